//! The CLI's error: every way a command can end badly, with the advice a
//! user at a terminal needs ("pass --yes", "run `kubectl runner install`").
//! Only the CLI renders (`output::error`) and maps to exit codes
//! ([`Error::exit_code`]), so the advice lives here and nowhere below.
//!
//! The layers below have their own errors; the `From` impls at the end are
//! the edge where they become this one. An API failure from any of them
//! becomes [`Error::Api`], so it renders the same whichever layer made it;
//! the rest keep their own message through a transparent variant.

use crate::error::ApiError;

/// Result with the CLI's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid input: {0}")]
    Invalid(String),

    #[error(transparent)]
    Api(#[from] ApiError),

    #[error("{}; run `kubectl runner install`", crate::error::Error::CrdMissing)]
    CrdMissing,

    /// What the shared client layer failed with, other than the cases above.
    #[error(transparent)]
    Cluster(crate::error::Error),

    /// What the manager failed with (`run-manager`), other than the cases above.
    #[error(transparent)]
    Manager(crate::manager::Error),

    /// Why `diagnose --fix` left a finalizer in place.
    #[error(transparent)]
    Fix(crate::diagnose::fix::Error),

    /// What ended `e2e` before its steps ran.
    #[error(transparent)]
    E2e(crate::e2e::Error),

    /// `install` would leave stored Runners unreadable; says what it needs.
    #[error("{0}")]
    InstallRefused(String),

    /// What `migrate` failed with, other than the cases around it.
    #[error(transparent)]
    Migrate(crate::migrate::Error),

    /// `migrate`'s preflight found a Runner the migration would change.
    #[error(
        "{0}; nothing was rewritten: change that Runner (or the conversion) and run `kubectl runner migrate` again"
    )]
    MigrateRefused(Box<crate::migrate::Refusal>),

    /// `migrate` may not do all it needs; asked before anything is written.
    #[error(
        "kubectl runner migrate needs permission(s) you lack: {}; nothing was rewritten: ask for them, or act as \
         an identity that has them (--as, --user, --as-service-account)",
        .0.join("; ")
    )]
    MigrateForbidden(Vec<String>),

    /// Ctrl-C during `migrate`'s rewrite.
    #[error(
        "migrate interrupted after {done} Runner(s); storedVersions was not pruned: run `kubectl runner migrate` \
         again to continue (a Runner already at the storage version is not written again)"
    )]
    MigrateInterrupted { done: usize },

    /// The CRD changed while `migrate` ran, so storedVersions was left as it was.
    #[error(
        "storedVersions was not pruned: the CRD {} changed during the migration (its resourceVersion was \
         {at_start} at the start); run `kubectl runner migrate` again",
        crate::api::CRD_NAME
    )]
    MigrateNotPruned { at_start: String },

    #[error("cannot load kubeconfig: {0}")]
    Kubeconfig(String),

    #[error("the apiserver is not reachable: {0}")]
    ClusterUnreachable(String),

    #[error("cannot encode {what} as JSON: {source}")]
    Encode { what: &'static str, source: serde_json::Error },

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

    #[error("aborted: not confirmed")]
    Declined,

    #[error("refusing to proceed without confirmation ({question}): stdin is not a terminal; pass --yes")]
    NoTerminal { question: String },

    #[error("cannot read the answer: {0}")]
    Prompt(String),

    #[error("cannot write to stdout: {0}")]
    WriteOutput(std::io::Error),

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
}

impl Error {
    /// The exit code for a command that ended with this error: 2
    /// ([`exit::USAGE`](super::exit::USAGE)) for input it refused before
    /// acting (a confirmation with no terminal to ask on and no `--yes`
    /// included), else 1.
    pub fn exit_code(&self) -> u8 {
        if matches!(self, Error::Invalid(_) | Error::NoTerminal { .. }) {
            super::exit::USAGE
        } else {
            super::exit::FAILURE
        }
    }
}

impl From<crate::error::Error> for Error {
    fn from(e: crate::error::Error) -> Self {
        match e {
            crate::error::Error::Api(e) => Error::Api(e),
            crate::error::Error::CrdMissing => Error::CrdMissing,
            other => Error::Cluster(other),
        }
    }
}

impl From<crate::manager::Error> for Error {
    fn from(e: crate::manager::Error) -> Self {
        use crate::manager::Error as M;
        match e {
            M::Api(e) => Error::Api(e),
            M::CrdMissing => Error::CrdMissing,
            other => Error::Manager(other),
        }
    }
}

impl From<crate::diagnose::fix::Error> for Error {
    fn from(e: crate::diagnose::fix::Error) -> Self {
        use crate::diagnose::fix::Error as F;
        match e {
            F::Api(e) => Error::Api(e),
            F::Read(e) => e.into(),
            other => Error::Fix(other),
        }
    }
}

impl From<crate::migrate::Error> for Error {
    fn from(e: crate::migrate::Error) -> Self {
        use crate::migrate::Error as M;
        match e {
            M::Cluster(e) => e.into(),
            M::Refused(r) => Error::MigrateRefused(r),
            M::Forbidden(missing) => Error::MigrateForbidden(missing),
            other => Error::Migrate(other),
        }
    }
}

impl From<crate::e2e::Error> for Error {
    fn from(e: crate::e2e::Error) -> Self {
        use crate::e2e::Error as E;
        match e {
            E::Api(e) => Error::Api(e),
            E::Cluster(e) => e.into(),
            other => Error::E2e(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FromApi;
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
                Error::from(crate::error::Error::CrdNotEstablished { after: Duration::from_secs(30) }),
                "the CRD runners.lab.cloudlab.training is not Established after 30s",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }

    #[test]
    fn a_missing_crd_from_any_layer_says_how_to_install_it() {
        let want =
            "the Runner CRD (runners.lab.cloudlab.training) is not installed; run `kubectl runner install`";
        assert_eq!(Error::from(crate::error::Error::CrdMissing).to_string(), want);
        assert_eq!(Error::from(crate::manager::Error::CrdMissing).to_string(), want);
    }

    #[test]
    fn an_api_error_from_any_layer_is_the_clis_api_error() {
        let gone =
            || kube::Error::Api(Box::new(kube::core::Status::failure("gone", "NotFound").with_code(404)));
        let from_manager = Error::from(crate::manager::Error::api("get", "Lease", "ns", "l", gone()));
        let from_client = Error::from(crate::error::Error::api("get", "Runner", "ns", "r", gone()));
        let from_fix = Error::from(crate::diagnose::fix::Error::Read(crate::error::Error::api(
            "list",
            "Pod",
            "ns",
            "",
            gone(),
        )));
        let from_e2e =
            Error::from(crate::e2e::Error::Cluster(crate::error::Error::api("get", "CRD", "", "c", gone())));
        for e in [from_manager, from_client, from_fix, from_e2e] {
            assert!(matches!(e, Error::Api(_)), "{e:?}");
        }
    }

    #[test]
    fn invalid_input_exits_2_and_any_other_failure_1() {
        assert_eq!(Error::Invalid("x".into()).exit_code(), super::super::exit::USAGE);
        assert_eq!(Error::CrdMissing.exit_code(), super::super::exit::FAILURE);
    }
}
