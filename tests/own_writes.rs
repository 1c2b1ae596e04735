//! The write path under churn: the manager reads its own writes, wakes a
//! Runner only for what a pass reads, and a child under constant writes by
//! someone else still converges. Each test runs its own manager in its own
//! namespace, with `/metrics` to count its passes and writes.

mod oracle;
mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams, PostParams};
use kubectl_runner::api::{Runner, RunnerSpec};
use kubectl_runner::manager::Config;
use serde_json::json;
use support::{ManagerHandle, TestNs, ensure_crd, free_loopback_addr, http_get, wait_for};

const T: Duration = Duration::from_secs(60);

/// A manager of its own on a new namespace, and Runner `web` of `spec`
/// converged under it.
async fn start(prefix: &str, spec: RunnerSpec) -> (TestNs, ManagerHandle, std::net::SocketAddr) {
    let ns = TestNs::new(prefix).await;
    ensure_crd(&ns.client).await;
    let addr = free_loopback_addr();
    let cfg = Config { metrics_addr: Some(addr), ..Config::namespaced(&ns.name) };
    let mgr = ManagerHandle::start_with(&ns.client, cfg);
    ns.api::<Runner>().create(&PostParams::default(), &Runner::new("web", spec)).await.unwrap();
    oracle::wait_converged(&ns, "web", true, T, "created").await;
    (ns, mgr, addr)
}

/// A counter of the manager's `/metrics`: `runner_reconciles_total`, or a
/// `runner_writes_total` line whose `op` label is given.
async fn counter(addr: std::net::SocketAddr, name: &str, op: Option<&str>) -> u64 {
    let (_, body) = http_get(addr, "/metrics", None).await.expect("/metrics answers");
    body.lines()
        .filter(|l| l.starts_with(name) && op.is_none_or(|op| l.contains(&format!("op=\"{op}\""))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

fn image(i: &str) -> Patch<serde_json::Value> {
    Patch::Merge(json!({ "spec": { "image": i } }))
}

#[tokio::test]
async fn image_edits_a_b_a_in_quick_succession_end_at_a_with_the_last_generations_status() {
    let (ns, mgr, _) = start("ow-aba", RunnerSpec::new("nginx:1.27").replicas(2)).await;
    let api = ns.api::<Runner>();
    for round in 0..3 {
        api.patch("web", &PatchParams::default(), &image("nginx:1.28")).await.unwrap();
        let back = api.patch("web", &PatchParams::default(), &image("nginx:1.27")).await.unwrap();
        // The oracle checks the children against the spec and that the
        // status is Ready for this very generation.
        let r = oracle::wait_converged(&ns, "web", true, T, &format!("round {round}: A -> B -> A")).await;
        assert_eq!(r.metadata.generation, back.metadata.generation, "no later change was made");
        let d = ns.api::<Deployment>().get("web").await.unwrap();
        let c = &d.spec.template.spec.unwrap().containers[0];
        assert_eq!(c.image.as_deref(), Some("nginx:1.27"), "round {round}");
    }
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn passes_woken_by_changes_that_alter_nothing_of_ours_write_nothing() {
    let (ns, mgr, addr) = start("ow-quiet", RunnerSpec::new("nginx:1.27")).await;
    // Let the last rollout events and any coalesced status write pass.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (passes, writes) =
        (counter(addr, "runner_reconciles", None).await, counter(addr, "runner_writes", None).await);
    // Someone labels the Deployment ten times: the cache keeps labels, so
    // each change wakes the Runner, and each pass finds nothing to do.
    let deploys = ns.api::<Deployment>();
    let pp = PatchParams::apply("someone-else");
    for i in 0..10 {
        let label = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "web", "labels": { "beat": i.to_string() } } });
        deploys.patch("web", &pp, &Patch::Apply(label)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let more_passes = wait_for("passes for the label changes", T, || async {
        let n = counter(addr, "runner_reconciles", None).await;
        (n > passes).then_some(n - passes)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(counter(addr, "runner_writes", None).await, writes, "after {more_passes} passes: no write");
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_field_of_ours_is_reverted_while_someone_writes_the_child_without_pause() {
    let (ns, mgr, _) = start("ow-busy", RunnerSpec::new("nginx:1.27").replicas(1)).await;
    let api = ns.api::<Runner>();
    // A writer that changes a label every 50 ms: each change is one the
    // cache keeps, so each is a trigger, never 200 ms apart.
    let deploys = ns.api::<Deployment>();
    let busy = {
        let deploys = deploys.clone();
        tokio::spawn(async move {
            let pp = PatchParams::apply("busy-writer");
            for i in 0u64.. {
                let label = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": { "name": "web", "labels": { "tick": i.to_string() } } });
                let _ = deploys.patch("web", &pp, &Patch::Apply(label)).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    // Meanwhile someone else scales our Deployment: a field we own.
    let scale = json!({ "spec": { "replicas": 3 } });
    deploys.patch("web", &PatchParams::default(), &Patch::Merge(scale)).await.unwrap();
    // Reverted well before the 5-minute resync, despite the busy writer.
    let bound = Duration::from_secs(20);
    wait_for("spec.replicas reverted to 1 under constant writes", bound, || async {
        let d = deploys.get("web").await.ok()?;
        (d.spec.replicas == Some(1)).then_some(())
    })
    .await;
    // And a new spec reaches it too.
    api.patch("web", &PatchParams::default(), &image("nginx:1.28")).await.unwrap();
    wait_for("the new image under constant writes", bound, || async {
        let d = deploys.get("web").await.ok()?;
        let image = d.spec.template.spec?.containers.first()?.image.clone();
        (image.as_deref() == Some("nginx:1.28")).then_some(())
    })
    .await;
    busy.abort();
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_reverted_field_is_announced_naming_the_field_and_the_other_manager_once_per_series() {
    use k8s_openapi::api::events::v1::Event;
    use kube::api::ListParams;
    let (ns, mgr, _) = start("ow-revert", RunnerSpec::new("nginx:1.27").replicas(1)).await;
    let deploys = ns.api::<Deployment>();
    let by_kubectl = PatchParams { field_manager: Some("kubectl".into()), ..Default::default() };
    for n in [3, 2, 3] {
        deploys.patch("web", &by_kubectl, &Patch::Merge(json!({ "spec": { "replicas": n } }))).await.unwrap();
        wait_for("spec.replicas reverted to 1", T, || async {
            (deploys.get("web").await.ok()?.spec.replicas == Some(1)).then_some(())
        })
        .await;
    }
    let want = "Reverted spec.replicas on Deployment web: changed by kubectl";
    let events = wait_for("the Reverted Event with a series of 3", T, || async {
        let list = ns.api::<Event>().list(&ListParams::default()).await.ok()?;
        let reverted: Vec<Event> =
            list.items.into_iter().filter(|e| e.reason.as_deref() == Some("Reverted")).collect();
        let count = |e: &Event| e.series.as_ref().map_or(1, |s| s.count);
        (reverted.iter().map(count).sum::<i32>() >= 3).then_some(reverted)
    })
    .await;
    assert_eq!(events.len(), 1, "one Event, its series counting the reverts: {events:?}");
    assert_eq!(events[0].note.as_deref(), Some(want));
    assert_eq!(events[0].regarding.as_ref().and_then(|r| r.kind.as_deref()), Some("Runner"));
    // Plain diagnose reads the fight from the Event: no watching needed.
    let out = support::cli(&["diagnose", "web", "-n", &ns.name, "-o", "json"]).await;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("diagnose -o json");
    let fight = report["findings"].as_array().into_iter().flatten().find(|f| f["code"] == "write-fight");
    let fight = fight.unwrap_or_else(|| panic!("a write-fight finding: {report}"));
    assert!(fight["message"].as_str().is_some_and(|m| m.contains("changed by kubectl")), "{fight}");
    assert_eq!(out.status.code(), Some(3), "an error");
    mgr.stop_after_cleanup(&ns).await;
}
