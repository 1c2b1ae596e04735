//! The manager's own error: what a pass, the preflight or the process can
//! fail with, and nothing a command line does (confirmations, templates,
//! timeouts of a `--wait`). Its messages state what failed; advice is the
//! CLI's, which converts this error when `run-manager` ends with it.
//! [`Error::metric_label`] and [`Error::is_conflict`] are what the retry
//! policy (`reconcile::error_policy`, [`super::retry`]) reads.

use crate::error::ApiError;

/// Result with the manager's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] ApiError),

    /// The preflight found no Runner resource type on the apiserver.
    #[error("{}", crate::error::Error::CrdMissing)]
    CrdMissing,

    #[error("the apiserver is not reachable: {0}")]
    ClusterUnreachable(String),

    /// The manager's identity lacks permissions it needs; the message lists
    /// each missing verb and the grant that fixes it.
    #[error("{0}")]
    PermissionsMissing(String),

    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: std::net::SocketAddr, source: std::io::Error },

    #[error("lost leadership of the Lease; exiting so a restart can wait for it again")]
    LeaseLost,

    #[error("cannot encode {what} as JSON: {source}")]
    Encode { what: &'static str, source: serde_json::Error },

    /// Shown in the Runner's status too; the pass fails so it is retried
    /// with backoff, since an RBAC or admission change may let it through.
    #[error("the apiserver refuses a child of Runner {runner}: {message}")]
    ChildRejected { runner: String, message: String },

    /// The webhooks could not make, load or keep their certificate, or
    /// (served locally) take or hand back their registrations.
    #[error("webhooks: {0}")]
    Webhook(String),
}

impl Error {
    /// Short label for metrics: `errors_total{reason=...}`. Bounded: one per
    /// variant, and for an API error the operation and kind (both fixed in
    /// the manager's code) with the apiserver's reason, a Kubernetes
    /// `StatusReason`, or its HTTP code when it gives none.
    pub fn metric_label(&self) -> String {
        match self {
            Error::Api(ApiError { op, kind, source, .. }) => {
                let code = match source.as_ref() {
                    kube::Error::Api(s) if s.reason.is_empty() => s.code.to_string(),
                    kube::Error::Api(s) => s.reason.to_lowercase(),
                    _ => "transport".into(),
                };
                format!("{}_{}_{code}", op.replace(' ', "_"), kind.to_lowercase())
            }
            Error::CrdMissing => "crd_missing".into(),
            Error::ClusterUnreachable(_) => "cluster_unreachable".into(),
            Error::PermissionsMissing(_) => "permissions_missing".into(),
            Error::Listen { .. } => "listen".into(),
            Error::LeaseLost => "lease_lost".into(),
            Error::Encode { .. } => "encode".into(),
            Error::ChildRejected { .. } => "child_rejected".into(),
            Error::Webhook(_) => "webhook".into(),
        }
    }

    /// True when the object moved on since it was read ([`ApiError::is_conflict`]):
    /// the retry policy re-reads soon instead of backing off.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Api(e) if e.is_conflict())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FromApi;

    fn status(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure("no", reason).with_code(code)))
    }

    #[test]
    fn metric_labels_name_the_operation_the_kind_and_the_reason() {
        let cases = [
            (
                Error::api("patch status of", "Runner", "app", "web", status(409, "Conflict")),
                "patch_status_of_runner_conflict",
            ),
            (Error::api("apply", "Deployment", "app", "web", status(500, "")), "apply_deployment_500"),
            (Error::LeaseLost, "lease_lost"),
            (Error::ChildRejected { runner: "app/web".into(), message: "no".into() }, "child_rejected"),
        ];
        for (e, want) in cases {
            assert_eq!(e.metric_label(), want);
        }
    }

    #[test]
    fn only_an_api_conflict_is_retried_soon() {
        assert!(Error::api("patch", "Runner", "app", "web", status(409, "Conflict")).is_conflict());
        assert!(!Error::api("patch", "Runner", "app", "web", status(403, "Forbidden")).is_conflict());
        assert!(!Error::LeaseLost.is_conflict());
    }
}
