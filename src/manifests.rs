//! Everything `install` applies and `manifests/` holds, generated from code:
//! the CRD from [`crate::api`], the RBAC from [`crate::rbac::PERMISSIONS`], the
//! tenant roles from [`crate::rbac::TenantRole`], and the in-cluster manager.
//! Nothing here is hand-edited YAML; a test fails when the files in
//! `manifests/` drift from what these functions return.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

use crate::api::Runner;
use crate::rbac::{METRICS_AUTH, Scope, metrics_reader_rules, policy_rules, policy_rules_of};
use crate::webhook::Target;

mod conversion;
mod tenant;
mod validating;
mod webhook;
pub use conversion::conversion;
pub use tenant::{tenant_role_names, tenant_roles};
pub use validating::{TIMEOUT_SECONDS, client_config, validating_webhook, validating_webhook_configuration};
pub use webhook::WEBHOOK_ROLE;

/// Label on everything `install` creates; `uninstall` removes only objects
/// that carry it, so it never deletes a CRD someone else installed.
pub const INSTALLED_BY_LABEL: &str = "lab.cloudlab.training/installed-by";
pub const INSTALLED_BY_VALUE: &str = "kubectl-runner";
/// Where the in-cluster manager lives.
pub const MANAGER_NAMESPACE: &str = "runner-system";
/// Name of the manager's ServiceAccount and Deployment.
pub const MANAGER_NAME: &str = "runner-controller-manager";
/// ClusterRole / Role holding [`crate::rbac::PERMISSIONS`].
pub const MANAGER_ROLE: &str = "runner-manager";
/// Role for the manager's own objects in [`MANAGER_NAMESPACE`]: the
/// leader-election and presence Leases, the webhooks' Secret.
pub const LEADER_ROLE: &str = "runner-leader-election";
/// ClusterRole holding the cluster-scoped reviews behind `/metrics`' access
/// check ([`crate::rbac::Scope::Cluster`]).
pub const METRICS_AUTH_ROLE: &str = "runner-metrics-auth";
/// ClusterRole that may read the manager's `/metrics`; bound to no one by
/// install: bind it to the scraper's ServiceAccount.
pub const METRICS_READER_ROLE: &str = "runner-metrics-reader";
/// Name of the leader-election Lease.
pub const LEADER_LEASE: &str = "runner-controller-manager-leader";
/// Label on every manager's presence Lease (in the Lease namespace, next to
/// the leader Lease): a running manager, leader or not, renews one.
pub const PRESENCE_LABEL: &str = "lab.cloudlab.training/manager-presence";
/// Presence Lease annotation: the namespaces the manager watches, comma
/// separated; empty for all namespaces.
pub const PRESENCE_NAMESPACES: &str = "lab.cloudlab.training/watch-namespaces";
/// Presence Lease annotation: "true" when the manager takes part in leader
/// election (it reconciles only while it leads).
pub const PRESENCE_LEADER_ELECT: &str = "lab.cloudlab.training/leader-elect";
/// Presence Lease annotation: the manager's work queue
/// ([`crate::queue_note::QueueNote`]), as of the last renewal.
pub const PRESENCE_QUEUE: &str = "lab.cloudlab.training/work-queue";

/// Pure: the presence Lease's name for a manager identity (the leader
/// Lease's holder). The identity (a Pod name, or "host-pid") is hashed: it
/// may hold characters a name may not, and stays the same for the whole
/// run. diagnose finds the leader's presence by it.
pub fn presence_lease_name(identity: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    identity.hash(&mut h);
    format!("runner-manager-{:016x}", h.finish())
}
/// Ports the manager serves on in the cluster.
pub const METRICS_PORT: i32 = 8080;
pub const HEALTH_PORT: i32 = 8081;

/// Which RBAC shape to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RbacScope {
    /// A ClusterRole: the manager watches every namespace.
    Cluster,
    /// A Role in each namespace: the manager runs with `--namespace`.
    Namespaces(Vec<String>),
}

/// One object to apply, with the API resource to apply it through.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub resource: ApiResource,
    pub namespaced: bool,
    pub object: DynamicObject,
}

impl Manifest {
    fn new(api_version: &str, kind: &str, plural: &str, namespaced: bool, mut value: Value) -> Manifest {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
        value["apiVersion"] = json!(api_version);
        value["kind"] = json!(kind);
        value["metadata"]["labels"][INSTALLED_BY_LABEL] = json!(INSTALLED_BY_VALUE);
        let object = serde_json::from_value(value).expect("generated manifests are valid objects");
        Manifest { resource, namespaced, object }
    }

    /// `Kind/name` or `Kind namespace/name`, for progress lines.
    pub fn describe(&self) -> String {
        let name = self.object.metadata.name.as_deref().unwrap_or("");
        match &self.object.metadata.namespace {
            Some(ns) => format!("{} {ns}/{name}", self.resource.kind),
            None => format!("{}/{name}", self.resource.kind),
        }
    }
}

/// The Runner CRD as its types declare it, every version
/// ([`crate::api::VERSIONS`]) listed with [`crate::api::VERSION`] stored,
/// described by the child kinds ([`crate::kinds::crd_description`]); tests
/// install it unlabelled.
///
/// Only the storage version is served: serving another needs the
/// manager's conversion webhook (without one, the apiserver would only
/// relabel an object and prune what the other version cannot hold), and
/// the install that runs the manager turns it on. The others stay listed,
/// not served, so a CRD that once stored them can still be updated.
pub fn runner_crd() -> CustomResourceDefinition {
    let versions = vec![crate::api::v1alpha1::Runner::crd(), Runner::crd()];
    let mut crd = kube::core::crd::merge_crds(versions, crate::api::VERSION)
        .expect("the Runner's versions agree on group, kind and scope");
    crd.spec.versions.iter_mut().for_each(|v| v.served = v.storage);
    let schemas = crd.spec.versions.iter_mut().filter_map(|v| v.schema.as_mut()?.open_api_v3_schema.as_mut());
    schemas.for_each(|s| s.description = Some(crate::kinds::crd_description()));
    crd
}

/// The Runner CRD, labelled as installed by this tool: [`runner_crd`], the
/// storage version the only one served and no conversion, which a cluster
/// without the manager needs (both served with no conversion would not do:
/// the apiserver would hand an old object out under the new version with
/// only its apiVersion changed, and the fields that moved would be pruned).
pub fn crd() -> CustomResourceDefinition {
    labelled(runner_crd())
}

/// The Runner CRD as `install --with-manager` applies it: every version
/// served, converted by the in-cluster manager's webhook (its Service in
/// [`MANAGER_NAMESPACE`]; the manager injects the caBundle).
pub fn crd_with_webhook() -> CustomResourceDefinition {
    let mut crd = crd();
    crd.spec.versions.iter_mut().for_each(|v| v.served = true);
    let service = Target::Service { namespace: MANAGER_NAMESPACE.into() };
    crd.spec.conversion = Some(conversion(&service, None));
    crd
}

fn labelled(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(INSTALLED_BY_LABEL.into(), INSTALLED_BY_VALUE.into());
    crd
}

/// The CRD as a [`Manifest`], as install --with-manager applies it (and
/// `manifests/crd.yaml` holds it, beside the manager's manifests).
pub fn crd_manifest() -> Manifest {
    crd_manifest_of(crd_with_webhook())
}

fn crd_manifest_of(crd: CustomResourceDefinition) -> Manifest {
    let value = serde_json::to_value(crd).expect("CRD serializes");
    Manifest::new(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        value,
    )
}

/// Namespace, ServiceAccount, the manager's (Cluster)Role(s) and bindings,
/// the Role in its own namespace, and the webhook's ClusterRole, in apply
/// order.
pub fn rbac(scope: &RbacScope) -> Vec<Manifest> {
    let sa_subject =
        json!([{ "kind": "ServiceAccount", "name": MANAGER_NAME, "namespace": MANAGER_NAMESPACE }]);
    let mut out = vec![
        Manifest::new(
            "v1",
            "Namespace",
            "namespaces",
            false,
            json!({ "metadata": { "name": MANAGER_NAMESPACE } }),
        ),
        Manifest::new(
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            json!({ "metadata": { "name": MANAGER_NAME, "namespace": MANAGER_NAMESPACE } }),
        ),
    ];
    let watched = serde_json::to_value(policy_rules(Scope::Watched)).expect("rules serialize");
    match scope {
        RbacScope::Cluster => {
            out.push(cluster_role(MANAGER_ROLE, &watched));
            out.push(cluster_role_binding(MANAGER_ROLE, &sa_subject));
        }
        RbacScope::Namespaces(namespaces) => {
            for ns in namespaces {
                out.push(role(ns, MANAGER_ROLE, &watched));
                out.push(role_binding(ns, MANAGER_ROLE, &sa_subject));
            }
        }
    }
    let leader = serde_json::to_value(policy_rules(Scope::ManagerNamespace)).expect("rules serialize");
    out.push(role(MANAGER_NAMESPACE, LEADER_ROLE, &leader));
    out.push(role_binding(MANAGER_NAMESPACE, LEADER_ROLE, &sa_subject));
    // Every install: conversion needs the caBundle in the (cluster-scoped)
    // CRD, which install creates anyway; the role names that CRD alone.
    out.extend(webhook::webhook_rbac(&sa_subject));
    // Otherwise a namespace-scoped install creates nothing cluster-wide (its
    // user may not be allowed to); its manager serves /metrics on loopback.
    if *scope == RbacScope::Cluster {
        let reviews =
            serde_json::to_value(policy_rules_of(METRICS_AUTH, Scope::Cluster)).expect("rules serialize");
        out.push(cluster_role(METRICS_AUTH_ROLE, &reviews));
        out.push(cluster_role_binding(METRICS_AUTH_ROLE, &sa_subject));
        let reader = serde_json::to_value(metrics_reader_rules()).expect("rules serialize");
        out.push(cluster_role(METRICS_READER_ROLE, &reader));
    }
    out
}

fn cluster_role(name: &str, rules: &Value) -> Manifest {
    Manifest::new(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        false,
        json!({ "metadata": { "name": name }, "rules": rules }),
    )
}

fn cluster_role_binding(role: &str, subjects: &Value) -> Manifest {
    Manifest::new(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        json!({
            "metadata": { "name": role },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
            "subjects": subjects,
        }),
    )
}

fn role(ns: &str, name: &str, rules: &Value) -> Manifest {
    Manifest::new(
        "rbac.authorization.k8s.io/v1",
        "Role",
        "roles",
        true,
        json!({ "metadata": { "name": name, "namespace": ns }, "rules": rules }),
    )
}

fn role_binding(ns: &str, role: &str, subjects: &Value) -> Manifest {
    Manifest::new(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
        true,
        json!({
            "metadata": { "name": role, "namespace": ns },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role },
            "subjects": subjects,
        }),
    )
}

/// The in-cluster manager Deployment: non-root, read-only root filesystem,
/// no privilege escalation, bounded resources, leader election on.
pub fn manager(image: &str, scope: &RbacScope) -> Vec<Manifest> {
    let mut args = vec![
        "run-manager".to_string(),
        "--leader-elect".into(),
        format!("--health-addr=0.0.0.0:{HEALTH_PORT}"),
        "--log-format=json".into(),
        format!("--webhook-listen=0.0.0.0:{}", crate::webhook::CONTAINER_PORT),
    ];
    // /metrics for scrapers the apiserver vouches for; without the
    // cluster-wide reviews that needs, on loopback (`kubectl port-forward`).
    match scope {
        RbacScope::Cluster => {
            args.push(format!("--metrics-addr=0.0.0.0:{METRICS_PORT}"));
            args.push("--metrics-auth".into());
        }
        RbacScope::Namespaces(_) => args.push(format!("--metrics-addr=127.0.0.1:{METRICS_PORT}")),
    }
    // A namespace-scoped install grants Roles in each of its namespaces, and
    // its manager watches exactly those.
    if let RbacScope::Namespaces(namespaces) = scope
        && !namespaces.is_empty()
    {
        args.push(format!("--watch-namespace={}", namespaces.join(",")));
    }
    let labels = json!({ "app.kubernetes.io/name": "runner-controller-manager", "app.kubernetes.io/component": "manager" });
    let probe = |path: &str| json!({ "httpGet": { "path": path, "port": "health" }, "periodSeconds": 10 });
    let deployment = json!({
        "metadata": { "name": MANAGER_NAME, "namespace": MANAGER_NAMESPACE, "labels": labels },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": labels },
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "serviceAccountName": MANAGER_NAME,
                    "securityContext": { "runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": { "type": "RuntimeDefault" } },
                    "terminationGracePeriodSeconds": 10,
                    "containers": [{
                        "name": "manager",
                        "image": image,
                        "args": args,
                        "env": [
                            { "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
                            { "name": "POD_NAMESPACE", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } },
                        ],
                        "ports": [
                            { "name": "metrics", "containerPort": METRICS_PORT },
                            { "name": "health", "containerPort": HEALTH_PORT },
                            { "name": crate::webhook::PORT_NAME, "containerPort": crate::webhook::CONTAINER_PORT },
                        ],
                        "livenessProbe": probe("/healthz"),
                        "readinessProbe": probe("/readyz"),
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": { "drop": ["ALL"] },
                        },
                        "resources": {
                            "requests": { "cpu": "10m", "memory": "32Mi" },
                            "limits": { "cpu": "500m", "memory": "128Mi" },
                        },
                    }],
                },
            },
        },
    });
    let mut out = webhook::webhook_objects(&labels);
    // Before the Deployment: the manager's first round finds it and sets
    // its caBundle (else Runner writes would fail until the next round);
    // uninstall, in reverse order, removes it right after the manager.
    out.push(webhook::validating_manifest());
    out.push(Manifest::new("apps/v1", "Deployment", "deployments", true, deployment));
    out
}

/// CRD, RBAC, the tenant roles and (with an image) the manager, in apply
/// order. Without the manager, the CRD serves the storage version only
/// ([`crd`]): nothing would answer a conversion.
pub fn all(image: Option<&str>, scope: &RbacScope) -> Vec<Manifest> {
    let crd = if image.is_some() { crd_manifest() } else { crd_manifest_of(crd()) };
    let mut out = vec![crd];
    out.extend(rbac(scope));
    out.extend(tenant_roles());
    if let Some(image) = image {
        out.extend(manager(image, scope));
    }
    out
}

/// Multi-document YAML, one document per object.
pub fn to_yaml(manifests: &[Manifest]) -> String {
    let mut out = String::new();
    for m in manifests {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&m.object).expect("objects serialize to YAML"));
    }
    out
}

/// Image the committed `manifests/manager.yaml` refers to.
pub const DEFAULT_MANAGER_IMAGE: &str = "kubectl-runner:dev";

/// The files under `manifests/`, by name, exactly as they should be on disk.
pub fn files() -> Vec<(&'static str, String)> {
    let cluster = RbacScope::Cluster;
    vec![
        ("crd.yaml", to_yaml(&[crd_manifest()])),
        ("rbac.yaml", to_yaml(&rbac(&cluster))),
        ("tenant-roles.yaml", to_yaml(&tenant_roles())),
        ("manager.yaml", to_yaml(&manager(DEFAULT_MANAGER_IMAGE, &cluster))),
    ]
}

#[cfg(test)]
mod tests;
