//! What `install` adds for the conversion webhook ([`crate::webhook`]): the
//! Service in front of every manager Pod, the Secret created empty (the
//! manager fills it and needs no `create`), and the ClusterRole that lets
//! the manager set the caBundle of the Runner CRD and of no other.

use serde_json::{Value, json};

use super::{MANAGER_NAMESPACE, Manifest, cluster_role, cluster_role_binding};
use crate::rbac::{Scope, WEBHOOK, policy_rules_of};
use crate::webhook::{PORT_NAME, SECRET, SERVICE, SERVICE_PORT};

/// ClusterRole (and binding) holding the webhook's cluster-scoped
/// permission: get/patch the Runner CRD, by name.
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
