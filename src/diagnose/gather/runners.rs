//! The Runners in scope and what surrounds each: the same-name object of
//! every child kind (whoever owns it: ownership is what the checks judge;
//! [`crate::client::children`] reads them), the Pods labelled with its UID,
//! and the Events about it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::{Gaps, Request};
use crate::api::{RUNNER_UID_LABEL, Runner};
use crate::client::children::{self, Children};
use crate::client::{scoped as api, scoped_dynamic};
use crate::diagnose::snapshot::{Resample, RunnerState, Versions};
use crate::kinds;

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
    let mut found = Children::default();
    for read in children::read(client, &ns, &name).await {
        let what = format!("get {} {ns}/{name}", read.kind.kind());
        if let Some(object) = gaps.take(what, read.result).flatten() {
            found.insert(read.kind, object);
        }
    }
    events.sort_by_key(|e| e.last_timestamp.clone().or(e.metadata.creation_timestamp.clone()));
    (RunnerState { runner, children: found, pods, events, resample: None }, gaps)
}

/// The second look for churn: each Runner and its children's
/// resourceVersions again. A failed read leaves `resample` unset.
pub async fn resample(client: &Client, runners: &mut [RunnerState], elapsed: Duration) {
    let looks: Vec<Option<Resample>> = stream::iter(runners.iter())
        .map(|rs| {
            let ns = rs.runner.namespace().unwrap_or_default();
            let name = rs.runner.name_any();
            async move {
                let runner = api::<Runner>(client, Some(&ns)).get_opt(&name).await.ok()?;
                let mut children_after = Versions::new();
                for &kind in kinds::all() {
                    let api = scoped_dynamic(client, &kind.api_resource(), Some(&ns));
                    if let Some(rv) =
                        api.get_metadata_opt(&name).await.ok()?.and_then(|m| m.metadata.resource_version)
                    {
                        children_after.insert(kind.kind(), rv);
                    }
                }
                Some(Resample { elapsed, runner, children_after })
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    for (rs, look) in runners.iter_mut().zip(looks) {
        rs.resample = look;
    }
}
