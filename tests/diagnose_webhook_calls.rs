//! diagnose asks the apiserver whether it can call our webhooks (a dry-run
//! create of a Runner per version), against the real control plane: the
//! registrations pointed at a Service nothing serves are errors naming
//! them (exit 3); served by a manager in this process, nothing is said; a
//! user who may not create Runners gets a note, not an alarm.
//!
//! The CRD and the configuration are cluster-wide: the tests take turns
//! (one lock), and [`PutBackRegistrations`] puts them back, also on a panic.

mod diagnose_util;
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubectl_runner::api::CRD_NAME;
use kubectl_runner::manager::Config;
use kubectl_runner::manager::webhook::WebhookConfig;
use kubectl_runner::manifests::{conversion, runner_crd, validating_webhook_configuration};
use kubectl_runner::webhook::{SERVICE, Target, VALIDATING_CONFIG};
use serde_json::{Value, json};

use diagnose_util::*;
use support::{ManagerHandle, PutBackRegistrations, TestNs, ensure_crd, free_loopback_addr, wait_for};

const T: Duration = Duration::from_secs(60);
const NOW: [&str; 4] = ["--churn-window", "0", "--grace", "0s"];
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Both registrations routed to `target`, every version served, as install
/// (or a manager's keeper) would write them.
async fn register(client: &kube::Client, target: &Target, ca_bundle: Option<&str>) {
    let apply = PatchParams::apply("kubectl-runner-tests").force();
    let vwcs = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let vwc = validating_webhook_configuration(target, ca_bundle);
    vwcs.patch(VALIDATING_CONFIG, &apply, &Patch::Apply(&vwc)).await.expect("apply the configuration");
    let mut crd = runner_crd();
    crd.spec.versions.iter_mut().for_each(|v| v.served = true);
    crd.spec.conversion = Some(conversion(target, ca_bundle));
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.patch(CRD_NAME, &apply, &Patch::Apply(&crd)).await.expect("convert through the target");
}

async fn diagnose_ns(ns: &TestNs, extra: &[&str]) -> (u8, Value) {
    let mut args = vec!["-n", ns.name.as_str()];
    args.extend(NOW);
    args.extend(extra);
    diagnose(&args).await
}

#[tokio::test]
async fn registrations_pointed_at_a_service_with_no_endpoint_are_errors_in_the_apiservers_words() {
    let _turn = LOCK.lock().await;
    let ns = TestNs::new("diag-calls").await;
    ensure_crd(&ns.client).await;
    let _put_back = PutBackRegistrations::guarded(&ns.client).await;
    // A Service whose selector matches no Pod: it exists, nothing serves it.
    let service: Service = serde_json::from_value(json!({
        "metadata": { "name": SERVICE },
        "spec": { "selector": { "app": "nothing" }, "ports": [{ "port": 443, "targetPort": 9443 }] },
    }))
    .unwrap();
    ns.api::<Service>().create(&PostParams::default(), &service).await.expect("create the Service");
    register(&ns.client, &Target::Service { namespace: ns.name.clone() }, None).await;

    let (code, report) = wait_for("diagnose to see both registrations fail", T, || async {
        let (code, report) = diagnose_ns(&ns, &[]).await;
        let both = !with_code(&report, "admission-webhook-unreachable").is_empty()
            && !with_code(&report, "conversion-webhook-unreachable").is_empty();
        both.then_some((code, report))
    })
    .await;
    assert_eq!(code, 3, "{report:#}");
    let admission = with_code(&report, "admission-webhook-unreachable");
    assert_eq!(admission[0]["severity"], "error", "{report:#}");
    let said = text(admission[0]);
    eprintln!("admission: {said}\nfix: {}", admission[0]["fix"]);
    assert!(said.contains(VALIDATING_CONFIG), "{said}");
    assert!(said.contains("every Runner create and update is refused"), "{said}");
    assert!(said.contains("a dry-run create of a Runner at v1beta1 in namespace"), "{said}");
    assert!(said.contains("failed calling webhook"), "the apiserver's own words: {said}");
    let fix = admission[0]["fix"].as_str().unwrap();
    assert!(
        fix.contains("run-manager --local-webhooks --take-over") && fix.contains("kubectl runner install"),
        "{fix}"
    );
    let conversion = with_code(&report, "conversion-webhook-unreachable");
    assert_eq!(conversion[0]["severity"], "error", "{report:#}");
    let said = text(conversion[0]);
    eprintln!("conversion: {said}\nfix: {}", conversion[0]["fix"]);
    assert!(said.contains("at v1alpha1"), "{said}");
}

#[tokio::test]
async fn webhooks_a_manager_serves_are_not_reported_and_a_user_who_may_not_create_gets_a_note() {
    let _turn = LOCK.lock().await;
    let ns = TestNs::new("diag-calls-ok").await;
    ensure_crd(&ns.client).await;
    let _put_back = PutBackRegistrations::guarded(&ns.client).await;
    let listen: SocketAddr = free_loopback_addr();
    let target = Target::Url(format!("https://{listen}/convert"));
    register(&ns.client, &target, None).await;
    // The keeper sets the caBundles of both registrations to its CA.
    let mut cfg = Config::namespaced(&ns.name);
    cfg.lease_namespace = ns.name.clone();
    cfg.webhook = Some(WebhookConfig { listen, target, namespace: ns.name.clone() });
    let manager = ManagerHandle::start_with(&ns.client, cfg);

    let report = wait_for("diagnose to find both webhooks answering", T, || async {
        let (_, report) = diagnose_ns(&ns, &[]).await;
        let quiet = ["admission-webhook-unreachable", "conversion-webhook-unreachable"]
            .iter()
            .all(|c| with_code(&report, c).is_empty());
        quiet.then_some(report)
    })
    .await;
    let notes: Vec<String> = with_code(&report, "not-readable").iter().map(|f| text(f)).collect();
    assert!(notes.iter().all(|n| !n.contains("was not checked")), "{notes:?}");

    // Someone who may not create Runners: the dry run says nothing.
    let (_, report) = diagnose_ns(&ns, &["--as", "diag-calls-nobody"]).await;
    for code in ["admission-webhook-unreachable", "conversion-webhook-unreachable"] {
        assert!(with_code(&report, code).is_empty(), "{code}: {report:#}");
    }
    let notes: Vec<String> = with_code(&report, "not-readable").iter().map(|f| text(f)).collect();
    assert!(
        notes.iter().any(|n| n.contains("whether the apiserver can call the webhooks was not checked")),
        "{notes:?}"
    );
    manager.stop().await;
}
