//! `kubectl runner diagnose` with a real manager running in-process (watching
//! only the test's namespace, as a ServiceAccount-shaped identity would): a
//! healthy Runner has nothing to report, and a child deleted while the
//! manager is down is reported missing, with the manager's absence as cause.

mod diagnose_util;
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use kube::api::DeleteParams;
use kubectl_runner::api::{Phase, Runner};

use diagnose_util::*;
use support::{ManagerHandle, TestNs, ensure_crd, wait_for};

async fn wait_ready(ns: &TestNs, name: &str) {
    let api = ns.api::<Runner>();
    wait_for(&format!("Runner {name} Available"), Duration::from_secs(60), || {
        let api = api.clone();
        async move {
            let r = api.get(name).await.ok()?;
            let s = r.status.as_ref()?;
            (s.observed_generation == r.metadata.generation && s.phase == Phase::Available).then_some(())
        }
    })
    .await;
}

/// A namespace with a ServiceAccount `mgr` holding exactly the generated
/// rules, and the CRD installed.
async fn setup(prefix: &str) -> (TestNs, String) {
    let ns = TestNs::new(prefix).await;
    ensure_crd(&ns.client).await;
    service_account_with(&ns, "mgr", manager_rules()).await;
    wait_rbac(&ns, "mgr", "list", "services").await;
    let sa = format!("{}/mgr", ns.name);
    (ns, sa)
}

#[tokio::test]
async fn a_healthy_runner_has_no_errors_or_warnings_and_exits_zero() {
    let (ns, sa) = setup("diag-ok").await;
    let _release = ReleaseFinalizers(ns.name.clone());
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create_runner(&ns, "web", spec("nginx:1.27"), false).await;
    wait_ready(&ns, "web").await;

    let start = Instant::now();
    // Default grace and the 1 s churn window: a manager hot loop would show.
    let (code, report) = diagnose(&["-n", &ns.name, "--service-account", &sa]).await;
    eprintln!("diagnose -n {} (1 healthy Runner, 1 s churn window): {:?}", ns.name, start.elapsed());
    assert!(problems(&report).is_empty(), "{report:#}");
    assert_eq!(code, 0);
    assert_eq!(report["summary"]["runners"], 1);
    assert!(report["summary"].get("runnersNotRead").is_none(), "every read worked: {report:#}");
    mgr.stop().await;
}

#[tokio::test]
async fn a_child_deleted_while_the_manager_is_down_is_reported_missing() {
    let (ns, sa) = setup("diag-down").await;
    let _release = ReleaseFinalizers(ns.name.clone());
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create_runner(&ns, "web", spec("nginx:1.27"), false).await;
    wait_ready(&ns, "web").await;
    mgr.stop().await;
    ns.api::<Service>().delete("web", &DeleteParams::default()).await.expect("delete the Service");

    let (code, report) =
        diagnose(&["-n", &ns.name, "--service-account", &sa, "--grace", "0s", "--churn-window", "0"]).await;
    let missing = with_code(&report, "child-missing");
    assert_eq!(missing.len(), 1, "{report:#}");
    assert_eq!(missing[0]["message"], format!("Service {}/web is missing", ns.name));
    assert!(text(missing[0]).contains("manager absent"), "{}", text(missing[0]));
    let absent = with_code(&report, "manager-absent");
    assert_eq!(absent.len(), 1, "{report:#}");
    assert!(text(absent[0]).contains("is missing its Service"), "{}", text(absent[0]));
    assert!(with_code(&report, "permission-denied").is_empty(), "{report:#}");
    assert_eq!(code, 3);
}
