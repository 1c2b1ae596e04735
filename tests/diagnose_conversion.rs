//! diagnose on broken conversion, against the real control plane: a CRD
//! whose conversion webhook nobody serves while Runners are stored at the
//! version it does not ask for, and a `status.storedVersions` that holds a
//! version no longer served.
//!
//! The CRDs are written as raw JSON with both versions and a permissive
//! schema, so the tests do not depend on which version the Runner type is:
//! the version diagnose asks for is [`VERSION`], the other one is where the
//! Runners are stored. Each test swaps the cluster's one Runner CRD, so
//! every test here holds [`CRD_LOCK`], and [`CrdRestore`] puts the CRD back
//! as it found it (storedVersions included), also when the test panics.

mod diagnose_util;
mod support;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kubectl_runner::api::{CRD_NAME, VERSION};
use serde_json::{Value, json};

use diagnose_util::*;
use support::{TestNs, ensure_crd, wait_for};

static CRD_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const GROUP: &str = "lab.cloudlab.training";

/// Where nobody listens: port 1 on the loopback refuses at once.
const DEAD_URL: &str = "https://127.0.0.1:1/convert";

/// No churn sampling, no grace: report what is there right now.
const NOW: [&str; 4] = ["--churn-window", "0", "--grace", "0s"];

/// The Runner version that is not [`VERSION`].
fn other_version() -> &'static str {
    if VERSION == "v1alpha1" { "v1beta1" } else { "v1alpha1" }
}

fn runners_at(client: &Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: "Runner".into(),
        plural: "runners".into(),
    };
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// One CRD version: permissive, except that `spec.phase` defaults to
/// `marker`, so a response shows which CRD handled the request.
fn version(name: &str, served: bool, storage: bool, marker: &str) -> Value {
    json!({ "name": name, "served": served, "storage": storage, "schema": { "openAPIV3Schema": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": { "spec": { "type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "properties": { "phase": { "type": "string", "default": marker } } } } } } })
}

/// The live CRD with `spec.versions` and `spec.conversion` replaced (a PUT:
/// nothing of the previous spec survives that the new one does not say).
async fn put(client: &Client, versions: Value, conversion: Value) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = serde_json::to_value(crds.get(CRD_NAME).await.expect("get the CRD")).unwrap();
    crd["spec"]["versions"] = versions;
    crd["spec"]["conversion"] = conversion;
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    crds.replace(CRD_NAME, &PostParams::default(), &crd).await.expect("replace the CRD");
}

fn none() -> Value {
    json!({ "strategy": "None" })
}

/// Puts the CRD back as it was when made: conversion None with both
/// versions and the original storage version, the test's Runners deleted
/// (nothing is left stored at a version the original may not have), then
/// the original storedVersions and the original spec.
struct CrdRestore {
    original: CustomResourceDefinition,
    namespace: String,
}

impl CrdRestore {
    async fn new(client: &Client, namespace: &str) -> CrdRestore {
        support::guard::refuse_foreign(client, "replace the Runner CRD's versions and conversion").await;
        ensure_crd(client).await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        CrdRestore { original: crds.get(CRD_NAME).await.unwrap(), namespace: namespace.into() }
    }

    async fn restore(original: CustomResourceDefinition, ns: String) {
        let client = support::client().await;
        let storage = original.spec.versions.iter().find(|v| v.storage).unwrap().name.clone();
        let both = json!([
            version(VERSION, true, storage == VERSION, "restore"),
            version(other_version(), true, storage != VERSION, "restore")
        ]);
        put(&client, both, none()).await;
        let api = runners_at(&client, &ns, &storage);
        wait_for("the test's Runners to be deleted", Duration::from_secs(30), || {
            let api = api.clone();
            async move {
                let _ = api.delete_collection(&DeleteParams::default(), &ListParams::default()).await;
                api.list(&ListParams::default()).await.ok().filter(|l| l.items.is_empty()).map(|_| ())
            }
        })
        .await;
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let stored = original.status.as_ref().and_then(|s| s.stored_versions.clone()).unwrap();
        let status = Patch::Merge(json!({ "status": { "storedVersions": stored } }));
        crds.patch_status(CRD_NAME, &PatchParams::default(), &status).await.expect("restore storedVersions");
        let original = serde_json::to_value(&original.spec).unwrap();
        put(&client, original["versions"].clone(), original["conversion"].clone()).await;
        ensure_crd(&client).await;
    }
}

impl Drop for CrdRestore {
    fn drop(&mut self) {
        let (original, ns) = (self.original.clone(), self.namespace.clone());
        // As TestNs's drop: a runtime of its own, on its own thread.
        let restored = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(CrdRestore::restore(original, ns));
        })
        .join();
        if restored.is_err() && !std::thread::panicking() {
            panic!("the Runner CRD could not be restored");
        }
    }
}

/// Creates `name` at `version` and returns it once the CRD with `marker`
/// handled the create: only then is it stored at that CRD's storage version.
async fn create_stored_by(client: &Client, ns: &str, version: &str, name: &str, marker: &str) {
    let api = runners_at(client, ns, version);
    let body: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/{version}"), "kind": "Runner",
        "metadata": { "name": name }, "spec": { "image": "nginx:1.27", "replicas": 1 }
    }))
    .unwrap();
    wait_for(&format!("Runner {name} stored by the CRD marked {marker}"), Duration::from_secs(30), || {
        let (api, body) = (api.clone(), body.clone());
        async move {
            let _ = api.delete(name, &DeleteParams::default()).await;
            let created = api.create(&PostParams::default(), &body).await.ok()?;
            (created.data["spec"]["phase"] == marker).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn a_dead_conversion_webhook_is_reported_first_with_its_fix_and_diagnose_still_runs() {
    let _lock = CRD_LOCK.lock().await;
    let ns = TestNs::new("diag-conv").await;
    let _restore = CrdRestore::new(&ns.client, &ns.name).await;
    let (asked, stored) = (VERSION, other_version());

    // Runners stored at the version diagnose does not ask for ...
    put(&ns.client, json!([version(asked, true, false, "a"), version(stored, true, true, "a")]), none())
        .await;
    for name in ["web", "api"] {
        create_stored_by(&ns.client, &ns.name, stored, name, "a").await;
    }
    // ... then the storage version switched, and conversion sent nowhere.
    let dead = json!({ "strategy": "Webhook", "webhook": { "conversionReviewVersions": ["v1"],
                       "clientConfig": { "url": DEAD_URL } } });
    put(&ns.client, json!([version(asked, true, true, "b"), version(stored, true, false, "b")]), dead).await;
    let api = runners_at(&ns.client, &ns.name, asked);
    // Paged, as diagnose lists: an unpaged list is answered 429 while the
    // watch cache cannot start, which the client retries for minutes.
    let refused = wait_for("a Runner list to fail for want of conversion", Duration::from_secs(30), || {
        let api = api.clone();
        async move {
            match api.list(&ListParams::default().limit(10)).await {
                Err(kube::Error::Api(s)) if s.code == 500 => Some(s.message),
                _ => None,
            }
        }
    })
    .await;
    assert!(refused.contains("conversion webhook for"), "{refused}");

    let mut args = vec!["-n", ns.name.as_str()];
    args.extend(NOW);
    let (code, report) = diagnose(&args).await;
    let first = &report["findings"][0];
    assert_eq!(first["code"], "conversion-webhook-unreachable", "said first: {report:#}");
    assert_eq!(first["severity"], "error");
    let t = text(first);
    assert!(
        t.contains(&format!("list Runners in {}: ", ns.name)) && t.contains("conversion webhook for"),
        "{t}"
    );
    assert!(t.contains(&format!("the CRD sends conversion to URL {DEAD_URL}")), "{t}");
    assert!(t.contains("Service runner-system/runner-webhook"), "{t}");
    let fix = first["fix"].as_str().unwrap();
    assert!(fix.contains(&format!("start the local manager that serves {DEAD_URL}")), "{fix}");
    let skipped = with_code(&report, "not-readable");
    assert!(skipped.iter().any(|f| text(f).contains("Runners not readable")), "{report:#}");
    assert!(with_code(&report, "gather-incomplete").is_empty(), "not a gap: {report:#}");
    // Not "0 Runners": the count says where it could not look.
    assert_eq!(report["summary"]["runnersNotRead"], json!([format!("in {}", ns.name)]), "{report:#}");
    assert_eq!(code, 3, "{report:#}");

    // One Runner by name: its GET fails the same way; diagnose does not
    // call it "not found".
    let mut args = vec!["web", "-n", ns.name.as_str()];
    args.extend(NOW);
    let (code, report) = diagnose(&args).await;
    assert_eq!(report["findings"][0]["code"], "conversion-webhook-unreachable", "{report:#}");
    assert!(text(&report["findings"][0]).contains(&format!("get Runner web in {}", ns.name)), "{report:#}");
    assert_eq!(report["summary"]["runnersNotRead"], json!([format!("in {}", ns.name)]), "{report:#}");
    assert_eq!(code, 3);
}

#[tokio::test]
async fn stored_versions_holding_a_version_no_longer_served_point_at_migrate() {
    let _lock = CRD_LOCK.lock().await;
    let ns = TestNs::new("diag-stored").await;
    let _restore = CrdRestore::new(&ns.client, &ns.name).await;
    let (asked, old) = (VERSION, other_version());

    // The storage version joins storedVersions as soon as the CRD says so.
    put(&ns.client, json!([version(asked, true, false, "a"), version(old, true, true, "a")]), none()).await;
    // The old version no longer served, but still in storedVersions.
    put(&ns.client, json!([version(asked, true, true, "b"), version(old, false, false, "b")]), none()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    let stored = crds.get(CRD_NAME).await.unwrap().status.unwrap().stored_versions.unwrap();
    assert!(stored.iter().any(|v| v == old), "{stored:?}");

    let mut args = vec!["-n", ns.name.as_str()];
    args.extend(NOW);
    let (code, report) = diagnose(&args).await;
    let f = with_code(&report, "stored-version-not-served");
    assert_eq!(f.len(), 1, "{report:#}");
    assert_eq!(f[0]["severity"], "warning");
    assert!(f[0]["message"].as_str().unwrap().contains(&format!("holds {old}")), "{report:#}");
    assert!(f[0]["fix"].as_str().unwrap().starts_with("kubectl runner migrate"), "{report:#}");
    assert!(with_code(&report, "conversion-webhook-unreachable").is_empty(), "{report:#}");
    assert_eq!(code, 0, "a warning alone exits 0: {report:#}");
}
