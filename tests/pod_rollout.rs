//! A stuck Pod follows the rollout, against the real control plane: it
//! fails its Runner while its ReplicaSet is the Deployment's current one,
//! and no longer once the user's fix rolls out a new ReplicaSet, even while
//! the old Pod is still there.

mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kubectl_runner::api::{Phase, RUNNER_UID_LABEL, Runner, RunnerSpec, RunnerStatus};
use serde_json::json;
use support::{ManagerHandle, TestNs, ensure_crd, wait_for};

const T: Duration = Duration::from_secs(60);

/// Waits until the Runner's status, written for its latest generation,
/// satisfies `ok`.
async fn wait_status(api: &Api<Runner>, what: &str, ok: impl Fn(&RunnerStatus) -> bool) -> RunnerStatus {
    wait_for(what, T, || {
        let api = api.clone();
        let ok = &ok;
        async move {
            let r = api.get("web").await.ok()?;
            let s = r.status?;
            (s.observed_generation == r.metadata.generation && ok(&s)).then_some(s)
        }
    })
    .await
}

/// What a kubelet reports for a container that cannot start; the Pod is
/// no longer Ready. kwok leaves a running Pod's patched status alone.
async fn make_stuck(pods: &Api<Pod>, name: &str, reason: &str) {
    let stuck = json!({ "status": {
        "conditions": [{ "type": "Ready", "status": "False" }, { "type": "ContainersReady", "status": "False" }],
        "containerStatuses": [{ "name": "runner", "image": "x", "imageID": "", "ready": false,
            "restartCount": 0, "state": { "waiting": { "reason": reason, "message": "stuck on purpose" } } }],
    } });
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&stuck))
        .await
        .expect("patch Pod status");
}

fn waiting_reason(p: &Pod) -> Option<String> {
    let cs = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
    cs.state.as_ref()?.waiting.as_ref()?.reason.clone()
}

fn message(s: &RunnerStatus) -> &str {
    s.message.as_deref().unwrap_or_default()
}

#[tokio::test]
async fn a_stuck_pod_of_the_replaced_replica_set_does_not_fail_the_runner_but_one_of_the_new_does() {
    let ns = TestNs::new("pod-rollout").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    let api = ns.api::<Runner>();
    let r = api
        .create(&PostParams::default(), &Runner::new("web", RunnerSpec::new("nginx:1.27").replicas(1)))
        .await
        .expect("create Runner");
    wait_status(&api, "the Runner Available", |s| s.phase == Phase::Available && s.ready_replicas == 1).await;
    let pods = ns.api::<Pod>();
    let of_runner = ListParams::default().labels(&format!("{RUNNER_UID_LABEL}={}", r.uid().unwrap()));
    let old = pods.list(&of_runner).await.unwrap().items.remove(0).name_any();

    // A new Pod that is Ready does not count as available for five minutes (the
    // progress deadline is ten), so
    // the rollout keeps the old ReplicaSet's Pod (one replica: no Pod may
    // be unavailable). Not a field of the Runner's: the manager keeps it.
    let deployments = ns.api::<Deployment>();
    let min_ready = |s: Option<i32>| json!({ "spec": { "minReadySeconds": s } });
    deployments.patch("web", &PatchParams::default(), &Patch::Merge(&min_ready(Some(300)))).await.unwrap();

    // A stuck Pod of the current ReplicaSet fails the Runner.
    make_stuck(&pods, &old, "ImagePullBackOff").await;
    let s = wait_status(&api, "the Runner Failed with the Pod's reason", |s| {
        message(s).starts_with("ImagePullBackOff")
    })
    .await;
    assert_eq!(s.phase, Phase::Failed);

    // The user's fix rolls out a new ReplicaSet whose Pod becomes Ready
    // while the old stuck Pod stays: the Runner is rolling out, not Failed.
    let image = json!({ "spec": { "image": "nginx:1.28" } });
    api.patch("web", &PatchParams::default(), &Patch::Merge(&image)).await.unwrap();
    let s = wait_status(&api, "the Runner rolling out with the new Pod Ready beside the old one", |s| {
        s.replicas == 2 && s.updated_replicas == 1 && s.ready_replicas == 1
    })
    .await;
    assert_eq!(s.phase, Phase::Progressing, "{:?}", s.message);
    assert!(!message(&s).contains("ImagePullBackOff"), "{:?}", s.message);
    let still = pods.get(&old).await.expect("the old Pod is still there");
    assert!(still.metadata.deletion_timestamp.is_none(), "the old Pod is not being deleted");
    assert_eq!(waiting_reason(&still).as_deref(), Some("ImagePullBackOff"), "the old Pod is still stuck");

    // A stuck Pod of the new ReplicaSet fails the Runner again, with its own reason.
    let new = pods.list(&of_runner).await.unwrap().items.into_iter().find(|p| p.name_any() != old);
    let new = new.expect("the new ReplicaSet's Pod").name_any();
    make_stuck(&pods, &new, "CrashLoopBackOff").await;
    let s = wait_status(&api, "the Runner Failed with the new Pod's reason", |s| {
        message(s).starts_with("CrashLoopBackOff")
    })
    .await;
    assert_eq!(s.phase, Phase::Failed);

    // Its replacement is healthy and counts at once: the rollout completes.
    deployments.patch("web", &PatchParams::default(), &Patch::Merge(&min_ready(None))).await.unwrap();
    pods.delete(&new, &DeleteParams::default()).await.unwrap();
    wait_status(&api, "the Runner Available on the new image", |s| {
        s.phase == Phase::Available && s.ready_replicas == 1 && s.replicas == 1
    })
    .await;
    mgr.stop_after_cleanup(&ns).await;
}
