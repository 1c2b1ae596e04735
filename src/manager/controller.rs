//! Wires the manager together: preflight, HTTP endpoints, leader election,
//! reflector stores for the children, and the kube-runtime Controller that
//! calls [`super::reconcile::reconcile`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Client;
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use tracing::{info, warn};

use super::context::{Context, Stores};
use super::leader::{self, LeaseConfig};
use super::metrics::Metrics;
use super::pod_problems::PodProblems;
use super::pod_view::PodView;
use super::reconcile::{error_policy, reconcile};
use super::retry::WatchBackoff;
use super::{preflight, server, trim};
use crate::api::{RUNNER_UID_LABEL, Runner};
use crate::client::scoped;
use crate::error::{Error, Result};
use crate::manifests::{LEADER_LEASE, MANAGER_NAME, MANAGER_NAMESPACE};

/// How the manager runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Watch one namespace; None watches all.
    pub namespace: Option<String>,
    pub metrics_addr: Option<SocketAddr>,
    pub health_addr: Option<SocketAddr>,
    /// Hold a Lease in `lease_namespace` before reconciling.
    pub leader_elect: bool,
    pub lease_namespace: String,
    /// Lease holder and Event reporter instance (the Pod name in the cluster).
    pub identity: String,
    /// Check the CRD and the permissions before starting.
    pub preflight: bool,
}

impl Config {
    /// Watch every namespace, no leader election, no HTTP endpoints.
    pub fn all_namespaces() -> Self {
        let identity = std::env::var("POD_NAME").unwrap_or_else(|_| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "local".into());
            format!("{host}-{}", std::process::id())
        });
        Config {
            namespace: None,
            metrics_addr: None,
            health_addr: None,
            leader_elect: false,
            lease_namespace: std::env::var("POD_NAMESPACE").unwrap_or_else(|_| MANAGER_NAMESPACE.into()),
            identity,
            preflight: true,
        }
    }

    /// Watch one namespace (what tests use: one manager per test namespace).
    pub fn namespaced(ns: &str) -> Self {
        Config { namespace: Some(ns.into()), ..Self::all_namespaces() }
    }
}

/// Reconciles in flight at once. Each holds one pooled HTTP/1.1 connection
/// while it writes; a few keep creation fast without a burst of TLS
/// handshakes and connections when a thousand Runners arrive together.
const CONCURRENCY: u16 = 4;

/// Objects per page of a watch's initial list: the largest transient
/// allocation at startup and on every relist.
const LIST_PAGE: u32 = 100;

/// What of a Runner, when it changes, needs a pass: its spec (generation),
/// a deletion, or its finalizers. Status-only updates (our own writes) do
/// not; the store still sees them, so the next pass compares against them.
fn runner_changed(r: &Runner) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (r.metadata.generation, r.metadata.deletion_timestamp.is_some(), &r.metadata.finalizers).hash(&mut h);
    Some(h.finish())
}

/// A watch's errors, logged and dropped after its own backoff. Passed on,
/// they would reach the Controller's one backoff for all its triggers: each
/// watch's `410 Expired` after an apiserver restart would pause every
/// trigger for up to 30 s, one after the other, and Runners created in the
/// meantime would wait minutes for their first pass.
fn without_errors<K: Send + 'static>(
    what: &'static str,
    stream: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static {
    stream.filter_map(move |item| {
        futures::future::ready(match item {
            Ok(obj) => Some(Ok(obj)),
            Err(e) => {
                warn!(watch = what, error = %e, "watch error; retrying with backoff (a relist follows 410 Expired)");
                None
            }
        })
    })
}

/// The Runner a child event concerns: the one with the child's name, not
/// the owner. A child of a deleted Runner going away must wake the Runner
/// created again under the same name, which waits for that name.
fn runner_of_same_name<K: kube::Resource>(child: K) -> Option<ObjectRef<Runner>> {
    Some(ObjectRef::new(child.meta().name.as_deref()?).within(child.meta().namespace.as_deref()?))
}

/// Runs until `shutdown` resolves (SIGINT/SIGTERM in the binary) or, with
/// leader election, until leadership is lost (an error: the process should
/// restart and wait for the Lease again).
pub async fn run(
    client: Client,
    cfg: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    if cfg.preflight {
        let lease_ns = cfg.leader_elect.then_some(cfg.lease_namespace.as_str());
        preflight::check(&client, cfg.namespace.as_deref(), lease_ns).await?;
    }
    let metrics = Metrics::default();
    let ready = Arc::new(AtomicBool::new(false));
    if let Some(addr) = cfg.metrics_addr {
        let bound = server::serve(addr, server::metrics_routes(metrics.clone())).await?;
        info!(%bound, "serving /metrics");
    }
    if let Some(addr) = cfg.health_addr {
        let bound = server::serve(addr, server::health_routes(ready.clone())).await?;
        info!(%bound, "serving /healthz and /readyz");
    }

    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = shutdown_tx.send(true);
    });
    let wait_shutdown = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|v| *v).await;
    };

    let lease_cfg = LeaseConfig::new(&cfg.lease_namespace, LEADER_LEASE, &cfg.identity);
    let mut leading = None;
    if cfg.leader_elect {
        tokio::select! {
            rx = leader::acquire(client.clone(), lease_cfg.clone()) => leading = Some(rx?),
            _ = wait_shutdown(shutdown_rx.clone()) => return Ok(()),
        }
    }
    let lost = async move {
        match leading {
            Some(mut rx) => {
                let _ = rx.wait_for(|v| !*v).await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    let lost_flag = Arc::new(AtomicBool::new(false));
    let stop = {
        let lost_flag = lost_flag.clone();
        let rx = shutdown_rx.clone();
        async move {
            tokio::select! {
                _ = wait_shutdown(rx) => {}
                _ = lost => lost_flag.store(true, Ordering::Relaxed),
            }
        }
    };

    // Every cache is label-filtered and trimmed before it is stored.
    let children = watcher::Config::default().labels(RUNNER_UID_LABEL).page_size(LIST_PAGE);
    let ns = cfg.namespace.as_deref();
    let (deployments, dep_w) = reflector::store::<Deployment>();
    let (services, svc_w) = reflector::store::<Service>();
    let (ingresses, ing_w) = reflector::store::<Ingress>();
    let (runners, runner_w) = reflector::store::<Runner>();
    let dep_stream = watcher(scoped::<Deployment>(&client, ns), children.clone())
        .backoff(WatchBackoff::default())
        .modify(trim::deployment)
        .reflect(dep_w)
        .touched_objects();
    let dep_stream = without_errors("Deployment", dep_stream);
    let svc_stream = watcher(scoped::<Service>(&client, ns), children.clone())
        .backoff(WatchBackoff::default())
        .modify(trim::service)
        .reflect(svc_w)
        .touched_objects();
    let svc_stream = without_errors("Service", svc_stream);
    let ing_stream = watcher(scoped::<Ingress>(&client, ns), children.clone())
        .backoff(WatchBackoff::default())
        .modify(trim::ingress)
        .reflect(ing_w)
        .touched_objects();
    let ing_stream = without_errors("Ingress", ing_stream);
    let runner_stream =
        watcher(scoped::<Runner>(&client, ns), watcher::Config::default().page_size(LIST_PAGE))
            .backoff(WatchBackoff::default())
            .modify(trim::runner)
            .reflect(runner_w)
            .applied_objects()
            .predicate_filter(runner_changed, Default::default());
    let runner_stream = without_errors("Runner", runner_stream);
    // Pods are not cached: only stuck ones are remembered, and only a change
    // in what a Runner would report triggers its pass.
    let pods = PodProblems::default();
    let pod_triggers = watcher(scoped::<PodView>(&client, ns), children).backoff(WatchBackoff::default()).flat_map({
        let pods = pods.clone();
        move |event| {
            let hits = match event {
                Ok(ev) => pods.apply(ev),
                Err(e) => {
                    warn!(watch = "Pod", error = %e, "watch error; retrying with backoff (a relist follows 410 Expired)");
                    vec![]
                }
            };
            stream::iter(hits)
        }
    });

    let stores = Stores { deployments, services, ingresses, pods };
    let reporter = Reporter { controller: MANAGER_NAME.into(), instance: Some(cfg.identity.clone()) };
    let ctx = Arc::new(Context::new(
        client.clone(),
        stores.clone(),
        Recorder::new(client.clone(), reporter),
        metrics,
    ));

    // Ready once every store has its first list; reconciles wait for it too.
    // One task is the stores' only waiter: a store's readiness wakes just the
    // last future that polled it, so concurrent waiters on it (a reconcile
    // per worker) could sleep forever when Runners exist at startup, and a
    // shutdown would then wait on them. The watch channel wakes them all.
    let (synced_tx, synced) = tokio::sync::watch::channel(false);
    tokio::spawn({
        let (stores, ready) = (stores.clone(), ready.clone());
        async move {
            let _ = stores.deployments.wait_until_ready().await;
            let _ = stores.services.wait_until_ready().await;
            let _ = stores.ingresses.wait_until_ready().await;
            ready.store(true, Ordering::Relaxed);
            let _ = synced_tx.send(true);
            info!("caches synced; reconciling");
        }
    });

    info!(namespace = ns.unwrap_or("<all>"), identity = %cfg.identity, "manager starting");
    let config = controller::Config::default().debounce(Duration::from_millis(200)).concurrency(CONCURRENCY);
    Controller::for_stream(runner_stream, runners)
        .with_config(config)
        .watches_stream(dep_stream, runner_of_same_name)
        .watches_stream(svc_stream, runner_of_same_name)
        .watches_stream(ing_stream, runner_of_same_name)
        .reconcile_on(pod_triggers)
        .graceful_shutdown_on(stop)
        .run(
            move |runner, ctx: Arc<Context>| {
                let mut synced = synced.clone();
                async move {
                    let _ = synced.wait_for(|v| *v).await;
                    reconcile(runner, ctx).await
                }
            },
            error_policy,
            ctx,
        )
        .for_each(|res| async move {
            if let Err(e) = res {
                match e {
                    controller::Error::ReconcilerFailed(..) => {} // logged by error_policy
                    other => warn!(error = %other, "controller event"),
                }
            }
        })
        .await;
    ready.store(false, Ordering::Relaxed);
    if cfg.leader_elect {
        leader::release(client, &lease_cfg).await;
    }
    if lost_flag.load(Ordering::Relaxed) {
        return Err(Error::Other(
            "lost leadership of the Lease; exiting so a restart can wait for it again".into(),
        ));
    }
    info!("manager stopped");
    Ok(())
}
