//! Pods that admission refuses, on the real control plane: a namespace
//! that enforces the restricted Pod Security Standard, and one whose
//! ResourceQuota needs cpu and memory limits. The Runner fails at once
//! with the apiserver's message (not ten minutes later at the progress
//! deadline), `diagnose` names what refused the Pods and the field that
//! fixes it, and with that field set the Runner becomes Ready there.

mod diagnose_util;
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubectl_runner::api::{Amounts, Phase, Resources, Runner, RunnerSpec, condition, is_ready};
use serde_json::json;

use diagnose_util::{diagnose, with_code};
use support::{ManagerHandle, TestNs, ensure_crd, wait_for};

/// Long enough for a manager pass, far short of the 600 s progress deadline.
const SOON: Duration = Duration::from_secs(45);

/// Waits until the Runner is Failed with reason PodsRefused; its message.
async fn refused(ns: &TestNs, name: &str) -> String {
    let api = ns.api::<Runner>();
    wait_for("the Runner to report its Pods refused", SOON, || {
        let api = api.clone();
        async move {
            let st = api.get(name).await.ok()?.status?;
            let ready = st.conditions.iter().find(|c| c.type_ == condition::READY)?;
            (st.phase == Phase::Failed
                && ready.reason == condition::REASON_PODS_REFUSED
                && ready.status == "False")
                .then(|| ready.message.clone())
        }
    })
    .await
}

async fn ready(ns: &TestNs, name: &str) {
    let api = ns.api::<Runner>();
    wait_for("the Runner to become Ready", Duration::from_secs(90), || {
        let api = api.clone();
        async move { api.get(name).await.ok().filter(is_ready).map(|_| ()) }
    })
    .await;
}

/// diagnose's pods-refused finding for `web`: (exit code, message, fix).
async fn diagnosed(ns: &TestNs) -> (u8, String, String) {
    let (code, report) = diagnose(&["-n", &ns.name, "web", "--churn-window", "0", "--grace", "0s"]).await;
    let found = with_code(&report, "pods-refused");
    assert_eq!(found.len(), 1, "{report:#}");
    assert_eq!(found[0]["severity"], "error");
    let text = |k: &str| found[0][k].as_str().unwrap_or_default().to_string();
    (code, text("message"), text("fix"))
}

async fn patch_spec(ns: &TestNs, spec: serde_json::Value) {
    ns.api::<Runner>()
        .patch("web", &PatchParams::default(), &Patch::Merge(json!({ "spec": spec })))
        .await
        .expect("patch the Runner");
}

#[tokio::test]
async fn a_runner_in_a_restricted_namespace_is_refused_at_once_and_ready_with_pod_security_restricted() {
    let ns = TestNs::new("pss").await;
    ensure_crd(&ns.client).await;
    let label = json!({ "metadata": { "labels": { "pod-security.kubernetes.io/enforce": "restricted" } } });
    Api::<Namespace>::all(ns.client.clone())
        .patch(&ns.name, &PatchParams::default(), &Patch::Merge(label))
        .await
        .expect("label the namespace");
    let manager = ManagerHandle::start(&ns.client, &ns.name);
    ns.api::<Runner>()
        .create(&PostParams::default(), &Runner::new("web", RunnerSpec::new("nginx:1.27")))
        .await
        .unwrap();

    let message = refused(&ns, "web").await;
    assert!(message.starts_with("PodSecurity admission refused the Pods: "), "{message}");
    assert!(message.contains("violates PodSecurity \"restricted:latest\""), "{message}");
    let (code, found, fix) = diagnosed(&ns).await;
    assert_eq!(code, 3, "an error exits 3");
    assert!(found.contains("PodSecurity admission refused the Pods"), "{found}");
    assert!(
        fix.contains("spec.podSecurity: restricted")
            && fix.contains(r#"{"spec":{"podSecurity":"restricted"}}"#),
        "{fix}"
    );

    patch_spec(&ns, json!({ "podSecurity": "restricted" })).await;
    ready(&ns, "web").await;
    let (code, report) = diagnose(&["-n", &ns.name, "web", "--churn-window", "0", "--grace", "0s"]).await;
    assert!(with_code(&report, "pods-refused").is_empty(), "{report:#}");
    assert_eq!(code, 0, "{report:#}");
    manager.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_runner_refused_by_a_quota_that_needs_limits_is_reported_and_ready_with_spec_resources() {
    let ns = TestNs::new("quota").await;
    ensure_crd(&ns.client).await;
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": { "name": "compute" },
        "spec": { "hard": { "limits.cpu": "2", "limits.memory": "1Gi" } }
    }))
    .unwrap();
    ns.api::<ResourceQuota>().create(&PostParams::default(), &quota).await.expect("create the quota");
    // The quota admission plugin refuses Pods only once it has computed the quota's usage.
    wait_for("the quota to be computed", SOON, || {
        let api = ns.api::<ResourceQuota>();
        async move { api.get("compute").await.ok()?.status?.used.map(|_| ()) }
    })
    .await;
    let manager = ManagerHandle::start(&ns.client, &ns.name);
    ns.api::<Runner>()
        .create(&PostParams::default(), &Runner::new("web", RunnerSpec::new("nginx:1.27")))
        .await
        .unwrap();

    let message = refused(&ns, "web").await;
    assert!(message.starts_with("a ResourceQuota refused the Pods: "), "{message}");
    assert!(message.contains("must specify limits.cpu"), "{message}");
    let (code, _, fix) = diagnosed(&ns).await;
    assert_eq!(code, 3);
    assert!(fix.contains("spec.resources") && fix.contains(r#"{"spec":{"resources":"#), "{fix}");

    let amounts =
        |cpu: &str, memory: &str| Some(Amounts { cpu: Some(cpu.into()), memory: Some(memory.into()) });
    let resources = Resources { requests: amounts("0.1", "64Mi"), limits: amounts("500m", "128Mi") };
    patch_spec(&ns, json!({ "resources": resources })).await;
    ready(&ns, "web").await;
    manager.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn the_apiserver_refuses_a_request_above_its_limit_as_the_cli_does() {
    let ns = TestNs::new("res-rule").await;
    ensure_crd(&ns.client).await;
    let amounts = |cpu: &str| Some(Amounts { cpu: Some(cpu.into()), memory: None });
    let cases = [
        (Resources { requests: amounts("1"), limits: amounts("500m") }, "spec.resources.requests.cpu"),
        (Resources { requests: None, limits: amounts("0") }, "spec.resources.limits.cpu"),
    ];
    let pp = PostParams { dry_run: true, field_manager: None };
    for (resources, field) in cases {
        let spec = RunnerSpec::new("nginx:1.27").resources(resources);
        let cli = spec.validate().unwrap_err();
        assert!(cli.starts_with(field), "{cli}");
        let err = ns.api::<Runner>().create(&pp, &Runner::new("web", spec)).await.unwrap_err();
        let kube::Error::Api(status) = err else { panic!("not a refusal: {err}") };
        assert_eq!(status.code, 422, "{status:?}");
        assert!(status.message.contains(field), "{}", status.message);
    }
    let fine = RunnerSpec::new("nginx:1.27")
        .resources(Resources { requests: amounts("0.5"), limits: amounts("500m") });
    assert_eq!(fine.validate(), Ok(()));
    ns.api::<Runner>()
        .create(&pp, &Runner::new("web", fine))
        .await
        .expect("equal request and limit are fine");
}
