//! The Lease naming the local manager that holds the registrations
//! ([`crate::webhook::local::LEASE`]): taken once at start (refused while
//! another live local manager holds it), renewed in the background, deleted
//! on exit. Liveness is judged by the wall clock
//! ([`crate::webhook::local::lease_live`]), as diagnose judges it.
//!
//! Also the check that no in-cluster manager leads: the local manager then
//! would take the registrations from under a working installation, so it
//! refuses unless told to take over.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};
use tokio::sync::watch;
use tracing::warn;

use super::super::guarded_error;
use crate::client::guarded::{self, Step};
use crate::error::FromApi;
use crate::manager::error::{Error, Result};
use crate::manifests::LEADER_LEASE;
use crate::webhook::local::{LEASE, LEASE_DURATION_SECONDS, LEASE_RENEW_SECONDS, lease_live};

/// Upper bound on one Lease request, so a dead connection fails a renewal.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Err naming the leader when a manager other than `identity` holds the
/// leader Lease in `namespace` and renews it (the in-cluster manager, as a
/// rule). A Lease that cannot be read (a namespace without one) is no leader.
pub async fn refuse_if_led(client: &kube::Client, namespace: &str, identity: &str) -> Result<()> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let Ok(Some(lease)) = api.get_opt(LEADER_LEASE).await else { return Ok(()) };
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone()).unwrap_or_default();
    if holder == identity || !lease_live(lease.spec.as_ref(), Timestamp::now()) {
        return Ok(());
    }
    Err(Error::Webhook(format!(
        "the manager {holder:?} leads (Lease {namespace}/{LEADER_LEASE}) and serves the webhooks in the cluster; \
         pass --take-over to serve them from here until this process exits (they are handed back then)"
    )))
}

/// Takes the Lease for `holder`: creates it, or takes it over when its
/// holder is `holder` or no longer renews it (a [`guarded::write`]: of
/// two taking it at once, the loser reads the winner). Err naming a live
/// holder.
pub async fn take(client: &kube::Client, namespace: &str, holder: &str) -> Result<()> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let api = &api;
    guarded::write(
        || async move { api.get_opt(LEASE).await.map_err(|e| Error::api("get", "Lease", namespace, LEASE, e)) },
        |current| {
            let now = Timestamp::now();
            let spec = current.as_ref().and_then(|l| l.spec.as_ref());
            let other = spec.and_then(|s| s.holder_identity.clone()).filter(|h| h != holder);
            if let Some(other) = other.filter(|_| lease_live(spec, now)) {
                return Err(Error::Webhook(format!(
                    "the local manager {other:?} serves the webhooks (Lease {namespace}/{LEASE}); stop it \
                     first, or wait {LEASE_DURATION_SECONDS} s if it was killed"
                )));
            }
            let name = ObjectMeta { name: Some(LEASE.into()), ..Default::default() };
            let metadata = current.map_or(name, |l| l.metadata);
            let spec = LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                ..Default::default()
            };
            Ok(Step::Write(Lease { metadata, spec: Some(spec) }))
        },
        |lease| async move { guarded::create_or_replace(api, LEASE, &lease).await.map(drop) },
    )
    .await
    .map_err(|f| guarded_error::<Lease>(namespace, LEASE, "take", f))
}

/// Renews every [`LEASE_RENEW_SECONDS`] until `stop`; turns `lost` true
/// (and returns) when another holder has the Lease. A failed renewal is
/// retried: the registrations stay ours until someone else takes the Lease.
pub async fn renew(
    client: kube::Client,
    namespace: String,
    holder: String,
    lost: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(LEASE_RENEW_SECONDS)) => {}
            _ = stop.wait_for(|v| *v) => return,
        }
        let once = async {
            let mut lease = api.get(LEASE).await?;
            let ours =
                lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(holder.as_str());
            if !ours {
                return Ok(false);
            }
            if let Some(s) = lease.spec.as_mut() {
                s.renew_time = Some(MicroTime(Timestamp::now()));
            }
            api.replace(LEASE, &PostParams::default(), &lease).await.map(|_| true)
        };
        let taken = match tokio::time::timeout(REQUEST_TIMEOUT, once).await {
            Ok(Ok(ours)) => !ours,
            // Deleted: diagnose --fix judged it lapsed and restored.
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => true,
            // A conflict is a write since the read: the next read says whose.
            Ok(Err(e)) => {
                warn!(error = %e, "cannot renew the local webhooks' Lease");
                false
            }
            Err(_) => {
                warn!("renewing the local webhooks' Lease timed out");
                false
            }
        };
        if taken {
            warn!(lease = LEASE, %namespace, "the local webhooks' Lease is no longer ours");
            let _ = lost.send(true);
            return;
        }
    }
}

/// Deletes the Lease if it is still `holder`'s (guarded by the
/// resourceVersion read), so the next local manager need not wait.
pub async fn release(client: &kube::Client, namespace: &str, holder: &str) {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let release = async {
        let Ok(Some(lease)) = api.get_opt(LEASE).await else { return };
        if lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) != Some(holder) {
            return;
        }
        let pre = Preconditions { resource_version: lease.metadata.resource_version, uid: None };
        let params = DeleteParams { preconditions: Some(pre), ..Default::default() };
        if let Err(e) = api.delete(LEASE, &params).await {
            warn!(error = %e, "deleting the local webhooks' Lease");
        }
    };
    if tokio::time::timeout(REQUEST_TIMEOUT, release).await.is_err() {
        warn!("deleting the local webhooks' Lease timed out; it lapses on its own");
    }
}
