//! HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the process is
//! alive) and `/readyz` (a standby waiting for the Lease, or a manager whose
//! caches have synced).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use tracing::warn;

use super::error::{Error, Result};
use super::metrics::Metrics;
use super::metrics_auth::{MetricsAuth, Verdict};

/// Binds `addr` and serves `routes` in the background. Binding happens
/// here, so a port in use fails startup instead of a background task.
pub async fn serve(addr: SocketAddr, routes: Router) -> Result<SocketAddr> {
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|source| Error::Listen { addr, source })?;
    let bound = listener.local_addr().map_err(|source| Error::Listen { addr, source })?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, routes).await;
    });
    Ok(bound)
}

/// `/metrics`; with `auth`, only for scrapers the apiserver lets `get` it.
pub fn metrics_routes(metrics: Metrics, auth: Option<MetricsAuth>) -> Router {
    Router::new().route(
        "/metrics",
        get(move |headers: HeaderMap| {
            let (metrics, auth) = (metrics.clone(), auth.clone());
            async move {
                let verdict = match &auth {
                    None => Verdict::Allowed,
                    Some(auth) => match auth.check(&headers).await {
                        Ok(v) => v,
                        Err(e) => {
                            warn!(error = %e, "cannot check a /metrics scrape");
                            return (StatusCode::INTERNAL_SERVER_ERROR, "cannot check access".to_string());
                        }
                    },
                };
                match verdict {
                    Verdict::Allowed => (StatusCode::OK, metrics.encode()),
                    refused => (refused.status(), format!("{refused:?}\n")),
                }
            }
        }),
    )
}

/// Where the manager is in its life, as `/readyz` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// Before the HTTP endpoints and after the stop.
    Starting = 0,
    /// Waiting for the Lease another replica holds. Ready: a standby that
    /// is not Ready would stall every rolling update of a one-replica
    /// Deployment, the new Pod waiting for the Lease the old Pod keeps.
    Standby = 1,
    /// Leading (or not electing), caches not yet listed.
    Syncing = 2,
    Reconciling = 3,
}

impl Phase {
    /// Pure: the `/readyz` answer for this phase.
    pub fn readyz(self) -> (StatusCode, &'static str) {
        match self {
            Phase::Starting => (StatusCode::SERVICE_UNAVAILABLE, "starting"),
            Phase::Standby => (StatusCode::OK, "standby"),
            Phase::Syncing => (StatusCode::SERVICE_UNAVAILABLE, "syncing caches"),
            Phase::Reconciling => (StatusCode::OK, "reconciling"),
        }
    }
}

/// The phase, shared between the run and the `/readyz` handler.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicU8>);

impl Readiness {
    pub fn set(&self, phase: Phase) {
        self.0.store(phase as u8, Ordering::Relaxed);
    }

    pub fn get(&self) -> Phase {
        match self.0.load(Ordering::Relaxed) {
            1 => Phase::Standby,
            2 => Phase::Syncing,
            3 => Phase::Reconciling,
            _ => Phase::Starting,
        }
    }
}

pub fn health_routes(readiness: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(|| std::future::ready("ok")))
        .route("/readyz", get(move || std::future::ready(readiness.get().readyz())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standby_and_a_synced_manager_are_ready_a_starting_or_syncing_one_is_not() {
        let r = Readiness::default();
        assert_eq!(r.get().readyz().0, StatusCode::SERVICE_UNAVAILABLE);
        for (phase, code) in [
            (Phase::Standby, StatusCode::OK),
            (Phase::Syncing, StatusCode::SERVICE_UNAVAILABLE),
            (Phase::Reconciling, StatusCode::OK),
            (Phase::Starting, StatusCode::SERVICE_UNAVAILABLE),
        ] {
            r.set(phase);
            assert_eq!(r.get(), phase);
            assert_eq!(phase.readyz().0, code, "{phase:?}");
        }
    }
}
