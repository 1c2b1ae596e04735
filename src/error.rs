//! One error type for the library. Variants name the operation that failed,
//! so a log line or a CLI message says what was being done, to which object.

use std::borrow::Cow;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid input: {0}")]
    Invalid(String),

    #[error("cannot {op} {kind} {namespace}/{name}: {source}", source = describe_kube(.source))]
    Api {
        /// The verb-phrase of the failed operation: "apply", "delete", "patch status of".
        op: &'static str,
        /// The object's kind; borrowed for the fixed kinds, owned for the
        /// ones `install` and `uninstall` read from their manifests.
        kind: Cow<'static, str>,
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },

    #[error("the Runner CRD ({}) is not installed; run `kubectl runner install`", crate::api::CRD_NAME)]
    CrdMissing,

    #[error("cannot load kubeconfig: {0}")]
    Kubeconfig(String),

    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: std::net::SocketAddr, source: std::io::Error },

    #[error("lost leadership of the Lease; exiting so a restart can wait for it again")]
    LeaseLost,

    #[error("cannot encode {what} as JSON: {source}")]
    Encode { what: &'static str, source: serde_json::Error },

    #[error("the apiserver refuses a child of Runner {runner}: {message}")]
    ChildRejected { runner: String, message: String },

    #[error("{0}")]
    Other(String),
}

impl Error {
    /// Short label for metrics: `errors_total{reason=...}`.
    pub fn metric_label(&self) -> String {
        match self {
            Error::Invalid(_) => "invalid".into(),
            Error::Api { op, kind, source, .. } => {
                let code = match source.as_ref() {
                    kube::Error::Api(s) if s.reason.is_empty() => s.code.to_string(),
                    kube::Error::Api(s) => s.reason.to_lowercase(),
                    _ => "transport".into(),
                };
                format!("{}_{}_{code}", op.replace(' ', "_"), kind.to_lowercase())
            }
            Error::CrdMissing => "crd_missing".into(),
            Error::Kubeconfig(_) => "kubeconfig".into(),
            Error::ChildRejected { .. } => "child_rejected".into(),
            Error::Listen { .. } => "listen".into(),
            Error::LeaseLost => "lease_lost".into(),
            Error::Encode { .. } => "encode".into(),
            Error::Other(_) => "other".into(),
        }
    }

    /// Builds an [`Error::Api`] for `op` on the named object.
    pub fn api(
        op: &'static str,
        kind: impl Into<Cow<'static, str>>,
        ns: &str,
        name: &str,
        source: kube::Error,
    ) -> Self {
        Error::Api {
            op,
            kind: kind.into(),
            namespace: ns.to_string(),
            name: name.to_string(),
            source: Box::new(source),
        }
    }

    /// True when the object moved on since it was read: a 409 Conflict, or
    /// a JSON patch whose `test` precondition failed. Worth a prompt re-read.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Api { source, .. }
            if matches!(source.as_ref(), kube::Error::Api(s) if s.is_conflict()) || is_failed_test(source))
    }
}

/// One readable line for an API error: RBAC "forbidden" keeps the apiserver's
/// message, which already names the user, the verb and the resource.
pub fn describe_kube(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.is_forbidden() => {
            format!("{} (check the ServiceAccount's RBAC: `kubectl runner diagnose`)", s.message)
        }
        kube::Error::Api(s) => format!("{} ({}, HTTP {})", s.message, s.reason, s.code),
        other => other.to_string(),
    }
}

/// True when `e` is an apiserver 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}

/// A JSON patch whose `test` operation failed. The apiserver answers 422
/// with its generic message (the failed path is only in the causes), where a
/// validation error names the object and the field.
pub fn is_failed_test(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s)
        if s.code == 422 && s.message.starts_with("the server rejected our request due to an error in our request"))
}

/// The apiserver refuses the request itself (invalid, forbidden, malformed):
/// retrying the same request cannot succeed until something else changes.
pub fn is_rejection(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if matches!(s.code, 400 | 403 | 422)) && !is_failed_test(e)
}
