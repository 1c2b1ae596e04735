//! HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the process is
//! alive) and `/readyz` (caches synced and, with leader election, leading).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;

use super::metrics::Metrics;
use crate::error::{Error, Result};

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

pub fn metrics_routes(metrics: Metrics) -> Router {
    Router::new().route("/metrics", get(move || std::future::ready(metrics.encode())))
}

pub fn health_routes(ready: Arc<AtomicBool>) -> Router {
    Router::new().route("/healthz", get(|| std::future::ready("ok"))).route(
        "/readyz",
        get(move || {
            let ok = ready.load(Ordering::Relaxed);
            std::future::ready(if ok {
                (StatusCode::OK, "ok")
            } else {
                (StatusCode::SERVICE_UNAVAILABLE, "not ready")
            })
        }),
    )
}
