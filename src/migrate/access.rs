//! What migrate needs to be allowed, asked before it starts. migrate runs
//! with the user's own credentials; a user who may update Runners but not
//! the CRD's status would otherwise rewrite every Runner and only then be
//! refused the prune. SelfSubjectAccessReviews answer for the whole list at
//! once, and the refusal names each missing permission.

use k8s_openapi::api::authorization::v1::ResourceAttributes;
use kube::Client;

use super::Error;
use super::svm::SVM_GROUP;
use crate::api::{CRD_NAME, GROUP};

/// One permission: verb, API group, resource (with `/subresource`), and the
/// one object's name when it is about one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    pub verb: &'static str,
    pub group: &'static str,
    pub resource: &'static str,
    pub name: Option<&'static str>,
}

const CRDS: &str = "apiextensions.k8s.io";

/// The permissions a run needs: with a StorageVersionMigration (`svm`) the
/// control plane rewrites, else this process does.
pub fn needed(svm: bool) -> Vec<Permission> {
    let p = |verb, group, resource, name| Permission { verb, group, resource, name };
    let mut list = vec![
        p("get", CRDS, "customresourcedefinitions", Some(CRD_NAME)),
        p("update", CRDS, "customresourcedefinitions/status", Some(CRD_NAME)),
        p("list", GROUP, "runners", None),
    ];
    if svm {
        list.push(p("create", SVM_GROUP, "storageversionmigrations", None));
        list.push(p("get", SVM_GROUP, "storageversionmigrations", None));
    } else {
        list.push(p("update", GROUP, "runners", None));
    }
    list
}

/// `update customresourcedefinitions/status runners.lab.cloudlab.training
/// (apiextensions.k8s.io)`, `update runners (lab.cloudlab.training) in all namespaces`.
pub fn describe(p: &Permission) -> String {
    match p.name {
        Some(name) => format!("{} {} {name} ({})", p.verb, p.resource, p.group),
        None => format!("{} {} ({}) in all namespaces", p.verb, p.resource, p.group),
    }
}

/// The permissions of `needed` the current user lacks, described.
pub async fn missing(client: &Client, needed: &[Permission]) -> Result<Vec<String>, Error> {
    let mut missing = Vec::new();
    for p in needed {
        let (resource, subresource) = match p.resource.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (p.resource, None),
        };
        let attributes = ResourceAttributes {
            group: Some(p.group.into()),
            resource: Some(resource.into()),
            subresource: subresource.map(Into::into),
            verb: Some(p.verb.into()),
            name: p.name.map(Into::into),
            ..Default::default()
        };
        if !crate::client::can_i(client, attributes).await? {
            missing.push(describe(p));
        }
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_update_path_needs_update_on_runners_and_on_the_crds_status() {
        let described: Vec<String> = needed(false).iter().map(describe).collect();
        assert!(described.contains(&"update runners (lab.cloudlab.training) in all namespaces".to_string()));
        assert!(described.contains(
            &"update customresourcedefinitions/status runners.lab.cloudlab.training (apiextensions.k8s.io)".to_string()
        ));
        assert!(!described.iter().any(|d| d.contains("storageversionmigrations")));
    }

    #[test]
    fn the_storage_version_migration_path_needs_to_create_one_instead_of_updating_runners() {
        let described: Vec<String> = needed(true).iter().map(describe).collect();
        assert!(described.iter().any(|d| d.starts_with("create storageversionmigrations")));
        assert!(!described.iter().any(|d| d.starts_with("update runners")));
    }
}
