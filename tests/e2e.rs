//! `kubectl runner e2e` as a user runs it: the binary, against the real
//! control plane, with its JSON report checked step by step.

mod support;

use std::process::Command;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubectl_runner::webhook::local::SAVED_ANNOTATION;

/// The webhook registrations are cluster-wide: one e2e run at a time, so
/// the run without webhooks sees none.
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const WEBHOOK_STEP: &str = "webhooks: an old client's Runner converts, a taken host is refused";

async fn e2e(args: &'static [&'static str]) -> (std::process::Output, serde_json::Value) {
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_kubectl-runner"))
            .arg("e2e")
            .args(args)
            .args(["-o", "json"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("JSON report ({e}): {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out, report)
}

fn step<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    let steps = report["steps"].as_array().unwrap();
    steps.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no step {name:?}: {steps:?}"))
}

#[tokio::test]
async fn e2e_with_local_webhooks_exercises_conversion_and_admission_and_puts_them_back() {
    let _turn = LOCK.lock().await;
    let client = support::client().await;
    support::ensure_crd(&client).await;
    let (out, report) = e2e(&["--local-webhooks"]).await;
    assert!(out.status.success(), "e2e failed: {report:#}\n{}", String::from_utf8_lossy(&out.stderr));
    let webhooks = step(&report, WEBHOOK_STEP);
    assert_eq!(
        (webhooks["ok"].as_bool(), webhooks["skipped"].as_bool()),
        (Some(true), Some(false)),
        "{webhooks}"
    );
    let detail = webhooks["detail"].as_str().unwrap();
    assert!(detail.contains("the local manager") && detail.contains(" at https://"), "{detail}");
    let crd = kube::Api::<CustomResourceDefinition>::all(client.clone())
        .get(kubectl_runner::api::CRD_NAME)
        .await
        .unwrap();
    assert!(!crd.metadata.annotations.unwrap_or_default().contains_key(SAVED_ANNOTATION), "handed back");
    assert_eq!(crd.spec.conversion.map(|c| c.strategy).as_deref(), Some("None"));
    let vwcs = kube::Api::<ValidatingWebhookConfiguration>::all(client);
    assert!(
        vwcs.get_opt(kubectl_runner::webhook::VALIDATING_CONFIG).await.unwrap().is_none(),
        "removed again"
    );
}

#[tokio::test]
async fn the_e2e_command_proves_the_lifecycle_and_leaves_nothing_behind() {
    let _turn = LOCK.lock().await;
    let client = support::client().await;
    // Installed beforehand, so e2e must not install (and later remove) it
    // while other tests share the cluster.
    support::ensure_crd(&client).await;
    let (out, report) = e2e(&[]).await;
    assert!(out.status.success(), "e2e failed: {report:#}");
    let webhooks = step(&report, WEBHOOK_STEP);
    assert_eq!(webhooks["skipped"], true, "no webhook is registered here: {webhooks}");
    assert!(webhooks["detail"].as_str().unwrap().contains("--local-webhooks"), "{webhooks}");
    assert_eq!(report["passed"], true);
    assert_eq!(report["installedCrd"], false, "the CRD was present, so e2e did not install it");
    let steps = report["steps"].as_array().unwrap();
    assert!(steps.len() >= 7, "{steps:?}");
    assert!(steps.iter().all(|s| s["ok"] == true));
    // Its namespace is being deleted (or gone): nothing left behind.
    let ns = report["namespace"].as_str().unwrap().to_string();
    let nss: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    let left = nss.get_opt(&ns).await.unwrap();
    assert!(left.is_none_or(|n| n.metadata.deletion_timestamp.is_some()), "namespace {ns} was not removed");
}

#[test]
fn e2e_refuses_a_production_looking_context_without_yes() {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-runner"))
        .args(["e2e", "--context", "gke_acme_prod-eu"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("looks like production") && err.contains("--yes"), "{err}");
}
