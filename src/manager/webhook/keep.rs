//! Keeps the webhook's Secret: every replica reads it, carries out
//! [`certs::plan`], writes the result guarded by the resourceVersion it
//! read (of replicas starting at once, one write wins; the others get a
//! conflict, read the winner's certificates and keep them), serves what
//! the Secret holds, and makes the caBundles match: the CRD's and the
//! validating webhook's ([`super::ca_bundle`]).
//! It looks again when the Secret changes (another replica renewed), at the
//! plan's next check, and every [`RECHECK`] to repair a caBundle someone
//! changed. Only its own Secret is read: get and watch by name, no list.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ObjectMeta, WatchEvent, WatchParams};
use tokio::sync::watch;
use tracing::{info, warn};

use super::ca_bundle::ensure;
use super::serve::CertSlot;
use crate::client::guarded::{self, Step};
use crate::error::FromApi;
use crate::manager::error::{Error, Result};
use crate::webhook::certs::{self, LIFETIMES};
use crate::webhook::{SECRET, Target, secret};

/// Looked at again at least this often, changed or not.
const RECHECK: Duration = Duration::from_secs(60);

/// What one replica needs to keep the Secret and the caBundle.
pub struct Keeper {
    pub secrets: Api<Secret>,
    pub client: kube::Client,
    pub namespace: String,
    /// What the serving certificate must name.
    pub names: Vec<String>,
    pub target: Target,
    pub slot: Arc<CertSlot>,
}

/// The outcome of a round: the Secret's resourceVersion and when to look again.
pub struct Kept {
    pub resource_version: String,
    pub next_check: Timestamp,
    /// False when the CRD does not convert through a webhook at all.
    pub converts: bool,
    /// False when there is no ValidatingWebhookConfiguration to keep.
    pub validates: bool,
}

impl Keeper {
    /// Reads, renews (or makes) if the plan says so (a [`guarded::write`]:
    /// of replicas writing at once one wins, the others read the winner's
    /// certificates), serves, and fixes the caBundles.
    pub async fn round(&self) -> Result<Kept> {
        let mut next_check = Timestamp::now();
        let (kept, material) = guarded::write(
            || async {
                let read = self.secrets.get_opt(SECRET).await;
                read.map_err(|e| Error::api("get", "Secret", &self.namespace, SECRET, e))
            },
            |current| {
                // None: created with its first material (install creates it
                // empty, so the installed manager needs no `create`).
                let named = ObjectMeta { name: Some(SECRET.into()), ..Default::default() };
                let current = current.unwrap_or(Secret { metadata: named, ..Default::default() });
                let now = Timestamp::now();
                let material = secret::material(current.data.as_ref());
                let plan = certs::plan(now, &material, &self.names, &LIFETIMES);
                next_check = plan.next_check;
                if plan.keeps() {
                    return Ok(Step::Done((current, material)));
                }
                let next = certs::carry_out(&plan, now, &material, &self.names, &LIFETIMES)
                    .map_err(|e| Error::Webhook(format!("cannot make certificates: {e}")))?;
                info!(ca = ?plan.ca, serving = ?plan.serving, expired_cas = plan.expired_cas, "renewing the webhook's certificates");
                let mut renewed = current;
                renewed.data = Some(secret::data(&next));
                renewed.string_data = None;
                Ok(Step::Write((renewed, next)))
            },
            |(renewed, next)| async move {
                Ok((guarded::create_or_replace(&self.secrets, SECRET, &renewed).await?, next))
            },
        )
        .await
        .map_err(|f| super::guarded_error::<Secret>(&self.namespace, SECRET, "update", f))?;
        self.slot.load(&material.tls_crt, &material.tls_key).map_err(Error::Webhook)?;
        let (client, target, ca) = (&self.client, &self.target, &material.ca_crt);
        let converts = ensure::<CustomResourceDefinition>(client, target, ca).await?;
        let validates = ensure::<ValidatingWebhookConfiguration>(client, target, ca).await?;
        let resource_version = kept.metadata.resource_version.unwrap_or_default();
        Ok(Kept { resource_version, next_check, converts, validates })
    }

    /// Rounds until `shutdown`: after a change of the Secret, at the next
    /// check, or after [`RECHECK`]; a failed round is retried after a pause.
    pub async fn run(self, mut last: Kept, mut shutdown: watch::Receiver<bool>) {
        loop {
            let until = Duration::try_from(last.next_check.duration_since(Timestamp::now()))
                .unwrap_or_default()
                .min(RECHECK);
            tokio::select! {
                _ = self.changed(&last.resource_version) => {}
                _ = tokio::time::sleep(until) => {}
                _ = super::serve::stopped(&mut shutdown) => return,
            }
            match self.round().await {
                Ok(kept) => last = kept,
                Err(e) => {
                    warn!(error = %e, "keeping the webhooks' certificates");
                    last.next_check = Timestamp::now() + SignedDuration::from_secs(5);
                }
            }
        }
    }

    /// Resolves when the Secret changes after `resource_version`, or the
    /// watch ends (the caller then reads it anew).
    async fn changed(&self, resource_version: &str) {
        let params = WatchParams::default().fields(&format!("metadata.name={SECRET}")).timeout(290);
        let stream = match self.secrets.watch(&params, resource_version).await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "watching the webhook's Secret");
                return std::future::pending().await; // the recheck reads it
            }
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Bookmark(_)) => continue,
                Ok(_) | Err(_) => return,
            }
        }
    }
}
