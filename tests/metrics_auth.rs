//! `/metrics` with `--metrics-auth` (as the in-cluster manager runs): only a
//! scraper whose token the apiserver accepts and whose user may `get`
//! `/metrics` reads it; the health probes stay open. The manager runs as its
//! ServiceAccount with only the generated RBAC, so the reviews it asks are
//! the ones install grants.

mod support;

use std::time::Duration;

use support::{
    TestNs, apply_generated_rbac, as_manager_service_account, bind_metrics_reader, ensure_crd,
    free_loopback_addr, http_get, new_service_account_token, wait_for,
};

#[tokio::test]
async fn metrics_answer_only_a_scraper_bound_to_the_metrics_reader_role() {
    let ns = TestNs::new("metrics").await;
    ensure_crd(&ns.client).await;
    apply_generated_rbac(&ns.client).await;

    let (metrics_addr, health_addr) = (free_loopback_addr(), free_loopback_addr());
    let mut cfg = kubectl_runner::manager::Config::namespaced(&ns.name);
    cfg.metrics_addr = Some(metrics_addr);
    cfg.health_addr = Some(health_addr);
    cfg.metrics_auth = true;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mgr =
        tokio::spawn(kubectl_runner::manager::run(as_manager_service_account().await, cfg, async move {
            let _ = rx.await;
        }));

    // The probes need no token.
    wait_for("/readyz to answer 200 without a token", Duration::from_secs(60), || async move {
        http_get(health_addr, "/readyz", None).await.filter(|(code, _)| *code == 200)
    })
    .await;
    assert_eq!(http_get(health_addr, "/healthz", None).await.map(|r| r.0), Some(200));

    let code = |token: Option<String>| async move {
        http_get(metrics_addr, "/metrics", token.as_deref()).await.expect("/metrics answers")
    };
    assert_eq!(code(None).await.0, 401, "no token");
    assert_eq!(code(Some("not-a-token".into())).await.0, 401, "a token the apiserver rejects");

    // A ServiceAccount with a valid token but no grant.
    let token = new_service_account_token(&ns.client, &ns.name, "scraper").await;
    let (status, body) = code(Some(token.clone())).await;
    assert_eq!(status, 403, "an authenticated scraper without the role: {body}");
    assert!(!body.contains("runner_reconciles"), "{body}");

    // Bound to the generated metrics-reader role, it reads the metrics (a
    // refusal is remembered for 10 s).
    let _binding = bind_metrics_reader(&ns.client, &ns.name, "scraper").await;
    let body = wait_for("/metrics to answer the bound scraper", Duration::from_secs(30), || {
        let token = token.clone();
        async move {
            let (status, body) = http_get(metrics_addr, "/metrics", Some(&token)).await?;
            (status == 200).then_some(body)
        }
    })
    .await;
    assert!(body.contains("runner_reconciles"), "{body}");

    let _ = tx.send(());
    tokio::time::timeout(Duration::from_secs(30), mgr)
        .await
        .expect("the manager stops")
        .unwrap()
        .expect("the manager ran without error as its ServiceAccount");
}
