//! Child events to passes: a Runner's child events bring one pass once
//! they are quiet for [`CHILD_DEBOUNCE`], and never later than
//! [`CHILD_MAX_WAIT`] after the first. Events that are progress only
//! ([`Lane::Progress`]) wait [`PROGRESS_WAIT`] instead, or until the
//! Runner's status clock lets progress be written ([`Gate`]), and any other
//! event of the Runner in the meantime takes them along.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::ready;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::scheduler::{ScheduleRequest, debounced_scheduler};

use super::status_write::Gate;
use super::work_queue::Priority;
use crate::api::Runner;

/// How long a Runner's children must be quiet before their events bring a
/// pass. A rollout sends a burst of Deployment status events (the new
/// ReplicaSet, then each replica updated, ready, available), and one pass
/// reads them all. Changes to the Runner itself are not debounced: they
/// reach the children at once.
pub const CHILD_DEBOUNCE: Duration = Duration::from_millis(200);

/// The longest a Runner's child events wait for quiet: a writer that keeps
/// touching a child less than [`CHILD_DEBOUNCE`] apart would otherwise
/// starve the Runner until its resync.
pub const CHILD_MAX_WAIT: Duration = Duration::from_secs(1);

/// The least a progress-only event waits for its pass: the status writes
/// progress (counts, message) at most this often anyway.
pub const PROGRESS_WAIT: Duration = super::status_write::COALESCE;

/// How soon a child event needs its Runner's pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Within the debounce: something the status decides on, or a field
    /// of ours, may have changed.
    Now,
    /// After [`PROGRESS_WAIT`], and not before the status may show it
    /// ([`Gate`]): only progress changed (a rollout's counts). Without this
    /// lane, a rollout's status events brought a pass each that had nothing
    /// to write but deferred progress.
    Progress,
}

/// A child event of a Runner: in which lane, how urgent, of which kind.
#[derive(Debug, Clone)]
pub struct ChildEvent {
    pub runner: ObjectRef<Runner>,
    pub lane: Lane,
    pub priority: Priority,
    pub kind: &'static str,
}

/// Each Runner once its triggers have been quiet for [`CHILD_DEBOUNCE`],
/// or [`CHILD_MAX_WAIT`] after the first of them; progress-only triggers
/// after [`PROGRESS_WAIT`] and as `gate` says. The pass's event says what
/// the merged ones were: the first kind, the most urgent priority, and the
/// `Now` lane if any was.
pub fn debounced(
    triggers: impl futures::Stream<Item = ChildEvent> + Send + 'static,
    gate: impl Fn(&ObjectRef<Runner>) -> Gate + Send + 'static,
) -> impl futures::Stream<Item = ChildEvent> + Send + 'static {
    debounced_at_most(triggers, gate, CHILD_DEBOUNCE, CHILD_MAX_WAIT, PROGRESS_WAIT)
}

/// When a Runner's waiting triggers began, by lane, and what they were.
#[derive(Default)]
struct Waiting {
    now: Option<tokio::time::Instant>,
    progress: Option<tokio::time::Instant>,
    event: Option<ChildEvent>,
}

impl Waiting {
    fn merge(&mut self, e: &ChildEvent) {
        match &mut self.event {
            None => self.event = Some(e.clone()),
            Some(w) => {
                w.priority = w.priority.min(e.priority);
                if e.lane == Lane::Now {
                    w.lane = Lane::Now;
                }
            }
        }
    }
}

/// kube's debounced scheduler pushes a message back by `quiet` whenever it
/// comes again, and takes a request for an earlier time over a later one
/// (and ignores a later one). Asking for the first trigger's time plus
/// `max_wait` (or, for progress, `progress_wait` or the gate's wait if
/// longer), less `quiet`, caps the wait; a trigger of the other lane merges
/// with the pending one, the earlier time winning.
fn debounced_at_most(
    triggers: impl futures::Stream<Item = ChildEvent> + Send + 'static,
    gate: impl Fn(&ObjectRef<Runner>) -> Gate + Send + 'static,
    quiet: Duration,
    max_wait: Duration,
    progress_wait: Duration,
) -> impl futures::Stream<Item = ChildEvent> + Send + 'static {
    type Pending = Arc<Mutex<HashMap<ObjectRef<Runner>, Waiting>>>;
    let pending: Pending = Pending::default();
    let waiting = pending.clone();
    let requests = triggers.filter_map(move |event: ChildEvent| {
        let now = tokio::time::Instant::now();
        let message = event.runner.clone();
        let wait = match event.lane {
            Lane::Now => None,
            Lane::Progress => match gate(&message) {
                Gate::Covered => return ready(None),
                Gate::Wait(wait) => Some(wait),
            },
        };
        let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
        let w = waiting.entry(message.clone()).or_default();
        w.merge(&event);
        let run_at = match wait {
            None => {
                let first = *w.now.get_or_insert(now);
                now.min((first + max_wait).checked_sub(quiet).unwrap_or(first))
            }
            Some(wait) => {
                let first = *w.progress.get_or_insert(now);
                let at = (first + progress_wait).max(now + wait);
                at.checked_sub(quiet).unwrap_or(first)
            }
        };
        ready(Some(ScheduleRequest { message, run_at }))
    });
    debounced_scheduler(requests, quiet).filter_map(move |message| {
        let waited = pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&message);
        ready(waited.and_then(|w| w.event))
    })
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn now_event(runner: ObjectRef<Runner>, priority: Priority) -> ChildEvent {
        ChildEvent { runner, lane: Lane::Now, priority, kind: "Deployment" }
    }

    #[tokio::test(start_paused = true)]
    async fn merged_events_bring_the_first_kind_the_most_urgent_priority_and_the_now_lane() {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut passes = debounced(rx, open).boxed();
        let web = ObjectRef::<Runner>::new("web").within("ns");
        let progress = ChildEvent { lane: Lane::Progress, ..now_event(web.clone(), Priority::Low) };
        tx.unbounded_send(progress).unwrap();
        let service = ChildEvent { kind: "Service", ..now_event(web.clone(), Priority::High) };
        tx.unbounded_send(service).unwrap();
        let e = passes.next().await.expect("one pass");
        assert_eq!((e.kind, e.priority, e.lane), ("Deployment", Priority::High, Lane::Now));
    }

    /// A gate for a Runner never written: progress may go at once.
    fn open(_: &ObjectRef<Runner>) -> Gate {
        Gate::Wait(Duration::ZERO)
    }

    #[tokio::test]
    async fn child_events_closer_than_the_debounce_bring_one_pass_per_runner() {
        let runner = |name: &str| ObjectRef::<Runner>::new(name).within("ns");
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut passes = debounced(rx.map(|r| now_event(r, Priority::Low)), open).map(|e| e.runner).boxed();
        let start = Instant::now();
        for _ in 0..4 {
            tx.unbounded_send(runner("web")).unwrap();
            tokio::time::sleep(CHILD_DEBOUNCE / 4).await;
        }
        tx.unbounded_send(runner("api")).unwrap();
        let mut got = Vec::new();
        while let Ok(Some(r)) = tokio::time::timeout(CHILD_DEBOUNCE * 3, passes.next()).await {
            got.push((r.name.clone(), start.elapsed()));
        }
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["web", "api"], "one pass per Runner, in the order they went quiet");
        assert!(got[0].1 >= CHILD_DEBOUNCE, "the first pass waits out the debounce: {got:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_child_touched_without_pause_still_brings_a_pass_within_the_maximum_wait() {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut passes = debounced(rx.map(|r| now_event(r, Priority::Low)), open).map(|e| e.runner).boxed();
        let start = tokio::time::Instant::now();
        let web = ObjectRef::<Runner>::new("web").within("ns");
        let writer = tokio::spawn(async move {
            loop {
                if tx.unbounded_send(web.clone()).is_err() {
                    break;
                }
                tokio::time::sleep(CHILD_DEBOUNCE / 2).await;
            }
        });
        let mut at = Vec::new();
        for _ in 0..3 {
            passes.next().await.expect("a pass");
            at.push(start.elapsed());
        }
        writer.abort();
        for (i, t) in at.iter().enumerate() {
            let bound = CHILD_MAX_WAIT * (i as u32 + 1) + CHILD_DEBOUNCE;
            assert!(*t <= bound, "pass {i} at {t:?}, after {bound:?}: {at:?}");
        }
    }

    /// Sends `events` (ms from the start, lane) for Runner `web` and
    /// returns when its passes came (ms), over `for_ms`.
    async fn passes_for(events: Vec<(u64, Lane)>, for_ms: u64) -> Vec<u128> {
        passes_gated(events, for_ms, open).await
    }

    /// [`passes_for`], the status clock saying `gate`.
    async fn passes_gated(
        events: Vec<(u64, Lane)>,
        for_ms: u64,
        gate: impl Fn(&ObjectRef<Runner>) -> Gate + Send + 'static,
    ) -> Vec<u128> {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let child_events = rx.map(|(r, lane)| ChildEvent { lane, ..now_event(r, Priority::Low) });
        let mut passes = debounced(child_events, gate).boxed();
        let start = tokio::time::Instant::now();
        let sender = tokio::spawn(async move {
            for (at, lane) in events {
                tokio::time::sleep_until(start + Duration::from_millis(at)).await;
                tx.unbounded_send((ObjectRef::<Runner>::new("web").within("ns"), lane)).unwrap();
            }
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        let mut at = Vec::new();
        let end = start + Duration::from_millis(for_ms);
        while let Ok(Some(_)) = tokio::time::timeout_at(end, passes.next()).await {
            at.push(start.elapsed().as_millis());
        }
        sender.abort();
        at
    }

    #[tokio::test(start_paused = true)]
    async fn progress_only_events_bring_one_pass_after_the_progress_wait() {
        let at =
            passes_for(vec![(0, Lane::Progress), (400, Lane::Progress), (900, Lane::Progress)], 15_000).await;
        assert_eq!(at.len(), 1, "{at:?}");
        let wait = PROGRESS_WAIT.as_millis();
        assert!(at[0] >= wait - CHILD_DEBOUNCE.as_millis() && at[0] <= wait + 50, "{at:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_that_cannot_wait_takes_the_waiting_progress_along() {
        let at =
            passes_for(vec![(0, Lane::Progress), (1_000, Lane::Now), (1_100, Lane::Progress)], 8_000).await;
        assert_eq!(at.len(), 1, "one pass, soon after the event that cannot wait: {at:?}");
        assert!(at[0] >= 1_000 + CHILD_DEBOUNCE.as_millis() && at[0] < 1_500, "{at:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn progress_waits_until_the_status_may_show_it() {
        let wait = |_: &ObjectRef<Runner>| Gate::Wait(PROGRESS_WAIT + Duration::from_secs(2));
        let at = passes_gated(vec![(0, Lane::Progress), (400, Lane::Progress)], 20_000, wait).await;
        assert_eq!(at.len(), 1, "{at:?}");
        let due = PROGRESS_WAIT.as_millis() + 2_000;
        assert!(at[0] >= due - CHILD_DEBOUNCE.as_millis() && at[0] <= due + 450, "{at:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn progress_covered_by_a_requeued_pass_brings_none_but_other_events_still_do() {
        let covered = |_: &ObjectRef<Runner>| Gate::Covered;
        let at = passes_gated(vec![(0, Lane::Progress), (400, Lane::Progress)], 10_000, covered).await;
        assert_eq!(at, Vec::<u128>::new());
        let at = passes_gated(vec![(0, Lane::Progress), (1_000, Lane::Now)], 10_000, covered).await;
        assert_eq!(at.len(), 1, "{at:?}");
        assert!(at[0] >= 1_000 + CHILD_DEBOUNCE.as_millis() && at[0] < 1_500, "{at:?}");
    }
}
