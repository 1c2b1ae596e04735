//! A Runner's children (Deployment, Service, Ingress, and the Pods they
//! run), read from the API and summarised as data for `get -o wide`,
//! `describe` and `delete --wait`.
//!
//! Reading is separate from summarising: [`fetch`] and [`index`] talk to the
//! API, [`summarize`] is pure and tested on fixed objects.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};

use crate::api::{RUNNER_UID_LABEL, Runner};
use crate::client::scoped as api;
use crate::error::{Error, Result, is_not_found};

/// The objects named like a Runner in its namespace, whoever owns them, and
/// the Pods labelled with its UID.
#[derive(Debug, Clone, Default)]
pub struct Children {
    pub deployment: Option<Deployment>,
    pub service: Option<Service>,
    pub ingress: Option<Ingress>,
    pub pods: Vec<Pod>,
}

/// One child, as a line: what it is, whether the Runner controls it, and
/// its state in a few words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSummary {
    pub kind: &'static str,
    pub name: String,
    /// The child has a controller ownerReference to this Runner's UID.
    pub owned: bool,
    pub state: String,
}

/// Reads the Deployment, Service and Ingress named `name` in `ns`, and the
/// Pods labelled with `uid` (none when `uid` is None).
pub async fn fetch(client: &kube::Client, ns: &str, name: &str, uid: Option<&str>) -> Result<Children> {
    let deployment = get_opt::<Deployment>(client, ns, name, "Deployment").await?;
    let service = get_opt::<Service>(client, ns, name, "Service").await?;
    let ingress = get_opt::<Ingress>(client, ns, name, "Ingress").await?;
    let pods = match uid {
        Some(uid) => {
            let lp = ListParams::default().labels(&format!("{RUNNER_UID_LABEL}={uid}"));
            Api::<Pod>::namespaced(client.clone(), ns)
                .list(&lp)
                .await
                .map_err(|e| Error::api("list", "Pod", ns, name, e))?
                .items
        }
        None => Vec::new(),
    };
    Ok(Children { deployment, service, ingress, pods })
}

async fn get_opt<K>(client: &kube::Client, ns: &str, name: &str, kind: &'static str) -> Result<Option<K>>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + serde::de::DeserializeOwned,
    K: std::fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    match Api::<K>::namespaced(client.clone(), ns).get(name).await {
        Ok(o) => Ok(Some(o)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(Error::api("get", kind, ns, name, e)),
    }
}

/// Children of many Runners at once, keyed by (namespace, name): three list
/// calls instead of three gets per Runner, for `get -o wide`.
pub async fn index(client: &kube::Client, ns: Option<&str>) -> Result<BTreeMap<(String, String), Children>> {
    let lp = ListParams::default().labels(RUNNER_UID_LABEL);
    let scope = ns.unwrap_or("");
    let mut out: BTreeMap<(String, String), Children> = BTreeMap::new();
    for d in api::<Deployment>(client, ns)
        .list(&lp)
        .await
        .map_err(|e| Error::api("list", "Deployment", scope, "", e))?
    {
        let k = key(&d);
        out.entry(k).or_default().deployment = Some(d);
    }
    for s in
        api::<Service>(client, ns).list(&lp).await.map_err(|e| Error::api("list", "Service", scope, "", e))?
    {
        let k = key(&s);
        out.entry(k).or_default().service = Some(s);
    }
    for i in
        api::<Ingress>(client, ns).list(&lp).await.map_err(|e| Error::api("list", "Ingress", scope, "", e))?
    {
        let k = key(&i);
        out.entry(k).or_default().ingress = Some(i);
    }
    Ok(out)
}

fn key<K: ResourceExt>(o: &K) -> (String, String) {
    (o.namespace().unwrap_or_default(), o.name_any())
}

/// True when `obj` is the Runner's ([`crate::children::ownership`]).
pub fn controlled_by(obj: &impl Resource, runner: &Runner) -> bool {
    let Some(uid) = runner.meta().uid.as_deref() else { return false };
    crate::children::ownership(obj.meta(), uid) == crate::children::Ownership::Ours
}

/// One line per child that exists, plus a line for an expected child that
/// is missing (the Ingress only when the spec has a host).
pub fn summarize(runner: &Runner, c: &Children) -> Vec<ChildSummary> {
    let name = runner.name_any();
    let mut out = Vec::new();
    match &c.deployment {
        Some(d) => {
            let st = d.status.clone().unwrap_or_default();
            let want = d.spec.replicas.unwrap_or(1);
            out.push(ChildSummary {
                kind: "Deployment",
                name: d.name_any(),
                owned: controlled_by(d, runner),
                state: format!(
                    "{}/{want} ready, {} updated, {} available",
                    st.ready_replicas.unwrap_or(0),
                    st.updated_replicas.unwrap_or(0),
                    st.available_replicas.unwrap_or(0)
                ),
            });
        }
        None => out.push(missing("Deployment", &name)),
    }
    match &c.service {
        Some(s) => {
            let spec = s.spec.clone().unwrap_or_default();
            let ports: Vec<String> = spec
                .ports
                .iter()
                .flatten()
                .map(|p| match &p.target_port {
                    Some(t) => format!("{}->{}", p.port, int_or_string(t)),
                    None => p.port.to_string(),
                })
                .collect();
            out.push(ChildSummary {
                kind: "Service",
                name: s.name_any(),
                owned: controlled_by(s, runner),
                state: format!(
                    "{} {} {}",
                    spec.type_.as_deref().unwrap_or("ClusterIP"),
                    spec.cluster_ip.as_deref().unwrap_or("<none>"),
                    ports.join(",")
                )
                .trim_end()
                .to_string(),
            });
        }
        None => out.push(missing("Service", &name)),
    }
    match &c.ingress {
        Some(i) => {
            let hosts: Vec<String> =
                i.spec.iter().flat_map(|s| s.rules.iter().flatten()).filter_map(|r| r.host.clone()).collect();
            out.push(ChildSummary {
                kind: "Ingress",
                name: i.name_any(),
                owned: controlled_by(i, runner),
                state: format!("hosts {}", if hosts.is_empty() { "*".into() } else { hosts.join(",") }),
            });
        }
        None if runner.spec.host.is_some() => out.push(missing("Ingress", &name)),
        None => {}
    }
    for p in &c.pods {
        out.push(ChildSummary { kind: "Pod", name: p.name_any(), owned: true, state: pod_state(p) });
    }
    out
}

fn missing(kind: &'static str, name: &str) -> ChildSummary {
    ChildSummary { kind, name: name.to_string(), owned: false, state: "missing".into() }
}

fn int_or_string(v: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString) -> String {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// `Running`, `Pending`, or a container's waiting reason such as
/// `ImagePullBackOff`, which is what a user needs to see first.
pub fn pod_state(p: &Pod) -> String {
    let status = p.status.clone().unwrap_or_default();
    let waiting = status
        .container_statuses
        .iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone());
    if p.metadata.deletion_timestamp.is_some() {
        return "Terminating".into();
    }
    waiting.or(status.phase).unwrap_or_else(|| "Unknown".into())
}

/// `deploy 2/3, svc, ing` for the wide table: which children exist, with
/// the Deployment's ready count; `!` marks one the Runner does not control.
pub fn short(runner: &Runner, c: &Children) -> String {
    let mut parts = Vec::new();
    let mark = |owned: bool| if owned { "" } else { "!" };
    if let Some(d) = &c.deployment {
        let ready = d.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
        let want = d.spec.replicas.unwrap_or(1);
        parts.push(format!("deploy{} {ready}/{want}", mark(controlled_by(d, runner))));
    }
    if let Some(s) = &c.service {
        parts.push(format!("svc{}", mark(controlled_by(s, runner))));
    }
    if let Some(i) = &c.ingress {
        parts.push(format!("ing{}", mark(controlled_by(i, runner))));
    }
    if parts.is_empty() { "<none>".into() } else { parts.join(",") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn runner(host: Option<&str>) -> Runner {
        serde_json::from_value(json!({
            "apiVersion": "lab.cloudlab.training/v1alpha1", "kind": "Runner",
            "metadata": { "name": "web", "namespace": "ns", "uid": "u1" },
            "spec": { "image": "nginx", "replicas": 2, "port": 80, "host": host },
        }))
        .unwrap()
    }

    fn owned_by(uid: &str) -> serde_json::Value {
        json!([{ "apiVersion": "lab.cloudlab.training/v1alpha1", "kind": "Runner", "name": "web", "uid": uid, "controller": true }])
    }

    fn deployment(owner: &str) -> Deployment {
        serde_json::from_value(json!({
            "metadata": { "name": "web", "namespace": "ns", "ownerReferences": owned_by(owner) },
            "spec": { "replicas": 2, "selector": {}, "template": {} },
            "status": { "readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1 },
        }))
        .unwrap()
    }

    #[test]
    fn a_missing_deployment_and_service_are_reported_but_no_ingress_without_a_host() {
        let s = summarize(&runner(None), &Children::default());
        let kinds: Vec<_> = s.iter().map(|c| (c.kind, c.state.as_str())).collect();
        assert_eq!(kinds, vec![("Deployment", "missing"), ("Service", "missing")]);
    }

    #[test]
    fn a_host_makes_a_missing_ingress_visible() {
        let s = summarize(&runner(Some("a.example.com")), &Children::default());
        assert!(s.iter().any(|c| c.kind == "Ingress" && c.state == "missing"));
    }

    #[test]
    fn a_deployment_owned_by_another_uid_is_marked_not_owned() {
        let c = Children { deployment: Some(deployment("someone-else")), ..Default::default() };
        let s = summarize(&runner(None), &c);
        assert!(!s[0].owned);
        assert_eq!(s[0].state, "1/2 ready, 2 updated, 1 available");
        assert_eq!(short(&runner(None), &c), "deploy! 1/2");
    }

    #[test]
    fn an_owned_deployment_shows_its_ready_count_in_the_short_form() {
        let c = Children { deployment: Some(deployment("u1")), ..Default::default() };
        assert!(summarize(&runner(None), &c)[0].owned);
        assert_eq!(short(&runner(None), &c), "deploy 1/2");
    }

    #[test]
    fn a_pod_waiting_on_its_image_shows_the_waiting_reason() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": { "name": "web-1" },
            "status": { "phase": "Pending", "containerStatuses": [{
                "name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": { "waiting": { "reason": "ImagePullBackOff" } } }] },
        }))
        .unwrap();
        assert_eq!(pod_state(&p), "ImagePullBackOff");
    }
}
