//! The permissions the manager needs, as data. One list drives three things:
//! the ClusterRole / Role in `manifests/`, the manager's startup self-check,
//! and `diagnose`'s SubjectAccessReviews. Adding a watch or a write in the
//! manager without adding it here makes the drift test and the startup check
//! fail, which is the seeds' "manager Ready but no children" bug, caught early.
//! What the people who use Runners may do is data too ([`TenantRole`]).

use std::sync::LazyLock;

use k8s_openapi::api::rbac::v1::PolicyRule;

mod tenant;
pub use tenant::{TENANT_PERMISSIONS, TenantRole};

/// Where a permission is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// In every namespace the manager watches (ClusterRole, or a Role per
    /// namespace in the namespace-scoped install).
    Watched,
    /// Only in the manager's own namespace (leader-election Lease, the
    /// webhooks' Secret).
    ManagerNamespace,
    /// Cluster-scoped resources (the reviews behind `/metrics`' access
    /// check, the caBundles of the Runner CRD and the validating webhook,
    /// the validating webhook's index), granted by ClusterRoles.
    Cluster,
}

/// One rule: these verbs on this resource, and why the manager needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    /// API group; "" is the core group.
    pub group: &'static str,
    /// Plural resource, with "/subresource" where one is meant.
    pub resource: &'static str,
    /// Only the object of this name (RBAC `resourceNames`); None: any.
    /// `create` cannot be limited so (the apiserver authorizes it before
    /// the name is known), so a named permission never holds it.
    pub resource_name: Option<&'static str>,
    pub verbs: &'static [&'static str],
    pub scope: Scope,
    /// What breaks without it, in one line (shown by `diagnose`).
    pub why: &'static str,
}

impl Permission {
    /// `deployments.apps`, `services`, `runners.lab.cloudlab.training/status`:
    /// the spelling `kubectl auth can-i` accepts.
    pub fn resource_ref(&self) -> String {
        let (res, sub) = match self.resource.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (self.resource, None),
        };
        let mut s = if self.group.is_empty() { res.to_string() } else { format!("{res}.{}", self.group) };
        if let Some(sub) = sub {
            s = format!("{s}/{sub}");
        }
        s
    }

    /// What a message names: [`Self::resource_ref`], and the one object
    /// when the permission is limited to it (`configmaps named runner-deletions`).
    pub fn target(&self) -> String {
        match self.resource_name {
            Some(name) => format!("{} named {name}", self.resource_ref()),
            None => self.resource_ref(),
        }
    }

    /// (resource, subresource) as a SubjectAccessReview spells them.
    pub fn split_resource(&self) -> (&'static str, Option<&'static str>) {
        match self.resource.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (self.resource, None),
        }
    }
}

/// Every permission the manager uses: the Runner's, one per child kind
/// ([`crate::kinds::all`]), then the rest, then those of `/metrics`' access
/// check ([`METRICS_AUTH`]) and of the webhooks ([`WEBHOOK`]),
/// which a manager needs only when it serves them. Keep in step with
/// `manager::*`.
pub static PERMISSIONS: LazyLock<Vec<Permission>> = LazyLock::new(|| {
    let children = crate::kinds::all().iter().map(|k| Permission {
        group: k.group(),
        resource: k.plural(),
        resource_name: None,
        verbs: CHILD_VERBS,
        scope: Scope::Watched,
        why: k.why(),
    });
    let rest = AFTER_CHILDREN.iter().chain(METRICS_AUTH).chain(WEBHOOK).copied();
    BEFORE_CHILDREN.iter().copied().chain(children).chain(rest).collect()
});

/// The Runner's own permissions, before the child kinds.
const BEFORE_CHILDREN: &[Permission] = &[
    Permission {
        group: crate::api::GROUP,
        resource: "runners",
        resource_name: None,
        verbs: &["get", "list", "watch", "patch", "update"],
        scope: Scope::Watched,
        why: "read Runners and add or remove the cleanup finalizer",
    },
    Permission {
        group: crate::api::GROUP,
        resource: "runners/status",
        resource_name: None,
        verbs: &["get", "patch", "update"],
        scope: Scope::Watched,
        why: "report status (replicas, phase, conditions)",
    },
    Permission {
        group: crate::api::GROUP,
        resource: "runners/finalizers",
        resource_name: None,
        verbs: &["update"],
        scope: Scope::Watched,
        why: "set blockOwnerDeletion on children where OwnerReferencesPermissionEnforcement is on",
    },
];

/// Verbs the manager needs on every child kind: watch it (get, list,
/// watch), create it with POST, keep it with server-side apply (patch),
/// remove it when unwanted (delete).
pub const CHILD_VERBS: &[&str] = &["get", "list", "watch", "create", "patch", "delete"];

/// After the child kinds.
const AFTER_CHILDREN: &[Permission] = &[
    Permission {
        group: "",
        resource: "pods",
        resource_name: None,
        verbs: &["get", "list", "watch"],
        scope: Scope::Watched,
        why: "explain a not-ready Runner with its Pods' waiting reasons",
    },
    Permission {
        group: "events.k8s.io",
        resource: "events",
        resource_name: None,
        verbs: &["create", "patch"],
        scope: Scope::Watched,
        why: "record AdoptionRefused and deletion Events on Runners",
    },
    Permission {
        group: "",
        resource: "configmaps",
        resource_name: None,
        verbs: &["create"],
        scope: Scope::Watched,
        why: "create the namespace's record of deleted Runners (kubectl runner history)",
    },
    Permission {
        group: "",
        resource: "configmaps",
        resource_name: Some(crate::deletion_record::CONFIGMAP),
        verbs: &["get", "patch"],
        scope: Scope::Watched,
        why: "add a deleted Runner to the namespace's record (kubectl runner history); no other ConfigMap",
    },
    Permission {
        group: "coordination.k8s.io",
        resource: "leases",
        resource_name: None,
        verbs: &["get", "create", "update", "patch", "delete"],
        scope: Scope::ManagerNamespace,
        why: "leader election, so two managers never reconcile at once; a presence Lease per running manager, so diagnose sees it",
    },
];

/// The reviews behind `/metrics`' access check (`--metrics-auth`).
pub const METRICS_AUTH: &[Permission] = &[
    Permission {
        group: "authentication.k8s.io",
        resource: "tokenreviews",
        resource_name: None,
        verbs: &["create"],
        scope: Scope::Cluster,
        why: "authenticate whoever scrapes /metrics (--metrics-auth)",
    },
    Permission {
        group: "authorization.k8s.io",
        resource: "subjectaccessreviews",
        resource_name: None,
        verbs: &["create"],
        scope: Scope::Cluster,
        why: "check that whoever scrapes /metrics may `get` it (--metrics-auth)",
    },
];

/// The webhooks': their certificates' Secret, read by name and updated
/// (install creates it, so no `create`), the caBundle of the Runner CRD and
/// of the Runner ValidatingWebhookConfiguration and no others, and the
/// validating webhook's index: Runners and Ingresses in every namespace
/// (a host is refused whichever namespace holds it), also for a manager
/// installed for some namespaces only.
pub const WEBHOOK: &[Permission] = &[
    Permission {
        group: "",
        resource: "secrets",
        resource_name: Some(crate::webhook::SECRET),
        verbs: &["get", "update", "watch"],
        scope: Scope::ManagerNamespace,
        why: "keep the webhooks' CA and serving certificate, and reload them when another replica renews them",
    },
    Permission {
        group: "apiextensions.k8s.io",
        resource: "customresourcedefinitions",
        resource_name: Some(crate::api::CRD_NAME),
        verbs: &["get", "patch"],
        scope: Scope::Cluster,
        why: "set the Runner CRD's conversion caBundle to the webhook's CA, so the apiserver trusts it",
    },
    Permission {
        group: "admissionregistration.k8s.io",
        resource: "validatingwebhookconfigurations",
        resource_name: Some(crate::webhook::VALIDATING_CONFIG),
        verbs: &["get", "patch"],
        scope: Scope::Cluster,
        why: "set the Runner validating webhook's caBundle to the webhook's CA, so the apiserver trusts it",
    },
    Permission {
        group: crate::api::GROUP,
        resource: "runners",
        resource_name: None,
        verbs: &["list", "watch"],
        scope: Scope::Cluster,
        why: "index every Runner's hosts, so the validating webhook refuses a host another Runner serves",
    },
    Permission {
        group: "networking.k8s.io",
        resource: "ingresses",
        resource_name: None,
        verbs: &["list", "watch"],
        scope: Scope::Cluster,
        why: "index every Ingress's hosts, so the validating webhook refuses a host an Ingress serves",
    },
];

/// The non-resource URL and verb a scraper needs for the manager's metrics:
/// what the manager asks in its SubjectAccessReview, and what the
/// metrics-reader ClusterRole grants.
pub const METRICS_PATH: &str = "/metrics";
pub const METRICS_VERB: &str = "get";

/// The rule of the metrics-reader ClusterRole; bind it to a scraper.
pub fn metrics_reader_rules() -> Vec<PolicyRule> {
    vec![PolicyRule {
        non_resource_urls: Some(vec![METRICS_PATH.to_string()]),
        verbs: vec![METRICS_VERB.to_string()],
        ..Default::default()
    }]
}

/// Permissions needed in the given scope.
pub fn permissions(scope: Scope) -> impl Iterator<Item = &'static Permission> {
    PERMISSIONS.iter().filter(move |p| p.scope == scope)
}

/// PolicyRules for one scope, one rule per permission (no wildcards).
pub fn policy_rules(scope: Scope) -> Vec<PolicyRule> {
    permissions(scope).map(rule).collect()
}

/// PolicyRules for the permissions of `list` in one scope (a ClusterRole
/// that holds only those, e.g. the webhook's).
pub fn policy_rules_of(list: &[Permission], scope: Scope) -> Vec<PolicyRule> {
    list.iter().filter(|p| p.scope == scope).map(rule).collect()
}

/// The rule granting one permission.
fn rule(p: &Permission) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![p.group.to_string()]),
        resources: Some(vec![p.resource.to_string()]),
        resource_names: p.resource_name.map(|n| vec![n.to_string()]),
        verbs: p.verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rule_uses_a_wildcard_and_only_the_webhook_touches_one_secret_and_one_crd() {
        for p in PERMISSIONS.iter() {
            assert!(!p.group.contains('*') && !p.resource.contains('*'), "{p:?}");
            assert!(!p.verbs.contains(&"*"), "{p:?}");
            if p.resource == "secrets" {
                assert_eq!(p.resource_name, Some("runner-webhook-tls"), "{p:?}");
                assert_eq!(p.scope, Scope::ManagerNamespace);
                assert_eq!(p.verbs, ["get", "update", "watch"], "no list: other Secrets stay unread");
            }
            if p.resource == "validatingwebhookconfigurations" {
                assert_eq!(p.resource_name, Some("runner-validation"), "{p:?}");
                assert_eq!(p.verbs, ["get", "patch"], "no create: install makes it, the manager keeps it");
            }
            if p.resource == "customresourcedefinitions" {
                assert_eq!(p.resource_name, Some("runners.lab.cloudlab.training"), "{p:?}");
                assert_eq!(p.verbs, ["get", "patch"]);
            }
        }
        assert!(WEBHOOK.iter().all(|w| PERMISSIONS.contains(w)));
    }

    #[test]
    fn a_named_permission_never_holds_create_and_is_a_rule_with_resource_names() {
        for p in PERMISSIONS.iter().filter(|p| p.resource_name.is_some()) {
            assert!(!p.verbs.contains(&"create"), "{p:?}");
        }
        let rules = policy_rules(Scope::Watched);
        let named: Vec<&PolicyRule> = rules.iter().filter(|r| r.resource_names.is_some()).collect();
        assert_eq!(named.len(), 1, "{named:?}");
        assert_eq!(named[0].resources.as_deref(), Some(&["configmaps".to_string()][..]));
        assert_eq!(named[0].resource_names.as_deref(), Some(&["runner-deletions".to_string()][..]));
        assert_eq!(named[0].verbs, ["get", "patch"]);
        // Other ConfigMaps: only create, which reads nothing.
        let any: Vec<&PolicyRule> = rules
            .iter()
            .filter(|r| {
                r.resources.as_deref() == Some(&["configmaps".to_string()][..]) && r.resource_names.is_none()
            })
            .collect();
        assert_eq!(any.len(), 1);
        assert_eq!(any[0].verbs, ["create"]);
    }

    #[test]
    fn resource_ref_reads_like_kubectl_auth_can_i() {
        let dep = PERMISSIONS.iter().find(|p| p.resource == "deployments").unwrap();
        assert_eq!(dep.resource_ref(), "deployments.apps");
        let svc = PERMISSIONS.iter().find(|p| p.resource == "services").unwrap();
        assert_eq!(svc.resource_ref(), "services");
        let st = PERMISSIONS.iter().find(|p| p.resource == "runners/status").unwrap();
        assert_eq!(st.resource_ref(), "runners.lab.cloudlab.training/status");
    }

    #[test]
    fn the_manager_can_list_and_watch_every_child_kind() {
        let children = crate::kinds::all().iter().map(|k| k.plural());
        for res in children.chain(["runners"]) {
            let p = PERMISSIONS.iter().find(|p| p.resource == res).unwrap();
            for v in ["list", "watch", "patch"] {
                assert!(p.verbs.contains(&v), "{res} lacks {v}");
            }
        }
    }
}
