//! The conversion and validating webhooks, served by every replica
//! (leader or not: the apiserver picks any endpoint of the Service).
//! [`start`] makes sure a certificate exists before it binds, so a replica
//! never listens without one, then leaves [`keep::Keeper`] to renew and
//! reload it. `/validate` reads the index [`admission::Admission`] keeps.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Api;
use tokio::sync::watch;
use tracing::{info, warn};

use super::error::{Error, Result};
use crate::client::guarded;
use crate::webhook::{Target, VALIDATING_CONFIG, service_dns_names};

pub mod admission;
pub mod ca_bundle;
pub mod keep;
pub mod local;
pub mod serve;

/// Where and for whom the manager serves `/convert` and `/validate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    pub listen: SocketAddr,
    /// Where the CRD sends reviews (the Service, or a URL: the tests' keeper).
    pub target: Target,
    /// The manager's namespace: its Secret, and its Service's DNS names.
    pub namespace: String,
}

impl WebhookConfig {
    /// The names the serving certificate holds: the Service's, and a URL's host.
    pub fn names(&self) -> Vec<String> {
        let mut names = service_dns_names(&self.namespace);
        names.extend(self.target.extra_name());
        names
    }
}

/// Behind a Service, a Pod being deleted stays an endpoint for a moment:
/// the EndpointSlice and then each node's proxy rules follow its deletion
/// by up to a few seconds, and the apiserver keeps its connections. A
/// replica that stopped answering at SIGTERM would fail every Runner write
/// routed to it meanwhile (`failurePolicy: Fail`), on each rollout and each
/// deleted Pod. So it answers this long after its stop begins, while the
/// rest (the Lease first) stops at once. Within the Pod's grace period.
pub const DRAIN: Duration = Duration::from_secs(5);

/// Pure: a URL target (a process, not behind a Service) has no
/// endpoints to follow; Ctrl-C there should not wait.
pub fn drain_for(target: &Target) -> Duration {
    match target {
        Target::Service { .. } => DRAIN,
        Target::Url(_) => Duration::ZERO,
    }
}

/// The server started by [`start`]; [`Serving::drain`] stops it.
pub struct Serving {
    stop: watch::Sender<bool>,
    drain: Duration,
    draining: Arc<std::sync::atomic::AtomicBool>,
}

impl Serving {
    /// Called when the manager begins to stop: keeps answering for
    /// [`drain_for`] its target, each answer closing its connection
    /// ([`serve::close_when_draining`]), then stops the server and its
    /// connections.
    pub async fn drain(self) {
        self.draining.store(true, std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(self.drain).await;
        let _ = self.stop.send(true);
    }
}

/// Keeps the certificate (first round here: an error fails startup), binds
/// `cfg.listen` and serves until [`Serving::drain`] ends it.
pub async fn start(client: &kube::Client, cfg: &WebhookConfig) -> Result<Serving> {
    let (stop, shutdown) = watch::channel(false);
    let started = Instant::now();
    let slot = Arc::new(serve::CertSlot::default());
    let keeper = keep::Keeper {
        secrets: Api::namespaced(client.clone(), &cfg.namespace),
        client: client.clone(),
        namespace: cfg.namespace.clone(),
        names: cfg.names(),
        target: cfg.target.clone(),
        slot: slot.clone(),
    };
    let kept = keeper.round().await?;
    if !kept.converts {
        warn!(
            "the Runner CRD does not convert through the webhook; `kubectl runner install --with-manager` sets it"
        );
    }
    if !kept.validates {
        info!(
            "no validating webhook of ours in {VALIDATING_CONFIG}: Runner writes are not checked for host conflicts; \
             `kubectl runner install --with-manager` creates it"
        );
    }
    let draining = Arc::default();
    let routes = serve::routes(started, admission::Admission::start(client.clone()), Arc::default());
    let routes = serve::close_when_draining(routes, Arc::clone(&draining));
    let bound = serve::serve(cfg.listen, slot, routes, shutdown.clone()).await?;
    info!(%bound, target = ?cfg.target, "serving the conversion and validating webhooks");
    tokio::spawn(keeper.run(kept, shutdown));
    Ok(Serving { stop, drain: drain_for(&cfg.target), draining })
}

/// The manager's error for a guarded write ([`guarded::write`]) of the
/// `K` `ns/name` (`ns` empty: cluster-scoped) that failed.
pub fn guarded_error<K: kube::Resource<DynamicType = ()>>(
    ns: &str,
    name: &str,
    op: &'static str,
    failed: guarded::Failed<Error>,
) -> Error {
    failed.into_error(op, K::kind(&()), ns, name, |object, why| Error::Webhook(format!("{object}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_webhook_behind_a_service_drains() {
        assert_eq!(drain_for(&Target::Service { namespace: "runner-system".into() }), DRAIN);
        assert_eq!(drain_for(&Target::Url("https://127.0.0.1:9443/convert".into())), Duration::ZERO);
    }

    /// The drain runs beside the rest of the stop and must end before the
    /// kubelet's SIGKILL, with a few seconds to spare for the reconciler's
    /// stop, which the process waits on too.
    #[test]
    fn the_installed_manager_pod_is_given_time_to_drain() {
        use crate::manifests::{RbacScope, manager};
        let deployment =
            manager("img", &RbacScope::Cluster).into_iter().find(|m| m.resource.kind == "Deployment");
        let object = serde_json::to_value(&deployment.expect("the manager Deployment").object).unwrap();
        let grace = object["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].as_u64().unwrap();
        assert!(DRAIN.as_secs() + 3 <= grace, "a drain of {DRAIN:?} in a grace period of {grace} s");
    }
}
