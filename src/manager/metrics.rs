//! Prometheus metrics of the manager, served on `--metrics-addr`: ours
//! (`runner_*`) and the work queue's ([`QueueMetrics`], named as
//! controller-runtime's).

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use super::queue_metrics::QueueMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabel {
    /// `create_deployment`, `apply_service`, `patch_status`, ...
    pub op: String,
}

/// Counters and histograms, cheap to clone (all Arc inside).
#[derive(Clone)]
pub struct Metrics {
    pub reconciles: Counter,
    pub errors: Family<ReasonLabel, Counter>,
    pub writes: Family<WriteLabel, Counter>,
    pub duration: Histogram,
    /// Status patches by why the status changed ([`super::status_write::Reason`]).
    pub status_writes: Family<ReasonLabel, Counter>,
    pub queue: QueueMetrics,
    pub registry: Arc<Registry>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let reconciles = Counter::default();
        let errors = Family::<ReasonLabel, Counter>::default();
        let writes = Family::<WriteLabel, Counter>::default();
        let status_writes = Family::<ReasonLabel, Counter>::default();
        let duration = Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]);
        registry.register("runner_reconciles", "Reconcile passes", reconciles.clone());
        registry.register("runner_reconcile_errors", "Failed reconcile passes by reason", errors.clone());
        registry.register("runner_writes", "API writes made by the reconciler, by operation", writes.clone());
        registry.register("runner_status_writes", "Status patches by what changed", status_writes.clone());
        registry.register(
            "runner_reconcile_duration_seconds",
            "Duration of one reconcile pass",
            duration.clone(),
        );
        let queue = QueueMetrics::register(&mut registry);
        Metrics { reconciles, errors, writes, duration, status_writes, queue, registry: Arc::new(registry) }
    }
}

tokio::task_local! {
    /// Writes made by the pass being polled ([`count_writes`]).
    static PASS_WRITES: Cell<u32>;
}

/// Runs `pass` and counts the writes it makes ([`Metrics::write`]), so a
/// pass that wrote nothing is counted idle by what queued it
/// (`runner_idle_passes_total`): the passes that cost a read of the caches
/// and bought nothing, which per-trigger totals alone do not show.
pub async fn count_writes<F: Future>(pass: F) -> (F::Output, u32) {
    PASS_WRITES
        .scope(Cell::new(0), async move {
            let out = pass.await;
            (out, PASS_WRITES.with(Cell::get))
        })
        .await
}

impl Metrics {
    pub fn observe(&self, elapsed: Duration) {
        self.reconciles.inc();
        self.duration.observe(elapsed.as_secs_f64());
    }

    pub fn error(&self, reason: String) {
        self.errors.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// A status patch, and why ([`super::status_write::Reason`]).
    pub fn status_write(&self, reason: &str) {
        self.write("patch_status");
        self.status_writes.get_or_create(&ReasonLabel { reason: reason.to_string() }).inc();
    }

    pub fn write(&self, op: &str) {
        self.writes.get_or_create(&WriteLabel { op: op.to_string() }).inc();
        let _ = PASS_WRITES.try_with(|n| n.set(n.get() + 1));
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
