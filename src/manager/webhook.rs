//! The conversion and validating webhooks, served by every replica
//! (leader or not: the apiserver picks any endpoint of the Service).
//! [`start`] makes sure a certificate exists before it binds, so a replica
//! never listens without one, then leaves [`keep::Keeper`] to renew and
//! reload it. `/validate` reads the index [`admission::Admission`] keeps.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use kube::Api;
use kube::core::conversion::ConversionReview;
use tokio::sync::watch;
use tracing::{info, warn};

use super::error::Result;
use crate::webhook::local::SAVED_ANNOTATION;
use crate::webhook::{Target, VALIDATING_CONFIG, service_dns_names};

pub mod admission;
pub mod crd;
pub mod keep;
pub mod local;
pub mod serve;
pub mod validating;

/// Where and for whom the manager serves `/convert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    pub listen: SocketAddr,
    /// Where the CRD sends reviews (the Service, or `--webhook-url`).
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

/// Keeps the certificate (first round here: an error fails startup), binds
/// `cfg.listen` and serves until `shutdown`. Returns the bound address.
pub async fn start(
    client: &kube::Client,
    cfg: &WebhookConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<SocketAddr> {
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
            "no ValidatingWebhookConfiguration {VALIDATING_CONFIG}: Runner writes are not checked for host conflicts; \
             `kubectl runner install --with-manager` creates it"
        );
    }
    let routes = serve::routes(started, admission::Admission::start(client.clone()), Arc::default());
    let bound = serve::serve(cfg.listen, slot, routes, shutdown.clone()).await?;
    info!(%bound, target = ?cfg.target, "serving the conversion and validating webhooks");
    tokio::spawn(keeper.run(kept, shutdown));
    Ok(bound)
}

/// Pure: a local manager (`run-manager --local-webhooks`) has pointed this
/// registration (the CRD or the webhook configuration) at itself, saving
/// what it held in [`SAVED_ANNOTATION`]: this manager leaves it alone until
/// the local one puts it back, or the two would rewrite each other's
/// caBundle every round.
pub fn held_locally(meta: &kube::api::ObjectMeta) -> bool {
    meta.annotations.as_ref().is_some_and(|a| a.contains_key(SAVED_ANNOTATION))
}

/// The conversion itself: pure, in `api::conversion`.
fn review(review: ConversionReview) -> ConversionReview {
    crate::api::conversion::review(review)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_carrying_the_saved_annotation_is_held_locally() {
        let mut meta = kube::api::ObjectMeta::default();
        assert!(!held_locally(&meta));
        meta.annotations = Some([("other".to_string(), "x".to_string())].into());
        assert!(!held_locally(&meta));
        meta.annotations.as_mut().unwrap().insert(SAVED_ANNOTATION.into(), "{}".into());
        assert!(held_locally(&meta));
    }
}
