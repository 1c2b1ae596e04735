//! The conversion webhook, served by every replica (leader or not: the
//! apiserver picks any endpoint of the Service). [`start`] makes sure a
//! certificate exists before it binds, so a replica never listens without
//! one, then leaves [`keep::Keeper`] to renew and reload it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use kube::Api;
use kube::core::conversion::ConversionReview;
use tokio::sync::watch;
use tracing::{info, warn};

use super::error::Result;
use crate::webhook::{Target, service_dns_names};

pub mod crd;
pub mod keep;
pub mod local;
pub mod serve;

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
    let bound = serve::serve(cfg.listen, slot, serve::routes(started), shutdown.clone()).await?;
    info!(%bound, target = ?cfg.target, "serving the conversion webhook");
    tokio::spawn(keeper.run(kept, shutdown));
    Ok(bound)
}

/// The conversion itself: pure, in `api::conversion`.
fn review(review: ConversionReview) -> ConversionReview {
    crate::api::conversion::review(review)
}
