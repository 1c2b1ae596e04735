//! Runs the passes: takes what the watches say needs a pass ([`Work`]),
//! queues it in the manager's own work queue ([`super::work_queue`]: FIFO,
//! two priorities, no starvation), and keeps up to `--concurrency` passes
//! in flight, each on the Runner as the cache holds it. It replaces
//! kube-runtime's Controller, whose scheduler takes the next key from a
//! hash set (see docs/design.md, "The work queue").
//!
//! One task owns the queue: the sources, the passes' ends and the timers
//! of delayed keys are polled together, so the queue needs no lock.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{BoxStream, FuturesUnordered};
use futures::{FutureExt, StreamExt};

use kube::runtime::reflector::Store;

use super::metrics::Metrics;
pub use super::trigger::{Key, Trigger, Work};
use super::watches::CachedRunner;
use super::work_queue::{Next, Queue};

/// How a pass ended, for the queue: `None` waits for a change, `Some(d)`
/// comes back after `d`; an error is retried with the queue's backoff, or
/// after the delay it names (a conflict: the cache catches up first).
pub type Outcome = Result<Option<Duration>, Option<Duration>>;

/// How often the queue's gauges are refreshed (depth is exact at each
/// change; the time-based ones are sampled).
const GAUGE_TICK: Duration = Duration::from_secs(1);

/// Runs passes until `stop` resolves and the passes in flight have ended.
/// No pass starts before `synced` turns true (the caches' first lists);
/// work that arrives meanwhile is queued in order.
pub async fn run<P, F>(
    sources: BoxStream<'static, Work>,
    store: Store<CachedRunner>,
    concurrency: usize,
    mut synced: tokio::sync::watch::Receiver<bool>,
    stop: impl Future<Output = ()>,
    metrics: Metrics,
    pass: P,
) where
    P: Fn(Arc<CachedRunner>) -> F + Send,
    F: Future<Output = Outcome> + Send + 'static,
{
    let mut queue: Queue<Key, Trigger> = Queue::new(|n| super::retry::backoff(n, rand::random()));
    let mut in_flight = FuturesUnordered::new();
    let mut sources = sources.fuse();
    let mut stop = pin!(stop.fuse());
    let mut stopping = false;
    let mut gauges = tokio::time::interval(GAUGE_TICK);
    loop {
        let now = Instant::now();
        queue.release_due(now);
        let ready = *synced.borrow();
        while ready && !stopping && in_flight.len() < concurrency {
            let Some(start) = queue.start(now) else { break };
            let Some(runner) = store.get(&start.key) else {
                // Deleted since it was queued: nothing to do, nothing to keep.
                queue.done(&start.key, Next::Done, now);
                queue.forget(&start.key);
                continue;
            };
            metrics.queue.started(start.priority, start.waited, start.tag);
            let (key, trigger) = (start.key, start.tag);
            let running = super::metrics::count_writes(pass(runner));
            in_flight.push(async move { (key, trigger, running.await) });
        }
        metrics.queue.depth(&queue);
        if stopping && in_flight.is_empty() {
            return;
        }
        let due = queue.next_due().map(tokio::time::Instant::from_std);
        tokio::select! {
            work = sources.next(), if !stopping => match work {
                Some(w) => {
                    if queue.add(w.key, w.priority, w.trigger, Instant::now()) {
                        metrics.queue.added();
                    }
                }
                None => stopping = true,
            },
            Some((key, trigger, (outcome, writes))) = in_flight.next(), if !in_flight.is_empty() => {
                if outcome.is_ok() && writes == 0 {
                    metrics.queue.idle(trigger);
                }
                let next = match outcome {
                    Ok(None) => Next::Done,
                    Ok(Some(after)) => Next::After(after, Trigger::Requeue),
                    Err(Some(after)) => Next::RetryAfter(after, Trigger::Retry),
                    Err(None) => Next::Backoff(Trigger::Retry),
                };
                if let Some((worked, _)) = queue.done(&key, next, Instant::now()) {
                    metrics.queue.done(worked, outcome.is_err());
                }
            }
            _ = sleep_until(due), if due.is_some() => {}
            changed = synced.changed(), if !ready => {
                if changed.is_err() {
                    stopping = true;
                }
            }
            _ = gauges.tick() => metrics.queue.sample(&queue, Instant::now()),
            () = &mut stop, if !stopping => stopping = true,
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::super::work_queue::Priority;
    use super::*;
    use crate::api::{Runner, RunnerSpec};
    use crate::kinds::packed::Packed;
    use kube::runtime::reflector;
    use kube::runtime::reflector::ObjectRef;
    use kube::runtime::watcher::Event;
    use std::sync::Mutex;

    fn store_of(names: &[&str]) -> Store<CachedRunner> {
        let (store, mut writer) = reflector::store::<CachedRunner>();
        for n in names {
            let mut r = Runner::new(n, RunnerSpec::new("nginx:1"));
            r.metadata.namespace = Some("ns".into());
            r.metadata.uid = Some(format!("uid-{n}"));
            writer.apply_watcher_event(&Event::Apply(Packed::pack(r).unwrap()));
        }
        store
    }

    /// [`run`] over `items` (then nothing more) in a task of its own, until
    /// the sender is used.
    fn spawn_run<F>(
        items: Vec<Work>,
        store: Store<CachedRunner>,
        concurrency: usize,
        synced: tokio::sync::watch::Receiver<bool>,
        metrics: Metrics,
        pass: impl Fn(Arc<CachedRunner>) -> F + Send + 'static,
    ) -> (tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>)
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let sources = futures::stream::iter(items).chain(futures::stream::pending()).boxed();
        let stop = async move {
            let _ = stop_rx.await;
        };
        (stop_tx, tokio::spawn(run(sources, store, concurrency, synced, stop, metrics, pass)))
    }

    fn work(name: &str, priority: Priority) -> Work {
        Work { key: ObjectRef::new(name).within("ns"), priority, trigger: Trigger::RunnerChange }
    }

    /// With one pass at a time and every key queued before the caches
    /// synced, passes run in queue order: High first, FIFO within each.
    #[tokio::test]
    async fn passes_start_after_the_sync_in_queue_order_one_at_a_time() {
        let names = ["a", "b", "c", "d"];
        let store = store_of(&names);
        let items = vec![
            work("a", Priority::Low),
            work("b", Priority::High),
            work("c", Priority::Low),
            work("d", Priority::High),
            work("gone", Priority::High),
        ];
        let (synced_tx, synced) = tokio::sync::watch::channel(false);
        let order = Arc::new(Mutex::new(Vec::new()));
        let seen = order.clone();
        let (stop_tx, runner) = spawn_run(items, store, 1, synced, Metrics::default(), move |r| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(kube::Resource::meta(r.as_ref()).name.clone().unwrap());
                Ok(None)
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(order.lock().unwrap().is_empty(), "nothing before the caches synced");
        synced_tx.send(true).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // One Low in every LOW_EVERY starts while Low waits: b, d are High,
        // then a and c (the fourth start would be Low's turn anyway).
        assert_eq!(*order.lock().unwrap(), ["b", "d", "a", "c"]);
        stop_tx.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(1), runner).await.expect("stops").unwrap();
    }

    /// A pass that wrote nothing is counted idle under what queued it; one
    /// that wrote is not, nor is one that failed.
    #[tokio::test]
    async fn passes_that_wrote_nothing_are_counted_idle() {
        let store = store_of(&["wrote", "idle", "failed"]);
        let items =
            vec![work("wrote", Priority::High), work("idle", Priority::High), work("failed", Priority::High)];
        let (_synced_tx, synced) = tokio::sync::watch::channel(true);
        let metrics = Metrics::default();
        let writer = metrics.clone();
        let (stop_tx, runner) = spawn_run(items, store, 2, synced, metrics.clone(), move |r| {
            let (writer, name) = (writer.clone(), kube::Resource::meta(r.as_ref()).name.clone().unwrap());
            async move {
                tokio::task::yield_now().await;
                if name == "wrote" {
                    writer.write("patch_status");
                }
                if name == "failed" { Err(None) } else { Ok(None) }
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop_tx.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(1), runner).await.expect("stops").unwrap();
        let text = metrics.encode();
        let idle: Vec<&str> = text.lines().filter(|l| l.starts_with("runner_idle_passes_total{")).collect();
        assert_eq!(idle, [r#"runner_idle_passes_total{trigger="runner_change",kind=""} 1"#], "{text}");
    }
}
