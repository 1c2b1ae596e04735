//! `kubectl runner diagnose --observe` against the real control plane, with
//! a manager running in-process: a script scaling the Deployment against
//! the manager is a fight naming both field managers and the field; a loop
//! writing a counter annotation is a write storm; a quiet Runner and a
//! rollout report neither.

mod diagnose_util;
mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use kubectl_runner::api::{FIELD_MANAGER, Phase, Runner};
use kubectl_runner::diagnose::writes::tally::{self, LIMITS};
use serde_json::{Value, json};

use diagnose_util::*;
use support::{ManagerHandle, TestNs, ensure_crd, wait_for};

/// Long enough for dozens of writes at the loops' 150 ms.
const WINDOW: &str = "6s";

/// A namespace with the CRD, a ServiceAccount `mgr` holding exactly the
/// generated rules (so the permission checks pass), a manager and a Ready
/// Runner `web` with 2 replicas.
async fn ready_runner(prefix: &str) -> (TestNs, String, ManagerHandle) {
    let ns = TestNs::new(prefix).await;
    ensure_crd(&ns.client).await;
    service_account_with(&ns, "mgr", manager_rules()).await;
    wait_rbac(&ns, "mgr", "list", "services").await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create_runner(&ns, "web", spec("nginx:1.27").replicas(2), false).await;
    let api = ns.api::<Runner>();
    wait_for("Runner web Available", Duration::from_secs(60), || {
        let api = api.clone();
        async move {
            let r = api.get("web").await.ok()?;
            let s = r.status.as_ref()?;
            (s.observed_generation == r.metadata.generation && s.phase == Phase::Available).then_some(())
        }
    })
    .await;
    let sa = format!("{}/mgr", ns.name);
    (ns, sa, mgr)
}

/// Merge-patches Deployment web with `body(i)` as `manager` every 150 ms
/// until aborted.
fn write_loop(
    api: Api<Deployment>,
    manager: &'static str,
    body: fn(u64) -> Value,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let pp = PatchParams { field_manager: Some(manager.into()), ..Default::default() };
        for i in 0.. {
            let _ = api.patch("web", &pp, &Patch::Merge(body(i))).await;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    })
}

fn managers(f: &Value) -> Vec<&str> {
    let mut m: Vec<&str> =
        f["writes"]["managers"].as_array().unwrap().iter().map(|m| m["manager"].as_str().unwrap()).collect();
    m.sort();
    m
}

#[tokio::test]
async fn a_script_scaling_the_deployment_against_the_manager_is_a_fight_naming_both_and_the_field() {
    let (ns, sa, mgr) = ready_runner("obs-fight").await;
    let fighter = write_loop(ns.api(), "kubectl", |_| json!({ "spec": { "replicas": 3 } }));
    let (code, report) =
        diagnose(&["web", "-n", &ns.name, "--service-account", &sa, "--observe", WINDOW]).await;
    fighter.abort();
    let fights = with_code(&report, "write-fight");
    assert_eq!(fights.len(), 1, "{report:#}");
    let f = fights[0];
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!("spec.replicas of Deployment {}/web is set by turns by ", ns.name)),
        "{msg}"
    );
    assert!(
        msg.contains("kubectl and kubectl-runner") || msg.contains("kubectl-runner and kubectl"),
        "{msg}"
    );
    assert_eq!(managers(f), ["kubectl", FIELD_MANAGER], "{f:#}");
    assert_eq!(f["writes"]["fields"], json!([{ "field": "spec.replicas" }]));
    let handovers = f["writes"]["handovers"].as_u64().unwrap();
    assert!(handovers >= LIMITS.min_handovers as u64, "{f:#}");
    let fix = f["fix"].as_str().unwrap();
    assert!(fix.contains(&format!("kubectl scale runner/web --replicas=N -n {}", ns.name)), "{fix}");
    assert!(
        with_code(&report, "write-storm").iter().all(|s| s["writes"]["kind"] != "Deployment"),
        "the fight is not also a storm: {report:#}"
    );
    assert_eq!(code, 3);
    eprintln!("fight over {WINDOW}: {handovers} hand-overs, {} writes a minute", f["writes"]["perMinute"]);
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_loop_writing_a_counter_annotation_is_a_storm_naming_the_writer_and_the_field() {
    let (ns, sa, mgr) = ready_runner("obs-storm").await;
    let ticker = write_loop(
        ns.api(),
        "ticker",
        |i| json!({ "metadata": { "annotations": { "example.org/tick": i.to_string() } } }),
    );
    let (code, report) =
        diagnose(&["web", "-n", &ns.name, "--service-account", &sa, "--observe", WINDOW]).await;
    ticker.abort();
    let storms = with_code(&report, "write-storm");
    assert_eq!(storms.len(), 1, "{report:#}");
    let s = storms[0];
    let msg = s["message"].as_str().unwrap();
    assert!(msg.starts_with(&format!("Deployment {}/web was written ", ns.name)), "{msg}");
    assert!(msg.ends_with("while the Runner's generation stayed 1"), "{msg}");
    let t = text(s);
    assert!(t.contains("by ticker (Update): "), "{t}");
    assert!(t.contains("changed: metadata.annotations[example.org/tick] ("), "{t}");
    let fields: Vec<&Value> = s["writes"]["fields"].as_array().unwrap().iter().map(|f| &f["field"]).collect();
    assert_eq!(fields, ["metadata.annotations[example.org/tick]"], "nothing else changed: {s:#}");
    assert_eq!(managers(s), ["ticker"], "the manager does not react to an annotation it does not own: {s:#}");
    assert!(s["writes"]["perMinute"].as_f64().unwrap() > LIMITS.storm_per_minute, "{s:#}");
    assert!(with_code(&report, "write-fight").is_empty(), "{report:#}");
    assert_eq!(code, 3);
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_quiet_runner_reports_nothing_and_exits_zero() {
    let (ns, sa, mgr) = ready_runner("obs-quiet").await;
    let (code, report) =
        diagnose(&["web", "-n", &ns.name, "--service-account", &sa, "--observe", "3s"]).await;
    assert!(problems(&report).is_empty(), "{report:#}");
    assert_eq!(code, 0);
    mgr.stop_after_cleanup(&ns).await;
}

/// The image changed every 2 s while diagnose watches: each time the
/// manager rewrites the Deployment and the controllers roll it out and
/// write statuses. All of it is seen; none of it is a storm or a fight.
#[tokio::test]
async fn rollouts_seen_during_the_window_are_neither_a_storm_nor_a_fight() {
    use kubectl_runner::diagnose::gather::{Request, gather};
    let (ns, _sa, mgr) = ready_runner("obs-rollout").await;
    let runners = ns.api::<Runner>();
    let editor = tokio::spawn(async move {
        for i in 0.. {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let image = if i % 2 == 0 { "nginx:1.28" } else { "nginx:1.27" };
            let patch = json!({ "spec": { "image": image } });
            let _ = runners.patch("web", &PatchParams::default(), &Patch::Merge(patch)).await;
        }
    });
    let req = Request {
        namespaces: vec![ns.name.clone()],
        name: Some("web".into()),
        service_account: None,
        thresholds: Default::default(),
        churn_window: Duration::ZERO,
        observe: Duration::from_secs(8),
    };
    let snapshot = gather(&ns.client, &req).await;
    editor.abort();
    let observed = snapshot.runners[0].observed.as_ref().expect("watched");
    let deploy =
        observed.objects.iter().find(|o| o.kind == "Deployment").expect("the Deployment was written");
    assert!(deploy.writes.iter().any(|w| w.generation_changed), "a rollout was seen: {observed:#?}");
    let t = tally::tally(observed, &LIMITS);
    assert!(t.storms.is_empty() && t.fights.is_empty(), "{t:#?}");
    eprintln!(
        "rollouts over 8 s: {} writes to {} objects",
        observed.objects.iter().map(|o| o.writes.len()).sum::<usize>(),
        observed.objects.len()
    );
    mgr.stop_after_cleanup(&ns).await;
}
