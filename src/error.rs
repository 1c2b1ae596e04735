//! One error type for the library. Variants name the operation that failed,
//! so a log line or a CLI message says what was being done, to which object.

use std::borrow::Cow;

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid input: {0}")]
    Invalid(String),

    #[error("cannot {op} {kind}{}: {source}", object(.namespace, .name), source = describe_kube(.source))]
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

    #[error("the apiserver is not reachable: {0}")]
    ClusterUnreachable(String),

    #[error("the CRD {} is not Established after {}s", crate::api::CRD_NAME, .after.as_secs())]
    CrdNotEstablished { after: std::time::Duration },

    #[error("waiting for the CRD {crd}: {0}", crd = crate::api::CRD_NAME)]
    WaitCrd(String),

    #[error("watch failed: {0}")]
    WatchRunners(String),

    #[error("Runner {namespace}/{name} not found")]
    RunnerNotFound { namespace: String, name: String },

    #[error("Runner(s) not found in namespace {namespace}: {}", .names.join(", "))]
    RunnersNotFound { namespace: String, names: Vec<String> },

    #[error(
        "timed out after {}s waiting for Runner {namespace}/{name} to {goal}; last state: {last}{}; \
         run `kubectl runner diagnose {name} -n {namespace}`",
        .after.as_secs(),
        if *.has_status { "" } else { "; no status was written: is the manager running?" }
    )]
    WaitRunner {
        namespace: String,
        name: String,
        /// What was awaited: "be Available", "scale".
        goal: &'static str,
        after: std::time::Duration,
        /// The last progress line seen.
        last: String,
        /// False when the manager never wrote a status.
        has_status: bool,
    },

    #[error(
        "Runner {namespace}/{name} was replaced by a new one between the read and the delete; \
         the new one was not deleted: run the command again to delete it"
    )]
    RunnerReplaced { namespace: String, name: String },

    #[error(
        "timed out after {}s deleting Runner {namespace}/{name}; still there: {}; \
         run `kubectl runner diagnose {name} -n {namespace}`",
        .after.as_secs(),
        .left.join(", ")
    )]
    DeleteTimedOut { namespace: String, name: String, after: std::time::Duration, left: Vec<String> },

    #[error(
        "refusing to uninstall: {} Runner(s) still exist: {}; delete them first \
         (kubectl runner delete ...) or pass --force to delete them too",
        .runners.len(),
        .runners.join(", ")
    )]
    RunnersExist {
        /// `namespace/name` of each.
        runners: Vec<String>,
    },

    /// `--as-service-account`, refused before any request is made as it.
    #[error("{message}")]
    CannotImpersonate {
        /// `namespace/name`.
        service_account: String,
        /// Who lacks what, and the grant that fixes it.
        message: String,
    },

    #[error("Runner {namespace}/{name} was re-created meanwhile; not touching it")]
    FixRecreated { namespace: String, name: String },

    #[error("Runner {namespace}/{name} still has children ({}); not removing {}", .children.join(", "), crate::api::FINALIZER)]
    FixChildrenRemain { namespace: String, name: String, children: Vec<String> },

    #[error("aborted: not confirmed")]
    Declined,

    #[error("refusing to proceed without confirmation ({question}): stdin is not a terminal; pass --yes")]
    NoTerminal { question: String },

    #[error("cannot read the answer: {0}")]
    Prompt(String),

    #[error("cannot write to stdout: {0}")]
    WriteOutput(std::io::Error),

    #[error("cannot create {}: {source}", .dir.display())]
    Artifacts { dir: std::path::PathBuf, source: std::io::Error },

    /// An e2e step ran but what it checks did not hold.
    #[error("{0}")]
    StepFailed(String),

    /// `install --wait`: the manager Deployment did not finish rolling out.
    #[error(
        "the manager Deployment {ns}/{name} did not roll out within {after:?}: {detail}; \
         see `kubectl -n {ns} describe deployment {name}` and `kubectl runner diagnose`",
        ns = crate::manifests::MANAGER_NAMESPACE,
        name = crate::manifests::MANAGER_NAME
    )]
    ManagerNotRolledOut { after: std::time::Duration, detail: String },

    /// `scale --current-replicas`: the apiserver refused the scale because
    /// the count was not the one required (checked in the same request).
    #[error(
        "Runner {namespace}/{name} has {} replicas, not {expected} as --current-replicas requires; not scaled",
        .actual.map_or_else(|| "another number of".to_string(), |n| n.to_string())
    )]
    ScalePrecondition { namespace: String, name: String, expected: i32, actual: Option<i32> },

    /// `get -o jsonpath=`, `custom-columns=` or `--sort-by` failed on the
    /// data, where kubectl fails too (an index out of range, a filter or
    /// sort comparing a string with a number).
    #[error("cannot print with {flag}: {message}")]
    Template { flag: String, message: String },

    /// The manager's identity lacks permissions it needs; the message lists
    /// each missing verb and the fix.
    #[error("{0}")]
    PermissionsMissing(String),
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
            Error::ClusterUnreachable(_) => "cluster_unreachable".into(),
            Error::CrdNotEstablished { .. } => "crd_not_established".into(),
            Error::WaitCrd(_) => "wait_crd".into(),
            Error::WatchRunners(_) => "watch_runners".into(),
            Error::RunnerNotFound { .. } | Error::RunnersNotFound { .. } => "runner_not_found".into(),
            Error::WaitRunner { .. } => "wait_runner_timeout".into(),
            Error::RunnerReplaced { .. } => "runner_replaced".into(),
            Error::DeleteTimedOut { .. } => "delete_timeout".into(),
            Error::RunnersExist { .. } => "runners_exist".into(),
            Error::CannotImpersonate { .. } => "cannot_impersonate".into(),
            Error::FixRecreated { .. } => "fix_recreated".into(),
            Error::FixChildrenRemain { .. } => "fix_children_remain".into(),
            Error::Declined => "declined".into(),
            Error::NoTerminal { .. } => "no_terminal".into(),
            Error::Prompt(_) => "prompt".into(),
            Error::WriteOutput(_) => "write_output".into(),
            Error::Artifacts { .. } => "artifacts".into(),
            Error::StepFailed(_) => "step_failed".into(),
            Error::PermissionsMissing(_) => "permissions_missing".into(),
            Error::Template { .. } => "template".into(),
            Error::ScalePrecondition { .. } => "scale_precondition".into(),
            Error::ManagerNotRolledOut { .. } => "manager_not_rolled_out".into(),
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

/// Which object(s) an [`Error::Api`] was about: ` NS/NAME`, ` NAME` (a
/// cluster-scoped object), ` in namespace NS` or ` in all namespaces` (`*`)
/// for a list, nothing for a review; never a stray `/`.
fn object(namespace: &str, name: &str) -> String {
    match (namespace, name) {
        ("", "") => String::new(),
        ("", name) => format!(" {name}"),
        ("*", "") => " in all namespaces".into(),
        (ns, "") => format!(" in namespace {ns}"),
        (ns, name) => format!(" {ns}/{name}"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_timed_out_wait_names_the_runner_its_last_state_and_the_next_command() {
        let e = Error::WaitRunner {
            namespace: "app".into(),
            name: "web".into(),
            goal: "scale",
            after: Duration::from_secs(60),
            last: "web: Progressing 1/3 ready".into(),
            has_status: false,
        };
        assert_eq!(
            e.to_string(),
            "timed out after 60s waiting for Runner app/web to scale; last state: web: Progressing 1/3 ready; \
             no status was written: is the manager running?; run `kubectl runner diagnose web -n app`"
        );
        assert_eq!(e.metric_label(), "wait_runner_timeout");
    }

    #[test]
    fn api_errors_name_the_object_or_the_list_without_a_stray_slash() {
        let gone =
            || kube::Error::Api(Box::new(kube::core::Status::failure("gone", "NotFound").with_code(404)));
        let cases = [
            (("get", "app", "web"), "cannot get Runner app/web: gone (NotFound, HTTP 404)"),
            (("list", "app", ""), "cannot list Runner in namespace app: gone (NotFound, HTTP 404)"),
            (("list", "*", ""), "cannot list Runner in all namespaces: gone (NotFound, HTTP 404)"),
            (("get", "", "web"), "cannot get Runner web: gone (NotFound, HTTP 404)"),
            (("create", "", ""), "cannot create Runner: gone (NotFound, HTTP 404)"),
        ];
        for ((op, ns, name), want) in cases {
            assert_eq!(Error::api(op, "Runner", ns, name, gone()).to_string(), want);
        }
    }

    #[test]
    fn refusals_name_the_objects_and_the_way_out() {
        let cases = [
            (
                Error::RunnersNotFound { namespace: "app".into(), names: vec!["a".into(), "b".into()] },
                "Runner(s) not found in namespace app: a, b",
            ),
            (
                Error::RunnerReplaced { namespace: "app".into(), name: "web".into() },
                "Runner app/web was replaced by a new one between the read and the delete; the new one was not \
                 deleted: run the command again to delete it",
            ),
            (
                Error::RunnersExist { runners: vec!["team/web".into()] },
                "refusing to uninstall: 1 Runner(s) still exist: team/web; delete them first (kubectl runner \
                 delete ...) or pass --force to delete them too",
            ),
            (
                Error::CrdNotEstablished { after: Duration::from_secs(30) },
                "the CRD runners.lab.cloudlab.training is not Established after 30s",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }
}
