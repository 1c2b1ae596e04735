//! Smoke tests: prove the local control plane (`tests/cluster/up.sh`) is a
//! real cluster before anything else is tested on it. Each test would fail
//! if the piece it names were missing: the scheduler and kwok (Pods never
//! become Ready), the garbage collector (the ReplicaSet stays), RBAC (every
//! request is allowed).

mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use support::{TestNs, wait_for};

const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// A Deployment of `replicas` Pods labelled `app=<name>`. The image is never
/// pulled: kwok only pretends to run containers.
fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "main", "image": "example.invalid/smoke:1" }] }
            }
        }
    }))
    .expect("valid Deployment")
}

/// Creates the Deployment and waits until all its replicas are Ready.
async fn create_ready_deployment(ns: &TestNs, name: &str, replicas: i32) -> Deployment {
    let deployments: Api<Deployment> = ns.api();
    deployments.create(&PostParams::default(), &deployment(name, replicas)).await.expect("create Deployment");
    wait_for(&format!("Deployment {name} to have {replicas} ready replicas"), READY_TIMEOUT, || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get(name).await.ok()?;
            let ready = d.status.as_ref()?.ready_replicas?;
            (ready == replicas).then_some(d)
        }
    })
    .await
}

async fn pods_of(ns: &TestNs, app: &str) -> Vec<Pod> {
    let pods: Api<Pod> = ns.api();
    pods.list(&ListParams::default().labels(&format!("app={app}"))).await.expect("list Pods").items
}

#[tokio::test]
async fn a_deployment_gets_scheduled_pods_that_become_ready() {
    let ns = TestNs::new("smoke-ready").await;
    create_ready_deployment(&ns, "web", 2).await;

    let pods = pods_of(&ns, "web").await;
    assert_eq!(pods.len(), 2, "exactly the Deployment's two Pods exist");
    for pod in &pods {
        let name = pod.metadata.name.as_deref().unwrap_or("?");
        let spec = pod.spec.as_ref().expect("Pod spec");
        assert!(spec.node_name.is_some(), "Pod {name} was bound to a node by the scheduler");
        let status = pod.status.as_ref().expect("Pod status");
        assert_eq!(status.phase.as_deref(), Some("Running"), "Pod {name} is Running");
        assert!(status.pod_ip.is_some(), "Pod {name} got an IP from kwok");
    }
}

#[tokio::test]
async fn deleting_a_deployment_garbage_collects_its_replica_set_and_pods() {
    let ns = TestNs::new("smoke-gc").await;
    let d = create_ready_deployment(&ns, "gc", 1).await;
    let uid = d.metadata.uid.clone().expect("Deployment uid");

    let replica_sets: Api<ReplicaSet> = ns.api();
    let owned = replica_sets.list(&ListParams::default()).await.expect("list ReplicaSets").items;
    let owned_by_d = |rs: &ReplicaSet| rs.metadata.owner_references.iter().flatten().any(|o| o.uid == uid);
    assert_eq!(owned.iter().filter(|rs| owned_by_d(rs)).count(), 1, "the Deployment owns one ReplicaSet");

    // Background propagation: the Deployment goes at once, and only the
    // garbage collector removes its dependents.
    let deployments: Api<Deployment> = ns.api();
    deployments.delete("gc", &DeleteParams::background()).await.expect("delete Deployment");

    wait_for("the garbage collector to delete the ReplicaSet", READY_TIMEOUT, || {
        let replica_sets = replica_sets.clone();
        async move {
            let items = replica_sets.list(&ListParams::default()).await.ok()?.items;
            items.is_empty().then_some(())
        }
    })
    .await;
    let pods: Api<Pod> = ns.api();
    wait_for("the garbage collector to delete the Pods", READY_TIMEOUT, || {
        let pods = pods.clone();
        async move { pods.list(&ListParams::default()).await.ok()?.items.is_empty().then_some(()) }
    })
    .await;
}

/// Asks the apiserver whether ServiceAccount `sa` in `ns` may list Pods there.
async fn may_list_pods(client: &kube::Client, ns: &str, sa: &str) -> bool {
    let review: SubjectAccessReview = serde_json::from_value(json!({
        "spec": {
            "user": format!("system:serviceaccount:{ns}:{sa}"),
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
            "resourceAttributes": { "namespace": ns, "verb": "list", "resource": "pods" }
        }
    }))
    .expect("valid SubjectAccessReview");
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("create SubjectAccessReview");
    answer.status.expect("SubjectAccessReview status").allowed
}

#[tokio::test]
async fn a_service_account_is_denied_until_a_role_binding_allows_it() {
    let ns = TestNs::new("smoke-rbac").await;
    let sa: ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "reader" } })).expect("valid ServiceAccount");
    ns.api::<ServiceAccount>().create(&PostParams::default(), &sa).await.expect("create ServiceAccount");

    assert!(
        !may_list_pods(&ns.client, &ns.name, "reader").await,
        "a ServiceAccount without a RoleBinding may not list Pods"
    );

    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "pod-reader" },
        "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"] }]
    }))
    .expect("valid Role");
    ns.api::<Role>().create(&PostParams::default(), &role).await.expect("create Role");
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "reader-reads-pods" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader" },
        "subjects": [{ "kind": "ServiceAccount", "name": "reader", "namespace": ns.name }]
    }))
    .expect("valid RoleBinding");
    ns.api::<RoleBinding>().create(&PostParams::default(), &binding).await.expect("create RoleBinding");

    // The RBAC authorizer reads from an informer cache: allow it a moment.
    wait_for("the RoleBinding to allow listing Pods", Duration::from_secs(30), || async {
        may_list_pods(&ns.client, &ns.name, "reader").await.then_some(())
    })
    .await;
}
