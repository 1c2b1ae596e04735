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
        runners_not_read: vec![],
        conversion: ConversionState::default(),
        registrations: RegistrationsState { validating: Readable::Read(None), ..Default::default() },
        gaps: vec![],
    }
}

/// The healthy snapshot with no manager anywhere.
pub fn without_manager() -> Snapshot {
    let mut s = healthy();
    s.manager = ManagerState::default();
    s
}

/// The healthy snapshot whose CRD converts by webhook through the
/// installed Service, with `ca` as its caBundle; the Service with one
/// ready endpoint; the webhook's Secret holding `serving` and `ca`.
pub fn with_webhook(ca: &[u8], serving: &[u8]) -> Snapshot {
    use crate::manifests::MANAGER_NAMESPACE as NAMESPACE;
    use crate::webhook::SERVICE;
    use k8s_openapi::ByteString;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, ServiceReference, WebhookClientConfig, WebhookConversion,
    };
    let mut s = healthy();
    // As `install --with-manager` leaves it: every version served.
    s.crd.as_mut().unwrap().spec.versions.iter_mut().for_each(|v| v.served = true);
    s.crd.as_mut().unwrap().spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".into()],
            client_config: Some(WebhookClientConfig {
                ca_bundle: Some(ByteString(ca.to_vec())),
                service: Some(ServiceReference {
                    namespace: NAMESPACE.into(),
                    name: SERVICE.into(),
                    path: Some("/convert".into()),
                    port: Some(443),
                }),
                url: None,
            }),
        }),
    });
    s.conversion.service = Readable::Read(Some(from(json!({
        "metadata": { "name": SERVICE, "namespace": NAMESPACE },
        "spec": { "ports": [{ "port": 443, "targetPort": 9443 }] }
    }))));
    s.conversion.endpoints = Readable::Read(vec![endpoint_slice(&[("10.0.0.7", Some(true))])]);
    s.conversion.certs =
        Readable::Read(Some(WebhookCerts { serving: Some(serving.to_vec()), ca: Some(ca.to_vec()) }));
    s
}

/// An EndpointSlice of the webhook's Service with these addresses and
/// their `ready` condition.
pub fn endpoint_slice(endpoints: &[(&str, Option<bool>)]) -> k8s_openapi::api::discovery::v1::EndpointSlice {
    use crate::manifests::MANAGER_NAMESPACE as NAMESPACE;
    use crate::webhook::SERVICE;
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(ip, ready)| json!({ "addresses": [ip], "conditions": { "ready": ready } }))
        .collect();
    from(json!({
        "metadata": { "name": format!("{SERVICE}-abcde"), "namespace": NAMESPACE,
                      "labels": { "kubernetes.io/service-name": SERVICE } },
        "addressType": "IPv4", "endpoints": endpoints
    }))
}

/// Where the fixtures' local manager serves.
pub const LOCAL_URL: &str = "https://127.0.0.1:9443";
/// The namespace of the fixtures' local manager's Lease.
pub const LOCAL_NS: &str = "dev";

/// The fixtures' local manager.
pub fn local_holder() -> crate::webhook::local::Holder {
    crate::webhook::local::Holder {
        holder: "laptop pid 4242".into(),
        lease_namespace: LOCAL_NS.into(),
        url: LOCAL_URL.into(),
    }
}

/// A local manager's Lease naming `holder`, renewed `renewed_secs_ago`.
pub fn local_lease(holder: &str, renewed_secs_ago: i64) -> k8s_openapi::api::coordination::v1::Lease {
    let renew = now().checked_sub(SignedDuration::from_secs(renewed_secs_ago)).unwrap();
    from(json!({
        "metadata": { "name": crate::webhook::local::LEASE, "namespace": LOCAL_NS,
                      "resourceVersion": "77", "uid": "lease-1" },
        "spec": { "holderIdentity": holder, "leaseDurationSeconds": 15,
                  "renewTime": renew.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string() }
    }))
}

/// The healthy snapshot after [`local_holder`] pointed the CRD and a
/// ValidatingWebhookConfiguration it created at itself (as
/// `webhook::local` does), its Lease renewed `renewed_secs_ago`.
pub fn locally_served(renewed_secs_ago: i64) -> Snapshot {
    use crate::webhook::local;
    let mut s = healthy();
    let by = local_holder();
    let (conversion, desired) = pointed_at(&by);
    s.crd = Some(local::point(Some(&crate::manifests::crd()), &by, conversion).unwrap());
    let vwc: k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration =
        local::point(None, &by, desired).unwrap();
    s.registrations.validating = Readable::Read(Some(vwc));
    let lease = local_lease(&by.holder, renewed_secs_ago);
    s.registrations.leases.insert(LOCAL_NS.into(), Readable::Read(Some(lease)));
    s
}

/// The conversion and the webhook configuration a local manager `by`
/// registers (as `manager::webhook::local` builds them).
pub fn pointed_at(
    by: &crate::webhook::local::Holder,
) -> (
    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion,
    k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
) {
    let target = crate::webhook::local::target(&by.url);
    (
        crate::manifests::conversion(&target, Some("CA")),
        crate::manifests::validating_webhook_configuration(&target, Some("CA")),
    )
}

/// [`locally_served`] ten minutes after its manager died.
pub fn abandoned() -> Snapshot {
    locally_served(600)
}
