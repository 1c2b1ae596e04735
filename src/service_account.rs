//! The manager's ServiceAccount as an identity: its name, the user and groups
//! the apiserver gives its token, and acting as it from a kubeconfig, so a
//! local `run-manager` (or `diagnose`) meets exactly the RBAC the in-cluster
//! manager meets instead of the developer's usually unlimited one.
//!
//! Acting as it sends only `Impersonate-User: system:serviceaccount:NS:NAME`.
//! For such a user the apiserver adds the ServiceAccount's groups itself
//! (`system:serviceaccounts`, `system:serviceaccounts:NS`, and
//! `system:authenticated`, as for a real token); naming them in
//! `Impersonate-Group` would give the same identity but also need
//! `impersonate` on `groups`. So the one permission the developer needs is
//! `impersonate` on that ServiceAccount, checked by [`check_may_impersonate`].

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::error::{Error, Result};
use crate::manifests::{MANAGER_NAME, MANAGER_NAMESPACE};

/// `namespace/name` of a ServiceAccount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountRef {
    pub namespace: String,
    pub name: String,
}

/// The installed manager's ServiceAccount, as `NS/NAME`.
pub const MANAGER_SERVICE_ACCOUNT: &str = "runner-system/runner-controller-manager";

impl ServiceAccountRef {
    /// The ServiceAccount `kubectl runner install` creates for the manager.
    pub fn manager() -> Self {
        ServiceAccountRef { namespace: MANAGER_NAMESPACE.into(), name: MANAGER_NAME.into() }
    }

    /// The user name RBAC sees: `system:serviceaccount:NS:NAME`.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The groups that name ServiceAccounts: a binding to one of them is
    /// meant for this ServiceAccount (unlike one to every authenticated user).
    pub fn groups(&self) -> Vec<String> {
        vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{}", self.namespace)]
    }

    /// True when a binding with these subjects applies to this
    /// ServiceAccount: directly, as its user name, or through the
    /// ServiceAccount [`groups`](Self::groups).
    pub fn is_bound_by(&self, subjects: &[k8s_openapi::api::rbac::v1::Subject]) -> bool {
        let groups = self.groups();
        subjects.iter().any(|s| match s.kind.as_str() {
            "ServiceAccount" => {
                s.name == self.name && s.namespace.as_deref() == Some(self.namespace.as_str())
            }
            "User" => s.name == self.user(),
            "Group" => groups.contains(&s.name),
            _ => false,
        })
    }

    /// Every group its token carries, as the authorizer sees them: the
    /// [`groups`](Self::groups) and `system:authenticated`.
    pub fn token_groups(&self) -> Vec<String> {
        let mut groups = self.groups();
        groups.push("system:authenticated".into());
        groups
    }

    /// Makes every request of a client built from `config` act as this
    /// ServiceAccount (replacing any impersonation the kubeconfig set).
    pub fn impersonate(&self, config: &mut kube::Config) {
        config.auth_info.impersonate = Some(self.user());
        // The apiserver derives the groups from the user (see the module docs).
        config.auth_info.impersonate_groups = None;
    }
}

impl std::str::FromStr for ServiceAccountRef {
    type Err = String;

    /// `namespace/name`, both non-empty.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(ServiceAccountRef { namespace: ns.into(), name: name.into() })
            }
            _ => Err(format!("{s:?} is not NAMESPACE/NAME, e.g. {MANAGER_SERVICE_ACCOUNT}")),
        }
    }
}

impl std::fmt::Display for ServiceAccountRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Who `client` is, as the apiserver sees it (user name and groups), or
/// `None` when it cannot say (an apiserver without SelfSubjectReview).
pub async fn whoami(client: &Client) -> Option<(String, Vec<String>)> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = api.create(&PostParams::default(), &SelfSubjectReview::default()).await.ok()?;
    let user = review.status?.user_info?;
    Some((user.username?, user.groups.unwrap_or_default()))
}

/// Turns `config` into one that acts as `sa`, after checking with `own`
/// (a client built from `config` as it was) that it may.
pub async fn act_as(own: &Client, config: &mut kube::Config, sa: &ServiceAccountRef) -> Result<()> {
    check_may_impersonate(own, sa).await?;
    sa.impersonate(config);
    Ok(())
}

/// Fails, with the fix, unless `client`'s own identity may impersonate `sa`
/// (`impersonate` on `serviceaccounts/NAME` in NS). Asked before acting as
/// it: afterwards every request would be refused with a less clear message.
pub async fn check_may_impersonate(client: &Client, sa: &ServiceAccountRef) -> Result<()> {
    if crate::client::can_i(client, impersonation(sa)).await? {
        return Ok(());
    }
    let me = whoami(client).await.map(|(user, _)| user);
    Err(Error::CannotImpersonate {
        service_account: sa.to_string(),
        message: cannot_impersonate(sa, me.as_deref()),
    })
}

/// What the apiserver's impersonation filter asks for a ServiceAccount user.
fn impersonation(sa: &ServiceAccountRef) -> ResourceAttributes {
    ResourceAttributes {
        verb: Some("impersonate".into()),
        resource: Some("serviceaccounts".into()),
        namespace: Some(sa.namespace.clone()),
        name: Some(sa.name.clone()),
        ..Default::default()
    }
}

/// The refusal, naming the missing permission and a grant that fixes it.
fn cannot_impersonate(sa: &ServiceAccountRef, me: Option<&str>) -> String {
    let who = me.map(|u| format!("user {u:?}")).unwrap_or_else(|| "your kubeconfig's user".into());
    let subject = me.map(|u| format!("--user={u}")).unwrap_or_else(|| "--user=YOUR_USER".into());
    format!(
        "--as-service-account {sa}: {who} may not impersonate ServiceAccount {sa} (needs verb impersonate on \
         serviceaccounts in namespace {ns}).\nfix: kubectl -n {ns} create role runner-impersonate --verb=impersonate \
         --resource=serviceaccounts --resource-name={name} && kubectl -n {ns} create rolebinding runner-impersonate \
         --role=runner-impersonate {subject}   # or run without --as-service-account",
        ns = sa.namespace,
        name = sa.name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_names_the_installed_manager_service_account() {
        let sa: ServiceAccountRef = MANAGER_SERVICE_ACCOUNT.parse().unwrap();
        assert_eq!(sa, ServiceAccountRef::manager());
        assert_eq!(sa.user(), "system:serviceaccount:runner-system:runner-controller-manager");
        assert_eq!(
            sa.token_groups(),
            ["system:serviceaccounts", "system:serviceaccounts:runner-system", "system:authenticated"]
        );
    }

    #[test]
    fn bindings_apply_by_service_account_user_or_group() {
        use k8s_openapi::api::rbac::v1::Subject;
        let sa = ServiceAccountRef { namespace: "ns".into(), name: "mgr".into() };
        let subj = |kind: &str, name: &str, ns: Option<&str>| Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: ns.map(String::from),
            api_group: None,
        };
        assert!(sa.is_bound_by(&[subj("ServiceAccount", "mgr", Some("ns"))]));
        assert!(!sa.is_bound_by(&[subj("ServiceAccount", "mgr", Some("other"))]));
        assert!(sa.is_bound_by(&[subj("User", "system:serviceaccount:ns:mgr", None)]));
        assert!(sa.is_bound_by(&[subj("Group", "system:serviceaccounts:ns", None)]));
        assert!(!sa.is_bound_by(&[subj("Group", "system:authenticated", None)]));
    }

    #[test]
    fn a_service_account_is_namespace_slash_name() {
        let sa: ServiceAccountRef = "team/mgr".parse().unwrap();
        assert_eq!((sa.namespace.as_str(), sa.name.as_str()), ("team", "mgr"));
        assert_eq!(sa.to_string(), "team/mgr");
        for bad in ["mgr", "/mgr", "team/", "a/b/c", ""] {
            assert!(bad.parse::<ServiceAccountRef>().is_err(), "{bad}");
        }
    }

    #[test]
    fn impersonating_sets_only_the_user_and_replaces_earlier_impersonation() {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        config.auth_info.impersonate = Some("someone".into());
        config.auth_info.impersonate_groups = Some(vec!["admins".into()]);
        "team/mgr".parse::<ServiceAccountRef>().unwrap().impersonate(&mut config);
        assert_eq!(config.auth_info.impersonate.as_deref(), Some("system:serviceaccount:team:mgr"));
        assert_eq!(config.auth_info.impersonate_groups, None);
    }

    #[test]
    fn the_review_asks_what_the_impersonation_filter_asks() {
        let sa: ServiceAccountRef = "team/mgr".parse().unwrap();
        let attrs = impersonation(&sa);
        assert_eq!(attrs.verb.as_deref(), Some("impersonate"));
        assert_eq!(attrs.resource.as_deref(), Some("serviceaccounts"));
        assert_eq!(attrs.group, None, "the core group");
        assert_eq!((attrs.namespace.as_deref(), attrs.name.as_deref()), (Some("team"), Some("mgr")));
    }

    #[test]
    fn the_refusal_names_the_verb_the_user_and_a_grant() {
        let sa: ServiceAccountRef = "team/mgr".parse().unwrap();
        let m = cannot_impersonate(&sa, Some("dev"));
        assert!(m.contains("user \"dev\" may not impersonate ServiceAccount team/mgr"), "{m}");
        assert!(m.contains("verb impersonate on serviceaccounts in namespace team"), "{m}");
        assert!(m.contains("--resource-name=mgr"), "{m}");
        assert!(m.contains("--user=dev"), "{m}");
        let m = cannot_impersonate(&sa, None);
        assert!(m.contains("your kubeconfig's user") && m.contains("--user=YOUR_USER"), "{m}");
    }
}
