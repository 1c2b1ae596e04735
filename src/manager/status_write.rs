//! Pure: when a computed status is written. A rollout changes the counts
//! and the message at every step; written each time, they cost about 1.4
//! status writes per spec change, and on a loaded control plane, where a
//! rollout takes tens of seconds, many more. What a reader acts on is the
//! verdict. So:
//! - a *milestone* is written at once: a new observedGeneration, phase, or
//!   a condition's status or reason (ownership is the ChildrenOwned
//!   condition). A new generation's first status ("Progressing") goes out
//!   without waiting for the rollout: kstatus, `kubectl wait` and `--wait`
//!   read `observedGeneration < generation` as "not seen yet", and a
//!   manager that sat on it would look slower than it is;
//! - other changes (counts, message) are spaced: at least [`COALESCE`]
//!   after the last write, and at least as long as the generation had been
//!   rolling out at that write (so 10 s, 20 s, 40 s, ... into a long
//!   rollout), at most [`SPACING_MAX`]: a rollout of a minute costs three
//!   progress writes, not twenty. With 3 s, at 1,000 Runners and 10
//!   changes a second on a loaded control plane, 63% of the rollouts
//!   outlived it, and each change cost 0.63 progress writes and 1.5
//!   passes for progress events, above the contract's floor of two status
//!   writes and two passes; 10 s halved the progress passes (docs/design.md).
//!
//! A write deferred is a pass requeued for when it is due. A progress-only
//! child event (the debounce's progress lane) asks [`Clocks::gate`]
//! first: a pass before progress is due would only defer it again, and one
//! already requeued for it reads the newest counts anyway.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::api::RunnerStatus;

/// At least this long between two writes of counts and message.
pub const COALESCE: Duration = Duration::from_secs(10);
/// At most this long between two writes of counts and message.
pub const SPACING_MAX: Duration = Duration::from_secs(30);

/// What the manager remembers of one Runner's status writes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Clock {
    /// When its status was last written.
    pub written: Option<Instant>,
    /// The newest generation a pass computed a status for, and when that
    /// was first done.
    pub generation: Option<(Option<i64>, Instant)>,
    /// When a write deferred by the last pass is due: that pass requeued
    /// itself for then.
    pub deferred: Option<Instant>,
}

impl Clock {
    /// Notes a pass computing a status for `generation` at `now`.
    pub fn saw(&mut self, generation: Option<i64>, now: Instant) {
        if self.generation.is_none_or(|(g, _)| g != generation) {
            self.generation = Some((generation, now));
        }
    }

    /// True when nothing it holds still matters at `now` (it can go).
    pub fn expired(&self, now: Instant) -> bool {
        self.written.is_none_or(|t| now.saturating_duration_since(t) >= SPACING_MAX)
    }

    /// Notes what the pass decided ([`when`]) at `now`.
    pub fn decided(&mut self, when: When, now: Instant) {
        self.deferred = match when {
            When::After(due) => Some(now + due),
            When::Never | When::Now => None,
        };
    }

    /// What a progress-only child event of this Runner needs at `now`.
    pub fn gate(&self, now: Instant) -> Gate {
        // A requeue lost with its pass (the Runner deleted, the manager
        // restarted) must not silence the events for long.
        if self.deferred.is_some_and(|due| now < due + REQUEUE_SLACK) {
            return Gate::Covered;
        }
        let due = self.written.map_or(now, |w| w + self.spacing());
        Gate::Wait(due.saturating_duration_since(now))
    }

    /// How long after the last write progress may be written again.
    fn spacing(&self) -> Duration {
        let rolling = match (self.written, self.generation) {
            (Some(w), Some((_, first))) => w.saturating_duration_since(first),
            _ => Duration::ZERO,
        };
        rolling.clamp(COALESCE, SPACING_MAX)
    }
}

/// How late a requeued pass may run before its deferral is not trusted.
const REQUEUE_SLACK: Duration = Duration::from_secs(1);

/// What a progress-only child event needs ([`Clock::gate`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Gate {
    /// No pass: one is requeued for the deferred write, and reads it.
    Covered,
    /// A pass no sooner than this from now, when progress may be written.
    Wait(Duration),
}

/// Every Runner's [`Clock`], by `namespace/name` (`runner_key`): passes
/// write them; the child-event debounce reads them ([`Clock::gate`]).
#[derive(Default)]
pub struct Clocks(Mutex<HashMap<String, Clock>>);

impl Clocks {
    pub fn lock(&self) -> MutexGuard<'_, HashMap<String, Clock>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Clock::gate`] of the Runner `key`; one never written may write.
    pub fn gate(&self, key: &str, now: Instant) -> Gate {
        self.lock().get(key).map_or(Gate::Wait(Duration::ZERO), |c| c.gate(now))
    }
}

/// When to write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum When {
    /// The status written is the status computed.
    Never,
    Now,
    /// Not before this much time from now: requeue the pass then.
    After(Duration),
}

/// When `new` is written over `old`, given the Runner's [`Clock`] (already
/// told of this pass, [`Clock::saw`]).
pub fn when(old: Option<&RunnerStatus>, new: &RunnerStatus, clock: &Clock, now: Instant) -> When {
    if old == Some(new) {
        return When::Never;
    }
    if old.is_none_or(|o| milestone(o, new)) {
        return When::Now;
    }
    match clock.written.map(|t| now.saturating_duration_since(t)) {
        Some(ago) if ago < clock.spacing() => When::After(clock.spacing() - ago),
        _ => When::Now,
    }
}

/// Why a status is written: the `reason` label of
/// `runner_status_writes_total`, the most telling change first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The Runner's first status.
    First,
    /// A new generation observed.
    ObservedGeneration,
    /// The phase or the Ready condition changed.
    Ready,
    /// Another condition's status or reason (ChildrenOwned, ...).
    Condition,
    /// Counts or message only: progress.
    Progress,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::First => "first",
            Reason::ObservedGeneration => "observed_generation",
            Reason::Ready => "ready",
            Reason::Condition => "condition",
            Reason::Progress => "progress",
        }
    }
}

/// Pure: why `new` is written over `old`.
pub fn reason(old: Option<&RunnerStatus>, new: &RunnerStatus) -> Reason {
    let Some(old) = old else { return Reason::First };
    let verdict = |s: &RunnerStatus, ready: bool| {
        let mut v: Vec<_> = s
            .conditions
            .iter()
            .filter(|c| (c.type_ == crate::api::condition::READY) == ready)
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect();
        v.sort();
        v
    };
    if old.observed_generation != new.observed_generation {
        Reason::ObservedGeneration
    } else if old.phase != new.phase || verdict(old, true) != verdict(new, true) {
        Reason::Ready
    } else if verdict(old, false) != verdict(new, false) {
        Reason::Condition
    } else {
        Reason::Progress
    }
}

/// A change a reader acts on, as opposed to progress within one.
fn milestone(old: &RunnerStatus, new: &RunnerStatus) -> bool {
    let verdicts = |s: &RunnerStatus| {
        let mut v: Vec<_> =
            s.conditions.iter().map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone())).collect();
        v.sort();
        v
    };
    old.observed_generation != new.observed_generation
        || old.phase != new.phase
        || verdicts(old) != verdicts(new)
}

#[cfg(test)]
#[path = "status_write_tests.rs"]
mod tests;
