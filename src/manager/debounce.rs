//! Child events to passes: a Runner's child events bring one pass once
//! they are quiet for [`CHILD_DEBOUNCE`], and never later than
//! [`CHILD_MAX_WAIT`] after the first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::scheduler::{ScheduleRequest, debounced_scheduler};

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

/// Each Runner once its triggers have been quiet for [`CHILD_DEBOUNCE`],
/// or [`CHILD_MAX_WAIT`] after the first of them.
pub fn debounced(
    triggers: impl futures::Stream<Item = ObjectRef<Runner>> + Send + 'static,
) -> impl futures::Stream<Item = ObjectRef<Runner>> + Send + 'static {
    debounced_at_most(triggers, CHILD_DEBOUNCE, CHILD_MAX_WAIT)
}

/// kube's debounced scheduler pushes a message back by `quiet` whenever it
/// comes again; asking for it to run earlier (the first trigger's time
/// plus `max_wait`, less `quiet`) caps that.
fn debounced_at_most(
    triggers: impl futures::Stream<Item = ObjectRef<Runner>> + Send + 'static,
    quiet: Duration,
    max_wait: Duration,
) -> impl futures::Stream<Item = ObjectRef<Runner>> + Send + 'static {
    type Pending = Arc<Mutex<HashMap<ObjectRef<Runner>, tokio::time::Instant>>>;
    let pending: Pending = Pending::default();
    let waiting = pending.clone();
    let requests = triggers.map(move |message| {
        let now = tokio::time::Instant::now();
        let mut waiting = waiting.lock().unwrap_or_else(|e| e.into_inner());
        let first = *waiting.entry(message.clone()).or_insert(now);
        let latest = (first + max_wait).checked_sub(quiet).unwrap_or(first);
        ScheduleRequest { message, run_at: now.min(latest) }
    });
    debounced_scheduler(requests, quiet).inspect(move |message| {
        pending.lock().unwrap_or_else(|e| e.into_inner()).remove(message);
    })
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[tokio::test]
    async fn child_events_closer_than_the_debounce_bring_one_pass_per_runner() {
        let runner = |name: &str| ObjectRef::<Runner>::new(name).within("ns");
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut passes = debounced(rx).boxed();
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
        let mut passes = debounced(rx).boxed();
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
}
