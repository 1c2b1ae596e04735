//! The work queue's metrics, named as controller-runtime's workqueue names
//! them (`workqueue_*` with `name="runner"`), so dashboards made for
//! controller-runtime controllers work; and the passes by what triggered
//! them (`runner_passes_total`), so a bench names what its passes were for.

use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::trigger::Trigger;
use super::work_queue::{Priority, Queue};

/// The queue's name in the `name` label (controller-runtime: the controller's).
const NAME: &str = "runner";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabel {
    name: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DepthLabel {
    name: &'static str,
    priority: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TriggerLabel {
    trigger: &'static str,
    kind: &'static str,
}

/// Seconds, as controller-runtime's workqueue buckets them (1 µs to 1000 s
/// by tens).
fn seconds() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(1e-6, 10.0, 10))
}

#[derive(Clone)]
pub struct QueueMetrics {
    depth: Family<DepthLabel, Gauge>,
    adds: Family<NameLabel, Counter>,
    queue_duration: Family<NameLabel, Histogram>,
    work_duration: Family<NameLabel, Histogram>,
    retries: Family<NameLabel, Counter>,
    unfinished: Family<NameLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    longest: Family<NameLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    oldest_wait: Family<NameLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    passes: Family<TriggerLabel, Counter>,
    idle: Family<TriggerLabel, Counter>,
    /// Whether the queue exists yet (sampled once).
    sampled: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl QueueMetrics {
    /// The queue's metrics, registered in `registry` (no prefix).
    pub fn register(registry: &mut Registry) -> Self {
        let m = QueueMetrics {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(seconds),
            work_duration: Family::new_with_constructor(seconds),
            retries: Family::default(),
            unfinished: Family::default(),
            longest: Family::default(),
            oldest_wait: Family::default(),
            passes: Family::default(),
            idle: Family::default(),
            sampled: Default::default(),
        };
        registry.register("workqueue_depth", "Current depth of the workqueue, by priority", m.depth.clone());
        registry.register("workqueue_adds", "Total number of adds handled by the workqueue", m.adds.clone());
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in the workqueue before being requested",
            m.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from the workqueue takes",
            m.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by the workqueue",
            m.retries.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress",
            m.unfinished.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for the workqueue been running",
            m.longest.clone(),
        );
        registry.register(
            "workqueue_oldest_wait_seconds",
            "How long the item queued longest ago has waited (not in controller-runtime)",
            m.oldest_wait.clone(),
        );
        registry.register("runner_passes", "Reconcile passes started, by what queued them", m.passes.clone());
        registry.register(
            "runner_idle_passes",
            "Reconcile passes that ended without writing anything, by what queued them",
            m.idle.clone(),
        );
        m
    }

    pub fn added(&self) {
        self.adds.get_or_create(&NameLabel { name: NAME }).inc();
    }

    pub fn started(&self, _priority: Priority, waited: Duration, trigger: Trigger) {
        self.queue_duration.get_or_create(&NameLabel { name: NAME }).observe(waited.as_secs_f64());
        let (trigger, kind) = trigger.labels();
        self.passes.get_or_create(&TriggerLabel { trigger, kind }).inc();
    }

    /// A pass queued by `trigger` ended well without a write.
    pub fn idle(&self, trigger: Trigger) {
        let (trigger, kind) = trigger.labels();
        self.idle.get_or_create(&TriggerLabel { trigger, kind }).inc();
    }

    pub fn done(&self, worked: Duration, failed: bool) {
        self.work_duration.get_or_create(&NameLabel { name: NAME }).observe(worked.as_secs_f64());
        if failed {
            self.retries.get_or_create(&NameLabel { name: NAME }).inc();
        }
    }

    /// The depth by priority, after every change of the queue.
    pub fn depth<K: std::hash::Hash + Eq + Clone, T: Copy>(&self, queue: &Queue<K, T>) {
        for p in Priority::ALL {
            let n = i64::try_from(queue.depth(p)).unwrap_or(i64::MAX);
            self.depth.get_or_create(&DepthLabel { name: NAME, priority: p.as_str() }).set(n);
        }
    }

    /// The queue as the last sample saw it, for the presence Lease; None
    /// before the first sample (no queue yet).
    pub fn note(&self) -> Option<crate::queue_note::QueueNote> {
        let label = NameLabel { name: NAME };
        let depth = |p: Priority| {
            let g = self.depth.get_or_create(&DepthLabel { name: NAME, priority: p.as_str() });
            u64::try_from(g.get()).unwrap_or(0)
        };
        let sampled = self.sampled.load(std::sync::atomic::Ordering::Relaxed);
        sampled.then(|| crate::queue_note::QueueNote {
            high: depth(Priority::High),
            normal: depth(Priority::Normal),
            low: depth(Priority::Low),
            oldest_wait: Duration::from_secs_f64(self.oldest_wait.get_or_create(&label).get().max(0.0)),
        })
    }

    /// The time-based gauges, sampled.
    pub fn sample<K: std::hash::Hash + Eq + Clone, T: Copy>(&self, queue: &Queue<K, T>, now: Instant) {
        let (_, unfinished, longest) = queue.running(now);
        let label = NameLabel { name: NAME };
        self.unfinished.get_or_create(&label).set(unfinished.as_secs_f64());
        self.longest.get_or_create(&label).set(longest.as_secs_f64());
        let oldest = queue.oldest_wait(now).unwrap_or_default();
        self.oldest_wait.get_or_create(&label).set(oldest.as_secs_f64());
        self.sampled.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
