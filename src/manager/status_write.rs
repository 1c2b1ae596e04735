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
//!   rolling out at that write (so 3 s, 6 s, 12 s, ... into a long
//!   rollout), at most [`SPACING_MAX`]: a rollout of a minute costs about
//!   five progress writes, not twenty.
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
pub const COALESCE: Duration = Duration::from_secs(3);
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
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;
    use crate::api::{Phase, condition};

    #[test]
    fn a_write_is_counted_under_its_most_telling_change() {
        let rolling = |g, n| status(g, Phase::Progressing, n, "RollingOut");
        let mut owned = rolling(1, 1);
        owned.conditions.push(Condition {
            type_: condition::CHILDREN_OWNED.into(),
            status: "False".into(),
            reason: condition::REASON_ADOPTION_REFUSED.into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: Time(Default::default()),
        });
        let rows = [
            ("first", None, rolling(1, 0), Reason::First),
            ("new generation", Some(rolling(1, 2)), rolling(2, 2), Reason::ObservedGeneration),
            ("available", Some(rolling(1, 2)), status(1, Phase::Available, 2, "Available"), Reason::Ready),
            ("refused child", Some(rolling(1, 1)), owned, Reason::Condition),
            ("counts", Some(rolling(1, 1)), rolling(1, 2), Reason::Progress),
        ];
        for (what, old, new, want) in rows {
            assert_eq!(reason(old.as_ref(), &new), want, "{what}");
        }
    }

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
    fn each_change_is_written_at_once_spaced_or_not_at_all() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Generation `g` first seen at `seen_ms`, last written at `written_ms`.
        let clock = |g: i64, seen_ms: u64, written_ms: u64| Clock {
            written: Some(at(written_ms)),
            generation: Some((Some(g), at(seen_ms))),
            deferred: None,
        };
        let avail = |g, n| status(g, Phase::Available, n, "Available");
        let rolling = |g, n| status(g, Phase::Progressing, n, "RollingOut");
        let failed = |g| status(g, Phase::Failed, 0, "ImagePullBackOff");
        let after = |ms| When::After(Duration::from_millis(ms));
        type Row = (&'static str, Option<RunnerStatus>, RunnerStatus, Clock, u64, When);
        let rows: Vec<Row> = vec![
            ("unchanged", Some(avail(1, 2)), avail(1, 2), clock(1, 0, 0), 100, When::Never),
            (
                "a verdict for a new generation",
                Some(avail(1, 2)),
                avail(2, 3),
                clock(2, 0, 0),
                100,
                When::Now,
            ),
            ("a failure", Some(avail(1, 2)), failed(2), clock(2, 0, 0), 100, When::Now),
            (
                "a new generation's rollout, just started",
                Some(avail(1, 2)),
                rolling(2, 1),
                clock(2, 0, 0),
                10,
                When::Now,
            ),
            ("a first status, just created", None, rolling(1, 0), Clock::default(), 0, When::Now),
            ("a first status that is a verdict", None, avail(1, 1), Clock::default(), 0, When::Now),
            (
                "counts early in a rollout, soon after a write",
                Some(rolling(2, 1)),
                rolling(2, 2),
                clock(2, 0, 0),
                1_000,
                after(2_000),
            ),
            (
                "counts early in a rollout, long after a write",
                Some(rolling(2, 1)),
                rolling(2, 2),
                clock(2, 0, 0),
                3_000,
                When::Now,
            ),
            (
                "counts 10 s into a rollout, 4 s after a write",
                Some(rolling(2, 1)),
                rolling(2, 2),
                clock(2, 0, 6_000),
                10_000,
                after(2_000),
            ),
            (
                "counts 12 s into a rollout, 6 s after a write",
                Some(rolling(2, 1)),
                rolling(2, 2),
                clock(2, 0, 6_000),
                12_000,
                When::Now,
            ),
            (
                "counts of a rollout stuck for ten minutes",
                Some(rolling(2, 1)),
                rolling(2, 2),
                clock(2, 0, 600_000),
                620_000,
                after(10_000),
            ),
            (
                "a reason changing within a rollout",
                Some(rolling(2, 1)),
                status(2, Phase::Progressing, 1, "ContainerCreating"),
                clock(2, 0, 1_000),
                1_500,
                When::Now,
            ),
        ];
        for (what, old, new, clock, ms, want) in rows {
            assert_eq!(when(old.as_ref(), &new, &clock, at(ms)), want, "{what}");
        }
    }

    #[test]
    fn progress_writes_of_a_long_rollout_double_their_spacing_up_to_the_cap() {
        let t0 = Instant::now();
        let mut c = Clock::default();
        c.saw(Some(2), t0);
        c.written = Some(t0);
        let (old, new) =
            (status(2, Phase::Progressing, 1, "RollingOut"), status(2, Phase::Progressing, 2, "RollingOut"));
        let mut writes = vec![];
        // A pass every 100 ms for ten minutes, the counts always changing.
        for tick in 1..=6_000u64 {
            let now = t0 + Duration::from_millis(tick * 100);
            c.saw(Some(2), now);
            if when(Some(&old), &new, &c, now) == When::Now {
                c.written = Some(now);
                writes.push(tick / 10);
            }
        }
        assert_eq!(writes[..5], [3, 6, 12, 24, 48], "{writes:?}");
        let gaps: Vec<_> = writes.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|g| (3..=30).contains(g)), "{gaps:?}");
        assert!(writes.len() < 25, "{} progress writes in ten minutes", writes.len());
    }

    #[test]
    fn a_clock_remembers_when_a_generation_was_first_seen() {
        let t0 = Instant::now();
        let mut c = Clock::default();
        c.saw(Some(2), t0);
        c.saw(Some(2), t0 + COALESCE);
        assert_eq!(c.generation, Some((Some(2), t0)));
        c.saw(Some(3), t0 + COALESCE);
        assert_eq!(c.generation, Some((Some(3), t0 + COALESCE)));
        assert!(c.expired(t0), "never written");
        c.written = Some(t0);
        assert!(!c.expired(t0 + COALESCE) && c.expired(t0 + SPACING_MAX));
    }

    #[test]
    fn a_progress_event_waits_for_the_write_it_could_bring() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let wait = |ms: u64| Gate::Wait(Duration::from_millis(ms));
        assert_eq!(Clocks::default().gate("ns/web", t0), wait(0), "never written: at once");
        let mut c = Clock::default();
        c.saw(Some(2), t0);
        c.written = Some(t0);
        assert_eq!(c.gate(at(1_000)), wait(2_000), "progress may be written {COALESCE:?} after a write");
        assert_eq!(c.gate(at(5_000)), wait(0));
        c.decided(When::After(Duration::from_millis(2_000)), at(1_000));
        assert_eq!(c.gate(at(2_000)), Gate::Covered, "the pass requeued for the deferred write reads it");
        assert_eq!(c.gate(at(3_900)), Gate::Covered);
        assert_eq!(c.gate(at(4_000)), wait(0), "a requeue this late was lost: events count again");
        c.decided(When::Never, at(3_100));
        assert_eq!(c.gate(at(3_200)), wait(0), "nothing deferred any more");
        let clocks = Clocks::default();
        clocks.lock().insert("ns/web".into(), c);
        assert_eq!(clocks.gate("ns/web", at(3_200)), wait(0));
        assert_eq!(clocks.gate("ns/other", at(3_200)), wait(0));
    }
}
