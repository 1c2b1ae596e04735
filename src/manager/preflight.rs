//! Startup check: the CRD is served and this identity holds every permission
//! in [`crate::rbac::PERMISSIONS`]. Failing here, with the exact missing verbs,
//! beats the seeds' "manager Ready but no children" hours later.

use k8s_openapi::api::authorization::v1::ResourceAttributes;
use kube::api::{Api, ListParams};

use super::error::{Error, Result};
use crate::api::Runner;
use crate::rbac::{METRICS_AUTH, PERMISSIONS, Permission, Scope, WEBHOOK};

/// One permission this identity lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub verb: &'static str,
    pub permission: Permission,
    /// None: cluster-wide.
    pub namespace: Option<String>,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let where_ =
            self.namespace.as_deref().map(|n| format!("in namespace {n}")).unwrap_or("cluster-wide".into());
        write!(
            f,
            "can't {} {} {where_} (needed to {})",
            self.verb,
            self.permission.target(),
            self.permission.why
        )
    }
}

/// Runs both checks, in each watched namespace (none: cluster-wide); the
/// error lists every missing verb and the fix.
pub async fn check(
    client: &kube::Client,
    watched: &[String],
    lease_ns: Option<&str>,
    metrics_auth: bool,
    webhook_ns: Option<&str>,
) -> Result<()> {
    let scopes: Vec<Option<&str>> =
        if watched.is_empty() { vec![None] } else { watched.iter().map(|n| Some(n.as_str())).collect() };
    let runners: Api<Runner> = crate::client::scoped(client, scopes[0]);
    match runners.list_metadata(&ListParams::default().limit(1)).await {
        Err(e) if crate::error::is_not_found(&e) => return Err(Error::CrdMissing),
        // 403 is reported below with the other permissions.
        Err(kube::Error::Api(s)) if s.is_forbidden() => {}
        Err(e) => {
            return Err(Error::ClusterUnreachable(crate::error::describe_kube(&e)));
        }
        Ok(_) => {}
    }
    let mut missing = Vec::new();
    for (i, ns) in scopes.iter().enumerate() {
        // The manager's own namespace and the cluster once, with the first.
        let (lease_ns, metrics_auth, webhook_ns) =
            if i == 0 { (lease_ns, metrics_auth, webhook_ns) } else { (None, false, None) };
        missing.extend(missing_permissions(client, *ns, lease_ns, metrics_auth, webhook_ns).await?);
    }
    if missing.is_empty() {
        return Ok(());
    }
    // Named, because locally it may be the kubeconfig's user or an
    // impersonated ServiceAccount (`run-manager --as-service-account`).
    let who = crate::service_account::whoami(client).await.map(|(user, _)| user);
    Err(Error::PermissionsMissing(lacking(&missing, who.as_deref())))
}

/// The preflight's refusal: who lacks what, and the fix.
fn lacking(missing: &[Missing], who: Option<&str>) -> String {
    let lines: Vec<String> = missing.iter().map(|m| format!("  - {m}")).collect();
    let who = who.map(|u| format!(" ({u})")).unwrap_or_default();
    let manager = crate::service_account::ServiceAccountRef::manager().user();
    let check = match who.strip_prefix(" (system:serviceaccount:").and_then(|r| r.strip_suffix(')')) {
        Some(sa) if format!("system:serviceaccount:{sa}") != manager => {
            format!(
                "`kubectl runner diagnose --service-account {}` names a grant for each",
                sa.replacen(':', "/", 1)
            )
        }
        _ => "check with `kubectl runner diagnose`".into(),
    };
    format!(
        "the manager's identity{who} lacks {} permission(s):\n{}\nfix: `kubectl runner install` (or `kubectl apply -f manifests/rbac.yaml`), \
         then {check}",
        missing.len(),
        lines.join("\n")
    )
}

/// SelfSubjectAccessReviews for every (verb, resource) the manager uses:
/// the Lease ones with `lease_ns`, the `/metrics` reviews with
/// `metrics_auth`, the webhooks' with `webhook_ns` (its Secret's
/// namespace).
pub async fn missing_permissions(
    client: &kube::Client,
    watch_ns: Option<&str>,
    lease_ns: Option<&str>,
    metrics_auth: bool,
    webhook_ns: Option<&str>,
) -> Result<Vec<Missing>> {
    let mut missing = Vec::new();
    for p in PERMISSIONS.iter() {
        let (webhook, metrics) = (WEBHOOK.contains(p), METRICS_AUTH.contains(p));
        let namespace = match p.scope {
            Scope::Watched => watch_ns,
            Scope::ManagerNamespace if webhook => match webhook_ns {
                Some(ns) => Some(ns),
                None => continue,
            },
            Scope::ManagerNamespace => match lease_ns {
                Some(ns) => Some(ns),
                None => continue,
            },
            Scope::Cluster if (webhook && webhook_ns.is_some()) || (metrics && metrics_auth) => None,
            Scope::Cluster => continue,
        };
        let (resource, subresource) = p.split_resource();
        for verb in p.verbs {
            let attributes = ResourceAttributes {
                group: Some(p.group.into()),
                resource: Some(resource.into()),
                subresource: subresource.map(Into::into),
                verb: Some((*verb).into()),
                name: p.resource_name.map(Into::into),
                namespace: namespace.map(Into::into),
                ..Default::default()
            };
            if !crate::client::can_i(client, attributes).await? {
                missing.push(Missing { verb, permission: *p, namespace: namespace.map(Into::into) });
            }
        }
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create_deployments(ns: &str) -> Missing {
        let permission = *PERMISSIONS.iter().find(|p| p.resource == "deployments").unwrap();
        Missing { verb: "create", permission, namespace: Some(ns.into()) }
    }

    #[test]
    fn the_refusal_names_the_identity_and_each_missing_verb() {
        let m = lacking(&[create_deployments("team")], Some("system:serviceaccount:team:mgr"));
        assert!(
            m.starts_with("the manager's identity (system:serviceaccount:team:mgr) lacks 1 permission(s):"),
            "{m}"
        );
        assert!(m.contains("  - can't create deployments.apps in namespace team (needed to"), "{m}");
        assert!(m.contains("kubectl runner diagnose --service-account team/mgr"), "{m}");
    }

    #[test]
    fn the_installed_manager_or_an_unknown_identity_is_pointed_at_install() {
        let sa = "system:serviceaccount:runner-system:runner-controller-manager";
        for who in [Some(sa), Some("kubernetes-admin"), None] {
            let m = lacking(&[create_deployments("team")], who);
            assert!(m.contains("fix: `kubectl runner install`"), "{m}");
            assert!(m.ends_with("then check with `kubectl runner diagnose`"), "{m}");
        }
    }
}
