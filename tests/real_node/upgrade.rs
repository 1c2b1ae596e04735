//! An upgrade of the in-cluster manager to a new image tag finishes: the new
//! Pod is Ready as a standby while the old one holds the Lease, the old one
//! stops and releases it, and the new one reconciles.

use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::Api;
use kubectl_runner::api::{Runner, RunnerSpec};
use kubectl_runner::cli::create;
use kubectl_runner::manifests::MANAGER_NAMESPACE;

use crate::fixture::*;
use crate::support::{TestNs, cli, client, wait_for};
use crate::writes::Writes;

#[tokio::test]
#[ignore = "needs the real node: tests/run.sh runs it when the cluster has one"]
async fn an_upgrade_to_a_second_image_tag_rolls_out_to_completion_and_the_new_pod_reconciles() {
    let (v1, v2) = (image(IMAGE_ENV), image(IMAGE_V2_ENV));
    assert_ne!(v1, v2, "the upgrade needs a second tag");
    let client = client().await;
    let node = real_node(&client).await;
    let ns = TestNs::new("realupgrade").await;
    let _cleanup = InstalledManager { runners_ns: ns.name.clone() };
    let (old_pod, _) = install_manager(&client, &v1, &node, &ns).await;
    let old_name = old_pod.name_any();
    wait_for("the v1 Pod to hold the Lease", Duration::from_secs(60), || {
        let (client, old_name) = (client.clone(), old_name.clone());
        async move { (lease_holder(&client).await? == old_name).then_some(()) }
    })
    .await;

    // `install --wait` returns once the rollout is complete: before a
    // standby was Ready, it waited for ever.
    let upgraded_at = Instant::now();
    let writes = Writes::start(client.clone(), &ns.name);
    let out = cli(&["install", "--with-manager", "--image", &v2, "--wait", "--timeout", "2m"]).await;
    assert!(out.status.success(), "install v2 --wait: {}", String::from_utf8_lossy(&out.stderr));
    eprintln!("upgrade rolled out {:.1} s after install", upgraded_at.elapsed().as_secs_f64());
    wait_rollout(&client, 1).await;

    let pods = manager_pods(&client).await;
    assert_eq!(pods.len(), 1, "one manager Pod after the rollout");
    let new_pod = &pods[0];
    assert_ne!(new_pod.name_any(), old_name, "the old Pod was replaced");
    let running = new_pod.spec.as_ref().map(|s| s.containers[0].image.clone());
    assert_eq!(running, Some(Some(v2.clone())), "the new Pod runs v2");
    let new_name = new_pod.name_any();
    wait_for("the v2 Pod to hold the Lease", Duration::from_secs(30), || {
        let (client, new_name) = (client.clone(), new_name.clone());
        async move { (lease_holder(&client).await? == new_name).then_some(()) }
    })
    .await;
    eprintln!("v2 leads {:.1} s after install", upgraded_at.elapsed().as_secs_f64());
    wait_gone(&Api::namespaced(client.clone(), MANAGER_NAMESPACE), &old_name).await;
    writes.stop_and_check("during the rollout").await;

    let spec = RunnerSpec::new(WEB_IMAGE).port(WEB_PORT);
    let runners: Api<Runner> = ns.api();
    runners
        .create(&Default::default(), &create::from_flags("after-upgrade", &ns.name, spec).expect("valid"))
        .await
        .expect("create Runner");
    wait_for("the new manager to reconcile a Runner", Duration::from_secs(90), || {
        let runners = runners.clone();
        async move { (runners.get("after-upgrade").await.ok()?.status?.ready_replicas == 1).then_some(()) }
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the real node: tests/run.sh runs it when the cluster has one"]
async fn install_wait_names_the_pod_problem_when_the_image_cannot_be_pulled() {
    let client = client().await;
    let node = real_node(&client).await;
    let ns = TestNs::new("realpull").await;
    let _cleanup = InstalledManager { runners_ns: ns.name.clone() };
    install_manager(&client, &image(IMAGE_ENV), &node, &ns).await;

    // No registry answers for this name: the new Pod cannot pull it.
    let missing = "localhost/kubectl-runner:no-such-tag";
    let out = cli(&["install", "--with-manager", "--image", missing, "--wait", "--timeout", "40s"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "install --wait fails: {stderr}");
    assert!(stderr.contains("did not roll out within"), "{stderr}");
    assert!(stderr.contains("ErrImagePull") || stderr.contains("ImagePullBackOff"), "{stderr}");
}
