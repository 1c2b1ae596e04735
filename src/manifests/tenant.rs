//! The tenant ClusterRoles ([`crate::rbac::TenantRole`]): `runner-viewer`,
//! `runner-editor` and `runner-admin`, each labelled so the built-in `view`,
//! `edit` and `admin` take its rules in. They go with the CRD: the CRD is
//! cluster-wide in every install, and without them a team bound to `edit`
//! in its namespace could not create a Runner there.

use super::{Manifest, cluster_role};
use crate::rbac::TenantRole;

/// The three ClusterRoles, viewer first.
pub fn tenant_roles() -> Vec<Manifest> {
    TenantRole::ALL
        .iter()
        .map(|&role| {
            let rules = serde_json::to_value(role.rules()).expect("rules serialize");
            let mut m = cluster_role(role.name(), &rules);
            let labels = m.object.metadata.labels.get_or_insert_with(Default::default);
            labels.insert(role.aggregation_label(), "true".into());
            m
        })
        .collect()
}

/// The names, for what `uninstall` and the docs list.
pub fn tenant_role_names() -> Vec<&'static str> {
    TenantRole::ALL.iter().map(|r| r.name()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifests::{INSTALLED_BY_LABEL, RbacScope, all};

    #[test]
    fn each_role_is_labelled_to_aggregate_and_as_installed_by_us() {
        let roles = tenant_roles();
        let described: Vec<String> = roles.iter().map(Manifest::describe).collect();
        assert_eq!(
            described,
            ["ClusterRole/runner-viewer", "ClusterRole/runner-editor", "ClusterRole/runner-admin"]
        );
        for (m, builtin) in roles.iter().zip(["view", "edit", "admin"]) {
            let labels = m.object.metadata.labels.clone().unwrap_or_default();
            let key = format!("rbac.authorization.k8s.io/aggregate-to-{builtin}");
            assert_eq!(labels.get(&key).map(String::as_str), Some("true"), "{}", m.describe());
            assert!(labels.contains_key(INSTALLED_BY_LABEL));
            assert!(m.object.data["rules"].as_array().is_some_and(|r| !r.is_empty()));
        }
    }

    #[test]
    fn every_install_applies_them_before_the_manager() {
        for scope in [RbacScope::Cluster, RbacScope::Namespaces(vec!["a".into()])] {
            let plan: Vec<String> = all(Some("img"), &scope).iter().map(Manifest::describe).collect();
            for name in tenant_role_names() {
                let at = plan.iter().position(|p| *p == format!("ClusterRole/{name}"));
                assert!(at.is_some_and(|i| i + 1 < plan.len()), "{name} in {plan:?}");
            }
            assert!(plan.last().unwrap().starts_with("Deployment"), "{plan:?}");
        }
    }
}
