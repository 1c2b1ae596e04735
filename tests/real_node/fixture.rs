//! What every real-node test needs: the node, the manager installed from
//! the image under test, and a cleanup that runs also when a test panics.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use kubectl_runner::api::Runner;
use kubectl_runner::manifests::{MANAGER_NAME, MANAGER_NAMESPACE};

use crate::support::{TestNs, apply_generated_rbac, cli, client, http_get, wait_for};

/// Label and NoSchedule taint key of the real node (tests/cluster/lib.sh).
pub const REAL_NODE_LABEL: &str = "kubectl-runner.test/real-node";
/// The busybox httpd image real-node.sh builds; it serves on 8080.
pub const WEB_IMAGE: &str = "localhost/kubectl-runner/busybox-httpd:2";
pub const WEB_PORT: i32 = 8080;
/// Set by tests/run.sh to the image scripts/image.sh built and loaded.
pub const IMAGE_ENV: &str = "RUNNER_TEST_MANAGER_IMAGE";
/// The same image under a second tag (tests/run.sh), for an upgrade.
pub const IMAGE_V2_ENV: &str = "RUNNER_TEST_MANAGER_IMAGE_V2";
/// The web image under a second tag (tests/run.sh), for e2e's image update.
pub const WEB_IMAGE_V2: &str = "localhost/kubectl-runner/busybox-httpd:2-update";
/// The manager's metrics port in the cluster.
pub const METRICS_PORT: u16 = kubectl_runner::manifests::METRICS_PORT as u16;

/// The image named by `env`; a missing one fails the test.
pub fn image(env: &str) -> String {
    std::env::var(env)
        .unwrap_or_else(|_| panic!("{env} is not set: build and load the image as tests/run.sh does"))
}
pub const FIELD_MANAGER: &str = "kubectl-runner-tests";

/// Pods in a namespace with these annotations get the real node's selector
/// and toleration from the apiserver (PodNodeSelector and
/// PodTolerationRestriction, on when the cluster has the real node), so no
/// manifest needs to know about the test cluster.
pub async fn send_pods_to_the_real_node(client: &Client, ns: &str) {
    let annotations: serde_json::Map<String, serde_json::Value> =
        real_node_annotations().into_iter().map(|(k, v)| (k, v.into())).collect();
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": ns, "annotations": annotations },
    });
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .patch(ns, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
        .await
        .unwrap_or_else(|e| panic!("annotate namespace {ns} for the real node: {e}"));
    // The label marks it as the test run's (tests/support/guard.rs), under a
    // field manager of its own: an apply of the generated RBAC by
    // FIELD_MANAGER (which lists the namespace without it) would remove it.
    let label = serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": { "name": ns, "labels": { crate::support::TEST_LABEL: "true" } },
    });
    namespaces
        .patch(ns, &PatchParams::apply("kubectl-runner-tests-guard").force(), &Patch::Apply(&label))
        .await
        .unwrap_or_else(|e| panic!("label namespace {ns} as the tests': {e}"));
}

/// The namespace annotations that send Pods to the real node.
pub fn real_node_annotations() -> [(String, String); 2] {
    [
        ("scheduler.alpha.kubernetes.io/node-selector".into(), format!("{REAL_NODE_LABEL}=true")),
        (
            "scheduler.alpha.kubernetes.io/defaultTolerations".into(),
            format!(r#"[{{"key":"{REAL_NODE_LABEL}","operator":"Exists","effect":"NoSchedule"}}]"#),
        ),
    ]
}

/// The real node, Ready; panics (the test fails) when the cluster has none.
pub async fn real_node(client: &Client) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels(&format!("{REAL_NODE_LABEL}=true")))
        .await
        .expect("list nodes");
    let node = list.items.into_iter().next().unwrap_or_else(|| {
        panic!(
            "the cluster has no node labelled {REAL_NODE_LABEL}=true: start it with \
             RUNNER_CLUSTER_REAL_NODE=1 bash tests/cluster/up.sh"
        )
    });
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    assert!(ready, "the real node {} is not Ready", node.name_any());
    node.name_any()
}

/// The node's view of a Pod's memory (kubelet summary API, through the
/// apiserver's node proxy): working set and RSS in bytes.
pub async fn pod_memory(client: &Client, node: &str, ns: &str, pod: &str) -> Option<(u64, u64)> {
    let req =
        http::Request::get(format!("/api/v1/nodes/{node}/proxy/stats/summary")).body(Vec::new()).ok()?;
    let summary: serde_json::Value = client.request(req).await.ok()?;
    let p = summary["pods"]
        .as_array()?
        .iter()
        .find(|p| p["podRef"]["namespace"] == ns && p["podRef"]["name"] == pod)?;
    Some((p["memory"]["workingSetBytes"].as_u64()?, p["memory"]["rssBytes"].as_u64()?))
}

/// Removes what the test installed in the cluster, also when it panics: the
/// RBAC put back as install writes it (a test may have cut it), the test
/// namespace's Runners while the manager still runs (their finalizer), then
/// the manager's namespace. The CRD and RBAC stay.
pub struct InstalledManager {
    pub runners_ns: String,
}

impl Drop for InstalledManager {
    fn drop(&mut self) {
        let ns = self.runners_ns.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let client = client().await;
                // The RBAC alone: `install` without the manager refuses a CRD
                // that converts through the manager's webhook.
                apply_generated_rbac(&client).await;
                delete_runners_and_wait(&client, &ns).await;
                let _ = Api::<Namespace>::all(client)
                    .delete(MANAGER_NAMESPACE, &DeleteParams::background())
                    .await;
            });
        })
        .join();
    }
}

/// Installs CRD, RBAC and the manager Deployment with `image`, its Pods (and
/// those of `ns`) sent to the real node; waits until the Deployment has a
/// Ready replica, i.e. its readiness probe passed. The manager Pod and the
/// time from install to Ready.
pub async fn install_manager(client: &Client, image: &str, node: &str, ns: &TestNs) -> (Pod, Duration) {
    // A cluster-wide manager reconciles every namespace's Runners.
    crate::support::guard::refuse_foreign(client, "install the cluster-wide manager").await;
    // The manager's namespace exists before install, annotated, so that the
    // Deployment's first Pod already goes to the real node.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if let Some(old) = namespaces.get_opt(MANAGER_NAMESPACE).await.expect("get namespace")
        && old.metadata.deletion_timestamp.is_some()
    {
        wait_for("the previous manager namespace to be gone", Duration::from_secs(120), || {
            let namespaces = namespaces.clone();
            async move { namespaces.get_opt(MANAGER_NAMESPACE).await.ok()?.is_none().then_some(()) }
        })
        .await;
    }
    send_pods_to_the_real_node(client, MANAGER_NAMESPACE).await;
    send_pods_to_the_real_node(client, &ns.name).await;

    let installed_at = Instant::now();
    let out = cli(&["install", "--with-manager", "--image", image, "--wait", "--timeout", "2m"]).await;
    assert!(
        out.status.success(),
        "install failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Ready through its own probes: /readyz answers once the caches are
    // synced (or, while another replica leads, as a standby).
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    wait_for("the manager Deployment to have a Ready replica", Duration::from_secs(120), || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get(MANAGER_NAME).await.ok()?;
            (d.status?.ready_replicas? >= 1).then_some(())
        }
    })
    .await;
    let to_ready = installed_at.elapsed();
    let pods: Api<Pod> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let manager_pod = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=runner-controller-manager"))
        .await
        .expect("list manager pods")
        .items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .expect("a manager Pod");
    let spec = manager_pod.spec.as_ref().expect("pod spec");
    assert_eq!(spec.node_name.as_deref(), Some(node), "the manager runs on the real node");
    (manager_pod, to_ready)
}

/// The manager Pods that are not being deleted.
pub async fn manager_pods(client: &Client) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    pods.list(&ListParams::default().labels("app.kubernetes.io/name=runner-controller-manager"))
        .await
        .expect("list manager pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Who holds the leader Lease now.
pub async fn lease_holder(client: &Client) -> Option<String> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    leases.get_opt(kubectl_runner::manifests::LEADER_LEASE).await.ok()??.spec?.holder_identity
}

/// Waits until the manager Deployment's rollout is complete with `replicas`
/// Pods (as `kubectl rollout status` judges it); how long it took.
pub async fn wait_rollout(client: &Client, replicas: i32) -> Duration {
    let started = Instant::now();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    wait_for("the manager Deployment's rollout to complete", Duration::from_secs(120), || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get(MANAGER_NAME).await.ok()?;
            let generation = d.metadata.generation?;
            let s = d.status?;
            let done = s.observed_generation? >= generation
                && s.updated_replicas == Some(replicas)
                && s.replicas == Some(replicas)
                && s.available_replicas == Some(replicas);
            done.then_some(())
        }
    })
    .await;
    started.elapsed()
}

/// The manager Pod's `runner_reconciles_total`, read from its /metrics
/// with `token`.
pub async fn reconciles(pod: &Pod, token: &str) -> Option<u64> {
    let ip: std::net::IpAddr = pod.status.as_ref()?.pod_ip.as_ref()?.parse().ok()?;
    let (code, body) = http_get((ip, METRICS_PORT).into(), "/metrics", Some(token)).await?;
    assert_eq!(code, 200, "scrape of {}: {body}", pod.name_any());
    body.lines().find_map(|l| l.strip_prefix("runner_reconciles_total ")?.trim().parse().ok())
}

/// Deletes every Runner in `ns` and waits (up to 60 s, without failing)
/// until the manager has removed their finalizer.
pub async fn delete_runners_and_wait(client: &Client, ns: &str) {
    let runners: Api<Runner> = Api::namespaced(client.clone(), ns);
    let _ = runners.delete_collection(&DeleteParams::default(), &Default::default()).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        match runners.list(&Default::default()).await {
            Ok(l) if l.items.is_empty() => break,
            _ => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Until the Pod no longer exists: its containers have exited.
pub async fn wait_gone(pods: &Api<Pod>, name: &str) {
    wait_for(&format!("Pod {name} to be gone"), Duration::from_secs(60), || {
        let pods = pods.clone();
        async move { matches!(pods.get_opt(name).await, Ok(None)).then_some(()) }
    })
    .await;
}
