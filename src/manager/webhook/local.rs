//! `run-manager --local-webhooks`: the webhooks served by this process on
//! the developer's machine, with nothing to set up by hand.
//!
//! ```text
//! start ─► address the apiserver reaches ─► throwaway CA + certificate (memory only)
//!       ─► listen ─► take the local Lease ─► point CRD conversion + webhook config here
//!       ─► probe (a dry-run create through both) ─► ... Ctrl-C/SIGTERM ─► put back, drop the Lease
//! ```
//!
//! What the registrations held before is saved on them
//! ([`crate::webhook::local`]), so a crash leaves what `diagnose --fix`
//! needs to put it back. The certificate is never written anywhere: a
//! restart makes a new CA and points the registrations at it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::{error, info, warn};

use super::serve;
use crate::manager::error::{Error, Result};
use crate::webhook::certs::{self, LIFETIMES, Material};
use crate::webhook::local::Holder;

pub mod address;
pub mod lease;
pub mod probe;
pub mod registrations;

/// How the developer asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    /// `--webhook-host`: the address or name the apiserver dials; None:
    /// found ([`address`]).
    pub host: Option<String>,
    /// `--webhook-listen`; None: the host's address, a free port.
    pub listen: Option<SocketAddr>,
    /// `--take-over`: serve even while an in-cluster manager leads.
    pub take_over: bool,
    /// Where the local Lease (and the leader Lease checked) live.
    pub lease_namespace: String,
    /// The kubeconfig server's host, when the cluster publishes no address.
    pub server_host: Option<String>,
    /// Where the dry-run probe creates its Runner.
    pub probe_namespace: String,
}

/// Serving, and holding the registrations until [`Self::hand_back`] or
/// the shutdown signal, whichever comes first.
pub struct LocalWebhooks {
    trigger: watch::Sender<bool>,
    done: tokio::task::JoinHandle<()>,
}

impl LocalWebhooks {
    /// Puts the registrations back now (if the shutdown has not already)
    /// and waits until they are.
    pub async fn hand_back(self) {
        let _ = self.trigger.send(true);
        let _ = self.done.await;
    }
}

/// The host to name in URLs and the certificate, and the address to bind.
async fn where_to_listen(client: &kube::Client, cfg: &LocalConfig) -> Result<(String, SocketAddr)> {
    let host = match &cfg.host {
        Some(h) => h.clone(),
        None => {
            let server = || cfg.server_host.as_deref().and_then(address::server_ip);
            let apiserver = address::advertised(client).await.or_else(server).ok_or_else(|| {
                Error::Webhook(
                    "cannot tell where the apiserver runs (no `kubernetes` EndpointSlice readable, \
                     and the kubeconfig's server is a name); give --webhook-host"
                        .into(),
                )
            })?;
            let local = address::route_to(apiserver)
                .map_err(|e| Error::Webhook(format!("no route to the apiserver at {apiserver}: {e}")))?;
            local.to_string()
        }
    };
    let ip = host.parse::<IpAddr>().unwrap_or(Ipv4Addr::UNSPECIFIED.into());
    Ok((host, cfg.listen.unwrap_or(SocketAddr::new(ip, 0))))
}

/// Everything up to the first request served; Err (with the registrations
/// put back) when any step fails.
pub async fn start(
    client: &kube::Client,
    cfg: &LocalConfig,
    identity: &str,
    shutdown: watch::Receiver<bool>,
) -> Result<LocalWebhooks> {
    let started = Instant::now();
    let calls = Arc::new(serve::Calls::default());
    let routes = serve::routes(started, super::admission::Admission::start(client.clone()), calls.clone());
    if !cfg.take_over {
        lease::refuse_if_led(client, &cfg.lease_namespace, identity).await?;
    }
    let (host, listen) = where_to_listen(client, cfg).await?;
    let material = throwaway(&host)?;
    let slot = Arc::new(serve::CertSlot::default());
    slot.load(&material.tls_crt, &material.tls_key).map_err(Error::Webhook)?;
    let (stop_server, server_stopped) = watch::channel(false);
    let bound = serve::serve(listen, slot, routes, server_stopped).await?;
    let origin = address::origin(&host, bound.port());
    let by = Holder {
        holder: crate::manager::presence::holder(),
        lease_namespace: cfg.lease_namespace.clone(),
        url: origin.clone(),
    };
    lease::take(client, &by.lease_namespace, &by.holder).await?;
    if let Err(e) = registrations::point(client, &by, &material.ca_crt).await {
        put_back(client, &by).await;
        return Err(e);
    }
    info!(%origin, %bound, "the Runner CRD's conversion and {} now call this process", crate::webhook::VALIDATING_CONFIG);
    match probe::probe(client, &cfg.probe_namespace, &calls).await {
        probe::Probe::Served(took) => info!(
            after_ms = started.elapsed().as_millis() as u64,
            probe_ms = took.as_millis() as u64,
            "the apiserver called the local webhooks (a dry-run create went through both)"
        ),
        probe::Probe::Unreachable(why) => {
            put_back(client, &by).await;
            return Err(Error::Webhook(format!(
                "the apiserver cannot call {origin}: {why}; the registrations are put back. Give --webhook-host \
                 with an address of this machine the apiserver can reach, or run the manager in the cluster \
                 (`kubectl runner install --with-manager`)"
            )));
        }
        probe::Probe::NotProbed(why) => warn!(%why, "could not probe the local webhooks; serving anyway"),
    }
    let (lost_tx, lost) = watch::channel(false);
    let (trigger, triggered) = watch::channel(false);
    let renew_stop = triggered.clone();
    tokio::spawn(lease::renew(
        client.clone(),
        by.lease_namespace.clone(),
        by.holder.clone(),
        lost_tx,
        renew_stop,
    ));
    let done = tokio::spawn(hold(client.clone(), by, shutdown, triggered, lost, stop_server));
    Ok(LocalWebhooks { trigger, done })
}

/// A CA and a serving certificate for `host`, in memory only.
fn throwaway(host: &str) -> Result<Material> {
    let names = vec![host.to_string()];
    let empty = Material::default();
    let now = k8s_openapi::jiff::Timestamp::now();
    let plan = certs::plan(now, &empty, &names, &LIFETIMES);
    certs::carry_out(&plan, now, &empty, &names, &LIFETIMES)
        .map_err(|e| Error::Webhook(format!("cannot make a throwaway certificate: {e}")))
}

/// Waits for the shutdown signal, an explicit hand-back, or the Lease
/// taken by another local manager; then puts back what is still ours and
/// stops serving.
async fn hold(
    client: kube::Client,
    by: Holder,
    mut shutdown: watch::Receiver<bool>,
    mut triggered: watch::Receiver<bool>,
    mut lost: watch::Receiver<bool>,
    stop_server: watch::Sender<bool>,
) {
    tokio::select! {
        _ = shutdown.wait_for(|v| *v) => {}
        _ = triggered.wait_for(|v| *v) => {}
        _ = lost.wait_for(|v| *v) => {
            error!("another local manager took the webhooks' Lease; its registrations are its own now");
            let _ = stop_server.send(true);
            return;
        }
    }
    let began = Instant::now();
    put_back(&client, &by).await;
    info!(took_ms = began.elapsed().as_millis() as u64, "handed the webhook registrations back");
    // A request the apiserver sent before the switch still gets its answer.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = stop_server.send(true);
}

/// Restores the registrations and drops the Lease; failures are logged
/// (diagnose finds what is left, and `--fix` puts it back).
async fn put_back(client: &kube::Client, by: &Holder) {
    if let Err(e) = registrations::restore(client, &by.holder).await {
        error!(error = %e, "could not put the webhook registrations back; `kubectl runner diagnose --fix` does");
    }
    lease::release(client, &by.lease_namespace, &by.holder).await;
}
