//! Permissions, answered the way `kubectl auth can-i
//! --as=system:serviceaccount:NS:SA` answers them: every denied (verb,
//! resource, namespace) from [`crate::rbac::PERMISSIONS`] is one finding,
//! `can't VERB RESOURCE in NS`, with the commands that grant exactly it.
//! When nothing at all is granted in a watched namespace, that is one finding
//! with the install command instead of thirty. The Lease permissions are
//! asked in the ServiceAccount's own namespace (where its Pod, and so its
//! Lease, lives).
//! Over-broad grants (wildcards, secrets, cluster-admin) on the
//! ServiceAccount's bindings are warnings: the manager needs none of them.

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::super::finding::{Code, Finding, ObjectRef};
use super::super::snapshot::{AccessCheck, Grant, ServiceAccountRef, Snapshot};
use crate::rbac::Scope;
use crate::webhook::SECRET;

/// `in NS`, or `cluster-wide` for the "" namespace.
fn where_(ns: &str) -> String {
    if ns.is_empty() { "cluster-wide".into() } else { format!("in {ns}") }
}

/// The two commands that grant exactly one denied permission.
pub fn grant_command(a: &AccessCheck, sa: &ServiceAccountRef) -> String {
    let res = a.permission.resource_ref();
    let role = format!("runner-manager-{}-{}", a.verb, res.replace('/', "-"));
    // `--resource-name` limits the grant to the one object, as the install does.
    let res = match a.permission.resource_name {
        Some(name) => format!("{res} --resource-name={name}"),
        None => res,
    };
    let sa_flag = format!("--serviceaccount={}:{}", sa.namespace, sa.name);
    if a.namespace.is_empty() {
        format!(
            "kubectl create clusterrole {role} --verb={} --resource={res} && \
             kubectl create clusterrolebinding {role} --clusterrole={role} {sa_flag}",
            a.verb
        )
    } else {
        let ns = &a.namespace;
        format!(
            "kubectl create role {role} -n {ns} --verb={} --resource={res} && \
             kubectl create rolebinding {role} -n {ns} --role={role} {sa_flag}",
            a.verb
        )
    }
}

pub fn check(s: &Snapshot) -> Vec<Finding> {
    let sa = &s.service_account;
    let sa_ref = ObjectRef::new("ServiceAccount", &sa.namespace, &sa.name);
    if s.service_account_exists == Some(false) {
        let in_cluster = s.manager.deployment.is_some();
        let msg = format!("ServiceAccount {sa} does not exist, so its permissions were not checked");
        let f = if in_cluster {
            Finding::error(Code::ServiceAccountMissing, sa_ref, msg)
                .evidence("the in-cluster manager's Pods cannot be created without it")
        } else {
            Finding::warning(Code::ServiceAccountMissing, sa_ref, msg)
                .evidence("fine for a local manager; the in-cluster one needs it")
        };
        return vec![f.fix("kubectl runner install")];
    }
    let mut out = denials(s, &sa_ref);
    for g in &s.grants {
        out.extend(overbroad(g, &sa_ref));
    }
    out
}

fn denials(s: &Snapshot, sa_ref: &ObjectRef) -> Vec<Finding> {
    let sa = &s.service_account;
    // (namespace, scope) groups in first-seen order.
    let mut groups: Vec<(&str, Scope)> = vec![];
    for a in &s.access {
        let key = (a.namespace.as_str(), a.permission.scope);
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    let mut out = vec![];
    for (ns, scope) in groups {
        let here: Vec<&AccessCheck> =
            s.access.iter().filter(|a| a.namespace == ns && a.permission.scope == scope).collect();
        let denied: Vec<&AccessCheck> = here.iter().copied().filter(|a| !a.allowed).collect();
        // Nothing bound at all: one finding with the install command, not 30.
        if scope == Scope::Watched && denied.len() > 1 && denied.len() == here.len() {
            out.push(
                Finding::error(
                    Code::PermissionDenied,
                    sa_ref.clone(),
                    format!(
                        "can't do anything the manager needs {}: all {} checks denied",
                        where_(ns),
                        here.len()
                    ),
                )
                .evidence(format!("e.g. can't {} {}", denied[0].verb, denied[0].permission.target()))
                .evidence("no Role or ClusterRole from the install is bound to this ServiceAccount here")
                .fix(if ns.is_empty() {
                    "kubectl runner install".to_string()
                } else {
                    format!("kubectl runner install --namespace-scoped {ns}")
                }),
            );
            continue;
        }
        for a in denied {
            let mut f = Finding::error(
                Code::PermissionDenied,
                sa_ref.clone(),
                format!("can't {} {} {}", a.verb, a.permission.target(), where_(ns)),
            )
            .evidence(format!("needed to {}", a.permission.why));
            if !a.reason.is_empty() {
                f = f.evidence(format!("authorizer: {}", a.reason));
            }
            out.push(f.fix(grant_command(a, sa)));
        }
    }
    out
}

/// Why a rule grants more than the manager needs, if it does.
fn too_broad(r: &PolicyRule) -> Option<String> {
    let has = |v: &Option<Vec<String>>, x: &str| v.iter().flatten().any(|s| s == x);
    let mut why = vec![];
    if r.verbs.iter().any(|v| v == "*") {
        why.push("all verbs (*)");
    }
    if has(&r.resources, "*") {
        why.push("all resources (*)");
    }
    if has(&r.api_groups, "*") {
        why.push("all API groups (*)");
    }
    let core = has(&r.api_groups, "") || has(&r.api_groups, "*");
    // The one Secret the manager keeps (its webhook's certificates) is
    // what it needs; any other Secret, or all of them, is not.
    let only_ours = r.resource_names.as_ref().is_some_and(|n| !n.is_empty() && n.iter().all(|n| n == SECRET));
    if core && (has(&r.resources, "*") || (has(&r.resources, "secrets") && !only_ours)) {
        why.push("Secrets");
    }
    if why.is_empty() {
        return None;
    }
    let list = |v: &Option<Vec<String>>| v.clone().unwrap_or_default().join(",");
    Some(format!(
        "{} (apiGroups=[{}] resources=[{}] verbs=[{}])",
        why.join(", "),
        list(&r.api_groups),
        list(&r.resources),
        r.verbs.join(",")
    ))
}

fn overbroad(g: &Grant, sa_ref: &ObjectRef) -> Option<Finding> {
    let reasons: Vec<String> = g.rules.iter().filter_map(too_broad).collect();
    if reasons.is_empty() && g.role_name != "cluster-admin" {
        return None;
    }
    let binding = if g.binding_namespace.is_empty() {
        format!("{} {}", g.binding_kind, g.binding_name)
    } else {
        format!("{} {}/{}", g.binding_kind, g.binding_namespace, g.binding_name)
    };
    let mut f = Finding::warning(
        Code::OverbroadGrant,
        sa_ref.clone(),
        format!("{binding} grants {} {}, more than the manager needs", g.role_kind, g.role_name),
    );
    for r in reasons {
        f = f.evidence(format!("grants {r}"));
    }
    let ns_flag =
        if g.binding_namespace.is_empty() { String::new() } else { format!(" -n {}", g.binding_namespace) };
    Some(f.fix(format!(
        "kubectl delete {}{ns_flag} {}   # after `kubectl runner install` has bound the generated, minimal rules",
        g.binding_kind.to_lowercase(),
        g.binding_name
    )))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::*;
    use crate::diagnose::finding::Severity;
    use serde_json::json;

    fn deny(s: &mut Snapshot, resource: &str, verb: &str) {
        for a in s.access.iter_mut().filter(|a| a.permission.resource == resource && a.verb == verb) {
            a.allowed = false;
        }
    }

    #[test]
    fn a_single_denial_is_reported_like_kubectl_auth_can_i() {
        let mut s = fixtures::healthy();
        deny(&mut s, "services", "list");
        let f = check(&s);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].message, "can't list services in app");
        assert_eq!(f[0].severity, Severity::Error);
        let fix = f[0].fix.as_deref().unwrap();
        assert!(fix.contains(
            "kubectl create role runner-manager-list-services -n app --verb=list --resource=services"
        ));
        assert!(fix.contains("--serviceaccount=runner-system:runner-controller-manager"), "{fix}");
    }

    #[test]
    fn a_denial_of_the_one_named_configmap_grants_only_that_name() {
        let mut s = fixtures::healthy();
        let named_configmap =
            |a: &AccessCheck| a.permission.resource_name.is_some() && a.permission.resource == "configmaps";
        for a in s.access.iter_mut().filter(|a| named_configmap(a) && a.verb == "patch") {
            a.allowed = false;
        }
        let f = check(&s);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].message, "can't patch configmaps named runner-deletions in app");
        let fix = f[0].fix.as_deref().unwrap();
        assert!(
            fix.contains("--verb=patch --resource=configmaps --resource-name=runner-deletions &&"),
            "{fix}"
        );
    }

    #[test]
    fn cluster_wide_denials_suggest_a_cluster_role() {
        let mut s = fixtures::healthy();
        s.access = fixtures::all_allowed("");
        deny(&mut s, "deployments", "watch");
        let f = check(&s);
        assert_eq!(f[0].message, "can't watch deployments.apps cluster-wide");
        assert!(f[0].fix.as_deref().unwrap().starts_with("kubectl create clusterrole "), "{:?}", f[0].fix);
    }

    #[test]
    fn everything_denied_in_a_namespace_is_one_finding() {
        let mut s = fixtures::healthy();
        for a in s.access.iter_mut().filter(|a| a.namespace == "app") {
            a.allowed = false;
        }
        let f = check(&s);
        assert_eq!(f.len(), 1, "{f:#?}");
        let n: usize = crate::rbac::permissions(crate::rbac::Scope::Watched).map(|p| p.verbs.len()).sum();
        assert_eq!(
            f[0].message,
            format!("can't do anything the manager needs in app: all {n} checks denied")
        );
    }

    #[test]
    fn several_watched_namespaces_are_each_reported_once() {
        let mut s = fixtures::healthy();
        // Interleaved as gather produces them: per permission, per namespace.
        s.access = crate::rbac::PERMISSIONS
            .iter()
            .flat_map(|p| {
                let nss: &[&str] = if p.scope == Scope::Watched { &["a", "b"] } else { &["runner-system"] };
                nss.iter().flat_map(move |ns| {
                    p.verbs.iter().map(move |verb| AccessCheck {
                        namespace: ns.to_string(),
                        permission: p,
                        verb,
                        allowed: !(p.resource == "services" && *verb == "list"),
                        reason: String::new(),
                    })
                })
            })
            .collect();
        let msgs: Vec<String> = check(&s).into_iter().map(|f| f.message).collect();
        assert_eq!(msgs, ["can't list services in a", "can't list services in b"]);
    }

    #[test]
    fn lease_denials_are_listed_one_by_one_not_summarised() {
        let mut s = fixtures::healthy();
        for a in s.access.iter_mut().filter(|a| a.permission.scope == Scope::ManagerNamespace) {
            a.allowed = false;
        }
        let f = check(&s);
        let verbs: usize = crate::rbac::permissions(Scope::ManagerNamespace).map(|p| p.verbs.len()).sum();
        assert_eq!(f.len(), verbs, "one finding per verb: {f:#?}");
        assert_eq!(f[0].message, "can't get leases.coordination.k8s.io in runner-system");
    }

    #[test]
    fn a_missing_service_account_skips_the_reviews() {
        let mut s = fixtures::healthy();
        s.service_account_exists = Some(false);
        deny(&mut s, "services", "list");
        let f = check(&s);
        assert_eq!(f.iter().map(|f| f.code).collect::<Vec<_>>(), [Code::ServiceAccountMissing]);
        assert_eq!(f[0].severity, Severity::Error);
    }

    #[test]
    fn over_broad_grants() {
        let cases: &[(&str, serde_json::Value, bool)] = &[
            (
                "generated rules",
                json!({ "apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"] }),
                false,
            ),
            (
                "all verbs",
                json!({ "apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"] }),
                true,
            ),
            ("all resources", json!({ "apiGroups": [""], "resources": ["*"], "verbs": ["get"] }), true),
            ("secrets", json!({ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get"] }), true),
            (
                "the webhook's Secret by name",
                json!({ "apiGroups": [""], "resources": ["secrets"], "resourceNames": [SECRET], "verbs": ["get", "update", "watch"] }),
                false,
            ),
            (
                "another Secret by name",
                json!({ "apiGroups": [""], "resources": ["secrets"], "resourceNames": [SECRET, "db"], "verbs": ["get"] }),
                true,
            ),
        ];
        for (name, rule, want) in cases {
            let mut s = fixtures::healthy();
            s.grants[0].rules = vec![fixtures::from(rule.clone())];
            let f = check(&s);
            assert_eq!(f.iter().any(|f| f.code == Code::OverbroadGrant), *want, "{name}: {f:#?}");
        }
        let mut s = fixtures::healthy();
        s.grants[0].role_name = "cluster-admin".into();
        s.grants[0].rules = vec![];
        assert_eq!(check(&s)[0].code, Code::OverbroadGrant);
    }
}
