//! Two manager replicas with leader election: both Ready, exactly one
//! reconciles, and deleting the leader hands the Lease to the other (which
//! then reconciles): at once when the leader released it on its way out,
//! within the lease duration when it did not.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kubectl_runner::api::{Runner, RunnerSpec};
use kubectl_runner::cli::create;
use kubectl_runner::manifests::{MANAGER_NAME, MANAGER_NAMESPACE};

use crate::fixture::*;
use crate::support::{TestNs, bind_metrics_reader, client, new_service_account_token, wait_for};
use crate::writes::Writes;

/// The manager's lease duration (leader::LeaseConfig).
const LEASE_DURATION: Duration = Duration::from_secs(15);

#[tokio::test]
#[ignore = "needs the real node: tests/run.sh runs it when the cluster has one"]
async fn of_two_replicas_one_reconciles_and_a_deleted_leader_hands_over_within_the_lease_duration() {
    let image = image(IMAGE_ENV);
    let client = client().await;
    let node = real_node(&client).await;
    let ns = TestNs::new("realleader").await;
    let _cleanup = InstalledManager { runners_ns: ns.name.clone() };
    install_manager(&client, &image, &node, &ns).await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let two = serde_json::json!({ "spec": { "replicas": 2 } });
    deployments
        .patch(MANAGER_NAME, &PatchParams::default(), &Patch::Merge(&two))
        .await
        .expect("scale the manager to 2");
    // Both Ready: the standby through its probe too.
    wait_rollout(&client, 2).await;
    let pods = manager_pods(&client).await;
    assert_eq!(pods.len(), 2);
    let leader_name = wait_for("one of them to hold the Lease", Duration::from_secs(30), || {
        let client = client.clone();
        async move { lease_holder(&client).await }
    })
    .await;
    let (leader, standby): (Vec<Pod>, Vec<Pod>) = pods.into_iter().partition(|p| p.name_any() == leader_name);
    let (leader, standby) = (leader.into_iter().next().expect("the holder is a manager Pod"), &standby[0]);

    // Metrics are read as a scraper bound to the metrics-reader role.
    let _binding = bind_metrics_reader(&client, &ns.name, "scraper").await;
    let token = new_service_account_token(&client, &ns.name, "scraper").await;
    let runners: Api<Runner> = ns.api();
    let spec = RunnerSpec::new(WEB_IMAGE).port(WEB_PORT);
    runners
        .create(&Default::default(), &create::from_flags("web", &ns.name, spec).expect("valid"))
        .await
        .expect("create Runner");
    wait_for("the Runner to have 1 ready replica", Duration::from_secs(90), || {
        let runners = runners.clone();
        async move { (runners.get("web").await.ok()?.status?.ready_replicas == 1).then_some(()) }
    })
    .await;
    let by_leader = wait_for("the leader's metrics (metrics-reader bound)", Duration::from_secs(30), || {
        let (leader, token) = (leader.clone(), token.clone());
        async move { reconciles(&leader, &token).await }
    })
    .await;
    assert!(by_leader > 0, "the leader reconciled");
    assert_eq!(reconciles(standby, &token).await.unwrap_or(0), 0, "the standby reconciled nothing");

    // Delete the leader: it stops and releases the Lease, and a standby
    // takes it. That is the standby above or the Pod the ReplicaSet starts
    // in the leader's place, whichever asks first once the Lease is free.
    let pods: Api<Pod> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let deleted_at = Instant::now();
    pods.delete(&leader_name, &DeleteParams::default()).await.expect("delete the leader Pod");
    // Runner writes go through the webhooks all along: the deleted Pod
    // stays an endpoint for a moment, and answers while it does.
    let writes = Writes::start(client.clone(), &ns.name);
    // Released on the leader's SIGTERM, the Lease moves within a retry
    // period (2 s); the bound is what expiry alone would take: the lease
    // duration after a standby saw the last renewal, plus one retry.
    let new_leader = wait_for("another manager Pod to hold the Lease", LEASE_DURATION * 2, || {
        let (client, leader_name) = (client.clone(), leader_name.clone());
        async move { lease_holder(&client).await.filter(|h| *h != leader_name) }
    })
    .await;
    let took = deleted_at.elapsed().as_secs_f64();
    let who = if new_leader == standby.name_any() { "the standby" } else { "the replacement Pod" };
    eprintln!("hand-over: {who} leads {took:.1} s after the leader's deletion");

    // The new leader reconciles: a scale reaches the Deployment.
    let scale = serde_json::json!({ "spec": { "replicas": 2 } });
    runners.patch("web", &PatchParams::default(), &Patch::Merge(&scale)).await.expect("scale the Runner");
    wait_for("the new leader to scale the Runner", Duration::from_secs(90), || {
        let runners = runners.clone();
        async move { (runners.get("web").await.ok()?.status?.ready_replicas == 2).then_some(()) }
    })
    .await;
    let new_pod = wait_for("the new leader's Pod IP", Duration::from_secs(30), || {
        let (pods, new_leader) = (pods.clone(), new_leader.clone());
        async move {
            pods.get(&new_leader).await.ok().filter(|p| p.status.as_ref().is_some_and(|s| s.pod_ip.is_some()))
        }
    })
    .await;
    assert!(reconciles(&new_pod, &token).await.unwrap_or(0) > 0, "the new leader reconciles");
    wait_gone(&pods, &leader_name).await;
    writes.stop_and_check("while the leader Pod was deleted").await;
}
