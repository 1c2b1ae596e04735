//! The roles for the people who use Runners (not the manager), as data:
//! [`TENANT_PERMISSIONS`] drives the `runner-viewer`, `runner-editor` and
//! `runner-admin` ClusterRoles (in `manifests/`), aggregated into the
//! built-in `view`, `edit` and `admin`.

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::{Permission, Scope, rule};

/// A role for the people who use Runners (not the manager), aggregated
/// into a built-in ClusterRole: whoever is bound to `view`, `edit` or
/// `admin` in a namespace (`kubectl create rolebinding --clusterrole=edit`)
/// reaches Runners there as they reach Deployments. Ordered: each role holds
/// everything the ones before it hold, so it also works bound on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TenantRole {
    Viewer,
    Editor,
    Admin,
}

impl TenantRole {
    pub const ALL: [TenantRole; 3] = [TenantRole::Viewer, TenantRole::Editor, TenantRole::Admin];

    /// The ClusterRole's name.
    pub fn name(self) -> &'static str {
        match self {
            TenantRole::Viewer => "runner-viewer",
            TenantRole::Editor => "runner-editor",
            TenantRole::Admin => "runner-admin",
        }
    }

    /// The built-in ClusterRole its rules are aggregated into.
    pub fn aggregates_to(self) -> &'static str {
        match self {
            TenantRole::Viewer => "view",
            TenantRole::Editor => "edit",
            TenantRole::Admin => "admin",
        }
    }

    /// The label the built-in role's aggregation rule selects.
    pub fn aggregation_label(self) -> String {
        format!("rbac.authorization.k8s.io/aggregate-to-{}", self.aggregates_to())
    }

    /// Its permissions: every [`TENANT_PERMISSIONS`] entry of this role or
    /// a lesser one.
    pub fn permissions(self) -> impl Iterator<Item = &'static Permission> {
        TENANT_PERMISSIONS.iter().filter(move |(least, _)| *least <= self).map(|(_, p)| p)
    }

    /// Its rules: one per resource (and resource name), the verbs of its
    /// permissions merged in list order.
    pub fn rules(self) -> Vec<PolicyRule> {
        let mut out: Vec<PolicyRule> = vec![];
        for p in self.permissions() {
            let rule = rule(p);
            match out.iter_mut().find(|r| {
                (&r.api_groups, &r.resources, &r.resource_names)
                    == (&rule.api_groups, &rule.resources, &rule.resource_names)
            }) {
                Some(r) => r.verbs.extend(rule.verbs),
                None => out.push(rule),
            }
        }
        out
    }
}

/// What tenants may do, each with the least [`TenantRole`] that holds it.
/// Nothing here reaches a child: a tenant reads every child kind and the
/// Pods through `view` itself, and never
/// writes a Runner's status or finalizers (the manager's). The deletion
/// record is readable by its name only, so `runner-viewer` opens no other
/// ConfigMap; it is written by the manager alone.
pub const TENANT_PERMISSIONS: &[(TenantRole, Permission)] = &[
    (
        TenantRole::Viewer,
        tenant("runners", None, &["get", "list", "watch"], "see Runners (get, describe, diagnose, get -w)"),
    ),
    (TenantRole::Viewer, tenant("runners/status", None, &["get"], "read a Runner's status")),
    (
        TenantRole::Viewer,
        tenant(
            "runners/scale",
            None,
            &["get"],
            "read a Runner's replica count through the scale subresource",
        ),
    ),
    (
        TenantRole::Viewer,
        Permission {
            group: "",
            resource: "configmaps",
            resource_name: Some(crate::deletion_record::CONFIGMAP),
            verbs: &["get", "list", "watch"],
            scope: Scope::Watched,
            why: "read the namespace's record of deleted Runners (kubectl runner history); no other ConfigMap",
        },
    ),
    (
        TenantRole::Editor,
        tenant(
            "runners",
            None,
            &["create", "update", "patch", "delete"],
            "create, change and delete Runners",
        ),
    ),
    (
        TenantRole::Editor,
        tenant(
            "runners/scale",
            None,
            &["update", "patch"],
            "scale Runners (kubectl runner scale, kubectl scale, an autoscaler)",
        ),
    ),
    (
        TenantRole::Admin,
        tenant("runners", None, &["deletecollection"], "delete every Runner of a namespace in one request"),
    ),
];

/// A tenant permission on a Runner resource.
const fn tenant(
    resource: &'static str,
    resource_name: Option<&'static str>,
    verbs: &'static [&'static str],
    why: &'static str,
) -> Permission {
    Permission { group: crate::api::GROUP, resource, resource_name, verbs, scope: Scope::Watched, why }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verbs(role: TenantRole, resource: &str) -> Vec<String> {
        role.rules()
            .into_iter()
            .filter(|r| r.resources.as_deref() == Some(&[resource.to_string()][..]))
            .flat_map(|r| r.verbs)
            .collect()
    }

    #[test]
    fn the_viewer_reads_runners_and_the_editor_also_writes_and_scales_them() {
        assert_eq!(verbs(TenantRole::Viewer, "runners"), ["get", "list", "watch"]);
        assert_eq!(verbs(TenantRole::Viewer, "runners/scale"), ["get"]);
        assert_eq!(
            verbs(TenantRole::Editor, "runners"),
            ["get", "list", "watch", "create", "update", "patch", "delete"]
        );
        assert_eq!(verbs(TenantRole::Editor, "runners/scale"), ["get", "update", "patch"]);
        assert!(verbs(TenantRole::Admin, "runners").contains(&"deletecollection".to_string()));
        assert!(!verbs(TenantRole::Editor, "runners").contains(&"deletecollection".to_string()));
    }

    #[test]
    fn every_role_reads_the_deletion_record_by_its_name_and_no_other_configmap() {
        for role in TenantRole::ALL {
            let cms: Vec<PolicyRule> = role
                .rules()
                .into_iter()
                .filter(|r| r.resources.as_deref() == Some(&["configmaps".to_string()][..]))
                .collect();
            assert_eq!(cms.len(), 1, "{role:?}: {cms:?}");
            assert_eq!(cms[0].resource_names.as_deref(), Some(&["runner-deletions".to_string()][..]));
            assert_eq!(cms[0].verbs, ["get", "list", "watch"], "{role:?}");
        }
    }

    #[test]
    fn no_tenant_touches_a_child_the_status_the_finalizers_or_a_wildcard() {
        let children: Vec<&str> = crate::kinds::all().iter().map(|k| k.plural()).collect();
        for role in TenantRole::ALL {
            for p in role.permissions() {
                assert!(!children.contains(&p.resource), "{role:?} reaches {}", p.resource);
                assert!(!p.resource.contains('*') && !p.verbs.contains(&"*"), "{p:?}");
                assert_ne!(p.resource, "runners/finalizers");
                if p.resource == "runners/status" || p.resource == "configmaps" {
                    assert!(p.verbs.iter().all(|v| ["get", "list", "watch"].contains(v)), "{p:?}");
                }
            }
        }
    }

    #[test]
    fn each_role_holds_everything_the_lesser_ones_hold_and_aggregates_into_its_builtin() {
        for pair in TenantRole::ALL.windows(2) {
            for p in pair[0].permissions() {
                assert!(pair[1].permissions().any(|q| q == p), "{:?} lacks {p:?}", pair[1]);
            }
        }
        let labels: Vec<String> = TenantRole::ALL.iter().map(|r| r.aggregation_label()).collect();
        assert_eq!(
            labels,
            [
                "rbac.authorization.k8s.io/aggregate-to-view",
                "rbac.authorization.k8s.io/aggregate-to-edit",
                "rbac.authorization.k8s.io/aggregate-to-admin"
            ]
        );
    }
}
