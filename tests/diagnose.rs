//! `kubectl runner diagnose` against the real control plane, reproducing each
//! fault for real, with no manager running (see diagnose_manager.rs for the
//! ones that need one). Each test has its own namespace and runs the binary.

mod diagnose_util;
mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kubectl_runner::api::{RUNNER_UID_LABEL, Runner};
use serde_json::json;

use diagnose_util::*;
use support::{TestNs, ensure_crd, wait_for};

/// No churn sampling, no grace: report what is there right now.
const NOW: [&str; 4] = ["--churn-window", "0", "--grace", "0s"];

fn args<'a>(ns: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["-n", ns];
    v.extend_from_slice(&NOW);
    v.extend_from_slice(extra);
    v
}

#[tokio::test]
async fn a_role_lacking_list_services_is_reported_as_exactly_that_denial() {
    let ns = TestNs::new("diag-rbac").await;
    ensure_crd(&ns.client).await;
    let mut rules = manager_rules();
    for r in rules.iter_mut().filter(|r| r.resources.as_deref() == Some(&["services".to_string()])) {
        r.verbs.retain(|v| v != "list");
    }
    service_account_with(&ns, "mgr", rules).await;
    wait_rbac(&ns, "mgr", "get", "services").await;
    let sa = format!("{}/mgr", ns.name);
    let (code, report) = diagnose(&args(&ns.name, &["--service-account", &sa])).await;
    let denied = with_code(&report, "permission-denied");
    assert_eq!(denied.len(), 1, "{report:#}");
    assert_eq!(denied[0]["message"], format!("can't list services in {}", ns.name));
    assert_eq!(denied[0]["object"], json!({ "kind": "ServiceAccount", "namespace": ns.name, "name": "mgr" }));
    let fix = denied[0]["fix"].as_str().unwrap();
    assert!(fix.contains("--verb=list --resource=services"), "{fix}");
    assert!(fix.contains(&format!("--serviceaccount={}:mgr", ns.name)), "{fix}");
    assert_eq!(code, 3, "a denial is an error");
}

#[tokio::test]
async fn a_role_granting_secrets_and_wildcards_is_an_over_broad_warning_not_an_error() {
    let ns = TestNs::new("diag-broad").await;
    ensure_crd(&ns.client).await;
    let mut rules = manager_rules();
    rules.push(
        serde_json::from_value(json!({ "apiGroups": [""], "resources": ["secrets"], "verbs": ["*"] }))
            .unwrap(),
    );
    service_account_with(&ns, "mgr", rules).await;
    wait_rbac(&ns, "mgr", "get", "secrets").await;
    let sa = format!("{}/mgr", ns.name);
    let (code, report) = diagnose(&args(&ns.name, &["--service-account", &sa])).await;
    let broad = with_code(&report, "overbroad-grant");
    assert_eq!(broad.len(), 1, "{report:#}");
    let t = text(broad[0]);
    assert!(t.contains(&format!("RoleBinding {}/mgr grants Role mgr", ns.name)), "{t}");
    assert!(t.contains("all verbs (*), Secrets"), "{t}");
    assert!(with_code(&report, "permission-denied").is_empty(), "{report:#}");
    assert_eq!(code, 0, "warnings alone exit 0: {report:#}");
}

#[tokio::test]
async fn a_deleted_runner_holding_the_finalizer_without_a_manager_is_stuck_and_fix_releases_it() {
    let ns = TestNs::new("diag-stuck").await;
    let _release = ReleaseFinalizers(ns.name.clone());
    ensure_crd(&ns.client).await;
    create_runner(&ns, "web", spec("nginx:1.27"), true).await;
    ns.api::<Runner>().delete("web", &DeleteParams::default()).await.expect("delete Runner");

    let (code, report) = diagnose(&args(&ns.name, &[])).await;
    let stuck = with_code(&report, "finalizer-stuck");
    assert_eq!(stuck.len(), 1, "{report:#}");
    let t = text(stuck[0]);
    assert!(t.contains("held by lab.cloudlab.training/cleanup"), "{t}");
    assert!(t.contains("manager absent"), "{t}");
    assert!(t.contains("removing it by hand skips that cleanup"), "{t}");
    assert!(stuck[0]["fix"].as_str().unwrap().contains("--fix"), "no children left: {t}");
    assert_eq!(with_code(&report, "manager-absent").len(), 1, "{report:#}");
    assert_eq!(code, 3);

    let (code, report) = diagnose(&args(&ns.name, &["web", "--fix", "--yes"])).await;
    assert!(with_code(&report, "finalizer-stuck").is_empty(), "{report:#}");
    assert_eq!(code, 0, "{report:#}");
    let api = ns.api::<Runner>();
    wait_for("the Runner to be gone", Duration::from_secs(10), || {
        let api = api.clone();
        async move { api.get_opt("web").await.ok().and_then(|r| r.is_none().then_some(())) }
    })
    .await;
}

#[tokio::test]
async fn a_squatter_deployment_is_reported_as_a_foreign_child_the_manager_will_not_adopt() {
    let ns = TestNs::new("diag-squat").await;
    let _release = ReleaseFinalizers(ns.name.clone());
    ensure_crd(&ns.client).await;
    let squatter: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "selector": { "matchLabels": { "app": "squatter" } },
                  "template": { "metadata": { "labels": { "app": "squatter" } },
                                "spec": { "containers": [{ "name": "c", "image": "busybox" }] } } }
    }))
    .unwrap();
    ns.api::<Deployment>().create(&PostParams::default(), &squatter).await.expect("create squatter");
    create_runner(&ns, "web", spec("nginx:1.27"), true).await;

    let (code, report) = diagnose(&args(&ns.name, &["web"])).await;
    let foreign = with_code(&report, "child-foreign");
    assert_eq!(foreign.len(), 1, "{report:#}");
    assert_eq!(
        foreign[0]["message"],
        format!("Deployment {}/web exists without an owner; the manager refuses to adopt it", ns.name)
    );
    assert!(text(foreign[0]).contains("no cloudlab.training/runner label"), "{}", text(foreign[0]));
    assert_eq!(foreign[0]["object"]["kind"], "Runner");
    assert_eq!(code, 3);
}

/// The namespace-wide read lists each kind once and joins by name: a
/// same-name object without our label is still found, and neither an
/// unrelated object nor another Runner's squatter is credited to the wrong
/// Runner.
#[tokio::test]
async fn diagnosing_a_namespace_finds_a_squatter_by_name_and_mixes_up_no_runners() {
    let ns = TestNs::new("diag-lists").await;
    ensure_crd(&ns.client).await;
    let deployment = |name: &str| -> Deployment {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": { "selector": { "matchLabels": { "app": name } },
                      "template": { "metadata": { "labels": { "app": name } },
                                    "spec": { "containers": [{ "name": "c", "image": "busybox" }] } } }
        }))
        .unwrap()
    };
    for name in ["web", "unrelated"] {
        ns.api::<Deployment>().create(&PostParams::default(), &deployment(name)).await.expect("create");
    }
    create_runner(&ns, "web", spec("nginx:1.27"), false).await;
    create_runner(&ns, "api", spec("nginx:1.27"), false).await;

    let (code, report) = diagnose(&args(&ns.name, &[])).await;
    let foreign: Vec<&str> =
        with_code(&report, "child-foreign").iter().map(|f| f["message"].as_str().unwrap()).collect();
    assert_eq!(
        foreign,
        [format!("Deployment {}/web exists without an owner; the manager refuses to adopt it", ns.name)],
        "{report:#}"
    );
    let missing: Vec<&str> =
        with_code(&report, "child-missing").iter().map(|f| f["message"].as_str().unwrap()).collect();
    let n = &ns.name;
    assert_eq!(
        missing,
        [
            format!("Deployment {n}/api is missing"),
            format!("Service {n}/api is missing"),
            format!("Service {n}/web is missing")
        ],
        "{report:#}"
    );
    assert_eq!(code, 3);
}

#[tokio::test]
async fn a_runner_no_manager_reconciled_is_missing_its_children_because_the_manager_is_absent() {
    let ns = TestNs::new("diag-missing").await;
    ensure_crd(&ns.client).await;
    create_runner(&ns, "web", spec("nginx:1.27"), false).await;

    let (code, report) = diagnose(&args(&ns.name, &[])).await;
    let missing = with_code(&report, "child-missing");
    let messages: Vec<&str> = missing.iter().map(|f| f["message"].as_str().unwrap()).collect();
    assert_eq!(
        messages,
        [format!("Deployment {}/web is missing", ns.name), format!("Service {}/web is missing", ns.name)],
        "{report:#}"
    );
    let t = text(missing[0]);
    assert!(t.contains("manager absent") && t.contains("no manager has reconciled it yet"), "{t}");
    assert_eq!(code, 3);
}

#[tokio::test]
async fn a_pod_reporting_image_pull_back_off_is_reported_with_that_reason() {
    let ns = TestNs::new("diag-pull").await;
    ensure_crd(&ns.client).await;
    let r = create_runner(&ns, "web", spec("nginx:does-not-exist"), false).await;
    let uid = r.uid().unwrap();
    // Bound to a node nobody runs, so kwok never overwrites the status we set.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "web-abc", "labels": { RUNNER_UID_LABEL: uid } },
        "spec": { "nodeName": "no-such-node", "containers": [{ "name": "app", "image": "nginx:does-not-exist" }] }
    }))
    .unwrap();
    let pods = ns.api::<Pod>();
    pods.create(&PostParams::default(), &pod).await.expect("create Pod");
    let status = json!({ "status": { "phase": "Pending", "containerStatuses": [{
        "name": "app", "ready": false, "restartCount": 0, "image": "nginx:does-not-exist", "imageID": "",
        "state": { "waiting": { "reason": "ImagePullBackOff",
                                "message": "Back-off pulling image \"nginx:does-not-exist\"" } } }] } });
    pods.patch_status("web-abc", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch status");

    let (code, report) = diagnose(&args(&ns.name, &["web"])).await;
    let waiting = with_code(&report, "pod-waiting");
    assert_eq!(waiting.len(), 1, "{report:#}");
    assert_eq!(
        waiting[0]["message"],
        "Pod web-abc container app: ImagePullBackOff: Back-off pulling image \"nginx:does-not-exist\""
    );
    assert!(waiting[0]["fix"].as_str().unwrap().contains("patch runner web"), "{:#}", waiting[0]);
    assert_eq!(code, 3);
}

#[tokio::test]
async fn a_status_rewritten_in_a_loop_is_churn_and_names_the_writer() {
    let ns = TestNs::new("diag-churn").await;
    ensure_crd(&ns.client).await;
    create_runner(&ns, "web", spec("nginx:1.27"), false).await;
    let api = ns.api::<Runner>();
    let writer = {
        let api = api.clone();
        tokio::spawn(async move {
            for i in 0.. {
                let p = json!({ "status": { "message": format!("reconciled {i} times") } });
                let _ = api
                    .patch_status(
                        "web",
                        &PatchParams { field_manager: Some("hot-looper".into()), ..Default::default() },
                        &Patch::Merge(&p),
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let (_, report) = diagnose(&["-n", &ns.name, "--churn-window", "1s"]).await;
    writer.abort();
    let churn = with_code(&report, "status-churn");
    assert_eq!(churn.len(), 1, "{report:#}");
    let t = text(churn[0]);
    assert!(t.contains("written by field manager \"hot-looper\""), "{t}");
    assert!(t.contains("changed: status.message"), "{t}");
}

#[tokio::test]
async fn an_unknown_runner_fails_and_a_name_with_all_namespaces_is_a_usage_error() {
    use kubectl_runner::cli::Error;
    let ns = TestNs::new("diag-404").await;
    ensure_crd(&ns.client).await;
    match try_diagnose(&["nope", "-n", &ns.name]).await {
        Err(e @ Error::RunnerNotFound { .. }) => {
            assert_eq!(e.to_string(), format!("Runner {}/nope not found", ns.name))
        }
        other => panic!("expected not found (exit 1), got {other:?}"),
    }
    assert!(matches!(try_diagnose(&["nope", "-A"]).await, Err(Error::Invalid(_))), "exit 2");
}

/// The reproduction: deleted a moment ago, no manager anywhere, the
/// default 30 s grace. Nothing will ever release the Runner, so it is stuck
/// now, and with a child left the fix is to start the manager.
#[tokio::test]
async fn a_runner_deleted_just_now_with_no_manager_anywhere_is_stuck_without_waiting_for_the_grace() {
    let ns = TestNs::new("diag-now").await;
    let _release = ReleaseFinalizers(ns.name.clone());
    ensure_crd(&ns.client).await;
    let r = create_runner(&ns, "web", spec("nginx:1.27"), true).await;
    let child: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web", "ownerReferences": [{
            "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner", "name": "web",
            "uid": r.uid().unwrap(), "controller": true }] },
        "spec": { "selector": { "matchLabels": { "app": "web" } },
                  "template": { "metadata": { "labels": { "app": "web" } },
                                "spec": { "containers": [{ "name": "c", "image": "nginx:1.27" }] } } }
    }))
    .unwrap();
    ns.api::<Deployment>().create(&PostParams::default(), &child).await.expect("create the child");
    ns.api::<Runner>().delete("web", &DeleteParams::default()).await.expect("delete Runner");

    // Default --grace (30 s): only the churn sampling is turned off.
    let (code, report) = diagnose(&["-n", &ns.name, "web", "--churn-window", "0"]).await;
    let stuck = with_code(&report, "finalizer-stuck");
    assert_eq!(stuck.len(), 1, "{report:#}");
    let t = text(stuck[0]);
    assert!(t.contains(&format!("Deployment {}/web still exists", ns.name)), "{t}");
    assert!(t.contains("manager absent"), "{t}");
    let fix = stuck[0]["fix"].as_str().unwrap();
    assert!(fix.starts_with("start the manager"), "{fix}");
    assert!(fix.contains("Do not remove the finalizer by hand"), "{fix}");
    let absent = with_code(&report, "manager-absent");
    assert_eq!(absent.len(), 1, "{report:#}");
    assert!(text(absent[0]).contains("is stuck deleting"), "{}", text(absent[0]));
    assert_eq!(code, 3);
}
