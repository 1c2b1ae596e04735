//! What a Runner's pass is queued for: the key, how urgent, and what
//! triggered it. The watches make [`Work`]; the work queue orders it; the
//! metrics count passes by [`Trigger`].

use kube::runtime::reflector::ObjectRef;

use super::work_queue::Priority;
use crate::api::Runner;
use crate::kinds::packed::Packed;

/// The key of a Runner's pass.
pub type Key = ObjectRef<Packed<Runner>>;

/// What made a Runner need a pass: the `trigger` (and `kind`) labels of
/// `runner_passes_total`, so a bench names what its passes were for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// A Runner created (its first pass).
    RunnerCreated,
    /// A new generation, deletion or finalizer of a Runner.
    RunnerChange,
    /// The manager's first list of the Runners (its start).
    RunnerListed,
    /// A child edited or deleted by another hand, or a milestone of it.
    Child(&'static str),
    /// Only a child's progress (a rollout's counts).
    ChildProgress(&'static str),
    /// A Pod problem appeared, changed or went.
    Pod,
    /// The periodic resync ([`super::resync`]).
    Resync,
    /// A pass asked to come back (a deferred status write, a refused child).
    Requeue,
    /// A failed pass, retried with backoff.
    Retry,
}

impl Trigger {
    /// (`trigger`, `kind`) label values; `kind` is empty but for children.
    pub fn labels(self) -> (&'static str, &'static str) {
        match self {
            Trigger::RunnerCreated => ("runner_created", ""),
            Trigger::RunnerChange => ("runner_change", ""),
            Trigger::RunnerListed => ("runner_listed", ""),
            Trigger::Child(kind) => ("child_event", kind),
            Trigger::ChildProgress(kind) => ("child_progress", kind),
            Trigger::Pod => ("pod", ""),
            Trigger::Resync => ("resync", ""),
            Trigger::Requeue => ("requeue", ""),
            Trigger::Retry => ("retry", ""),
        }
    }
}

/// A Runner that needs a pass, how urgently, and why.
#[derive(Debug, Clone)]
pub struct Work {
    pub key: Key,
    pub priority: Priority,
    pub trigger: Trigger,
}
