//! What went wrong talking to the apiserver, in the kinds a kubectl user can
//! act on: nothing listens at the address, the host name does not resolve,
//! the TLS handshake fails, no answer in time, the credentials are refused
//! (401) or the identity may not do it (403).
//!
//! kube hands transport failures over as a chain of wrapped errors
//! (`ServiceError: client error (Connect)` -> `tcp connect error` ->
//! `Connection refused`) whose outer lines say nothing useful; the kind is
//! in the chain. [`classify`] walks it and is pure, so every kind is
//! table-tested with chains shaped like the ones hyper, hyper-util, rustls
//! and tower build. The words shown to the user are the CLI's
//! (`cli::output::failure`).

use std::error::Error as StdError;
use std::io::ErrorKind;

/// hyper-util's name for a failed host name lookup (its `ConnectError`
/// carries the resolver's error as the source).
const DNS_ERROR: &str = "dns error";

/// The kind of a failed request, with the detail worth showing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The TCP connection was refused: nothing listens at that host and port.
    Refused,
    /// The server's host name did not resolve; the resolver's reason.
    Dns { detail: String },
    /// The TLS handshake failed; rustls' reason (unknown issuer, name mismatch...).
    Tls { detail: String },
    /// No connection or no answer in time.
    TimedOut,
    /// Another connection-level failure (reset, unreachable network).
    Unreachable { detail: String },
    /// HTTP 401: the apiserver did not accept the credentials.
    Unauthorized { message: String },
    /// HTTP 403: the apiserver's message, which names the user, the verb
    /// and the resource.
    Forbidden { message: String },
}

/// The kind of `e`, or `None` for errors that are about the request or the
/// object (404, 409, 422, a bad response body), which keep their own words.
pub fn classify(e: &kube::Error) -> Option<Failure> {
    match e {
        kube::Error::Api(s) if s.code == 401 => Some(Failure::Unauthorized { message: s.message.clone() }),
        kube::Error::Api(s) if s.code == 403 => Some(Failure::Forbidden { message: s.message.clone() }),
        kube::Error::Api(_) => None,
        other => classify_chain(other),
    }
}

/// The transport kinds, from any error chain: the first link that tells.
pub fn classify_chain(e: &(dyn StdError + 'static)) -> Option<Failure> {
    let mut chain = vec![e];
    while let Some(next) = cause(chain[chain.len() - 1]) {
        chain.push(next);
    }
    let innermost = chain.last().map(|e| e.to_string()).unwrap_or_default();
    for link in &chain {
        if link.is::<tower::timeout::error::Elapsed>() {
            return Some(Failure::TimedOut);
        }
        if let Some(tls) = link.downcast_ref::<rustls::Error>() {
            return Some(Failure::Tls { detail: tls.to_string() });
        }
        if link.to_string() == DNS_ERROR {
            return Some(Failure::Dns { detail: innermost });
        }
        if let Some(io) = link.downcast_ref::<std::io::Error>() {
            match io.kind() {
                ErrorKind::ConnectionRefused => return Some(Failure::Refused),
                ErrorKind::TimedOut => return Some(Failure::TimedOut),
                ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::NotConnected
                | ErrorKind::HostUnreachable
                | ErrorKind::NetworkUnreachable
                | ErrorKind::NetworkDown
                | ErrorKind::AddrNotAvailable
                | ErrorKind::BrokenPipe
                | ErrorKind::UnexpectedEof => return Some(Failure::Unreachable { detail: innermost }),
                _ => {}
            }
        }
    }
    None
}

/// The error `e` wraps. An `io::Error` built around another error (as
/// tokio-rustls wraps the TLS error, and hyper-rustls that again) answers
/// `source()` with its inner error's source, skipping the inner error
/// itself: take the inner one.
fn cause<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a (dyn StdError + 'static)> {
    match e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
        Some(inner) => Some(inner),
        None => e.source(),
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;
    use std::io;

    use super::*;

    /// A link of a chain: its own words and what it wraps, as hyper-util's
    /// `Error` ("client error (Connect)") and `ConnectError` ("tcp connect
    /// error", "dns error") are.
    #[derive(Debug)]
    struct Wrap(&'static str, Box<dyn StdError + Send + Sync>);

    impl fmt::Display for Wrap {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl StdError for Wrap {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&*self.1)
        }
    }

    /// What kube returns for a failed connection: `Error::Service` around
    /// hyper-util's client error around the connector's error around `cause`.
    fn connect_failure(step: &'static str, cause: Box<dyn StdError + Send + Sync>) -> kube::Error {
        kube::Error::Service(Box::new(Wrap("client error (Connect)", Box::new(Wrap(step, cause)))))
    }

    fn status(code: u16, reason: &str, message: &str) -> kube::Error {
        let s = kube::core::Status::failure(message, reason).with_code(code);
        kube::Error::Api(Box::new(s))
    }

    #[test]
    fn each_kind_of_failure_is_told_apart() {
        let io = |kind, msg: &str| -> Box<dyn StdError + Send + Sync> { Box::new(io::Error::new(kind, msg)) };
        let refused = io(ErrorKind::ConnectionRefused, "Connection refused (os error 111)");
        let lookup = io(ErrorKind::Other, "failed to lookup address information: Name or service not known");
        let cert = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let tls = io(ErrorKind::InvalidData, "x");
        // As it comes: io::Error(Other) around io::Error(InvalidData) around rustls' error.
        let tls_wrapped: Box<dyn StdError + Send + Sync> =
            Box::new(io::Error::other(io::Error::new(ErrorKind::InvalidData, cert)));
        let forbidden =
            "runners.lab.cloudlab.training is forbidden: User \"dev\" cannot list resource \"runners\"";
        let cases: Vec<(&str, kube::Error, Option<Failure>)> = vec![
            ("refused", connect_failure("tcp connect error", refused), Some(Failure::Refused)),
            (
                "dns",
                connect_failure(DNS_ERROR, lookup),
                Some(Failure::Dns {
                    detail: "failed to lookup address information: Name or service not known".into(),
                }),
            ),
            (
                "tls",
                connect_failure("tls handshake", tls_wrapped),
                Some(Failure::Tls { detail: "invalid peer certificate: UnknownIssuer".into() }),
            ),
            ("other invalid data is not tls", connect_failure("read", tls), None),
            (
                "connect timeout",
                connect_failure("connect", io(ErrorKind::TimedOut, "deadline has elapsed")),
                Some(Failure::TimedOut),
            ),
            (
                "request timeout",
                kube::Error::Service(Box::new(tower::timeout::error::Elapsed::new())),
                Some(Failure::TimedOut),
            ),
            (
                "reset",
                connect_failure("read", io(ErrorKind::ConnectionReset, "Connection reset by peer")),
                Some(Failure::Unreachable { detail: "Connection reset by peer".into() }),
            ),
            (
                "401",
                status(401, "Unauthorized", "Unauthorized"),
                Some(Failure::Unauthorized { message: "Unauthorized".into() }),
            ),
            (
                "403",
                status(403, "Forbidden", forbidden),
                Some(Failure::Forbidden { message: forbidden.into() }),
            ),
            ("404 keeps its words", status(404, "NotFound", "runners \"web\" not found"), None),
            ("422 keeps its words", status(422, "Invalid", "spec.replicas: Invalid value"), None),
            ("a bad body", kube::Error::LinesCodecMaxLineLengthExceeded, None),
        ];
        for (name, e, want) in cases {
            assert_eq!(classify(&e), want, "{name}: {e}");
        }
    }
}
