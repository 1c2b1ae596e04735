//! Pure: what a pass does with the Runner itself, before and after its
//! children. The reconcile pass performs it.

use kube::ResourceExt;

use crate::api::{FINALIZER, Runner};

/// The Runner-level step of a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerStep {
    /// Being deleted without our finalizer: nothing of ours is left to do.
    Ignore,
    /// Being deleted with our finalizer: remove the children (unless the
    /// garbage collector orphans them), then the finalizer.
    Cleanup { orphan: bool },
    /// Not yet ours: add the finalizer first, then converge in the same
    /// pass on the object the patch returned (a create is one trip).
    AddFinalizer,
    /// Bring the children to the spec and report the status.
    Converge,
}

/// The step for `runner` as the cache holds it.
pub fn decide(runner: &Runner) -> RunnerStep {
    let has_finalizer = runner.finalizers().iter().any(|f| f == FINALIZER);
    match (runner.metadata.deletion_timestamp.is_some(), has_finalizer) {
        (true, false) => RunnerStep::Ignore,
        // `kubectl delete --cascade=orphan`: the garbage collector's
        // `orphan` finalizer is on the Runner, and it detaches the children.
        (true, true) => RunnerStep::Cleanup { orphan: runner.finalizers().iter().any(|f| f == "orphan") },
        (false, false) => RunnerStep::AddFinalizer,
        (false, true) => RunnerStep::Converge,
    }
}

/// The deletion Event's note: what the Runner was and which children this
/// manager removed (none: they were gone already, or went by another hand).
pub fn deletion_note(runner: &Runner, orphan: bool, removed: &[&str]) -> String {
    let what = format!("image {}, {} replicas", runner.spec.image, runner.spec.replicas);
    match (orphan, removed) {
        (true, _) => format!("Runner deleted with its children orphaned: {what}"),
        (false, []) => format!("Runner deleted: {what}; no children were left to remove"),
        (false, [one]) => format!("Runner deleted: {what}; {one} removed"),
        (false, [init @ .., last]) => {
            format!("Runner deleted: {what}; {} and {last} removed", init.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::RunnerSpec;

    fn runner(deleting: bool, finalizers: &[&str]) -> Runner {
        let mut r = Runner::new("web", RunnerSpec::every_field());
        r.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
        r.metadata.deletion_timestamp = deleting.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        r
    }

    #[test]
    fn every_branch_of_the_runner_step() {
        let rows = [
            ("new", runner(false, &[]), RunnerStep::AddFinalizer),
            ("someone else's finalizer only", runner(false, &["x/y"]), RunnerStep::AddFinalizer),
            ("ours", runner(false, &[FINALIZER]), RunnerStep::Converge),
            ("deleted, ours", runner(true, &[FINALIZER]), RunnerStep::Cleanup { orphan: false }),
            (
                "deleted, orphaning",
                runner(true, &["orphan", FINALIZER]),
                RunnerStep::Cleanup { orphan: true },
            ),
            ("deleted, our finalizer gone", runner(true, &["x/y"]), RunnerStep::Ignore),
        ];
        for (what, r, step) in rows {
            assert_eq!(decide(&r), step, "{what}");
        }
    }

    #[test]
    fn the_deletion_note_names_every_kind_that_went() {
        let r = runner(true, &[FINALIZER]);
        let all: Vec<&str> = crate::kinds::all().iter().map(|k| k.kind()).collect();
        let (last, init) = all.split_last().unwrap();
        assert_eq!(
            deletion_note(&r, false, &all),
            format!("Runner deleted: image nginx:1.27, 2 replicas; {} and {last} removed", init.join(", "))
        );
        assert_eq!(
            deletion_note(&r, false, &[last]),
            format!("Runner deleted: image nginx:1.27, 2 replicas; {last} removed")
        );
        assert!(deletion_note(&r, false, &[]).ends_with("no children were left to remove"));
        assert!(deletion_note(&r, true, &all).contains("orphaned"));
    }
}
