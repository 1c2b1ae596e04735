//! Test fixtures: a healthy snapshot that each rule's tests break in one way.
//! Objects are written as JSON, the way the apiserver would return them.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::api::Runner;
use crate::diagnose::snapshot::*;
use crate::rbac::{PERMISSIONS, Scope as PermScope};

pub const NS: &str = "app";
pub const NAME: &str = "web";
pub const UID: &str = "uid-1";
/// The template hash of the Deployment's current ReplicaSet, and of its Pods.
pub const TEMPLATE_HASH: &str = "5d9c7b6f4";

/// The fixed "now" of every fixture.
pub fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().unwrap()
}

/// `now` minus `secs`, as the RFC 3339 string the API uses.
pub fn ago(secs: i64) -> String {
    now().checked_sub(SignedDuration::from_secs(secs)).unwrap().to_string()
}

pub fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("fixture deserializes")
}

pub fn owner(uid: &str) -> Value {
    json!([{ "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner", "name": NAME,
             "uid": uid, "controller": true, "blockOwnerDeletion": true }])
}

pub fn runner() -> Runner {
    from(json!({
        "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner",
        "metadata": { "name": NAME, "namespace": NS, "uid": UID, "generation": 1, "resourceVersion": "10",
                      "creationTimestamp": ago(3600), "finalizers": [crate::api::FINALIZER] },
        "spec": { "image": "nginx:1.27", "replicas": 1, "expose": { "port": 80 } },
        "status": { "observedGeneration": 1, "replicas": 1, "readyReplicas": 1, "phase": "Available",
                    "conditions": [
                        { "type": "Ready", "status": "True", "reason": "Available", "message": "1/1 ready",
                          "lastTransitionTime": ago(3000) },
                        { "type": "ChildrenOwned", "status": "True", "reason": "Owned", "message": "",
                          "lastTransitionTime": ago(3000) } ] }
    }))
}

pub fn deployment() -> k8s_openapi::api::apps::v1::Deployment {
    from(json!({
        "metadata": { "name": NAME, "namespace": NS, "uid": "d-1", "resourceVersion": "11", "generation": 1,
                      "labels": { crate::api::RUNNER_UID_LABEL: UID }, "ownerReferences": owner(UID) },
        "spec": { "selector": { "matchLabels": { crate::api::RUNNER_UID_LABEL: UID } },
                  "template": { "spec": { "containers": [{ "name": "app", "image": "nginx:1.27" }] } } },
        "status": { "observedGeneration": 1, "readyReplicas": 1, "replicas": 1, "updatedReplicas": 1,
                    "availableReplicas": 1, "conditions": [
            { "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
              "message": format!("ReplicaSet \"{NAME}-{TEMPLATE_HASH}\" has successfully progressed.") },
            { "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable" } ] }
    }))
}

pub fn service() -> k8s_openapi::api::core::v1::Service {
    from(json!({
        "metadata": { "name": NAME, "namespace": NS, "uid": "s-1", "resourceVersion": "12",
                      "labels": { crate::api::RUNNER_UID_LABEL: UID }, "ownerReferences": owner(UID) },
        "spec": { "ports": [{ "port": 80 }] }
    }))
}

pub fn ingress(host: &str) -> k8s_openapi::api::networking::v1::Ingress {
    from(json!({
        "metadata": { "name": NAME, "namespace": NS, "uid": "i-1", "resourceVersion": "13",
                      "labels": { crate::api::RUNNER_UID_LABEL: UID }, "ownerReferences": owner(UID) },
        "spec": { "rules": [{ "host": host }] }
    }))
}

pub fn pdb() -> k8s_openapi::api::policy::v1::PodDisruptionBudget {
    from(json!({
        "metadata": { "name": NAME, "namespace": NS, "uid": "p-1", "resourceVersion": "14",
                      "labels": { crate::api::RUNNER_UID_LABEL: UID }, "ownerReferences": owner(UID) },
        "spec": { "minAvailable": 1, "selector": { "matchLabels": { crate::api::RUNNER_UID_LABEL: UID } } }
    }))
}

/// Sets the Runner's child of `obj`'s kind.
pub fn set_child<K: k8s_openapi::Resource + serde::Serialize>(rs: &mut RunnerState, obj: K) {
    let kind = crate::kinds::by_name(K::KIND).expect("a child kind");
    rs.children.insert(kind, from(serde_json::to_value(obj).unwrap()));
}

/// Changes the Runner's child of kind `K` in its typed form.
pub fn edit_child<K>(rs: &mut RunnerState, change: impl FnOnce(&mut K))
where
    K: k8s_openapi::Resource + serde::Serialize + serde::de::DeserializeOwned,
{
    let mut obj: K = rs.children.typed().expect("the child exists");
    change(&mut obj);
    set_child(rs, obj);
}

pub fn pod(name: &str, status: Value) -> k8s_openapi::api::core::v1::Pod {
    from(json!({
        "metadata": { "name": name, "namespace": NS, "labels": { crate::api::RUNNER_UID_LABEL: UID,
                                                                 crate::rollout::POD_TEMPLATE_HASH_LABEL: TEMPLATE_HASH } },
        "spec": { "containers": [{ "name": "app", "image": "nginx:1.27" }] },
        "status": status
    }))
}

pub fn running_pod() -> k8s_openapi::api::core::v1::Pod {
    pod(
        "web-1",
        json!({ "phase": "Running",
                "conditions": [{ "type": "Ready", "status": "True" }],
                "containerStatuses": [{ "name": "app", "ready": true, "restartCount": 0, "image": "nginx:1.27",
                                        "imageID": "", "state": { "running": {} } }] }),
    )
}

pub fn runner_state() -> RunnerState {
    let mut rs = RunnerState {
        runner: runner(),
        children: Default::default(),
        pods: vec![running_pod()],
        events: vec![],
        resample: None,
        observed: None,
    };
    set_child(&mut rs, deployment());
    set_child(&mut rs, service());
    rs
}

pub fn manager_deployment(ready: i32) -> k8s_openapi::api::apps::v1::Deployment {
    from(json!({
        "metadata": { "name": crate::manifests::MANAGER_NAME, "namespace": crate::manifests::MANAGER_NAMESPACE },
        "spec": { "replicas": 1,
                  "selector": { "matchLabels": { "app.kubernetes.io/name": "runner-controller-manager" } },
                  "template": { "spec": { "serviceAccountName": crate::manifests::MANAGER_NAME,
                      "containers": [{ "name": "manager", "image": "kubectl-runner:dev",
                                       "args": ["run-manager", "--leader-elect"] }] } } },
        "status": { "replicas": 1, "readyReplicas": ready }
    }))
}

pub fn lease(renewed_secs_ago: i64) -> k8s_openapi::api::coordination::v1::Lease {
    let renew = now().checked_sub(SignedDuration::from_secs(renewed_secs_ago)).unwrap();
    from(json!({
        "metadata": { "name": crate::manifests::LEADER_LEASE, "namespace": crate::manifests::MANAGER_NAMESPACE },
        "spec": { "holderIdentity": "runner-controller-manager-abc", "leaseDurationSeconds": 15,
                  "renewTime": renew.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string() }
    }))
}

/// Every permission allowed in `ns` (and the Lease ones in runner-system).
pub fn all_allowed(ns: &str) -> Vec<AccessCheck> {
    let mut out = vec![];
    for p in PERMISSIONS.iter() {
        let namespace = match p.scope {
            PermScope::Watched => ns.to_string(),
            PermScope::ManagerNamespace => crate::manifests::MANAGER_NAMESPACE.to_string(),
            PermScope::Cluster => String::new(),
        };
        for verb in p.verbs {
            out.push(AccessCheck {
                namespace: namespace.clone(),
                permission: p,
                verb,
                allowed: true,
                reason: "".into(),
            });
        }
    }
    out
}

/// An in-cluster manager that is Ready and leads, with exactly the RBAC it
/// needs, and one Available Runner with its children.
pub fn healthy() -> Snapshot {
    Snapshot {
        now: now(),
        scope: Scope { namespaces: vec![NS.into()], name: None },
        thresholds: Thresholds::default(),
        cluster: Ok("v1.37.2".into()),
        crd: Some(crate::manifests::crd()),
        expected_crd: crate::manifests::crd(),
        manager: ManagerState {
            deployment: Some(manager_deployment(1)),
            pods: vec![],
            lease: Some(lease(3)),
            presences: vec![],
        },
        service_account: ServiceAccountRef {
            namespace: crate::manifests::MANAGER_NAMESPACE.into(),
            name: crate::manifests::MANAGER_NAME.into(),
        },
        service_account_exists: Some(true),
        access: all_allowed(NS),
        grants: vec![Grant {
            binding_kind: "ClusterRoleBinding".into(),
            binding_namespace: "".into(),
            binding_name: crate::manifests::MANAGER_ROLE.into(),
            role_kind: "ClusterRole".into(),
            role_name: crate::manifests::MANAGER_ROLE.into(),
            rules: crate::rbac::policy_rules(PermScope::Watched),
        }],
        runners: vec![runner_state()],
        gaps: vec![],
    }
}

/// The healthy snapshot with no manager anywhere.
pub fn without_manager() -> Snapshot {
    let mut s = healthy();
    s.manager = ManagerState::default();
    s
}
