//! The Ingress: routes each of `spec.expose.hosts` (path `/`, Prefix) to the Service. Only
//! with a host; removing the host removes it.

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule, IngressServiceBackend,
    IngressSpec, ServiceBackendPort,
};
use kube::ResourceExt;

use super::{ChildKind, Facts, Merge, meta, packed};
use crate::api::Runner;

/// The Ingress kind.
pub struct Ingresses;

impl ChildKind for Ingresses {
    type Object = Ingress;
    /// The full type, trimmed: its spec is all ours and small.
    type View = Ingress;
    const SHORT: &'static str = "ing";
    const WHY: &'static str = "create, repair and delete the Runner's Ingress when spec.expose.hosts is set";
    // Ingress rules: listType=atomic.
    const WHEN: &'static str = "with a host";
    const MERGE: &'static [(&'static [&'static str], Merge)] = &[(&["spec", "rules"], Merge::Atomic)];

    fn desired(runner: &Runner) -> Option<Ingress> {
        let hosts = &runner.spec.expose.hosts;
        if hosts.is_empty() {
            return None;
        }
        let backend = IngressServiceBackend {
            name: runner.name_any(),
            port: Some(ServiceBackendPort { number: Some(runner.spec.expose.port), ..Default::default() }),
        };
        let path = HTTPIngressPath {
            path: Some("/".into()),
            path_type: "Prefix".into(),
            backend: IngressBackend { service: Some(backend), ..Default::default() },
        };
        Some(Ingress {
            metadata: meta::metadata(runner),
            spec: Some(IngressSpec {
                rules: Some(
                    hosts
                        .iter()
                        .map(|host| IngressRule {
                            host: Some(host.clone()),
                            http: Some(HTTPIngressRuleValue { paths: vec![path.clone()] }),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        })
    }

    /// The load balancer status is not read.
    fn trim(i: &mut Ingress) {
        i.status = None;
    }

    fn facts(_: &Ingress, _: &Runner, facts: &mut Facts) {
        facts.routed = true;
    }

    fn state(i: &Ingress) -> String {
        format!("hosts {}", hosts(i).unwrap_or_else(|| "*".into()))
    }
}

/// The Ingress's hosts, comma-separated; None when it names none.
pub fn hosts(i: &Ingress) -> Option<String> {
    let hosts: Vec<String> =
        i.spec.iter().flat_map(|s| s.rules.iter().flatten()).filter_map(|r| r.host.clone()).collect();
    (!hosts.is_empty()).then(|| hosts.join(","))
}

packed::dictionary!(Ingress, include_str!("ingress.sample.json"));

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kinds::served_fixture::{as_json, body, is_subset, managed, runner, served};
    use crate::kinds::trim::child_meta;

    #[test]
    fn an_ingress_exists_only_with_a_host() {
        let mut r = runner();
        let i = as_json(&Ingresses::desired(&r).unwrap());
        assert_eq!(i["spec"]["rules"][0]["host"], "web.example.com");
        assert_eq!(i["spec"]["rules"][0]["http"]["paths"][0]["pathType"], "Prefix");
        assert_eq!(i["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["port"]["number"], 8080);
        r.spec.expose.hosts.clear();
        assert!(Ingresses::desired(&r).is_none());
    }

    #[test]
    fn a_trimmed_ingress_keeps_its_spec_and_routes_the_runner() {
        let r = runner();
        let want = Ingresses::desired(&r).unwrap();
        let mut i = served(&want, json!({ "metadata": managed(), "status": { "loadBalancer": {} } }));
        child_meta(&mut i.metadata);
        Ingresses::trim(&mut i);
        assert!(is_subset(Ingresses::MERGE, &body(&want), &as_json(&i)));
        assert!(i.status.is_none() && i.metadata.annotations.is_none());
        let mut facts = Facts::default();
        Ingresses::facts(&i, &r, &mut facts);
        assert!(facts.routed);
        assert_eq!(Ingresses::state(&i), "hosts web.example.com,www.example.com");
        let rules = want.spec.unwrap().rules.unwrap();
        assert_eq!(rules.len(), 2, "a rule per host");
        assert!(rules.iter().all(|r| r.http == rules[0].http), "each to the Service's port");
    }
}
