//! What `install` adds for the webhooks ([`crate::webhook`]): the Service
//! in front of every manager Pod, the Secret created empty (the manager
//! fills it and needs no `create`), the Runner ValidatingWebhookConfiguration
//! routed to the Service without a caBundle (the manager injects it), and
//! the ClusterRole that lets the manager set the caBundle of those two
//! registrations and of no other, and index hosts for the validating one.

use serde_json::{Value, json};

use super::{MANAGER_NAMESPACE, Manifest, cluster_role, cluster_role_binding};
use crate::rbac::{Scope, WEBHOOK, policy_rules_of};
use crate::webhook::{PORT_NAME, SECRET, SERVICE, SERVICE_PORT, Target};

/// ClusterRole (and binding) holding the webhooks' cluster-scoped
/// permissions ([`crate::rbac::WEBHOOK`]).
pub const WEBHOOK_ROLE: &str = "runner-webhook";

/// The webhook's ClusterRole and its binding to the manager's ServiceAccount.
pub fn webhook_rbac(subjects: &Value) -> Vec<Manifest> {
    let rules = serde_json::to_value(policy_rules_of(WEBHOOK, Scope::Cluster)).expect("rules serialize");
    vec![cluster_role(WEBHOOK_ROLE, &rules), cluster_role_binding(WEBHOOK_ROLE, subjects)]
}

/// The empty Secret and the Service selecting the manager Pods by `labels`.
pub fn webhook_objects(pod_labels: &Value) -> Vec<Manifest> {
    let secret = json!({
        "metadata": { "name": SECRET, "namespace": MANAGER_NAMESPACE },
        "type": "Opaque",
    });
    let service = json!({
        "metadata": { "name": SERVICE, "namespace": MANAGER_NAMESPACE },
        "spec": {
            "selector": pod_labels,
            "ports": [{ "name": PORT_NAME, "port": SERVICE_PORT, "targetPort": PORT_NAME, "protocol": "TCP" }],
        },
    });
    vec![
        Manifest::new("v1", "Secret", "secrets", true, secret),
        Manifest::new("v1", "Service", "services", true, service),
    ]
}

/// The ValidatingWebhookConfiguration as install applies it: to the
/// Service in [`MANAGER_NAMESPACE`], no caBundle (the manager's field).
pub fn validating_manifest() -> Manifest {
    let target = Target::Service { namespace: MANAGER_NAMESPACE.into() };
    let vwc = super::validating_webhook_configuration(&target, None);
    let value = serde_json::to_value(vwc).expect("the configuration serializes");
    Manifest::new(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
        value,
    )
}
