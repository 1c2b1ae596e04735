//! diagnose after a local manager crashed, against the real control plane:
//! the registrations are written as `run-manager --local-webhooks` leaves
//! them (`webhook::local::point`, an origin on a
//! loopback port nothing listens on, and its Lease renewed long ago or
//! live), then diagnose reports them first and `--fix` restores them.
//!
//! The CRD and the ValidatingWebhookConfiguration are cluster-wide: one
//! left pointing at a dead URL breaks lists, and a configuration left with
//! failurePolicy Fail refuses every Runner create in every later test
//! binary. So every test holds [`LOCK`], and [`PutBack`] restores both as
//! it found them, also when the test panics.

mod diagnose_util;
mod support;

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kubectl_runner::api::{CRD_NAME, Runner, VERSION};
use kubectl_runner::diagnose::fix::Error as FixError;
use kubectl_runner::diagnose::restore;
use kubectl_runner::webhook::VALIDATING_CONFIG;
use kubectl_runner::webhook::local::{self, Holder, LEASE};
use serde_json::Value;

use diagnose_util::*;
use support::{TestNs, ensure_crd, free_loopback_addr, wait_for};

static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A real PEM for the caBundle (the apiserver never dials anyway).
const CA: &str = include_str!("../src/diagnose/checks/testdata/ca.pem");

/// No churn sampling, no grace: report what is there right now.
const NOW: [&str; 4] = ["--churn-window", "0", "--grace", "0s"];

const T: Duration = Duration::from_secs(30);

/// Puts the CRD's spec and annotations and the webhook configuration
/// back as they were when made (deleting a configuration that did not
/// exist), on a runtime of its own, also on panic.
struct PutBack {
    crd: CustomResourceDefinition,
    vwc: Option<ValidatingWebhookConfiguration>,
}

impl PutBack {
    async fn new(client: &Client) -> PutBack {
        support::guard::refuse_foreign(client, "replace the webhook registrations").await;
        ensure_crd(client).await;
        let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(CRD_NAME).await.unwrap();
        let vwc = Api::<ValidatingWebhookConfiguration>::all(client.clone()).get_opt(VALIDATING_CONFIG).await;
        PutBack { crd, vwc: vwc.unwrap() }
    }

    async fn restore(crd: CustomResourceDefinition, vwc: Option<ValidatingWebhookConfiguration>) {
        let client = support::client().await;
        let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        // The configuration first: until it is gone, creates are refused.
        match vwc {
            None => {
                let _ = vwcs.delete(VALIDATING_CONFIG, &DeleteParams::default()).await;
            }
            Some(original) => {
                if let Ok(Some(mut live)) = vwcs.get_opt(VALIDATING_CONFIG).await {
                    live.webhooks = original.webhooks;
                    live.metadata.annotations = original.metadata.annotations;
                    live.metadata.managed_fields = None;
                    let _ = vwcs.replace(VALIDATING_CONFIG, &PostParams::default(), &live).await;
                }
            }
        }
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        if let Ok(mut live) = crds.get(CRD_NAME).await {
            live.spec = crd.spec;
            live.metadata.annotations = crd.metadata.annotations;
            live.metadata.managed_fields = None;
            let _ = crds.replace(CRD_NAME, &PostParams::default(), &live).await;
        }
        ensure_crd(&client).await;
    }
}

impl Drop for PutBack {
    fn drop(&mut self) {
        let (crd, vwc) = (self.crd.clone(), self.vwc.clone());
        let restored = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(PutBack::restore(crd, vwc));
        })
        .join();
        if restored.is_err() && !std::thread::panicking() {
            panic!("the CRD and the webhook configuration could not be put back");
        }
    }
}

/// A local manager that served on a loopback port nothing listens on
/// now, with its Lease in the test namespace.
fn crashed(ns: &str) -> Holder {
    Holder {
        holder: format!("crashed-laptop pid {}", std::process::id()),
        lease_namespace: ns.into(),
        url: format!("https://{}", free_loopback_addr()),
    }
}

/// The holder's Lease, renewed `ago` ago with a 15 s duration.
async fn write_lease(client: &Client, by: &Holder, ago: Duration) -> Lease {
    let renewed = Timestamp::now().checked_sub(SignedDuration::try_from(ago).unwrap()).unwrap();
    let lease = Lease {
        metadata: ObjectMeta { name: Some(LEASE.into()), ..Default::default() },
        spec: Some(LeaseSpec {
            holder_identity: Some(by.holder.clone()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(renewed)),
            renew_time: Some(MicroTime(renewed)),
            ..Default::default()
        }),
    };
    let api: Api<Lease> = Api::namespaced(client.clone(), &by.lease_namespace);
    match api.get_opt(LEASE).await.unwrap() {
        None => api.create(&PostParams::default(), &lease).await.unwrap(),
        Some(live) => {
            let lease = Lease { metadata: live.metadata, ..lease };
            api.replace(LEASE, &PostParams::default(), &lease).await.unwrap()
        }
    }
}

/// What the crashed manager left: the CRD and the webhook configuration
/// pointed at it, as `webhook::local` computes them.
async fn point(client: &Client, by: &Holder) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get(CRD_NAME).await.unwrap();
    let target = local::target(&by.url);
    let conversion = kubectl_runner::manifests::conversion(&target, Some(CA));
    let pointed = local::point(Some(&crd), by, conversion).unwrap();
    crds.replace(CRD_NAME, &PostParams::default(), &pointed).await.expect("point the CRD");
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let current = vwcs.get_opt(VALIDATING_CONFIG).await.unwrap();
    let desired = kubectl_runner::manifests::validating_webhook_configuration(&target, Some(CA));
    let pointed = local::point(current.as_ref(), by, desired).unwrap();
    match current {
        None => vwcs.create(&PostParams::default(), &pointed).await.expect("create the configuration"),
        Some(_) => vwcs.replace(VALIDATING_CONFIG, &PostParams::default(), &pointed).await.expect("point it"),
    };
}

/// What a restore must give back: the CRD's spec and annotations, the
/// configuration's webhooks and annotations (None: it does not exist).
async fn registrations(client: &Client) -> (Value, Option<Value>) {
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(CRD_NAME).await.unwrap();
    let vwc =
        Api::<ValidatingWebhookConfiguration>::all(client.clone()).get_opt(VALIDATING_CONFIG).await.unwrap();
    let crd = serde_json::json!({ "spec": crd.spec, "annotations": crd.metadata.annotations });
    (crd, vwc.map(|v| serde_json::json!({ "webhooks": v.webhooks, "annotations": v.metadata.annotations })))
}

fn runners_at(client: &Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let group = kubectl_runner::api::GROUP;
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: "Runner".into(),
        plural: "runners".into(),
    };
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn other_version() -> &'static str {
    if VERSION == "v1alpha1" { "v1beta1" } else { "v1alpha1" }
}

async fn create(ns: &TestNs, name: &str) -> kube::Result<Runner> {
    ns.api::<Runner>().create(&PostParams::default(), &Runner::new(name, spec("nginx:1.27"))).await
}

#[tokio::test]
async fn a_crashed_local_managers_registrations_come_first_and_fix_puts_them_back_exactly() {
    let _lock = LOCK.lock().await;
    let ns = TestNs::new("diag-local").await;
    let _release = ReleaseFinalizers(ns.name.clone());
    let _put_back = PutBack::new(&ns.client).await;
    create(&ns, "web").await.expect("a Runner before the local manager");
    let before = registrations(&ns.client).await;
    assert!(before.1.is_none(), "no configuration to start with: {before:?}");

    let by = crashed(&ns.name);
    point(&ns.client, &by).await;
    write_lease(&ns.client, &by, Duration::from_secs(3600)).await;

    // What it breaks: creates are refused, and reads at the other version.
    let refused = wait_for("a create to be refused by the dead webhook", T, || async {
        let _ = ns.api::<Runner>().delete("refused", &DeleteParams::default()).await;
        create(&ns, "refused").await.err().map(|e| e.to_string()).filter(|e| e.contains("webhook"))
    })
    .await;
    assert!(refused.contains(kubectl_runner::webhook::VALIDATING_WEBHOOK), "{refused}");
    let other = runners_at(&ns.client, &ns.name, other_version());
    let failed = wait_for("a list at the other version to fail", T, || {
        let other = other.clone();
        async move { other.list(&ListParams::default().limit(10)).await.err() }
    })
    .await;
    assert!(failed.to_string().contains("conversion webhook"), "{failed}");

    let mut args = vec!["-n", ns.name.as_str()];
    args.extend(NOW);
    let (code, report) = diagnose(&args).await;
    assert_eq!(code, 3, "{report:#}");
    let findings = report["findings"].as_array().unwrap();
    let first: Vec<&Value> = findings.iter().take(2).collect();
    assert!(first.iter().all(|f| f["code"] == "local-webhooks-abandoned"), "said first: {report:#}");
    assert!(with_code(&report, "conversion-webhook-unreachable").is_empty(), "{report:#}");
    let (crd, vwc) = (text(first[0]), text(first[1]));
    assert!(crd.contains(&format!("URL {}/convert", by.url)) && crd.contains(&by.holder), "{crd}");
    assert!(crd.contains("lists and reads of Runners at a version other than"), "{crd}");
    assert!(crd.contains(&format!("its Lease {}/{LEASE} expired 59m", ns.name)), "{crd}");
    assert!(vwc.contains(&format!("URL {}/validate", by.url)), "{vwc}");
    assert!(vwc.contains("creates and updates of Runners are refused"), "{vwc}");
    assert_eq!(first[0]["fix"], "kubectl runner diagnose --fix");

    let mut fix = args.clone();
    fix.extend(["--fix", "--yes"]);
    let (_, after) = diagnose(&fix).await;
    for code in
        ["local-webhooks-abandoned", "conversion-webhook-unreachable", "admission-webhook-unreachable"]
    {
        assert!(with_code(&after, code).is_empty(), "{code}: {after:#}");
    }
    assert_eq!(registrations(&ns.client).await, before, "put back exactly");
    let lease = Api::<Lease>::namespaced(ns.client.clone(), &ns.name).get_opt(LEASE).await.unwrap();
    assert!(lease.is_none(), "the expired Lease is deleted: {lease:?}");

    // Lists and creates work again.
    ns.api::<Runner>().list(&ListParams::default()).await.expect("list Runners");
    wait_for("a create to be admitted", T, || async { create(&ns, "after").await.ok() }).await;
}

#[tokio::test]
async fn a_configuration_that_existed_before_gets_its_webhooks_back() {
    let _lock = LOCK.lock().await;
    let ns = TestNs::new("diag-local-vwc").await;
    let _put_back = PutBack::new(&ns.client).await;
    // An installed configuration that never blocks (Ignore): the manager
    // is not running here.
    let service = kubectl_runner::webhook::Target::Service { namespace: ns.name.clone() };
    let mut installed = kubectl_runner::manifests::validating_webhook_configuration(&service, None);
    installed.webhooks.as_mut().unwrap()[0].failure_policy = Some("Ignore".into());
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(ns.client.clone());
    vwcs.create(&PostParams::default(), &installed).await.expect("install the configuration");
    let before = registrations(&ns.client).await;
    // As the apiserver stored it, it differs from ours in that one field.
    let mut args = vec!["-n", ns.name.as_str()];
    args.extend(NOW);
    let (_, report) = diagnose(&args).await;
    let drift = with_code(&report, "validating-webhook-drift");
    assert_eq!(drift.len(), 1, "{report:#}");
    assert_eq!(
        drift[0]["evidence"],
        serde_json::json!(["webhooks[0].failurePolicy: cluster has \"Ignore\", expected \"Fail\""])
    );

    let by = crashed(&ns.name);
    point(&ns.client, &by).await;
    // No Lease at all: never written, or deleted.
    args.extend(["--fix", "--yes"]);
    let (_, after) = diagnose(&args).await;
    assert!(with_code(&after, "local-webhooks-abandoned").is_empty(), "{after:#}");
    assert_eq!(registrations(&ns.client).await, before, "the installed webhooks are back, the CRD too");
}

#[tokio::test]
async fn a_live_lease_is_a_note_and_blocks_the_fix_even_when_it_comes_back_after_diagnose() {
    let _lock = LOCK.lock().await;
    let ns = TestNs::new("diag-local-live").await;
    let _put_back = PutBack::new(&ns.client).await;
    let by = crashed(&ns.name);
    point(&ns.client, &by).await;
    write_lease(&ns.client, &by, Duration::ZERO).await;
    let pointed = registrations(&ns.client).await;

    let mut args = vec!["-n", ns.name.as_str()];
    args.extend(NOW);
    let (_, report) = diagnose(&args).await;
    assert!(with_code(&report, "local-webhooks-abandoned").is_empty(), "{report:#}");
    let served = with_code(&report, "local-webhooks-served");
    assert_eq!(served.len(), 2, "{report:#}");
    assert_eq!(served[0]["severity"], "info");
    assert!(
        text(served[0]).contains(&format!("served by the local manager \"{}\" at {}", by.holder, by.url))
    );
    let mut fix = args.clone();
    fix.extend(["--fix", "--yes"]);
    diagnose(&fix).await;
    assert_eq!(registrations(&ns.client).await, pointed, "a live holder's registrations are not touched");

    // Expired when diagnose looked, renewed before the fix writes: the
    // re-check refuses, and nothing is written.
    write_lease(&ns.client, &by, Duration::from_secs(3600)).await;
    let req = diagnose_request(&ns.name);
    let (snapshot, _) = kubectl_runner::diagnose::diagnose(&ns.client, &req).await;
    let candidates = restore::candidates(&snapshot);
    assert_eq!(candidates.len(), 2, "{candidates:?}");
    write_lease(&ns.client, &by, Duration::ZERO).await;
    let err = restore::restore(&ns.client, &candidates[0]).await.unwrap_err();
    assert!(matches!(err, FixError::FixHeld { .. }), "{err}");
    assert_eq!(registrations(&ns.client).await, pointed);

    // Taken by another local manager meanwhile: changed, nothing written.
    let other = Holder { holder: "another laptop".into(), ..by.clone() };
    point(&ns.client, &other).await;
    write_lease(&ns.client, &by, Duration::from_secs(3600)).await;
    let err = restore::restore(&ns.client, &candidates[0]).await.unwrap_err();
    assert!(matches!(err, FixError::FixChanged { .. }), "{err}");
}

fn diagnose_request(ns: &str) -> kubectl_runner::diagnose::Request {
    kubectl_runner::diagnose::Request {
        namespaces: vec![ns.into()],
        name: None,
        service_account: None,
        thresholds: Default::default(),
        churn_window: Duration::ZERO,
        observe: Duration::ZERO,
    }
}
