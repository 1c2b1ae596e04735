//! When a status is written, and why it was (the reason a write counts under).

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
        ("a verdict for a new generation", Some(avail(1, 2)), avail(2, 3), clock(2, 0, 0), 100, When::Now),
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
            after(9_000),
        ),
        (
            "counts early in a rollout, long after a write",
            Some(rolling(2, 1)),
            rolling(2, 2),
            clock(2, 0, 0),
            10_000,
            When::Now,
        ),
        (
            "counts 20 s into a rollout, 8 s after a write",
            Some(rolling(2, 1)),
            rolling(2, 2),
            clock(2, 0, 12_000),
            20_000,
            after(4_000),
        ),
        (
            "counts 24 s into a rollout, 12 s after a write",
            Some(rolling(2, 1)),
            rolling(2, 2),
            clock(2, 0, 12_000),
            24_000,
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
    assert_eq!(writes[..5], [10, 20, 40, 70, 100], "{writes:?}");
    let gaps: Vec<_> = writes.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.iter().all(|g| (10..=30).contains(g)), "{gaps:?}");
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
    assert_eq!(c.gate(at(1_000)), wait(9_000), "progress may be written {COALESCE:?} after a write");
    assert_eq!(c.gate(at(12_000)), wait(0));
    c.decided(When::After(Duration::from_millis(2_000)), at(1_000));
    assert_eq!(c.gate(at(2_000)), Gate::Covered, "the pass requeued for the deferred write reads it");
    assert_eq!(c.gate(at(3_900)), Gate::Covered);
    assert_eq!(c.gate(at(4_000)), wait(6_000), "a requeue this late was lost: events count again");
    c.decided(When::Never, at(3_100));
    assert_eq!(c.gate(at(3_200)), wait(6_800), "nothing deferred any more");
    let clocks = Clocks::default();
    clocks.lock().insert("ns/web".into(), c);
    assert_eq!(clocks.gate("ns/web", at(3_200)), wait(6_800));
    assert_eq!(clocks.gate("ns/other", at(3_200)), wait(0));
}
