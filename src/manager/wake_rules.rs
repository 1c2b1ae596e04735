//! Pure: which Runner and child events need a pass, and how urgently
//! ([`Priority`], [`Trigger`]). The watches apply these rules to each
//! event.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::trigger::Trigger;
use super::work_queue::Priority;
use crate::api::Runner;

/// Whether a Runner event needs a pass: a new Runner, or a change of its
/// spec (generation), its deletion or its finalizers. Status-only updates
/// (our own writes) do not; the store still takes them, so the next pass
/// compares against them. Judged against what the manager last knew of it
/// (the store before it takes the event, or our own write's answer when
/// that is newer: the echo of our finalizer is no change), so unlike kube's
/// `predicate_filter` no second map of every Runner is kept (about 280
/// bytes per Runner).
pub(super) fn runner_changed(before: Option<&ObjectMeta>, now: &ObjectMeta) -> bool {
    fn key(m: &ObjectMeta) -> (Option<&str>, Option<i64>, bool) {
        (m.uid.as_deref(), m.generation, m.deletion_timestamp.is_some())
    }
    let Some(b) = before else { return true };
    let finalizers = |m: &ObjectMeta| m.finalizers.clone().unwrap_or_default();
    // Our finalizer arriving is the pass that added it, which goes on to
    // converge (a create is one trip): its echo can beat the patch's answer
    // to the watch, and would bring a second pass.
    let mut ours_added = finalizers(b);
    ours_added.push(crate::api::FINALIZER.to_string());
    key(b) != key(now) || (finalizers(b) != finalizers(now) && ours_added != finalizers(now))
}

/// What the pass that made our last write of a Runner had seen of it: the
/// write's answer, but at the generation the pass converged (its status's
/// observedGeneration). A spec change that landed while the pass ran is in
/// the answer, and compared with the answer as it is, its event would
/// look like nothing new: the change would wait for the next pass someone
/// else brings (3 s and more for a person's change during a burst).
pub(super) fn what_our_pass_saw(ours: &Runner) -> ObjectMeta {
    let mut meta = ours.metadata.clone();
    if let Some(g) = ours.status.as_ref().and_then(|s| s.observed_generation) {
        meta.generation = Some(g);
    }
    meta
}

/// The pass a Runner event asks for, if any ([`runner_changed`]), and how
/// urgent it is: the first list's is Low; a Runner seen for the first time
/// (created, or deleted and created again) is Normal, so a burst of
/// creates does not hold up a change to a Runner that exists, which is
/// High.
pub(super) fn runner_work(
    before: Option<&ObjectMeta>,
    now: &ObjectMeta,
    listed: bool,
) -> Option<(Priority, Trigger)> {
    let created = before.is_none_or(|b| b.uid != now.uid);
    runner_changed(before, now).then_some(match (listed, created) {
        (true, _) => (Priority::Low, Trigger::RunnerListed),
        (false, true) => (Priority::Normal, Trigger::RunnerCreated),
        (false, false) => (Priority::High, Trigger::RunnerChange),
    })
}

/// How urgent a child event is: its deletion, or an edit (a new generation,
/// other labels or owners) is someone's change; a status that moved is the
/// child's progress.
pub(super) fn child_priority(before: Option<&ObjectMeta>, now: &ObjectMeta) -> Priority {
    let edited = |b: &ObjectMeta| {
        b.generation.is_none()
            || b.generation != now.generation
            || b.labels != now.labels
            || b.owner_references != now.owner_references
    };
    if before.is_none_or(edited) { Priority::High } else { Priority::Low }
}

#[cfg(test)]
#[path = "wake_rules_tests.rs"]
mod tests;
