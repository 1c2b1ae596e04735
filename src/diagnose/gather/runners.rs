//! The Runners in scope and what surrounds each: the same-name object of
//! every child kind (whoever owns it: ownership is what the checks judge;
//! [`crate::client::children`] reads them), the Pods labelled with its UID,
//! and the Events about it.
//!
//! One Runner by name is read with GETs; every other scope with one list
//! per kind and scope joined in memory, so `diagnose -A` costs a few lists
//! whatever the number of Runners. The churn resample does the same.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::{Gaps, Request, conversion};
use crate::api::{RUNNER_UID_LABEL, Runner};
use crate::client::children::{self, Children, Key, ListFailure, NotReadable, is_forbidden};
use crate::client::runners::list_paged;
use crate::client::{scoped as api, scoped_dynamic};
use crate::diagnose::snapshot::{Gap, Resample, RunnerState, Versions};
use crate::kinds;

/// Runners whose children are fetched at once.
const CONCURRENCY: usize = 8;

/// `None` in the list means all namespaces.
pub(super) fn scopes(req: &Request) -> Vec<Option<&str>> {
    if req.namespaces.is_empty() {
        vec![None]
    } else {
        req.namespaces.iter().map(|n| Some(n.as_str())).collect()
    }
}

pub(super) fn where_(ns: Option<&str>) -> String {
    ns.map(|n| format!("in {n}")).unwrap_or("in all namespaces".into())
}

/// What [`read`] found.
#[derive(Default)]
pub struct Read {
    pub runners: Vec<RunnerState>,
    /// Failed reads.
    pub gaps: Gaps,
    /// Runner reads that failed because the apiserver could not convert a
    /// stored Runner ([`conversion::is_conversion_failure`]).
    pub unconverted: Vec<Gap>,
    /// Where the Runners themselves could not be read (`in NS`).
    pub not_read: Vec<String>,
}

/// The Runners in scope, each with its surroundings, and the reads that
/// failed. Nothing when the CRD is known to be missing (the install check
/// says so).
pub async fn read(client: &Client, req: &Request, crd_present: bool) -> Read {
    let mut out = Read::default();
    if !crd_present {
        return out;
    }
    let (gaps, unconverted) = (&mut out.gaps, &mut out.unconverted);
    let mut runners: Vec<Runner> = vec![];
    for ns in scopes(req) {
        let a: Api<Runner> = api(client, ns);
        let read = match &req.name {
            Some(name) => {
                let what = format!("get Runner {name} {}", where_(ns));
                take_runners(gaps, unconverted, what, a.get_opt(name).await).map(|r| runners.extend(r))
            }
            None => {
                let what = format!("list Runners {}", where_(ns));
                take_runners(gaps, unconverted, what, list_paged(&a, ListParams::default()).await)
                    .map(|items| runners.extend(items))
            }
        };
        if read.is_none() {
            out.not_read.push(where_(ns));
        }
    }
    if runners.is_empty() {
        return out;
    }
    let gaps = &mut out.gaps;
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
    let mut found = match &req.name {
        Some(_) => by_name(client, &runners, gaps).await,
        None => listed(client, req, &runners, gaps).await,
    };
    let mut states: Vec<RunnerState> = runners
        .into_iter()
        .map(|runner| {
            let uid = runner.metadata.uid.clone().unwrap_or_default();
            let mut events = events.remove(&uid).unwrap_or_default();
            events.sort_by_key(|e| e.last_timestamp.clone().or(e.metadata.creation_timestamp.clone()));
            let children = found.remove(&key(&runner)).unwrap_or_default();
            let pods = pods.remove(&uid).unwrap_or_default();
            RunnerState { runner, children, pods, events, resample: None, observed: None }
        })
        .collect();
    states.sort_by_key(|r| (r.runner.namespace(), r.runner.name_any()));
    out.runners = states;
    out
}

/// A Runner read's value; a failed conversion goes to `unconverted` (the
/// conversion check reports it), any other failure is a gap.
fn take_runners<T>(
    gaps: &mut Gaps,
    unconverted: &mut Vec<Gap>,
    what: String,
    r: kube::Result<T>,
) -> Option<T> {
    match r {
        Err(e) if conversion::is_conversion_failure(&e) => {
            unconverted.push(Gap { what, error: crate::error::describe_kube(&e) });
            None
        }
        r => gaps.take(what, r),
    }
}

fn key(r: &Runner) -> Key {
    (r.namespace().unwrap_or_default(), r.name_any())
}

/// Failed lists: a refused one (403) makes its kind not readable for the
/// scope's Runners (said once by the `not-readable` finding, and their
/// checks skip it); any other is a gap.
fn record(gaps: &mut Gaps, failed: Vec<ListFailure>, scope: &[Key], out: &mut BTreeMap<Key, Children>) {
    for f in failed {
        if is_forbidden(&f.error) {
            for key in scope {
                out.entry(key.clone()).or_default().mark_unreadable(NotReadable::of(f.kind, "list"));
            }
        } else {
            gaps.take::<()>(f.what, Err(f.error));
        }
    }
}

/// The children of one Runner (or the few asked by name): a GET per kind.
async fn by_name(client: &Client, runners: &[Runner], gaps: &mut Gaps) -> BTreeMap<Key, Children> {
    let mut out = BTreeMap::new();
    for r in runners {
        let (ns, name) = key(r);
        let mut found = Children::default();
        for read in children::read(client, &ns, &name).await {
            match read.result {
                Err(e) if is_forbidden(&e) => found.mark_unreadable(NotReadable::of(read.kind, "get")),
                result => {
                    let what = format!("get {} {ns}/{name}", read.kind.kind());
                    if let Some(object) = gaps.take(what, result).flatten() {
                        found.insert(read.kind, object);
                    }
                }
            }
        }
        out.insert((ns, name), found);
    }
    out
}

/// The children of every Runner in scope: lists per kind and scope.
async fn listed(
    client: &Client,
    req: &Request,
    runners: &[Runner],
    gaps: &mut Gaps,
) -> BTreeMap<Key, Children> {
    let keys: BTreeSet<Key> = runners.iter().map(key).collect();
    let mut out = BTreeMap::new();
    for ns in scopes(req) {
        let (found, failed) = children::list(client, ns, &keys).await;
        out.extend(found.into_iter().filter(|(_, c)| !c.is_empty()));
        let scope: Vec<Key> = keys.iter().filter(|k| ns.is_none_or(|n| n == k.0)).cloned().collect();
        record(gaps, failed, &scope, &mut out);
    }
    out
}

/// The second look for churn: each Runner and its children's
/// resourceVersions again, by GETs for a Runner asked by name, else by one
/// list per kind and scope. A Runner whose second look failed keeps
/// `resample` unset.
pub async fn resample(client: &Client, req: &Request, runners: &mut [RunnerState], elapsed: Duration) {
    let looks = match &req.name {
        Some(_) => resample_by_name(client, runners, elapsed).await,
        None => resample_listed(client, req, runners, elapsed).await,
    };
    for (rs, look) in runners.iter_mut().zip(looks) {
        rs.resample = look;
    }
}

async fn resample_by_name(
    client: &Client,
    runners: &[RunnerState],
    elapsed: Duration,
) -> Vec<Option<Resample>> {
    stream::iter(runners.iter())
        .map(|rs| {
            let (ns, name) = key(&rs.runner);
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
        .await
}

async fn resample_listed(
    client: &Client,
    req: &Request,
    runners: &[RunnerState],
    elapsed: Duration,
) -> Vec<Option<Resample>> {
    let keys: BTreeSet<Key> = runners.iter().map(|rs| key(&rs.runner)).collect();
    let mut now: BTreeMap<Key, Runner> = BTreeMap::new();
    let mut versions: BTreeMap<Key, Versions> = BTreeMap::new();
    // Scopes whose second look failed: their Runners get no resample.
    let mut failed_scopes: Vec<Option<String>> = vec![];
    for ns in scopes(req) {
        let runners_api = api::<Runner>(client, ns);
        let (listed, (found, failed)) = tokio::join!(
            list_paged(&runners_api, ListParams::default()),
            children::versions(client, ns, &keys)
        );
        match listed {
            Ok(items) if failed.is_empty() => {
                now.extend(items.into_iter().map(|r| (key(&r), r)));
                versions.extend(found);
            }
            _ => failed_scopes.push(ns.map(str::to_string)),
        }
    }
    runners
        .iter()
        .map(|rs| {
            let k = key(&rs.runner);
            if failed_scopes.iter().any(|s| s.as_ref().is_none_or(|s| *s == k.0)) {
                return None;
            }
            let children_after = versions.remove(&k).unwrap_or_default();
            Some(Resample { elapsed, runner: now.remove(&k), children_after })
        })
        .collect()
}
