//! `/validate`: the apiserver posts an AdmissionReview of each Runner
//! CREATE or UPDATE whose spec changed, and this answers from memory. An
//! index of every Runner and every Ingress, all namespaces, is kept by two
//! reflectors ([`Admission::start`]); [`crate::admission::judge`] decides.
//!
//! The apiserver waits at most `manifests::TIMEOUT_SECONDS` (5 s), so a
//! request never reads the API: until the index has synced, it waits up to
//! [`SYNC_WAIT`] and then refuses, saying the webhook is starting (with
//! failurePolicy Fail, a refusal the user can retry beats an admission
//! the index could not check).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::networking::v1::Ingress;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use tracing::{debug, warn};

use crate::admission::{self, ingress_claims, runner_claims};
use crate::api::{GROUP, Runner, VERSION};
use crate::manager::retry::WatchBackoff;

/// Longest wait of a request for the index's first sync: well under the
/// apiserver's 5 s, so the refusal saying why arrives before its timeout.
pub const SYNC_WAIT: Duration = Duration::from_secs(3);

/// The refusal while the index has not synced.
pub const STARTING: &str = "the Runner admission webhook is starting (its index of the hosts of Runners \
                            and Ingresses has not synced yet); retry in a few seconds";

/// The index `/validate` reads. Cheap to clone (the routes hold one per
/// connection); the reflectors stop when the last clone is dropped.
#[derive(Clone)]
pub struct Admission {
    runners: Store<Runner>,
    ingresses: Store<Ingress>,
    _tasks: Arc<Tasks>,
}

/// The reflectors' tasks, aborted with the last [`Admission`].
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        self.0.iter().for_each(|t| t.abort());
    }
}

impl Admission {
    /// Starts the reflectors (on the current tokio runtime) of Runners and
    /// Ingresses in all namespaces: a host is refused whichever namespace
    /// holds it. Objects are kept trimmed to what the rule reads.
    pub fn start(client: kube::Client) -> Admission {
        let (runners, runners_w) = reflector::store::<Runner>();
        let (ingresses, ingresses_w) = reflector::store::<Ingress>();
        let tasks = vec![
            tokio::spawn(index("Runners", Api::all(client.clone()), runners_w, |r: &mut Runner| {
                trim(&mut r.metadata);
                r.status = None;
            })),
            tokio::spawn(index("Ingresses", Api::all(client), ingresses_w, |i: &mut Ingress| {
                trim(&mut i.metadata);
                i.status = None;
            })),
        ];
        Admission { runners, ingresses, _tasks: Arc::new(Tasks(tasks)) }
    }

    /// True once both reflectors have listed, waiting at most `within`.
    pub async fn synced(&self, within: Duration) -> bool {
        let both = async {
            self.runners.wait_until_ready().await.is_ok() && self.ingresses.wait_until_ready().await.is_ok()
        };
        tokio::time::timeout(within, both).await.unwrap_or(false)
    }

    /// The answer to one request: admitted, with warnings, or refused.
    pub async fn review(&self, req: &AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let started = Instant::now();
        let allowed = AdmissionResponse::from(req);
        let kind = &req.kind;
        if (kind.group.as_str(), kind.version.as_str(), kind.kind.as_str()) != (GROUP, VERSION, "Runner") {
            let sent = format!("{}/{} {}", kind.group, kind.version, kind.kind);
            return allowed.deny(format!("this webhook judges {GROUP}/{VERSION} Runners, not {sent}"));
        }
        // DELETE is never sent (the rules name CREATE and UPDATE only).
        let Some(object) = &req.object else { return allowed };
        let runner: Runner = match serde_json::to_value(object).and_then(serde_json::from_value) {
            Ok(r) => r,
            Err(e) => return allowed.deny(format!("cannot read the Runner: {e}")),
        };
        if !self.synced(SYNC_WAIT).await {
            return refuse(allowed, 503, "ServiceUnavailable", STARTING);
        }
        let namespace = req.namespace.clone().or_else(|| runner.namespace()).unwrap_or_default();
        let name = if req.name.is_empty() { runner.name_any() } else { req.name.clone() };
        let (runners, ingresses) = (self.runners.state(), self.ingresses.state());
        let claims = runners.iter().flat_map(|r| runner_claims(r));
        let claims = claims.chain(ingresses.iter().flat_map(|i| ingress_claims(i)));
        let verdict = admission::judge(&namespace, &name, &runner, claims);
        let mut out = match verdict.denial() {
            Some(message) => refuse(allowed, 422, "Invalid", &(message + &converted(req))),
            None => allowed,
        };
        if !verdict.warnings.is_empty() {
            out.warnings = Some(verdict.warnings);
        }
        debug!(
            %namespace, %name, allowed = out.allowed, runners = runners.len(), ingresses = ingresses.len(),
            micros = started.elapsed().as_micros() as u64, "admission review"
        );
        out
    }
}

/// `response` refused with `message`, an HTTP `code` and its `reason`.
/// Without a code the apiserver answers 400 with no reason; a conflict
/// is 422 Invalid (what no client retries as is, unlike 409, which
/// read-modify-write loops retry), the webhook starting 503 (retry soon).
fn refuse(response: AdmissionResponse, code: u16, reason: &str, message: &str) -> AdmissionResponse {
    let mut out = response.deny(message);
    out.result.code = code;
    out.result.reason = reason.into();
    out
}

/// The note a refusal of a write made in another version carries: the
/// fields it names are the storage version's, which that writer never saw.
fn converted(req: &AdmissionRequest<DynamicObject>) -> String {
    match &req.request_kind {
        Some(k) if k.version != VERSION => format!(
            " (the write was {}/{}, judged as {GROUP}/{VERSION}: its spec.host is spec.expose.hosts[0])",
            k.group, k.version
        ),
        _ => String::new(),
    }
}

/// Drops what the rule never reads (managed fields, annotations such as
/// kubectl's last-applied copy): most of an object's size.
fn trim(meta: &mut kube::api::ObjectMeta) {
    meta.managed_fields = None;
    meta.annotations = None;
}

/// Keeps `writer` filled from a watch of `api` until aborted; errors are
/// retried with the manager's watch backoff.
async fn index<K>(
    what: &'static str,
    api: Api<K>,
    writer: Writer<K>,
    trim: impl FnMut(&mut K) + Send + 'static,
) where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    watcher(api, watcher::Config::default())
        .backoff(WatchBackoff::default())
        .modify(trim)
        .reflect(writer)
        .for_each(|event| {
            if let Err(e) = event {
                warn!(index = what, error = %e, "admission index watch error; retrying with backoff");
            }
            futures::future::ready(())
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starting_is_answered_before_the_apiserver_gives_up_on_the_webhook() {
        let apiserver_waits = Duration::from_secs(crate::manifests::TIMEOUT_SECONDS as u64);
        // A second of slack for the request's way there and back.
        assert!(SYNC_WAIT + Duration::from_secs(1) < apiserver_waits, "{SYNC_WAIT:?} vs {apiserver_waits:?}");
    }
}
