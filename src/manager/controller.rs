//! Wires the manager together: preflight, HTTP endpoints, leader election,
//! the watches ([`super::watches`]), and the workers ([`super::workers`])
//! that call [`super::reconcile::reconcile`] in the work queue's order.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use tracing::{info, warn};

use super::context::{Context, Stores};
use super::error::{Error, Result};
use super::leader::{self, Leadership, LeaseConfig};
use super::metrics::Metrics;
use super::metrics_auth::MetricsAuth;
use super::reconcile::{error_policy, reconcile};
use super::server::{Phase, Readiness};
use super::trigger::{Trigger, Work};
use super::work_queue::Priority;
use super::{preflight, presence, server, watches, workers};
use crate::manifests::{LEADER_LEASE, MANAGER_NAME, MANAGER_NAMESPACE};

/// How the manager runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The namespaces to watch, each with its own watches into the one
    /// cache per kind; empty watches all.
    pub namespaces: Vec<String>,
    pub metrics_addr: Option<SocketAddr>,
    pub health_addr: Option<SocketAddr>,
    /// Hold a Lease in `lease_namespace` before reconciling.
    pub leader_elect: bool,
    pub lease_namespace: String,
    /// Lease holder and Event reporter instance (the Pod name in the cluster).
    pub identity: String,
    /// Check the CRD and the permissions before starting.
    pub preflight: bool,
    /// Serve `/metrics` only to callers the apiserver authenticates and
    /// authorises (`get` on `/metrics`).
    pub metrics_auth: bool,
    /// Reconcile passes in flight at once.
    pub concurrency: u16,
    /// Serve the conversion and validating webhooks (every replica, leader or not).
    pub webhook: Option<super::webhook::WebhookConfig>,
    /// `--local-webhooks`: serve the webhooks from this process and point
    /// the registrations here until exit.
    pub local_webhooks: Option<super::webhook::local::LocalConfig>,
}

impl Config {
    /// Watch every namespace, no leader election, no HTTP endpoints.
    pub fn all_namespaces() -> Self {
        let identity = std::env::var("POD_NAME").unwrap_or_else(|_| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "local".into());
            format!("{host}-{}", std::process::id())
        });
        Config {
            namespaces: Vec::new(),
            metrics_addr: None,
            health_addr: None,
            leader_elect: false,
            lease_namespace: std::env::var("POD_NAMESPACE").unwrap_or_else(|_| MANAGER_NAMESPACE.into()),
            identity,
            preflight: true,
            metrics_auth: false,
            concurrency: DEFAULT_CONCURRENCY,
            webhook: None,
            local_webhooks: None,
        }
    }

    /// Watch one namespace (what tests use: one manager per test namespace).
    pub fn namespaced(ns: &str) -> Self {
        Self::watching(&[ns])
    }

    /// Watch exactly these namespaces (`run-manager --watch-namespace a,b`).
    pub fn watching(namespaces: &[&str]) -> Self {
        Config { namespaces: namespaces.iter().map(|n| n.to_string()).collect(), ..Self::all_namespaces() }
    }

    /// `a,b` or `<all>`, for logs and the presence Lease.
    pub fn watched(&self) -> String {
        if self.namespaces.is_empty() { "<all>".into() } else { self.namespaces.join(",") }
    }
}

/// How long a stop waits for passes in flight (each is a few requests).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Reconciles in flight at once, unless configured. Each holds one pooled
/// HTTP/1.1 connection while it writes. A pass waits on the apiserver, not
/// on CPU: with 4, 1,000 Runners changed 25 times a second queued up to a
/// 104 s p99 (our writes took 36 ms p50 on a busy apiserver) while the
/// manager used 0.06 cores; with 16 the p99 was 2.1 s and p50 0.19 s
/// (benches/sustained.sh).
pub const DEFAULT_CONCURRENCY: u16 = 16;
/// More passes in flight than this would only queue at the apiserver.
pub const MAX_CONCURRENCY: u16 = 64;

/// Runs until `shutdown` resolves (SIGINT/SIGTERM in the binary) or, with
/// leader election, until leadership is lost (an error: the process should
/// restart and wait for the Lease again).
pub async fn run(
    client: Client,
    cfg: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let shutdown = listen_for(shutdown);
    if cfg.preflight && !preflight_unless_stopped(&client, &cfg, shutdown.clone()).await? {
        return Ok(());
    }
    // Before /readyz answers: a replica is an endpoint of the webhook's
    // Service only once it serves a certificate.
    let serving = match &cfg.webhook {
        Some(webhook) => Some(super::webhook::start(&client, webhook).await?),
        None => None,
    };
    let local = match &cfg.local_webhooks {
        Some(local) => {
            Some(super::webhook::local::start(&client, local, &cfg.identity, shutdown.clone()).await?)
        }
        None => None,
    };
    let (ended_tx, ended) = tokio::sync::oneshot::channel::<()>();
    let drained = {
        let mut shutdown = shutdown.clone();
        async move {
            let Some(serving) = serving else { return };
            // The drain counts from the signal, or from an error's exit.
            tokio::select! {
                _ = super::webhook::serve::stopped(&mut shutdown) => {}
                _ = ended => {}
            }
            serving.drain().await;
        }
    };
    let reconciled = async move {
        let result = serve_and_reconcile(client, cfg, shutdown).await;
        let _ = ended_tx.send(());
        result
    };
    let (result, ()) = tokio::join!(reconciled, drained);
    // On every way out, an error included: the shutdown signal has already
    // started this; here it is waited for.
    if let Some(local) = local {
        local.hand_back().await;
    }
    result
}

/// Health and metrics, the presence Lease, leadership, and the reconcile
/// loop until `shutdown` (or the leader Lease is lost).
async fn serve_and_reconcile(
    client: Client,
    cfg: Config,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<()> {
    let metrics = Metrics::default();
    let readiness = Readiness::default();
    serve_http(&client, &cfg, &metrics, &readiness).await?;
    // Visible from here on, standing by or leading ([`presence`]).
    let presence = presence::announce(&client, &cfg, metrics.queue.clone());
    let lease_cfg = LeaseConfig::new(&cfg.lease_namespace, LEADER_LEASE, &cfg.identity);
    let Some((stop, leadership)) = lead(&client, &cfg, &lease_cfg, &readiness, shutdown).await else {
        presence.withdraw().await;
        return Ok(()); // shut down while waiting for the Lease
    };
    let why = reconcile_until(&client, &cfg, metrics, &readiness, stop).await;
    readiness.set(Phase::Starting);
    if let Some(leadership) = leadership {
        leadership.release(client, &lease_cfg).await;
    }
    presence.withdraw().await;
    if why == Stop::LostLease {
        return Err(Error::LeaseLost);
    }
    info!("manager stopped");
    Ok(())
}

/// Starts listening for the shutdown signal at once: a signal handler is
/// installed when its future is first polled, and one that arrives during
/// the preflight must still stop the manager.
fn listen_for(shutdown: impl Future<Output = ()> + Send + 'static) -> tokio::sync::watch::Receiver<bool> {
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = shutdown_tx.send(true);
    });
    shutdown_rx
}

/// The preflight; Ok(false) when shut down during it.
async fn preflight_unless_stopped(
    client: &Client,
    cfg: &Config,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<bool> {
    let lease_ns = cfg.leader_elect.then_some(cfg.lease_namespace.as_str());
    tokio::select! {
        checked = preflight::check(client, &cfg.namespaces, lease_ns, cfg.metrics_auth, cfg.webhook.as_ref().map(|w| w.namespace.as_str())) => checked.map(|()| true),
        _ = shutdown.wait_for(|v| *v) => Ok(false),
    }
}

/// Watches, caches and the workers, until `stop` resolves; says why.
async fn reconcile_until(
    client: &Client,
    cfg: &Config,
    metrics: Metrics,
    readiness: &Readiness,
    stop: impl Future<Output = Stop> + Send + Sync + 'static,
) -> Stop {
    let lost_flag = Arc::new(AtomicBool::new(false));
    // Raised when the run ends: the workers start no pass after it.
    let (stopping_tx, mut stopping) = tokio::sync::watch::channel(false);
    let stop = {
        let lost_flag = lost_flag.clone();
        async move {
            lost_flag.store(stop.await == Stop::LostLease, Ordering::Relaxed);
            let _ = stopping_tx.send(true);
        }
    };
    tokio::spawn(stop);

    let w = watches::start(client, &cfg.namespaces);
    let reporter = Reporter { controller: MANAGER_NAME.into(), instance: Some(cfg.identity.clone()) };
    let ctx = Arc::new(Context::new(
        client.clone(),
        w.stores.clone(),
        Recorder::new(client.clone(), reporter),
        metrics.clone(),
    ));
    readiness.set(Phase::Syncing);
    let synced = announce_sync(w.runners.clone(), w.stores.clone(), readiness.clone());

    info!(namespaces = %cfg.watched(), identity = %cfg.identity, "manager starting");
    let resyncs = super::resync::resyncs(w.runners.clone()).map(|key| Work {
        key,
        priority: Priority::Low,
        trigger: Trigger::Resync,
    });
    let work = futures::stream::select(w.work, resyncs).boxed();
    let mut grace = stopping.clone();
    let stopped = async move {
        let _ = stopping.wait_for(|v| *v).await;
    };
    let pass = move |cached: Arc<watches::CachedRunner>| {
        let ctx = ctx.clone();
        async move {
            let runner = cached.unpack().map_err(|source| Error::Encode { what: "Runner", source });
            let runner = match runner {
                Ok(runner) => Arc::new(runner),
                Err(e) => return Err(error_policy(cached.as_ref(), &e, &ctx)),
            };
            reconcile(runner.clone(), ctx.clone()).await.map_err(|e| error_policy(runner.as_ref(), &e, &ctx))
        }
    };
    let workers = workers::run(work, w.runners, usize::from(cfg.concurrency), synced, stopped, metrics, pass);
    // The workers stop taking passes at the stop and wait for those in
    // flight: give them a grace period, then drop them. With the Lease lost
    // there is no grace: a standby may take over when the renew deadline
    // has passed, and from then on every write of ours would race it.
    let lost = lost_flag.clone();
    tokio::select! {
        _ = workers => {}
        _ = async move {
            let _ = grace.wait_for(|v| *v).await;
            if !lost.load(Ordering::Relaxed) {
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            }
        } => warn!("stopped with passes in flight; they were dropped"),
    }
    if lost_flag.load(Ordering::Relaxed) { Stop::LostLease } else { Stop::Shutdown }
}

/// `/metrics`, and `/healthz` + `/readyz` ([`Phase::readyz`]).
async fn serve_http(client: &Client, cfg: &Config, metrics: &Metrics, readiness: &Readiness) -> Result<()> {
    if let Some(addr) = cfg.metrics_addr {
        let auth = cfg.metrics_auth.then(|| MetricsAuth::new(client.clone()));
        let bound = server::serve(addr, server::metrics_routes(metrics.clone(), auth)).await?;
        info!(%bound, auth = cfg.metrics_auth, "serving /metrics");
    }
    if let Some(addr) = cfg.health_addr {
        let bound = server::serve(addr, server::health_routes(readiness.clone())).await?;
        info!(%bound, "serving /healthz and /readyz");
    }
    Ok(())
}

/// Why the workers stop.
#[derive(Debug, PartialEq)]
enum Stop {
    Shutdown,
    LostLease,
}

/// With leader election, stands by (Ready) until the Lease is ours; None
/// when shut down first. Returns what ends the run (the shutdown signal, or
/// the Lease lost) and the Leadership to release at the end.
async fn lead(
    client: &Client,
    cfg: &Config,
    lease_cfg: &LeaseConfig,
    readiness: &Readiness,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Option<(impl Future<Output = Stop> + Send + Sync + 'static, Option<Leadership>)> {
    let wait_shutdown = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|v| *v).await;
    };
    let mut leadership = None;
    if cfg.leader_elect {
        readiness.set(Phase::Standby);
        tokio::select! {
            held = leader::acquire(client.clone(), lease_cfg.clone()) => leadership = Some(held),
            _ = wait_shutdown(shutdown.clone()) => return None,
        }
    }
    let leading = leadership.as_ref().map(Leadership::lost);
    let stop = async move {
        let lost = async move {
            match leading {
                Some(mut rx) => {
                    let _ = rx.wait_for(|v| !*v).await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = wait_shutdown(shutdown) => Stop::Shutdown,
            _ = lost => Stop::LostLease,
        }
    };
    Some((stop, leadership))
}

/// Ready once every store has its first list; passes wait for it too.
/// One task is the stores' only waiter: a store's readiness wakes just the
/// last future that polled it, so concurrent waiters on it (a reconcile per
/// worker) could sleep forever when Runners exist at startup, and a
/// shutdown would then wait on them. The watch channel wakes them all.
fn announce_sync(
    runners: kube::runtime::reflector::Store<watches::CachedRunner>,
    stores: Stores,
    readiness: Readiness,
) -> tokio::sync::watch::Receiver<bool> {
    let (synced_tx, synced) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        // The Runner store first: a pass finds its Runner there, and the
        // store holds the first list's Runners only once it has ended.
        if runners.wait_until_ready().await.is_err() {
            return;
        }
        for child in stores.children.iter() {
            child.synced().await;
        }
        readiness.set(Phase::Reconciling);
        let _ = synced_tx.send(true);
        info!("caches synced; reconciling");
    });
    synced
}
