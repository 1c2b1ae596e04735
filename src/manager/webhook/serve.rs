//! HTTPS `/convert` and `/validate` on every replica: the apiserver posts
//! a ConversionReview and gets the converted objects back
//! ([`crate::api::conversion::review`]), or an AdmissionReview of a Runner
//! write and gets the verdict ([`super::admission`]).
//! The certificate sits in a [`CertSlot`] the keeper (the `keep` module)
//! refills whenever the Secret changes, so a renewal by another replica
//! is served without a restart; connections already open keep theirs.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use kube::api::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::conversion::ConversionReview;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::admission::Admission;
use crate::manager::error::{Error, Result};
use crate::webhook::{PATH, VALIDATE_PATH};

/// The certificate being served; empty until the keeper's first load.
#[derive(Debug, Default)]
pub struct CertSlot(RwLock<Option<Arc<CertifiedKey>>>);

impl CertSlot {
    /// Serves `tls_crt` (PEM chain) with `tls_key` (PEM) from the next
    /// handshake on. Err (and the old one kept) when they do not load.
    pub fn load(&self, tls_crt: &str, tls_key: &str) -> std::result::Result<(), String> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(tls_crt.as_bytes())
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| format!("tls.crt: {e}"))?;
        let key = PrivateKeyDer::from_pem_slice(tls_key.as_bytes()).map_err(|e| format!("tls.key: {e}"))?;
        let signer =
            rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| format!("tls.key: {e}"))?;
        let certified = CertifiedKey::new(chain, signer);
        certified.keys_match().map_err(|e| format!("tls.crt and tls.key: {e}"))?;
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(certified));
        Ok(())
    }
}

impl ResolvesServerCert for CertSlot {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A handshake that takes longer is dropped (a stuck client holds a task).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A ConversionReview holds every object of a list at once: 1,000 Runners
/// are about 2 MB; axum's default limit (2 MB) would refuse such a list.
const BODY_LIMIT: usize = 32 << 20;

/// How many reviews of each kind the routes received: a local manager's
/// probe checks that the apiserver called both.
#[derive(Debug, Default)]
pub struct Calls {
    pub conversions: AtomicU64,
    pub admissions: AtomicU64,
}

impl Calls {
    /// (conversions, admissions) so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.conversions.load(Ordering::Relaxed), self.admissions.load(Ordering::Relaxed))
    }
}

/// `POST /convert` and `POST /validate`. `started` dates the first
/// conversion in the log: the figure that says how long a new manager
/// leaves reads of old objects failing. `admission` is the index the
/// validating webhook reads; the in-cluster manager and a local one
/// (`run-manager --local-webhooks`, with its own certificate) build the
/// same routes from it.
pub fn routes(started: Instant, admission: Admission, calls: Arc<Calls>) -> Router {
    let first = Arc::new(std::sync::Once::new());
    let conversions = calls.clone();
    let convert = move |body: axum::body::Bytes| {
        let (first, calls) = (first.clone(), conversions.clone());
        async move {
            calls.conversions.fetch_add(1, Ordering::Relaxed);
            let review: ConversionReview = match serde_json::from_slice(&body) {
                Ok(r) => r,
                Err(e) => {
                    return (StatusCode::BAD_REQUEST, format!("not a ConversionReview: {e}\n"))
                        .into_response();
                }
            };
            first.call_once(|| {
                info!(after_ms = started.elapsed().as_millis() as u64, "served the first conversion")
            });
            json(&crate::api::conversion::review(review), "ConversionReview")
        }
    };
    let validate = move |body: axum::body::Bytes| {
        let (admission, calls) = (admission.clone(), calls.clone());
        async move {
            calls.admissions.fetch_add(1, Ordering::Relaxed);
            json(&validate(&admission, &body).await, "AdmissionReview")
        }
    };
    Router::new()
        .route(PATH, post(convert))
        .route(VALIDATE_PATH, post(validate))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
}

/// One AdmissionReview answered. A body that is no review of a Runner
/// write is answered with an invalid response (no uid to echo), which
/// the apiserver treats as a failed call: failurePolicy decides.
async fn validate(admission: &Admission, body: &[u8]) -> AdmissionReview<DynamicObject> {
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return AdmissionResponse::invalid(format!("not an AdmissionReview: {e}")).into_review(),
    };
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(e) => return AdmissionResponse::invalid(e).into_review(),
    };
    admission.review(&request).await.into_review()
}

/// `value` as the JSON answer to a review.
fn json(value: &impl serde::Serialize, what: &str) -> axum::response::Response {
    match serde_json::to_vec(value) {
        Ok(out) => ([(header::CONTENT_TYPE, "application/json")], out).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the {what}\n")).into_response(),
    }
}

/// `routes` answering `Connection: close` once `draining` is set: the
/// apiserver then opens a new connection for its next call (through the
/// Service, to a replica that stays) instead of reusing one to this
/// replica. Without it, the connections it kept alive were still there
/// when the drain ended and the server closed them: a call written to one
/// at that moment failed ("write: broken pipe"), and a POST is not retried
/// (1 of 150 Runner writes refused during an upgrade's rollout).
pub fn close_when_draining(routes: Router, draining: Arc<std::sync::atomic::AtomicBool>) -> Router {
    routes.layer(axum::middleware::map_response(move |mut response: axum::response::Response| {
        let draining = draining.load(Ordering::Relaxed);
        async move {
            if draining {
                response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
            }
            response
        }
    }))
}

/// Binds `addr` (so a port in use fails startup) and serves `routes` over
/// TLS with the certificate in `slot`, until `shutdown` turns true.
pub async fn serve(
    addr: SocketAddr,
    slot: Arc<CertSlot>,
    routes: Router,
    mut shutdown: watch::Receiver<bool>,
) -> Result<SocketAddr> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Webhook(format!("TLS setup: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(slot);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|source| Error::Listen { addr, source })?;
    let bound = listener.local_addr().map_err(|source| Error::Listen { addr, source })?;
    tokio::spawn(async move {
        loop {
            let tcp = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((tcp, _)) => tcp,
                    Err(e) => {
                        warn!(error = %e, "webhook accept");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = stopped(&mut shutdown) => return,
            };
            let (acceptor, routes, mut shutdown) = (acceptor.clone(), routes.clone(), shutdown.clone());
            tokio::spawn(async move {
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => return debug!(error = %e, "webhook TLS handshake failed"),
                    Err(_) => return debug!("webhook TLS handshake timed out"),
                };
                let service = TowerToHyperService::new(routes);
                let conn =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service);
                let mut conn = std::pin::pin!(conn);
                // A stopped server closes its kept-alive connections too (after
                // the request in flight): else the apiserver would keep calling
                // a manager that has stopped, through a connection it reuses.
                let done = tokio::select! {
                    done = conn.as_mut() => done,
                    _ = stopped(&mut shutdown) => {
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    }
                };
                if let Err(e) = done {
                    debug!(error = %e, "webhook connection");
                }
            });
        }
    });
    Ok(bound)
}

/// Resolves once `shutdown` is true (or its sender is gone).
pub async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|v| *v).await;
}

#[cfg(test)]
mod tests {
    use tower::Service;

    use super::*;

    #[tokio::test]
    async fn a_draining_server_closes_each_connection_after_its_answer() {
        let draining = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let routes = Router::new().route("/x", post(|| async { "ok" }));
        let mut app = close_when_draining(routes, draining.clone());
        let request = || axum::http::Request::post("/x").body(axum::body::Body::empty()).expect("a request");
        let open = app.call(request()).await.expect("an answer");
        assert_eq!(open.headers().get(header::CONNECTION), None, "kept alive while serving");
        draining.store(true, Ordering::Relaxed);
        let closing = app.call(request()).await.expect("an answer");
        assert_eq!(closing.status(), StatusCode::OK);
        assert_eq!(closing.headers().get(header::CONNECTION).and_then(|v| v.to_str().ok()), Some("close"));
    }
}
