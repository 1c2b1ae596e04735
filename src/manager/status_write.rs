//! Pure: when a computed status is written. A rollout changes the counts
//! and the message at every step; written each time, they cost about 1.4
//! status writes per spec change, where what a reader acts on is the
//! verdict. So:
//! - a *milestone* is written at once: a new observedGeneration, phase, or
//!   a condition's status or reason (ownership is the ChildrenOwned
//!   condition);
//! - other changes (counts, message) are coalesced: at most one write per
//!   Runner per [`COALESCE`];
//! - a *transitional* status for a new generation first seen less than
//!   [`HOLD`] ago (Pending or Progressing: the rollout this pass started)
//!   waits until then (a Runner's first status does not: until it is
//!   written `get` shows nothing): most rollouts end within it, and one
//!   write then says how it ended. Meanwhile the status written before
//!   still has the old observedGeneration, which kstatus, `kubectl wait`
//!   and `--wait` read as "not yet": nothing reads Ready for the new
//!   generation before its rollout is complete.
//!
//! A write deferred is a pass requeued for when it is due.

use std::time::{Duration, Instant};

use crate::api::{Phase, RunnerStatus};

/// At most one write of counts and message per Runner this often.
pub const COALESCE: Duration = Duration::from_secs(3);
/// How long a new generation's transitional status waits for a verdict.
pub const HOLD: Duration = Duration::from_secs(1);

/// What the manager remembers of one Runner's status writes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Clock {
    /// When its status was last written.
    pub written: Option<Instant>,
    /// The newest generation a pass computed a status for, and when that
    /// was first done.
    pub generation: Option<(Option<i64>, Instant)>,
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
        let old = |t: Instant, d: Duration| now.saturating_duration_since(t) >= d;
        self.written.is_none_or(|t| old(t, COALESCE)) && self.generation.is_none_or(|(_, t)| old(t, HOLD))
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
    let since = |t: Instant| now.saturating_duration_since(t);
    let transitional = matches!(new.phase, Phase::Pending | Phase::Progressing);
    // A Runner's first status goes out at once: until then `get` shows nothing.
    let new_generation = old.is_some_and(|o| o.observed_generation != new.observed_generation);
    let held = clock.generation.filter(|(g, first)| *g == new.observed_generation && since(*first) < HOLD);
    if let Some((_, first)) = held.filter(|_| transitional && new_generation) {
        return When::After(HOLD - since(first));
    }
    if old.is_none_or(|o| milestone(o, new)) {
        return When::Now;
    }
    match clock.written.map(since) {
        Some(ago) if ago < COALESCE => When::After(COALESCE - ago),
        _ => When::Now,
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
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;
    use crate::api::condition;

    fn status(generation: i64, phase: Phase, ready: i32, reason: &str) -> RunnerStatus {
        RunnerStatus {
            observed_generation: Some(generation),
            phase,
            ready_replicas: ready,
            message: Some(format!("{ready} ready")),
            conditions: vec![Condition {
                type_: condition::READY.into(),
                status: if phase == Phase::Available { "True" } else { "False" }.into(),
                reason: reason.into(),
                message: String::new(),
                observed_generation: Some(generation),
                last_transition_time: Time(Default::default()),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn each_change_is_written_at_once_coalesced_held_or_not_at_all() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let seen = |generation: i64, ms: u64| Clock {
            written: Some(t0),
            generation: Some((Some(generation), at(ms))),
        };
        let avail = |g, n| status(g, Phase::Available, n, "Available");
        let rolling = |g, n| status(g, Phase::Progressing, n, "RollingOut");
        let failed = |g| status(g, Phase::Failed, 0, "ImagePullBackOff");
        type Row = (&'static str, Option<RunnerStatus>, RunnerStatus, Clock, u64, When);
        let rows: Vec<Row> = vec![
            ("unchanged", Some(avail(1, 2)), avail(1, 2), seen(1, 0), 100, When::Never),
            ("a verdict for a new generation", Some(avail(1, 2)), avail(2, 3), seen(2, 0), 100, When::Now),
            ("a failure", Some(avail(1, 2)), failed(2), seen(2, 0), 100, When::Now),
            (
                "a new generation's rollout, just started",
                Some(avail(1, 2)),
                rolling(2, 1),
                seen(2, 0),
                300,
                When::After(Duration::from_millis(700)),
            ),
            (
                "a new generation's rollout, still going after the hold",
                Some(avail(1, 2)),
                rolling(2, 1),
                seen(2, 0),
                1_000,
                When::Now,
            ),
            ("a first status, just created", None, rolling(1, 0), seen(1, 0), 0, When::Now),
            ("a first status that is a verdict", None, avail(1, 1), seen(1, 0), 0, When::Now),
            (
                "counts within a rollout, soon after a write",
                Some(rolling(2, 1)),
                rolling(2, 2),
                seen(2, 0),
                1_000,
                When::After(Duration::from_millis(2_000)),
            ),
            (
                "counts within a rollout, long after a write",
                Some(rolling(2, 1)),
                rolling(2, 2),
                seen(2, 0),
                3_000,
                When::Now,
            ),
            (
                "a reason changing within a rollout",
                Some(rolling(2, 1)),
                status(2, Phase::Progressing, 1, "ContainerCreating"),
                seen(2, 0),
                1_500,
                When::Now,
            ),
        ];
        for (what, old, new, clock, ms, want) in rows {
            assert_eq!(when(old.as_ref(), &new, &clock, at(ms)), want, "{what}");
        }
    }

    #[test]
    fn a_clock_remembers_when_a_generation_was_first_seen() {
        let t0 = Instant::now();
        let mut c = Clock::default();
        c.saw(Some(2), t0);
        c.saw(Some(2), t0 + HOLD);
        assert_eq!(c.generation, Some((Some(2), t0)));
        c.saw(Some(3), t0 + HOLD);
        assert_eq!(c.generation, Some((Some(3), t0 + HOLD)));
        assert!(!c.expired(t0 + HOLD));
        assert!(c.expired(t0 + HOLD * 2));
        c.written = Some(t0 + HOLD * 2);
        assert!(!c.expired(t0 + HOLD * 3) && c.expired(t0 + HOLD * 2 + COALESCE));
    }
}
