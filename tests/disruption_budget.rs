//! The PodDisruptionBudget, the fourth child kind, end to end on the real
//! control plane: it exists from 2 replicas and goes at 1, the apiserver's
//! Eviction API honours it (a drain never takes the last ready Pod), a
//! change to it is reverted, and someone else's budget under the Runner's
//! name is refused and left alone.
//!
//! The eviction test cordons the fake nodes, as a drain does: otherwise
//! kwok makes the evicted Pod's replacement Ready within milliseconds, the
//! budget allows a disruption again, and a second eviction rightly
//! succeeds. The tests of this file run one at a time, so no other test's
//! Pods meet the cordon.

mod oracle;
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::ResourceExt;
use kube::api::{EvictParams, ListParams, Patch, PatchParams, PostParams};
use kubectl_runner::api::{Phase, RUNNER_UID_LABEL, Runner, RunnerSpec, condition};
use serde_json::json;
use support::{ManagerHandle, TestNs, ensure_crd, wait_for};

const T: Duration = Duration::from_secs(60);

/// One test of this file at a time (the cordon is cluster-wide).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sets `spec.unschedulable` on every fake node (not the real node, which
/// our Pods never select); returns their names.
async fn cordon(client: &kube::Client, on: bool) -> Vec<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut names = vec![];
    for n in nodes.list(&ListParams::default()).await.unwrap() {
        if n.labels().contains_key("kubectl-runner.test/real-node") {
            continue;
        }
        let patch = Patch::Merge(json!({ "spec": { "unschedulable": on } }));
        nodes.patch(&n.name_any(), &PatchParams::default(), &patch).await.unwrap();
        names.push(n.name_any());
    }
    names
}

async fn start(prefix: &str) -> (TestNs, ManagerHandle) {
    let ns = TestNs::new(prefix).await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    (ns, mgr)
}

fn merge(spec: serde_json::Value) -> Patch<serde_json::Value> {
    Patch::Merge(json!({ "spec": spec }))
}

#[tokio::test]
async fn a_budget_comes_with_two_replicas_honours_evictions_and_goes_at_one() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (ns, mgr) = start("pdb-evict").await;
    let spec = RunnerSpec::new("nginx:1.27").replicas(2);
    let r = ns.api::<Runner>().create(&PostParams::default(), &Runner::new("web", spec)).await.unwrap();
    oracle::wait_converged(&ns, "web", true, T, "2 replicas").await;

    // The disruption controller counts both Pods healthy: one may go.
    let budgets = ns.api::<PodDisruptionBudget>();
    wait_for("the budget to allow one disruption", T, || {
        let budgets = budgets.clone();
        async move {
            let st = budgets.get("web").await.ok()?.status?;
            (st.current_healthy == Some(2) && st.disruptions_allowed == Some(1)).then_some(())
        }
    })
    .await;
    // kube's client retries a 429 (as the Eviction API's refusal is) for
    // minutes by default, honouring Retry-After: ask without retries.
    let mut config = kube::Config::infer().await.unwrap();
    config.default_retry = false;
    let once: Api<Pod> = Api::namespaced(kube::Client::try_from(config).unwrap(), &ns.name);
    let pods = ns.api::<Pod>();
    let lp = ListParams::default().labels(&format!("{RUNNER_UID_LABEL}={}", r.uid().unwrap()));
    let names: Vec<String> = pods.list(&lp).await.unwrap().items.iter().map(|p| p.name_any()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // A drain: the nodes are cordoned, so an evicted Pod's replacement
    // cannot become healthy; the cordon is lifted whatever the outcome.
    assert!(!cordon(&ns.client, true).await.is_empty(), "no fake node to cordon");
    let first = once.evict(&names[0], &EvictParams::default()).await;
    let second = once.evict(&names[1], &EvictParams::default()).await;
    cordon(&ns.client, false).await;
    // The replacement made while cordoned waits in the scheduler's
    // unschedulable queue for minutes; a fresh one is scheduled at once.
    for p in pods.list(&lp).await.unwrap() {
        if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none() {
            pods.delete(&p.name_any(), &Default::default()).await.unwrap();
        }
    }
    first.expect("the first eviction is allowed");
    match second.expect_err("the second eviction is refused") {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 429, "{s:?}");
            assert!(s.message.contains("disruption budget"), "{}", s.message);
        }
        other => panic!("not the apiserver's refusal: {other}"),
    }

    // Scaled to one, the budget goes (it would block every drain).
    ns.api::<Runner>().patch("web", &PatchParams::default(), &merge(json!({ "replicas": 1 }))).await.unwrap();
    oracle::wait_converged(&ns, "web", true, T, "1 replica").await;
    ns.api::<Runner>().patch("web", &PatchParams::default(), &merge(json!({ "replicas": 3 }))).await.unwrap();
    oracle::wait_converged(&ns, "web", true, T, "3 replicas").await;
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_changed_budget_is_reverted_and_a_foreign_one_is_refused_and_kept() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (ns, mgr) = start("pdb-own").await;
    let spec = RunnerSpec::new("nginx:1.27").replicas(2);
    ns.api::<Runner>().create(&PostParams::default(), &Runner::new("web", spec.clone())).await.unwrap();
    oracle::wait_converged(&ns, "web", true, T, "created").await;
    let budgets = ns.api::<PodDisruptionBudget>();
    let edit = PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    budgets.patch("web", &edit, &Patch::Merge(json!({ "spec": { "minAvailable": 2 } }))).await.unwrap();
    oracle::wait_converged(&ns, "web", true, T, "after minAvailable 1 -> 2 by someone else").await;

    // Someone else's budget under the name of a new Runner.
    let theirs: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": { "name": "api" },
        "spec": { "maxUnavailable": 1, "selector": { "matchLabels": { "app": "api" } } } }))
    .unwrap();
    let theirs = budgets.create(&PostParams::default(), &theirs).await.unwrap();
    ns.api::<Runner>().create(&PostParams::default(), &Runner::new("api", spec)).await.unwrap();
    let runners = ns.api::<Runner>();
    let refused = wait_for("AdoptionRefused on Runner api", T, || {
        let runners = runners.clone();
        async move {
            let r = runners.get("api").await.ok()?;
            let st = r.status.clone()?;
            let owned = st.conditions.iter().find(|c| c.type_ == condition::CHILDREN_OWNED)?;
            (owned.reason == condition::REASON_ADOPTION_REFUSED && st.phase == Phase::Failed)
                .then_some(owned.clone())
        }
    })
    .await;
    assert!(refused.message.contains("PodDisruptionBudget"), "{}", refused.message);
    let after = budgets.get("api").await.unwrap();
    assert_eq!(after.uid(), theirs.uid(), "not replaced");
    assert!(after.owner_references().is_empty(), "not adopted");
    assert_eq!(after.spec, theirs.spec, "not changed");
    // Deleting the Runner leaves their budget alone.
    runners.delete("api", &Default::default()).await.unwrap();
    wait_for("Runner api gone", T, || {
        let runners = runners.clone();
        async move { runners.get_opt("api").await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert_eq!(budgets.get("api").await.unwrap().uid(), theirs.uid(), "their budget survives");
    mgr.stop_after_cleanup(&ns).await;
}
