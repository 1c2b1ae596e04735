//! The Runners in scope and what surrounds each: the same-name Deployment,
//! Service and Ingress (whoever owns them: ownership is what the checks
//! judge), the Pods labelled with its UID, and the Events about it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::{Gaps, Request};
use crate::api::{RUNNER_UID_LABEL, Runner};
use crate::client::scoped as api;
use crate::diagnose::snapshot::{Resample, RunnerState};

/// Runners whose children are fetched at once.
const CONCURRENCY: usize = 8;

/// `None` in the list means all namespaces.
fn scopes(req: &Request) -> Vec<Option<&str>> {
    if req.namespaces.is_empty() {
        vec![None]
    } else {
        req.namespaces.iter().map(|n| Some(n.as_str())).collect()
    }
}

fn where_(ns: Option<&str>) -> String {
    ns.map(|n| format!("in {n}")).unwrap_or("in all namespaces".into())
}

/// The Runners in scope, each with its surroundings. Nothing when the CRD
/// is missing (the install check says so).
pub async fn read(client: &Client, req: &Request, crd_present: bool) -> (Vec<RunnerState>, Gaps) {
    let mut gaps = Gaps::default();
    if !crd_present {
        return (vec![], gaps);
    }
    let mut runners: Vec<Runner> = vec![];
    for ns in scopes(req) {
        let a: Api<Runner> = api(client, ns);
        match &req.name {
            Some(name) => {
                if let Some(r) =
                    gaps.take(format!("get Runner {name} {}", where_(ns)), a.get_opt(name).await).flatten()
                {
                    runners.push(r);
                }
            }
            None => {
                if let Some(l) =
                    gaps.take(format!("list Runners {}", where_(ns)), a.list(&ListParams::default()).await)
                {
                    runners.extend(l.items);
                }
            }
        }
    }
    if runners.is_empty() {
        return (vec![], gaps);
    }
    let mut pods: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    let mut events: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for ns in scopes(req) {
        let lp = ListParams::default().labels(RUNNER_UID_LABEL);
        let listed = api::<Pod>(client, ns).list(&lp).await;
        for p in
            gaps.take(format!("list Runner Pods {}", where_(ns)), listed).map(|l| l.items).unwrap_or_default()
        {
            let uid = p.labels().get(RUNNER_UID_LABEL).cloned().unwrap_or_default();
            pods.entry(uid).or_default().push(p);
        }
        let lp = ListParams::default().fields("involvedObject.kind=Runner");
        let listed = api::<Event>(client, ns).list(&lp).await;
        for e in gaps
            .take(format!("list Runner Events {}", where_(ns)), listed)
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let uid = e.involved_object.uid.clone().unwrap_or_default();
            events.entry(uid).or_default().push(e);
        }
    }
    let states: Vec<(RunnerState, Gaps)> = stream::iter(runners)
        .map(|r| {
            let uid = r.metadata.uid.clone().unwrap_or_default();
            let pods = pods.remove(&uid).unwrap_or_default();
            let events = events.remove(&uid).unwrap_or_default();
            async move { children(client, r, pods, events).await }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let mut out = vec![];
    for (st, g) in states {
        out.push(st);
        gaps.0.extend(g.0);
    }
    out.sort_by_key(|r| (r.runner.namespace(), r.runner.name_any()));
    (out, gaps)
}

async fn children(
    client: &Client,
    runner: Runner,
    pods: Vec<Pod>,
    mut events: Vec<Event>,
) -> (RunnerState, Gaps) {
    let mut gaps = Gaps::default();
    let ns = runner.namespace().unwrap_or_default();
    let name = runner.name_any();
    let (da, sa, ia) = (
        api::<Deployment>(client, Some(&ns)),
        api::<Service>(client, Some(&ns)),
        api::<Ingress>(client, Some(&ns)),
    );
    let (d, s, i) = tokio::join!(da.get_opt(&name), sa.get_opt(&name), ia.get_opt(&name));
    let deployment = gaps.take(format!("get Deployment {ns}/{name}"), d).flatten();
    let service = gaps.take(format!("get Service {ns}/{name}"), s).flatten();
    let ingress = gaps.take(format!("get Ingress {ns}/{name}"), i).flatten();
    events.sort_by_key(|e| e.last_timestamp.clone().or(e.metadata.creation_timestamp.clone()));
    (RunnerState { runner, deployment, service, ingress, pods, events, resample: None }, gaps)
}

/// The second look for churn: each Runner and its children's
/// resourceVersions again. A failed read leaves `resample` unset.
pub async fn resample(client: &Client, runners: &mut [RunnerState], elapsed: Duration) {
    let looks: Vec<Option<Resample>> = stream::iter(runners.iter())
        .map(|rs| {
            let ns = rs.runner.namespace().unwrap_or_default();
            let name = rs.runner.name_any();
            async move {
                let (ra, da, sa, ia) = (
                    api::<Runner>(client, Some(&ns)),
                    api::<Deployment>(client, Some(&ns)),
                    api::<Service>(client, Some(&ns)),
                    api::<Ingress>(client, Some(&ns)),
                );
                let (r, d, s, i) = tokio::join!(
                    ra.get_opt(&name),
                    da.get_metadata_opt(&name),
                    sa.get_metadata_opt(&name),
                    ia.get_metadata_opt(&name),
                );
                let (d, s, i) = (d.ok()?, s.ok()?, i.ok()?);
                let children_after = [
                    d.and_then(|m| m.metadata.resource_version),
                    s.and_then(|m| m.metadata.resource_version),
                    i.and_then(|m| m.metadata.resource_version),
                ];
                Some(Resample { elapsed, runner: r.ok()?, children_after })
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    for (rs, look) in runners.iter_mut().zip(looks) {
        rs.resample = look;
    }
}
