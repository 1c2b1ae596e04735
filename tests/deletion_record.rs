//! A deleted Runner leaves a record (ConfigMap `runner-deletions` in its
//! namespace) that `kubectl runner history` lists; concurrent writers lose
//! no entry; the manager's ServiceAccount may read and write that one
//! ConfigMap and no other; and a manager without those rules deletes
//! Runners all the same, saying why there is no record.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kubectl_runner::api::{FINALIZER, Runner, RunnerSpec};
use kubectl_runner::deletion_record::{CONFIGMAP, Entry, MAX_ENTRIES, Plan, entries, plan};
use kubectl_runner::manager::deletion_record_write::{BUDGET, record};
use serde_json::{Value, json};
use support::{
    ManagerHandle, TestNs, apply_generated_rbac, as_manager_service_account, cli, ensure_crd, wait_for,
};

const T: Duration = Duration::from_secs(60);

async fn create(ns: &TestNs, name: &str, spec: RunnerSpec) -> String {
    let r = ns.api::<Runner>().create(&PostParams::default(), &Runner::new(name, spec)).await.unwrap();
    r.uid().unwrap()
}

/// Waits until the manager holds `name` with its finalizer, so its deletion
/// goes through the manager's cleanup.
async fn wait_finalizer(ns: &TestNs, name: &str) {
    let api = ns.api::<Runner>();
    wait_for(&format!("the finalizer on {name}"), T, || {
        let api = api.clone();
        async move { api.get(name).await.ok()?.finalizers().iter().any(|f| f == FINALIZER).then_some(()) }
    })
    .await;
}

async fn wait_gone(ns: &TestNs) {
    let api = ns.api::<Runner>();
    wait_for("the Runners to be gone", T, || {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.ok()?.items.is_empty().then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn two_runners_deleted_at_once_are_listed_by_history_with_their_last_spec() {
    let ns = TestNs::new("history").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    let web = create(&ns, "web", RunnerSpec::new("nginx:1.27")).await;
    let api = create(&ns, "api", RunnerSpec::new("nginx:1.26").port(8080).host("api.example.test")).await;
    wait_finalizer(&ns, "web").await;
    wait_finalizer(&ns, "api").await;
    // The last spec is the one recorded, not the first.
    let runners = ns.api::<Runner>();
    let change = json!({ "spec": { "image": "nginx:1.28", "replicas": 3 } });
    runners.patch("web", &PatchParams::default(), &Patch::Merge(&change)).await.unwrap();

    // At once, one of them orphaning its children.
    let (background, orphan) = (DeleteParams::background(), DeleteParams::orphan());
    let (a, b) = tokio::join!(runners.delete("web", &background), runners.delete("api", &orphan));
    a.unwrap();
    b.unwrap();
    wait_gone(&ns).await;

    let out = cli(&["history", "-n", &ns.name, "-o", "json"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{listed}");
    let by_name = |n: &str| items.iter().find(|i| i["name"] == n).unwrap_or_else(|| panic!("{n}: {listed}"));
    let w = by_name("web");
    assert_eq!((w["uid"].as_str(), w["image"].as_str()), (Some(web.as_str()), Some("nginx:1.28")));
    assert_eq!(
        (w["replicas"].as_i64(), w["port"].as_i64(), w["orphaned"].as_bool()),
        (Some(3), Some(80), Some(false))
    );
    assert_eq!(w["namespace"], ns.name.as_str());
    let a = by_name("api");
    assert_eq!((a["uid"].as_str(), a["host"].as_str()), (Some(api.as_str()), Some("api.example.test")));
    assert_eq!((a["port"].as_i64(), a["orphaned"].as_bool()), (Some(8080), Some(true)));
    assert!(ns.api::<Deployment>().get_opt("api").await.unwrap().is_some(), "orphaned, not deleted");

    // The table, and NAME as a filter.
    let out = cli(&["history", "-n", &ns.name, "web"]).await;
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(lines[0].starts_with("NAME ") && lines[0].contains("CHILDREN"), "{table}");
    assert!(
        lines[1].starts_with("web ") && lines[1].contains("nginx:1.28") && lines[1].contains(&web),
        "{table}"
    );
    let out = cli(&["history", "-n", &ns.name, "-o", "yaml"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("image: nginx:1.26"));
    mgr.stop_after_cleanup(&ns).await;
}

fn entry(i: i64) -> Entry {
    Entry {
        name: format!("r{i}"),
        uid: format!("uid-{i}"),
        deleted_at: Time(k8s_openapi::jiff::Timestamp::from_second(1_767_600_000 + i).unwrap()),
        image: "nginx:1.27".into(),
        replicas: 1,
        port: 80,
        host: None,
        hosts: Vec::new(),
        orphaned: false,
    }
}

/// A writer's deadline, as the manager gives each.
fn deadline() -> tokio::time::Instant {
    tokio::time::Instant::now() + BUDGET
}

/// The garbage collector detaches the children and lifts its `orphan`
/// finalizer before the manager's pass (here: the manager is down). The
/// Runner then no longer says it was orphaned; its children do, and the
/// manager neither deletes them nor records a plain deletion.
#[tokio::test]
async fn an_orphaning_deletion_seen_after_the_collector_finished_keeps_the_children_and_says_orphaned() {
    let ns = TestNs::new("orphan-late").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create(&ns, "web", RunnerSpec::new("nginx:1.27")).await;
    wait_finalizer(&ns, "web").await;
    let deps = ns.api::<Deployment>();
    wait_for("the Deployment", T, || {
        let deps = deps.clone();
        async move { deps.get_opt("web").await.ok().flatten().map(|_| ()) }
    })
    .await;
    mgr.stop().await;
    ns.api::<Runner>().delete("web", &DeleteParams::orphan()).await.unwrap();
    let runners = ns.api::<Runner>();
    wait_for("the collector to detach the children and lift its finalizer", T, || {
        let (runners, deps) = (runners.clone(), deps.clone());
        async move {
            let r = runners.get("web").await.ok()?;
            let d = deps.get("web").await.ok()?;
            (r.finalizers() == [FINALIZER] && d.owner_references().is_empty()).then_some(())
        }
    })
    .await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    wait_gone(&ns).await;
    assert!(deps.get_opt("web").await.unwrap().is_some(), "orphaned, not deleted");
    let out = cli(&["history", "-n", &ns.name, "-o", "json"]).await;
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["items"][0]["orphaned"], true, "{listed}");
    mgr.stop().await;
}

#[tokio::test]
async fn eight_records_written_at_once_lose_none_and_the_oldest_beyond_fifty_go() {
    let ns = TestNs::new("record-race").await;
    let api = ns.api::<ConfigMap>();
    // 46 entries already: the 8 new ones push out the 4 oldest.
    let Plan::Create(mut cm) = plan(None, &ns.name, &[entry(0)]) else { panic!("want a create") };
    cm.data = Some((0..46).map(entry).map(|e| (e.key(), e.value())).collect());
    api.create(&PostParams::default(), &*cm).await.unwrap();
    let new: Vec<Entry> = (100..108).map(entry).collect();
    let writes = new.iter().map(|e| record(&api, &ns.name, std::slice::from_ref(e), deadline()));
    let results = futures::future::join_all(writes).await;
    let attempts: Vec<u32> = results.into_iter().map(|r| r.expect("recorded").attempts).collect();
    eprintln!("attempts per writer (conflicts re-read): {attempts:?}");
    let (kept, bad) = entries(&api.get(CONFIGMAP).await.unwrap());
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(kept.len(), MAX_ENTRIES);
    let want: Vec<Entry> = (4..46).chain(100..108).map(entry).collect();
    assert_eq!(kept, want, "the newest 50, oldest first");
}

#[tokio::test]
async fn the_managers_service_account_reads_and_writes_its_record_and_no_other_configmap() {
    let ns = TestNs::new("record-rbac").await;
    apply_generated_rbac(&ns.client).await;
    let other: ConfigMap = serde_json::from_value(json!({ "metadata": { "name": "app-config" },
        "data": { "password": "hunter2" } }))
    .unwrap();
    ns.api::<ConfigMap>().create(&PostParams::default(), &other).await.unwrap();
    let sa = as_manager_service_account().await;
    let as_sa: Api<ConfigMap> = Api::namespaced(sa, &ns.name);

    // Its own record: create, get and patch (RBAC may take a moment to settle).
    let Plan::Create(cm) = plan(None, &ns.name, &[entry(0)]) else { panic!("want a create") };
    wait_for("the manager to be allowed to create its record", T, || {
        let (as_sa, cm) = (as_sa.clone(), cm.clone());
        async move { as_sa.create(&PostParams::default(), &*cm).await.ok() }
    })
    .await;
    let got = as_sa.get(CONFIGMAP).await.expect("get its record");
    let Plan::Patch(p) = plan(Some(&got), &ns.name, &[entry(1)]) else { panic!("want a patch") };
    as_sa.patch(CONFIGMAP, &PatchParams::default(), &Patch::Merge(&p)).await.expect("patch its record");

    // Nothing else.
    let forbidden = |r: kube::Result<ConfigMap>| match r {
        Err(kube::Error::Api(s)) => s.code == 403,
        _ => false,
    };
    assert!(forbidden(as_sa.get("app-config").await), "get another ConfigMap");
    assert!(forbidden(as_sa.patch("app-config", &PatchParams::default(), &Patch::Merge(json!({}))).await));
    let listed = as_sa.list(&ListParams::default()).await;
    assert!(matches!(listed, Err(kube::Error::Api(s)) if s.code == 403), "list ConfigMaps");
    let deleted = as_sa.delete(CONFIGMAP, &DeleteParams::default()).await;
    assert!(matches!(deleted, Err(kube::Error::Api(s)) if s.code == 403), "delete its record");
}

/// ServiceAccount `norecord` in `ns`, bound there to the manager's rules
/// without the ConfigMap ones; a client acting as it.
async fn without_configmap_rules(ns: &TestNs) -> Client {
    let mut rules = kubectl_runner::rbac::policy_rules(kubectl_runner::rbac::Scope::Watched);
    rules.retain(|r| r.resources.as_deref() != Some(&["configmaps".to_string()][..]));
    let pp = PostParams::default();
    let sa: ServiceAccount = serde_json::from_value(json!({ "metadata": { "name": "norecord" } })).unwrap();
    ns.api::<ServiceAccount>().create(&pp, &sa).await.unwrap();
    let role: Role =
        serde_json::from_value(json!({ "metadata": { "name": "norecord" }, "rules": rules })).unwrap();
    ns.api::<Role>().create(&pp, &role).await.unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({ "metadata": { "name": "norecord" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "norecord" },
        "subjects": [{ "kind": "ServiceAccount", "name": "norecord", "namespace": ns.name }] }))
    .unwrap();
    ns.api::<RoleBinding>().create(&pp, &binding).await.unwrap();
    let mut cfg = kube::Config::infer().await.unwrap();
    cfg.auth_info.impersonate = Some(format!("system:serviceaccount:{}:norecord", ns.name));
    cfg.auth_info.impersonate_groups =
        Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{}", ns.name)]);
    Client::try_from(cfg).unwrap()
}

#[tokio::test]
async fn a_manager_without_the_configmap_rules_still_deletes_and_warns_that_nothing_was_recorded() {
    let ns = TestNs::new("record-denied").await;
    ensure_crd(&ns.client).await;
    let client = without_configmap_rules(&ns).await;
    wait_for("the Role to settle", T, || {
        let client = client.clone();
        let ns = ns.name.clone();
        async move { Api::<Runner>::namespaced(client, &ns).list(&ListParams::default()).await.ok() }
    })
    .await;
    let mut cfg = kubectl_runner::manager::Config::namespaced(&ns.name);
    cfg.preflight = false; // it would refuse to start without the ConfigMap rules
    cfg.lease_namespace = ns.name.clone();
    let mgr = ManagerHandle::start_with(&client, cfg);
    create(&ns, "web", RunnerSpec::new("nginx:1.27")).await;
    wait_finalizer(&ns, "web").await;
    let started = Instant::now();
    ns.api::<Runner>().delete("web", &DeleteParams::default()).await.unwrap();
    wait_gone(&ns).await;
    eprintln!("deleted without a record in {:?}", started.elapsed());

    let events = ns.api::<Event>().list(&ListParams::default()).await.unwrap().items;
    let warning = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("DeletionNotRecorded"))
        .unwrap_or_else(|| panic!("a DeletionNotRecorded Event: {events:#?}"));
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    let note = warning.note.clone().unwrap_or_default();
    assert!(note.contains("forbidden") && note.contains(CONFIGMAP), "{note}");
    assert!(events.iter().any(|e| e.reason.as_deref() == Some("Deleted")), "the deletion went on");
    assert!(ns.api::<ConfigMap>().get_opt(CONFIGMAP).await.unwrap().is_none());
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn history_escapes_what_someone_wrote_into_the_record_and_names_a_bad_key() {
    let ns = TestNs::new("record-escape").await;
    let mut evil = entry(0);
    evil.name = "web\u{1b}]0;owned\u{7}".into();
    evil.image = "nginx\u{1b}[2J\u{202e}".into();
    let Plan::Create(mut cm) = plan(None, &ns.name, &[entry(0)]) else { panic!("want a create") };
    // Keys are validated by the apiserver; values are anyone's text.
    cm.data = Some([(entry(0).key(), evil.value())].into());
    cm.data.as_mut().unwrap().insert("20260105T080001Z.x.y".into(), "\u{1b}[31mnot json".into());
    ns.api::<ConfigMap>().create(&PostParams::default(), &*cm).await.unwrap();

    let out = cli(&["history", "-n", &ns.name]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    for text in [&stdout, &stderr] {
        assert!(!text.contains(['\u{1b}', '\u{7}', '\u{202e}']), "raw control characters: {text:?}");
    }
    assert!(
        stdout.contains("web\\x1b]0;owned\\x07") && stdout.contains("nginx\\x1b[2J\\u{202e}"),
        "{stdout}"
    );
    assert!(stderr.contains("warning: ConfigMap") && stderr.contains("20260105T080001Z.x.y"), "{stderr}");
    // -o json is the exact data.
    let out = cli(&["history", "-n", &ns.name, "-o", "json"]).await;
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["items"][0]["image"], evil.image.as_str());
}
