//! Leader election on a coordination.k8s.io Lease, so a local manager and an
//! in-cluster one never reconcile at the same time.
//!
//! Hand-written (~100 lines) rather than a crate: the Lease crates we found
//! track older kube releases, and the protocol is small: take the Lease when
//! it is free or expired (optimistic concurrency on resourceVersion), renew it
//! every few seconds, give it up on shutdown, and report when it is lost.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::error::{Error, Result};

/// Lease timing, as controller-runtime's defaults.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_every: Duration,
    pub retry_every: Duration,
}

impl LeaseConfig {
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            retry_every: Duration::from_secs(2),
        }
    }
}

/// Pure: may `identity` take a Lease with this spec at `now`?
pub fn can_take(spec: &LeaseSpec, identity: &str, now: Timestamp) -> bool {
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder.is_empty() || holder == identity {
        return true;
    }
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    match &spec.renew_time {
        Some(MicroTime(t)) => t.as_second() + duration < now.as_second(),
        None => true,
    }
}

/// Blocks until the Lease is ours, then keeps renewing it in the background.
/// The returned receiver turns `false` when leadership is lost.
pub async fn acquire(client: kube::Client, cfg: LeaseConfig) -> Result<watch::Receiver<bool>> {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let mut waiting_logged = false;
    loop {
        if try_take(&api, &cfg).await? {
            break;
        }
        if !waiting_logged {
            info!(lease = %cfg.name, namespace = %cfg.namespace, "another manager holds the lease; waiting");
            waiting_logged = true;
        }
        tokio::time::sleep(cfg.retry_every).await;
    }
    info!(lease = %cfg.name, identity = %cfg.identity, "acquired leadership");
    let (tx, rx) = watch::channel(true);
    tokio::spawn(async move {
        let mut last_ok = std::time::Instant::now();
        loop {
            tokio::time::sleep(cfg.renew_every).await;
            match try_take(&api, &cfg).await {
                Ok(true) => last_ok = std::time::Instant::now(),
                Ok(false) => break,
                Err(e) => {
                    warn!(error = %e, "cannot renew the lease");
                    if last_ok.elapsed() > cfg.lease_duration {
                        break;
                    }
                }
            }
        }
        warn!(lease = %cfg.name, "lost leadership");
        let _ = tx.send(false);
    });
    Ok(rx)
}

/// One attempt to take or renew. Ok(false): someone else holds it.
async fn try_take(api: &Api<Lease>, cfg: &LeaseConfig) -> Result<bool> {
    let now = Timestamp::now();
    let err = |op, e| Error::api(op, "Lease", &cfg.namespace, &cfg.name, e);
    let Some(mut lease) = api.get_opt(&cfg.name).await.map_err(|e| err("get", e))? else {
        let lease = Lease {
            metadata: ObjectMeta { name: Some(cfg.name.clone()), ..Default::default() },
            spec: Some(spec_for(cfg, now, now, 0)),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(false),
            Err(e) => Err(err("create", e)),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    if !can_take(&spec, &cfg.identity, now) {
        return Ok(false);
    }
    let ours = spec.holder_identity.as_deref() == Some(cfg.identity.as_str());
    let acquired = if ours { spec.acquire_time.map(|t| t.0).unwrap_or(now) } else { now };
    let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
    lease.spec = Some(spec_for(cfg, acquired, now, transitions));
    match api.replace(&cfg.name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.is_conflict() => Ok(false),
        Err(e) => Err(err("update", e)),
    }
}

fn spec_for(cfg: &LeaseConfig, acquired: Timestamp, now: Timestamp, transitions: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: Some(cfg.lease_duration.as_secs() as i32),
        acquire_time: Some(MicroTime(acquired)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..Default::default()
    }
}

/// Gives the Lease up on shutdown so the next manager need not wait for it
/// to expire. Best effort.
pub async fn release(client: kube::Client, cfg: &LeaseConfig) {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    if let Ok(Some(mut lease)) = api.get_opt(&cfg.name).await
        && let Some(spec) = lease.spec.as_mut()
        && spec.holder_identity.as_deref() == Some(cfg.identity.as_str())
    {
        spec.holder_identity = None;
        spec.renew_time = None;
        let _ = api.replace(&cfg.name, &PostParams::default(), &lease).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            ..Default::default()
        }
    }

    #[test]
    fn a_fresh_lease_of_another_holder_cannot_be_taken() {
        assert!(!can_take(&spec("other", 100), "me", Timestamp::from_second(110).unwrap()));
    }

    #[test]
    fn an_expired_lease_can_be_taken() {
        assert!(can_take(&spec("other", 100), "me", Timestamp::from_second(116).unwrap()));
    }

    #[test]
    fn our_own_or_a_released_lease_can_be_taken() {
        assert!(can_take(&spec("me", 100), "me", Timestamp::from_second(101).unwrap()));
        assert!(can_take(&LeaseSpec::default(), "me", Timestamp::from_second(101).unwrap()));
    }
}
