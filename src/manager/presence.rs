//! A running manager announces itself, leader-elected or not: a Lease of
//! its own (coordination.k8s.io, in the Lease namespace next to the leader
//! Lease) whose holder is "HOST pid N", annotated with the namespaces it
//! watches, whether it takes part in leader election and its work queue
//! ([`crate::queue_note`]), renewed every few seconds and deleted on stop. A killed manager's Lease simply stops being
//! renewed: diagnose judges freshness by `leaseDurationSeconds`.
//!
//! Best effort by design: an identity that may not write Leases there (a
//! tenant with only a namespaced Role) still reconciles; it logs one
//! warning and stays invisible.
//!
//! ```text
//! Config ─► presence::lease (pure) ─► apply every RENEW ─► ... stop ─► delete
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams};
use tokio::task::AbortHandle;
use tracing::{debug, info, warn};

use super::Config;
use super::metrics::QueueMetrics;
use crate::manifests::{PRESENCE_LABEL, PRESENCE_LEADER_ELECT, PRESENCE_NAMESPACES, PRESENCE_QUEUE};
use crate::queue_note::QueueNote;

/// How long a presence counts without renewal (the Lease says so itself).
pub const DURATION: Duration = Duration::from_secs(15);
/// Between renewals: three chances before the Lease expires.
const RENEW: Duration = Duration::from_secs(5);
/// Upper bound on one write, so a dead connection does not stall renewals.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Field manager of the presence writes (server-side apply, the one path).
const FIELD_MANAGER: &str = "kubectl-runner-presence";

/// "HOST pid N": who this process is, as people look for it.
pub fn holder() -> String {
    let host =
        hostname::get().ok().and_then(|h| h.into_string().ok()).unwrap_or_else(|| "unknown-host".into());
    format!("{host} pid {}", std::process::id())
}

pub use crate::manifests::presence_lease_name as lease_name;

/// Pure: the presence Lease of `cfg`, renewed `now`, with its work queue
/// as it stands (none before the queue exists).
pub fn lease(cfg: &Config, holder: &str, now: Timestamp, queue: Option<QueueNote>) -> Lease {
    let mut annotations = BTreeMap::from([
        (PRESENCE_NAMESPACES.to_string(), cfg.namespaces.join(",")),
        (PRESENCE_LEADER_ELECT.to_string(), cfg.leader_elect.to_string()),
    ]);
    if let Some(q) = queue {
        annotations.insert(PRESENCE_QUEUE.to_string(), q.encode());
    }
    Lease {
        metadata: ObjectMeta {
            name: Some(lease_name(&cfg.identity)),
            namespace: Some(cfg.lease_namespace.clone()),
            labels: Some(BTreeMap::from([(PRESENCE_LABEL.to_string(), "true".to_string())])),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(DURATION.as_secs() as i32),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

/// The renewals in the background; [`Presence::withdraw`] ends them.
pub struct Presence {
    renewer: AbortHandle,
    api: Api<Lease>,
    name: String,
}

/// Starts announcing `cfg`'s manager and its work queue.
pub fn announce(client: &kube::Client, cfg: &Config, queue: QueueMetrics) -> Presence {
    let api: Api<Lease> = Api::namespaced(client.clone(), &cfg.lease_namespace);
    let (cfg, holder) = (cfg.clone(), holder());
    let name = lease_name(&cfg.identity);
    let renewer = tokio::spawn({
        let api = api.clone();
        async move {
            let mut failing = false;
            loop {
                let body = lease(&cfg, &holder, Timestamp::now(), queue.note());
                match renew(&api, &body).await {
                    Ok(()) if failing => {
                        info!(lease = %body.metadata.name.unwrap_or_default(), "presence Lease written again");
                        failing = false;
                    }
                    Ok(()) => {}
                    Err(e) if !failing => {
                        failing = true;
                        warn!(namespace = %cfg.lease_namespace, error = %e,
                              "cannot write this manager's presence Lease; it keeps reconciling, but `kubectl runner diagnose` will not see it (needs patch on leases.coordination.k8s.io there)");
                    }
                    Err(e) => debug!(error = %e, "presence Lease still not written"),
                }
                tokio::time::sleep(RENEW).await;
            }
        }
    })
    .abort_handle();
    Presence { renewer, api, name }
}

/// One renewal: a server-side apply (creates the Lease the first time).
async fn renew(api: &Api<Lease>, body: &Lease) -> Result<(), String> {
    let name = body.metadata.name.as_deref().unwrap_or_default();
    let (params, patch) = (PatchParams::apply(FIELD_MANAGER).force(), Patch::Apply(body));
    match tokio::time::timeout(REQUEST_TIMEOUT, api.patch(name, &params, &patch)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(crate::error::describe_kube(&e)),
        Err(_) => Err(format!("no answer within {}s", REQUEST_TIMEOUT.as_secs())),
    }
}

impl Presence {
    /// Stops renewing, then deletes the Lease (best effort, bounded).
    pub async fn withdraw(self) {
        self.renewer.abort();
        let params = DeleteParams::default();
        match tokio::time::timeout(REQUEST_TIMEOUT, self.api.delete(&self.name, &params)).await {
            Ok(Ok(_)) => debug!(lease = %self.name, "presence Lease deleted"),
            Ok(Err(e)) => debug!(lease = %self.name, error = %e, "presence Lease not deleted; it expires"),
            Err(_) => debug!(lease = %self.name, "presence Lease delete timed out; it expires"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_names_the_holder_the_watched_namespaces_and_leader_election() {
        let mut cfg = Config::watching(&["a", "b"]);
        cfg.identity = "laptop-42".into();
        cfg.lease_namespace = "runner-system".into();
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let queue = QueueNote { high: 1, normal: 0, low: 2, oldest_wait: Duration::from_secs(3) };
        let l = lease(&cfg, "laptop pid 42", now, Some(queue));
        let a = l.metadata.annotations.clone().unwrap();
        assert_eq!(QueueNote::parse(&a[PRESENCE_QUEUE]), Some(queue));
        assert_eq!(a[PRESENCE_NAMESPACES], "a,b");
        assert_eq!(a[PRESENCE_LEADER_ELECT], "false");
        assert_eq!(l.metadata.labels.unwrap()[PRESENCE_LABEL], "true");
        assert_eq!(l.metadata.namespace.as_deref(), Some("runner-system"));
        let spec = l.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("laptop pid 42"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.renew_time.map(|t| t.0), Some(now));
        let all = Config::all_namespaces();
        let annotations = lease(&all, "h", now, None).metadata.annotations.unwrap();
        assert_eq!(annotations[PRESENCE_NAMESPACES], "", "all");
        assert!(!annotations.contains_key(PRESENCE_QUEUE), "no queue yet, no note");
    }

    #[test]
    fn lease_names_are_valid_names_and_differ_per_identity() {
        let (a, b) = (lease_name("Host.Name_With caps-1"), lease_name("other-2"));
        assert_ne!(a, b);
        assert_eq!(a, lease_name("Host.Name_With caps-1"), "stable for the run");
        assert!(a.len() <= 63 && a.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    }

    #[test]
    fn the_holder_says_host_and_pid() {
        assert!(holder().ends_with(&format!(" pid {}", std::process::id())), "{}", holder());
    }
}
