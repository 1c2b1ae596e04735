//! The ServiceAccount's access: one SubjectAccessReview per (namespace,
//! permission, verb) from [`crate::rbac::PERMISSIONS`], asked as the
//! ServiceAccount's user and groups, exactly as `kubectl auth can-i --as`
//! would; and the (Cluster)RoleBindings that name it, with their rules.

use std::collections::BTreeMap;

use futures::{StreamExt, stream};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};

use super::Gaps;
use crate::diagnose::snapshot::{AccessCheck, Grant, ServiceAccountRef};
use crate::rbac::{PERMISSIONS, Permission, Scope};

/// Reviews in flight at once: enough to finish ~35 reviews in a few round
/// trips without flooding the apiserver.
const CONCURRENCY: usize = 16;

/// Access checks (in PERMISSIONS order) and grants. `watched` holds the
/// namespaces for [`Scope::Watched`]; "" means cluster-wide. The
/// [`Scope::ManagerNamespace`] ones (the Lease) are asked in the
/// ServiceAccount's namespace: a Pod runs in its ServiceAccount's namespace,
/// and the manager keeps its Lease in its own (`POD_NAMESPACE`).
pub async fn read(
    client: &Client,
    sa: &ServiceAccountRef,
    watched: &[String],
) -> (Vec<AccessCheck>, Vec<Grant>, Gaps) {
    let mut asks: Vec<(String, &'static Permission, &'static str)> = vec![];
    for p in PERMISSIONS.iter() {
        let namespaces: Vec<String> = match p.scope {
            Scope::Watched => watched.to_vec(),
            Scope::ManagerNamespace => vec![sa.namespace.clone()],
            // The /metrics reviews: only a cluster-wide manager serves
            // /metrics with auth (a namespace-scoped one, on loopback).
            Scope::Cluster if watched.iter().any(String::is_empty) => vec![String::new()],
            Scope::Cluster => vec![],
        };
        for ns in namespaces {
            for verb in p.verbs {
                asks.push((ns.clone(), p, verb));
            }
        }
    }
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answers: Vec<kube::Result<AccessCheck>> = stream::iter(asks)
        .map(|(ns, p, verb)| {
            let api = api.clone();
            async move {
                let review = api.create(&PostParams::default(), &review(sa, &ns, p, verb)).await?;
                let st = review.status.unwrap_or_default();
                let reason = [st.reason, st.evaluation_error].into_iter().flatten().filter(|s| !s.is_empty());
                Ok(AccessCheck {
                    namespace: ns,
                    permission: p,
                    verb,
                    allowed: st.allowed,
                    reason: reason.collect::<Vec<_>>().join("; "),
                })
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let mut gaps = Gaps::default();
    let mut access = vec![];
    for a in answers {
        if let Some(a) = gaps.take("create SubjectAccessReviews (diagnose needs create on subjectaccessreviews.authorization.k8s.io)", a) {
            access.push(a);
        }
    }
    // One gap is enough to say the reviews failed.
    gaps.0.dedup_by(|a, b| a.what == b.what);
    let grants = grants(client, sa, watched, &mut gaps).await;
    (access, grants, gaps)
}

fn review(sa: &ServiceAccountRef, ns: &str, p: &Permission, verb: &str) -> SubjectAccessReview {
    let (resource, subresource) = p.split_resource();
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(sa.user()),
            // As a real token (and `kubectl auth can-i --as`): with system:authenticated.
            groups: Some(sa.token_groups()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.to_string()).filter(|n| !n.is_empty()),
                verb: Some(verb.to_string()),
                group: Some(p.group.to_string()),
                resource: Some(resource.to_string()),
                subresource: subresource.map(String::from),
                name: p.resource_name.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Bindings naming the ServiceAccount in the watched namespaces, its own
/// namespace and cluster-wide, with the rules of their roles.
async fn grants(client: &Client, sa: &ServiceAccountRef, watched: &[String], gaps: &mut Gaps) -> Vec<Grant> {
    let lp = ListParams::default();
    let crbs: Api<ClusterRoleBinding> = Api::all(client.clone());
    let mut bindings: Vec<(String, String, String, RoleRef, Vec<Subject>)> = vec![];
    if let Some(l) = gaps.take("list ClusterRoleBindings", crbs.list(&lp).await) {
        for b in l.items {
            let name = b.metadata.name.unwrap_or_default();
            bindings.push((
                "ClusterRoleBinding".into(),
                String::new(),
                name,
                b.role_ref,
                b.subjects.unwrap_or_default(),
            ));
        }
    }
    let mut namespaces: Vec<String> = watched.to_vec();
    namespaces.push(sa.namespace.clone());
    namespaces.sort();
    namespaces.dedup();
    for ns in &namespaces {
        let rbs: Api<RoleBinding> =
            if ns.is_empty() { Api::all(client.clone()) } else { Api::namespaced(client.clone(), ns) };
        let what = if ns.is_empty() {
            "list RoleBindings in all namespaces".into()
        } else {
            format!("list RoleBindings in {ns}")
        };
        if let Some(l) = gaps.take(what, rbs.list(&lp).await) {
            for b in l.items {
                let bns = b.metadata.namespace.unwrap_or_default();
                let name = b.metadata.name.unwrap_or_default();
                bindings.push(("RoleBinding".into(), bns, name, b.role_ref, b.subjects.unwrap_or_default()));
            }
        }
    }
    bindings.retain(|b| sa.is_bound_by(&b.4));
    bindings.sort_by(|a, b| (&a.1, &a.2).cmp(&(&b.1, &b.2)));
    bindings.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1 && a.2 == b.2);
    let mut rules: BTreeMap<(String, String, String), Vec<PolicyRule>> = BTreeMap::new();
    let mut out = vec![];
    for (kind, ns, name, role_ref, _) in bindings {
        let key = (
            role_ref.kind.clone(),
            if role_ref.kind == "Role" { ns.clone() } else { String::new() },
            role_ref.name.clone(),
        );
        if !rules.contains_key(&key) {
            let got = match role_ref.kind.as_str() {
                "ClusterRole" => {
                    let api: Api<ClusterRole> = Api::all(client.clone());
                    gaps.take(format!("get ClusterRole {}", role_ref.name), api.get_opt(&role_ref.name).await)
                        .flatten()
                        .and_then(|r| r.rules)
                }
                _ => {
                    let api: Api<Role> = Api::namespaced(client.clone(), &ns);
                    gaps.take(format!("get Role {ns}/{}", role_ref.name), api.get_opt(&role_ref.name).await)
                        .flatten()
                        .and_then(|r| r.rules)
                }
            };
            rules.insert(key.clone(), got.unwrap_or_default());
        }
        out.push(Grant {
            binding_kind: kind,
            binding_namespace: ns,
            binding_name: name,
            role_kind: role_ref.kind,
            role_name: role_ref.name,
            rules: rules[&key].clone(),
        });
    }
    out
}
