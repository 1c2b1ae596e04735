//! `kubectl runner migrate` on the real local control plane, with Runners
//! really stored at the old version: a CRD whose storage version is
//! v1alpha1 is installed, Runners are created, then a CRD whose storage
//! version is v1beta1 replaces it (storedVersions becomes [v1alpha1,
//! v1beta1]). What is stored is read from etcd itself, so "stored at
//! v1beta1" is seen, not inferred.
//!
//! The test CRD gives both versions the v1alpha1 schema and no conversion
//! webhook: these tests are about moving objects between versions (the
//! guards, the counts, the prune), which needs only that the apiserver can
//! read the stored objects; the conversion between different schemas is
//! the webhook's, tested with it.
//!
//! The CRD is cluster-wide, so the tests of this file take turns (a lock)
//! and each starts from a freshly created CRD.

mod support;

mod migrate_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kubectl_runner::migrate::{Method, Plan, Prune, crd, rewrite};
use migrate_support::{
    CRD_LOCK, create_old, install_old_crd, restore_current_crd, stored_api_version, stored_versions,
    upgrade_crd,
};
use support::{TestNs, cli, err, ok, out};

#[tokio::test]
async fn migrate_rewrites_runners_stored_at_the_old_version_and_prunes_stored_versions() {
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("migrate").await;
    install_old_crd(&ns.client).await;
    for name in ["a", "b", "c"] {
        create_old(&ns, name, 1).await;
        assert_eq!(stored_api_version(&ns.name, name).await, "lab.cloudlab.training/v1alpha1");
    }
    upgrade_crd(&ns.client).await;
    assert_eq!(stored_versions(&ns.client).await, ["v1alpha1", "v1beta1"]);

    let o = cli(&["migrate", "--no-storage-version-migration"]).await;
    ok(&o, "migrate");
    let text = out(&o);
    for want in [
        "preflight:               3 Runner(s) round-tripped unchanged",
        "rewritten:               3\n",
        "skipped:                 0 (deleted meanwhile)",
        "storedVersions before:   v1alpha1, v1beta1\n",
        "storedVersions after:    v1beta1 (pruned)\n",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
    assert_eq!(stored_versions(&ns.client).await, ["v1beta1"]);
    for name in ["a", "b", "c"] {
        assert_eq!(stored_api_version(&ns.name, name).await, "lab.cloudlab.training/v1beta1", "{name}");
    }

    let again = cli(&["migrate", "-o", "json"]).await;
    ok(&again, "migrate again");
    let summary: serde_json::Value = serde_json::from_str(&out(&again)).expect("JSON summary");
    assert_eq!(summary["prune"]["result"], "nothingToDo", "{summary}");
    assert_eq!(summary["storedVersionsAfter"], serde_json::json!(["v1beta1"]));
    restore_current_crd(&ns.client).await;
}

/// Where the apiserver serves storagemigration.k8s.io (the local control
/// plane does), migrate leaves the rewrite to a StorageVersionMigration; the
/// migrator writes a condition into the CRD while it runs (and 1.37's
/// prunes storedVersions itself), and storedVersions ends pruned.
#[tokio::test]
async fn a_storage_version_migration_rewrites_the_runners_where_the_apiserver_serves_one() {
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("migrate-svm").await;
    install_old_crd(&ns.client).await;
    for name in ["a", "b"] {
        create_old(&ns, name, 1).await;
    }
    upgrade_crd(&ns.client).await;
    let o = cli(&["migrate"]).await;
    ok(&o, "migrate");
    let text = out(&o);
    assert!(text.contains("method:                  StorageVersionMigration runners-"), "{text}");
    assert!(text.contains("storedVersions after:    v1beta1 (pruned"), "{text}");
    assert_eq!(stored_versions(&ns.client).await, ["v1beta1"]);
    for name in ["a", "b"] {
        assert_eq!(stored_api_version(&ns.name, name).await, "lab.cloudlab.training/v1beta1", "{name}");
    }
    restore_current_crd(&ns.client).await;
}

#[tokio::test]
async fn a_stale_copy_is_never_written_a_conflict_is_retried_and_a_deleted_runner_skipped() {
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("migrate-stale").await;
    install_old_crd(&ns.client).await;
    for name in ["changed", "same", "gone"] {
        create_old(&ns, name, 1).await;
    }
    upgrade_crd(&ns.client).await;
    // Copies read before a writer moves on: what a slow migration holds.
    let api: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &crd::resource("v1beta1"));
    let mut stale = BTreeMap::new();
    for name in ["changed", "same", "gone"] {
        let mut o = api.get(name).await.unwrap();
        o.types = Some(kube::api::TypeMeta {
            api_version: "lab.cloudlab.training/v1beta1".into(),
            kind: "Runner".into(),
        });
        stale.insert(name, o);
    }
    let patch = Patch::Merge(serde_json::json!({ "spec": { "replicas": 3 } }));
    api.patch("changed", &PatchParams::default(), &patch).await.expect("the writer's update");
    api.delete("gone", &DeleteParams::default()).await.expect("delete");

    let outcome = |name| rewrite::rewrite_one(&ns.client, stale[name].clone());
    assert_eq!(outcome("changed").await.unwrap(), rewrite::Outcome::Rewritten { retries: 1 });
    assert_eq!(outcome("same").await.unwrap(), rewrite::Outcome::Rewritten { retries: 0 });
    assert_eq!(outcome("gone").await.unwrap(), rewrite::Outcome::Deleted { retries: 0 });
    let changed = api.get("changed").await.unwrap();
    assert_eq!(changed.data["spec"]["replicas"], 3, "the writer's update survived the rewrite");
    for name in ["changed", "same"] {
        assert_eq!(stored_api_version(&ns.name, name).await, "lab.cloudlab.training/v1beta1", "{name}");
    }
    restore_current_crd(&ns.client).await;
}

#[tokio::test]
async fn a_concurrent_writer_loses_no_update_while_migrate_runs() {
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("migrate-writer").await;
    install_old_crd(&ns.client).await;
    let names: Vec<String> = (0..60).map(|i| format!("r{i}")).collect();
    for name in &names {
        create_old(&ns, name, 1).await;
    }
    upgrade_crd(&ns.client).await;
    // The writer still speaks v1alpha1, as an old client would, and records
    // the last value the apiserver acknowledged for each Runner.
    let old: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &crd::resource("v1alpha1"));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn({
        let (old, names, stop) = (old.clone(), names.clone(), stop.clone());
        async move {
            let mut acked: BTreeMap<String, u64> = BTreeMap::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let name = &names[(n as usize) % names.len()];
                n += 1;
                let patch = Patch::Merge(
                    serde_json::json!({ "metadata": { "annotations": { "test/write": n.to_string() } } }),
                );
                if old.patch(name, &PatchParams::default(), &patch).await.is_ok() {
                    acked.insert(name.clone(), n);
                }
            }
            acked
        }
    });
    let o = cli(&["migrate", "--no-storage-version-migration", "--parallel", "2"]).await;
    stop.store(true, Ordering::Relaxed);
    let acked = writer.await.unwrap();
    ok(&o, "migrate");
    assert!(out(&o).contains("rewritten:               60\n"), "{}", out(&o));
    assert!(!acked.is_empty(), "the writer wrote while migrate ran");
    for (name, n) in &acked {
        let r = old.get(name).await.unwrap();
        let seen = r.metadata.annotations.unwrap_or_default().get("test/write").cloned();
        assert_eq!(seen, Some(n.to_string()), "Runner {name}: the last acknowledged write is there");
    }
    assert_eq!(stored_versions(&ns.client).await, ["v1beta1"]);
    restore_current_crd(&ns.client).await;
}

#[tokio::test]
async fn a_crd_changed_during_the_run_is_not_pruned() {
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("migrate-crd").await;
    install_old_crd(&ns.client).await;
    create_old(&ns, "a", 1).await;
    upgrade_crd(&ns.client).await;
    let at_start = crd::read(&ns.client).await.unwrap();
    let plan = Plan::from_crd(&at_start).unwrap();
    let run =
        rewrite::run(&ns.client, &plan.storage, 2, std::future::pending(), &mut |_, _| {}).await.unwrap();
    assert_eq!(run.tally.rewritten, 1);
    // Someone changes the CRD before the prune.
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(ns.client.clone());
    let label = Patch::Merge(serde_json::json!({ "metadata": { "labels": { "test/touched": "yes" } } }));
    crds.patch(kubectl_runner::api::CRD_NAME, &PatchParams::default(), &label).await.unwrap();
    let prune = crd::prune(&ns.client, &at_start, &plan, &Method::Update).await.unwrap();
    assert_eq!(prune, Prune::CrdChanged { at_start: plan.crd_resource_version.clone() });
    assert_eq!(stored_versions(&ns.client).await, ["v1alpha1", "v1beta1"], "not pruned");
    let o = cli(&["migrate", "--no-storage-version-migration"]).await;
    ok(&o, "the rerun");
    assert_eq!(stored_versions(&ns.client).await, ["v1beta1"], "pruned by the rerun");
    restore_current_crd(&ns.client).await;
}

/// A v1alpha1 client that removed `spec.host` removed every host, but the
/// annotation listing the others stays on the stored v1alpha1 object; the
/// conversion drops it on the way to v1beta1, and the preflight says so.
#[tokio::test]
async fn the_preflight_refuses_naming_the_runner_and_the_field_and_writes_nothing() {
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("migrate-refuse").await;
    install_old_crd(&ns.client).await;
    create_old(&ns, "fine", 1).await;
    create_old(&ns, "lossy", 1).await;
    let old: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &crd::resource("v1alpha1"));
    let key = kubectl_runner::api::conversion::EXTRA_HOSTS_ANNOTATION;
    let envelope = serde_json::json!({ "hosts": ["b.example"] }).to_string();
    let patch = Patch::Merge(serde_json::json!({ "metadata": { "annotations": { key: envelope } } }));
    old.patch("lossy", &PatchParams::default(), &patch).await.expect("annotate");
    upgrade_crd(&ns.client).await;

    let o = cli(&["migrate", "--no-storage-version-migration"]).await;
    assert_eq!(o.status.code(), Some(1), "stdout: {}\nstderr: {}", out(&o), err(&o));
    let e = err(&o);
    let runner = format!("Runner {}/lossy would not survive the migration", ns.name);
    for want in [runner.as_str(), "metadata.annotations was", "b.example", "nothing was rewritten"] {
        assert!(e.contains(want), "{want:?} in {e}");
    }
    for name in ["fine", "lossy"] {
        assert_eq!(stored_api_version(&ns.name, name).await, "lab.cloudlab.training/v1alpha1", "{name}");
    }
    assert_eq!(stored_versions(&ns.client).await, ["v1alpha1", "v1beta1"]);
    restore_current_crd(&ns.client).await;
}

#[tokio::test]
async fn a_user_without_the_permissions_is_refused_naming_each_and_nothing_is_rewritten() {
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("migrate-rbac").await;
    install_old_crd(&ns.client).await;
    create_old(&ns, "a", 1).await;
    upgrade_crd(&ns.client).await;
    let o = cli(&["migrate", "--no-storage-version-migration", "--as", "migrate-tester"]).await;
    assert_eq!(o.status.code(), Some(1), "stdout: {}\nstderr: {}", out(&o), err(&o));
    let e = err(&o);
    for want in [
        "kubectl runner migrate needs permission(s) you lack",
        "update customresourcedefinitions/status runners.lab.cloudlab.training (apiextensions.k8s.io)",
        "update runners (lab.cloudlab.training) in all namespaces",
        "nothing was rewritten",
    ] {
        assert!(e.contains(want), "{want:?} in {e}");
    }
    assert_eq!(stored_api_version(&ns.name, "a").await, "lab.cloudlab.training/v1alpha1");
    assert_eq!(stored_versions(&ns.client).await, ["v1alpha1", "v1beta1"]);
    restore_current_crd(&ns.client).await;
}
