//! `kubectl runner e2e` as a user runs it: the binary, against the real
//! control plane, with its JSON report checked step by step.

mod support;

use std::process::Command;

#[tokio::test]
async fn the_e2e_command_proves_the_lifecycle_and_leaves_nothing_behind() {
    let client = support::client().await;
    // Installed beforehand, so e2e must not install (and later remove) it
    // while other tests share the cluster.
    support::ensure_crd(&client).await;
    let out = tokio::task::spawn_blocking(|| {
        Command::new(env!("CARGO_BIN_EXE_kubectl-runner")).args(["e2e", "-o", "json"]).output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("JSON report ({e}): {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "e2e failed: {report:#}");
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
