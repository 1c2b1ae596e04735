//! Pure: who holds which host. A Runner holds each of
//! `spec.expose.hosts`; an Ingress each `spec.rules[].host`, unless a
//! Runner controls it (then that Runner is the holder, and counting its
//! Ingress too would make every Runner conflict with its own child).
//! Hosts match exactly, as the Ingress API compares them (a wildcard rule
//! `*.example.com` is a host of its own, not a pattern here).

use k8s_openapi::api::networking::v1::Ingress;

use crate::api::Runner;

/// The kind of object holding a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HolderKind {
    Runner,
    Ingress,
}

impl std::fmt::Display for HolderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HolderKind::Runner => "Runner",
            HolderKind::Ingress => "Ingress",
        })
    }
}

/// An object serving a host: `kind namespace/name` (not the local manager
/// holding the webhook registrations, `webhook::local::Holder`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostHolder {
    pub kind: HolderKind,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for HostHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// One host held by one object, borrowed from the index: the handler
/// walks every cached object on each request, so nothing is copied until
/// a conflict is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim<'a> {
    pub host: &'a str,
    pub kind: HolderKind,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// The hosts `runner` holds.
pub fn runner_claims(runner: &Runner) -> impl Iterator<Item = Claim<'_>> {
    let (namespace, name) = names(&runner.metadata);
    runner.spec.expose.hosts.iter().map(move |host| Claim { host, kind: HolderKind::Runner, namespace, name })
}

/// The hosts `ingress` holds; none when a Runner controls it.
pub fn ingress_claims(ingress: &Ingress) -> impl Iterator<Item = Claim<'_>> {
    let (namespace, name) = names(&ingress.metadata);
    let ours = crate::ownership::controlled_by_a_runner(&ingress.metadata);
    let rules = ingress.spec.as_ref().and_then(|s| s.rules.as_ref()).filter(|_| !ours);
    rules.into_iter().flatten().filter_map(move |r| {
        let host = r.host.as_deref().filter(|h| !h.is_empty())?;
        Some(Claim { host, kind: HolderKind::Ingress, namespace, name })
    })
}

fn names(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (&str, &str) {
    (meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
}

/// A host of the Runner being written that someone else serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Its index in `spec.expose.hosts`.
    pub index: usize,
    pub host: String,
    pub holder: HostHolder,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "spec.expose.hosts[{}]: host {:?} is already served by {}",
            self.index, self.host, self.holder
        )
    }
}

/// Pure: each of `hosts` (the Runner `namespace/name` being written) that
/// a claim of another object holds, in the order of `hosts`, then of
/// holder. The Runner's own claims (same namespace and name) are skipped.
pub fn conflicts<'a>(
    namespace: &str,
    name: &str,
    hosts: &[String],
    claims: impl IntoIterator<Item = Claim<'a>>,
) -> Vec<Conflict> {
    if hosts.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for c in claims {
        if c.kind == HolderKind::Runner && c.namespace == namespace && c.name == name {
            continue;
        }
        if let Some(index) = hosts.iter().position(|h| h == c.host) {
            let holder = HostHolder { kind: c.kind, namespace: c.namespace.into(), name: c.name.into() };
            out.push(Conflict { index, host: c.host.into(), holder });
        }
    }
    out.sort_by(|a, b| (a.index, &a.holder).cmp(&(b.index, &b.holder)));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::networking::v1::{IngressRule, IngressSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    use super::*;
    use crate::api::RunnerSpec;

    fn runner(ns: &str, name: &str, hosts: &[&str]) -> Runner {
        let spec = hosts.iter().fold(RunnerSpec::new("nginx:1.27"), |s, h| s.host(*h));
        let mut r = Runner::new(name, spec);
        r.metadata.namespace = Some(ns.into());
        r
    }

    fn ingress(ns: &str, name: &str, hosts: &[Option<&str>], controller: Option<&str>) -> Ingress {
        let rules = hosts.iter().map(|h| IngressRule { host: h.map(Into::into), http: None }).collect();
        let owner = controller.map(|kind| OwnerReference {
            api_version: format!("{}/v1beta1", crate::api::GROUP),
            kind: kind.into(),
            name: name.into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: None,
        });
        Ingress {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                owner_references: owner.map(|o| vec![o]),
                ..Default::default()
            },
            spec: Some(IngressSpec { rules: Some(rules), ..Default::default() }),
            status: None,
        }
    }

    fn hosts(h: &[&str]) -> Vec<String> {
        h.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_host_held_by_a_runner_in_another_namespace_conflicts_naming_it_and_the_field() {
        let other = runner("team-b", "shop", &["x.example", "a.example"]);
        let found = conflicts("team-a", "web", &hosts(&["b.example", "a.example"]), runner_claims(&other));
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].to_string(),
            r#"spec.expose.hosts[1]: host "a.example" is already served by Runner team-b/shop"#
        );
    }

    #[test]
    fn the_runner_itself_is_no_conflict_but_its_namesake_in_another_namespace_is() {
        let itself = runner("team-a", "web", &["a.example"]);
        assert!(conflicts("team-a", "web", &hosts(&["a.example"]), runner_claims(&itself)).is_empty());
        let namesake = runner("team-b", "web", &["a.example"]);
        assert_eq!(conflicts("team-a", "web", &hosts(&["a.example"]), runner_claims(&namesake)).len(), 1);
    }

    #[test]
    fn an_ingress_holds_its_rules_hosts_unless_a_runner_controls_it() {
        let legacy = ingress("ops", "legacy", &[Some("a.example"), None, Some("")], None);
        let held: Vec<&str> = ingress_claims(&legacy).map(|c| c.host).collect();
        assert_eq!(held, ["a.example"], "a rule without a host holds none");
        let found = conflicts("team-a", "web", &hosts(&["a.example"]), ingress_claims(&legacy));
        assert_eq!(
            found[0].to_string(),
            r#"spec.expose.hosts[0]: host "a.example" is already served by Ingress ops/legacy"#
        );

        let child = ingress("team-b", "shop", &[Some("a.example")], Some("Runner"));
        assert_eq!(ingress_claims(&child).count(), 0, "its Runner is the holder");
        let other_controller = ingress("ops", "x", &[Some("a.example")], Some("Gateway"));
        assert_eq!(ingress_claims(&other_controller).count(), 1);
    }

    #[test]
    fn hosts_match_exactly_and_every_holder_is_named_once_in_order() {
        let wildcard = ingress("ops", "wild", &[Some("*.example")], None);
        assert!(conflicts("t", "web", &hosts(&["a.example"]), ingress_claims(&wildcard)).is_empty());
        let (r1, r2) = (runner("z", "one", &["b.example"]), runner("y", "two", &["a.example", "b.example"]));
        let i = ingress("ops", "in", &[Some("a.example"), Some("a.example")], None);
        let claims = runner_claims(&r1).chain(runner_claims(&r2)).chain(ingress_claims(&i));
        let found = conflicts("t", "web", &hosts(&["a.example", "b.example"]), claims);
        let named: Vec<String> = found.iter().map(|c| format!("{} {}", c.index, c.holder)).collect();
        assert_eq!(named, ["0 Runner y/two", "0 Ingress ops/in", "1 Runner y/two", "1 Runner z/one"]);
    }

    #[test]
    fn a_runner_without_hosts_conflicts_with_nothing() {
        let other = runner("b", "x", &["a.example"]);
        assert!(conflicts("a", "web", &[], runner_claims(&other)).is_empty());
    }
}
