//! The one line printed for a request that failed in a way the user can act
//! on ([`Failure`]): what happened, to which server or as which user, and
//! what to check, in kubectl's words where kubectl has some ("The
//! connection to the server HOST:PORT was refused - did you specify the
//! right host or port?"). Pure: the kind and the endpoint in, a line out.

use std::time::Duration;

use crate::client::failure::Failure;

/// Where the command was talking to, for the message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// The apiserver URL, once the command had one.
    pub server: Option<http::Uri>,
    /// `--request-timeout`, when given.
    pub request_timeout: Option<Duration>,
}

impl Endpoint {
    /// `the server HOST:PORT`, as kubectl names a server in its connection
    /// errors; `the server` before one is known.
    fn the_server(&self) -> String {
        match &self.server {
            Some(uri) => {
                format!(
                    "the server {}",
                    uri.authority().map(|a| a.to_string()).unwrap_or_else(|| uri.to_string())
                )
            }
            None => "the server".into(),
        }
    }

    fn host(&self) -> String {
        self.server.as_ref().and_then(|u| u.host()).unwrap_or("the server").to_string()
    }
}

/// The line (without `error: `) for `failure` while talking to `at`.
pub fn line(failure: &Failure, at: &Endpoint) -> String {
    let server = at.the_server();
    match failure {
        Failure::Refused => {
            format!("The connection to {server} was refused - did you specify the right host or port?")
        }
        Failure::Dns { detail } => format!(
            "Unable to connect to {server}: cannot resolve the host name {host} ({detail}) - check \
             the server address (--server, or the kubeconfig's cluster) and your DNS",
            host = at.host()
        ),
        Failure::Tls { detail } => format!(
            "Unable to connect to {server}: TLS handshake failed: {detail} - check the certificate \
             authority (--certificate-authority, the kubeconfig's certificate-authority-data) and the name the \
             certificate is for (--tls-server-name)"
        ),
        Failure::TimedOut => match at.request_timeout {
            Some(t) => format!(
                "Unable to connect to {server}: no answer within {} (--request-timeout) - is the \
                 apiserver up, and is this its address?",
                seconds(t)
            ),
            None => format!(
                "Unable to connect to {server}: the connection timed out - is the apiserver up, and \
                 is this its address? (--request-timeout bounds each request)"
            ),
        },
        Failure::Unreachable { detail } => {
            format!("Unable to connect to {server}: {detail} - is the apiserver up, and is this its address?")
        }
        Failure::Unauthorized { message } => format!(
            "You must be logged in to {server} ({message}) - it did not accept the credentials: \
             check the kubeconfig user's token or client certificate, or --token"
        ),
        Failure::Forbidden { message } => format!(
            "Error from server (Forbidden): {message} - ask for that permission, or act as an identity that \
             has it (--as, --user, --as-service-account)"
        ),
    }
}

/// `2s`, `1.5s`, `90s`: a short duration as given.
fn seconds(t: Duration) -> String {
    format!("{}s", t.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_gets_one_line_naming_the_server_or_the_user_and_what_to_check() {
        let at = Endpoint {
            server: Some("https://127.0.0.1:1/".parse().unwrap()),
            request_timeout: Some(Duration::from_secs(2)),
        };
        let forbidden = "runners.lab.cloudlab.training is forbidden: User \"system:serviceaccount:t:dev\" \
                         cannot list resource \"runners\" in API group \"lab.cloudlab.training\" in the namespace \"x\"";
        let cases = [
            (
                Failure::Refused,
                "The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?",
            ),
            (
                Failure::Dns { detail: "no such host".into() },
                "cannot resolve the host name 127.0.0.1 (no such host)",
            ),
            (
                Failure::Tls { detail: "invalid peer certificate: UnknownIssuer".into() },
                "--certificate-authority",
            ),
            (Failure::TimedOut, "server 127.0.0.1:1: no answer within 2s (--request-timeout)"),
            (
                Failure::Unreachable { detail: "Connection reset by peer".into() },
                "127.0.0.1:1: Connection reset",
            ),
            (
                Failure::Unauthorized { message: "Unauthorized".into() },
                "You must be logged in to the server 127.0.0.1:1 (Unauthorized)",
            ),
            (
                Failure::Forbidden { message: forbidden.into() },
                "User \"system:serviceaccount:t:dev\" cannot list",
            ),
        ];
        for (failure, want) in cases {
            let l = line(&failure, &at);
            assert!(l.contains(want), "{failure:?}: {l}");
            assert!(!l.contains('\n'), "one line: {l}");
            assert!(l.contains(" - "), "says what to check: {l}");
        }
    }

    #[test]
    fn without_a_request_timeout_a_timeout_points_to_the_flag() {
        let at = Endpoint { server: Some("https://10.0.0.1:6443".parse().unwrap()), request_timeout: None };
        let l = line(&Failure::TimedOut, &at);
        assert!(
            l.contains("10.0.0.1:6443: the connection timed out") && l.contains("--request-timeout"),
            "{l}"
        );
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5s");
    }

    #[test]
    fn before_a_server_is_known_the_line_says_the_server() {
        let l = line(&Failure::Refused, &Endpoint::default());
        assert!(l.starts_with("The connection to the server was refused - "), "{l}");
    }
}
