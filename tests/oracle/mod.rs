//! The convergence oracle: a Runner's children as the apiserver holds them,
//! compared field by field with what `desired` computes for the Runner's
//! *current* spec, read back from the apiserver (whatever wrote it), plus a
//! status that has caught up with that spec.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use kubectl_runner::api::{Phase, RUNNER_UID_LABEL, Runner, condition};
use kubectl_runner::ownership::{Ownership, ownership};

use crate::support::TestNs;

/// What is still off, or Ok when the Runner has converged. With `exact`,
/// the children carry nothing but ours (no port or container added by
/// someone else), which is what a walk over specs alone must end with.
pub async fn check(ns: &TestNs, name: &str, exact: bool) -> Result<Runner, String> {
    let r = ns.api::<Runner>().get(name).await.map_err(|e| format!("get Runner: {e}"))?;
    let uid = r.uid().unwrap_or_default();
    let spec = &r.spec;
    let d = ns.api::<Deployment>().get_opt(name).await.map_err(|e| e.to_string())?.ok_or("no Deployment")?;
    if ownership(&d.metadata, &uid) != Ownership::Ours {
        return Err("the Deployment is not controlled by this Runner".into());
    }
    if d.spec.replicas != Some(spec.replicas) {
        return Err(format!("Deployment replicas {:?}, spec {}", d.spec.replicas, spec.replicas));
    }
    let pod = d.spec.template.spec.as_ref().ok_or("no Pod template")?;
    let c = pod.containers.iter().find(|c| c.name == "runner").ok_or("no runner container")?;
    if c.image.as_deref() != Some(spec.image.as_str()) {
        return Err(format!("image {:?}, spec {}", c.image, spec.image));
    }
    let ports: Vec<i32> = c.ports.iter().flatten().map(|p| p.container_port).collect();
    if !ports.contains(&spec.expose.port) || (exact && (ports.len() != 1 || pod.containers.len() != 1)) {
        return Err(format!("container ports {ports:?}, spec port {}", spec.expose.port));
    }
    let s = ns.api::<Service>().get_opt(name).await.map_err(|e| e.to_string())?.ok_or("no Service")?;
    if ownership(&s.metadata, &uid) != Ownership::Ours {
        return Err("the Service is not controlled by this Runner".into());
    }
    // Selectors are atomic and ours: exactly the Runner's UID label.
    let want_selector = std::collections::BTreeMap::from([(RUNNER_UID_LABEL.to_string(), uid.clone())]);
    let dep_selector = d.spec.selector.match_labels.clone().unwrap_or_default();
    let svc_selector = s.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
    if dep_selector != want_selector || svc_selector != want_selector {
        return Err(format!("selectors {dep_selector:?} / {svc_selector:?}, want {want_selector:?}"));
    }
    let sports: Vec<(Option<String>, i32)> =
        s.spec.iter().flat_map(|s| s.ports.iter().flatten()).map(|p| (p.name.clone(), p.port)).collect();
    let http: Vec<_> = sports.iter().filter(|(n, _)| n.as_deref() == Some("http")).collect();
    if http.len() != 1 || http[0].1 != spec.expose.port || (exact && sports.len() != 1) {
        return Err(format!("Service ports {sports:?}, spec port {}", spec.expose.port));
    }
    let ing = ns.api::<Ingress>().get_opt(name).await.map_err(|e| e.to_string())?;
    let ing = ing.filter(|i| i.metadata.deletion_timestamp.is_none());
    let hosts = &spec.expose.hosts;
    match (hosts.is_empty(), &ing) {
        (true, Some(_)) => return Err("an Ingress without a host".into()),
        (false, None) => return Err(format!("no Ingress for hosts {hosts:?}")),
        (false, Some(i)) => {
            // One rule per host, in the spec's order, each to the port.
            let rules = i.spec.as_ref().and_then(|s| s.rules.clone()).unwrap_or_default();
            let routed: Vec<(Option<String>, Option<i32>)> = rules
                .iter()
                .map(|rule| {
                    let path = rule.http.as_ref().and_then(|h| h.paths.first());
                    let port = path.and_then(|p| p.backend.service.as_ref()?.port.as_ref()?.number);
                    (rule.host.clone(), port)
                })
                .collect();
            let want: Vec<_> = hosts.iter().map(|h| (Some(h.clone()), Some(spec.expose.port))).collect();
            if routed != want {
                return Err(format!("Ingress rules {routed:?}, spec {want:?}"));
            }
        }
        (true, None) => {}
    }
    // A budget of one Pod from 2 replicas, none below: the rule written out
    // here, not read from the code under test.
    let pdb = ns.api::<PodDisruptionBudget>().get_opt(name).await.map_err(|e| e.to_string())?;
    let pdb = pdb.filter(|p| p.metadata.deletion_timestamp.is_none());
    match (spec.replicas >= 2, &pdb) {
        (false, Some(_)) => return Err(format!("a PodDisruptionBudget with {} replica", spec.replicas)),
        (true, None) => return Err(format!("no PodDisruptionBudget with {} replicas", spec.replicas)),
        (true, Some(p)) => {
            if ownership(&p.metadata, &uid) != Ownership::Ours {
                return Err("the PodDisruptionBudget is not controlled by this Runner".into());
            }
            let pspec = p.spec.clone().unwrap_or_default();
            let selector = pspec.selector.and_then(|s| s.match_labels).unwrap_or_default();
            if pspec.min_available != Some(IntOrString::Int(1)) || selector != want_selector {
                return Err(format!("budget minAvailable {:?} selector {selector:?}", pspec.min_available));
            }
        }
        (false, None) => {}
    }
    let st = r.status.as_ref().ok_or("no status")?;
    if st.observed_generation != r.metadata.generation {
        return Err(format!(
            "observedGeneration {:?}, generation {:?}",
            st.observed_generation, r.metadata.generation
        ));
    }
    let ready = st.conditions.iter().any(|c| c.type_ == condition::READY && c.status == "True");
    if st.phase != Phase::Available || !ready || st.ready_replicas != spec.replicas {
        return Err(format!("phase {} ready {} ({:?})", st.phase, st.ready_replicas, st.message));
    }
    Ok(r)
}

/// Polls [`check`] until it passes; panics with the last difference and
/// `context` (a seed, a step) after `timeout`.
pub async fn wait_converged(
    ns: &TestNs,
    name: &str,
    exact: bool,
    timeout: Duration,
    context: &str,
) -> Runner {
    let start = Instant::now();
    loop {
        match check(ns, name, exact).await {
            Ok(r) => return r,
            Err(why) if start.elapsed() > timeout => {
                panic!("{context}: Runner {}/{name} did not converge in {timeout:?}: {why}", ns.name)
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}
