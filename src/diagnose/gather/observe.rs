//! `--observe`: watches the Runners in scope, the same-name object of every
//! child kind (whoever owns it) and the Pods labelled with a Runner's UID,
//! for a while, and hands each write to [`attribute`] as it arrives.
//!
//! One watch per kind and scope (a Runner asked by name: a field selector
//! on its name, its Pods by its UID), however many Runners, as the reads
//! are. Only the last version of each object is kept, to compare the next
//! one with; what the window keeps is the attributed [`Write`]s. The
//! watches' first lists are the starting point, not writes, and are read
//! from etcd (`MostRecent`): a list served from the apiserver's watch cache
//! may be seconds behind under load, and the watch would then replay writes
//! made before the window as if made in it. A watch that
//! has to list again (its history expired) compares what it lists with
//! what it had, so writes in between count as one. A watch that fails is a
//! [`Gap`]; the others go on.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, ListSemantic};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::runners::{scopes, where_};
use super::{Gaps, Request};
use crate::api::{RUNNER_UID_LABEL, Runner};
use crate::client::children::Key;
use crate::client::scoped_dynamic;
use crate::diagnose::snapshot::{Gap, RunnerState};
use crate::diagnose::writes::attribute::attribute;
use crate::diagnose::writes::{ObjectWrites, Observed, Write};
use crate::kinds;

/// A Runner to watch: its key and UID (its Pods carry the UID).
#[derive(Debug, Clone)]
pub struct Target {
    pub key: Key,
    pub uid: String,
}

pub fn targets(runners: &[RunnerState]) -> Vec<Target> {
    runners
        .iter()
        .map(|rs| Target {
            key: (rs.runner.namespace().unwrap_or_default(), rs.runner.name_any()),
            uid: rs.runner.metadata.uid.clone().unwrap_or_default(),
        })
        .collect()
}

/// (kind, namespace, name) of a watched object.
type Id = (&'static str, String, String);

/// Watches for `req.observe`; what each Runner's objects saw, by key.
pub async fn watch(client: &Client, req: &Request, targets: &[Target]) -> (BTreeMap<Key, Observed>, Gaps) {
    let mut gaps = Gaps::default();
    if req.observe.is_zero() || targets.is_empty() {
        return (BTreeMap::new(), gaps);
    }
    let by_uid: HashMap<&str, &Key> = targets.iter().map(|t| (t.uid.as_str(), &t.key)).collect();
    let wanted: std::collections::HashSet<&Key> = targets.iter().map(|t| &t.key).collect();
    let mut events = stream::select_all(streams(client, req, targets));
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + req.observe;
    let mut last: HashMap<Id, Value> = HashMap::new();
    let mut writes: BTreeMap<(Key, usize, Id), Vec<Write>> = BTreeMap::new();
    let mut failed: Vec<String> = vec![];
    while let Ok(Some((what, kind, order, event))) = tokio::time::timeout_at(deadline, events.next()).await {
        let object = match event {
            Ok(Event::Apply(o) | Event::InitApply(o)) => o,
            Ok(Event::Delete(o)) => {
                last.remove(&(kind, o.namespace().unwrap_or_default(), o.name_any()));
                continue;
            }
            Ok(Event::Init | Event::InitDone) => continue,
            Err(e) => {
                if !failed.contains(&what) {
                    gaps.0.push(Gap { what: what.clone(), error: e.to_string() });
                    failed.push(what);
                }
                continue;
            }
        };
        let (ns, name) = (object.namespace().unwrap_or_default(), object.name_any());
        let runner = match kind {
            "Pod" => object.labels().get(RUNNER_UID_LABEL).and_then(|uid| by_uid.get(uid.as_str())).copied(),
            _ => wanted.get(&(ns.clone(), name.clone())).copied(),
        };
        let Some(runner) = runner else { continue };
        let id: Id = (kind, ns, name);
        let now = serde_json::to_value(&object).unwrap_or_default();
        if let Some(before) = last.get(&id)
            && before.pointer("/metadata/resourceVersion") != now.pointer("/metadata/resourceVersion")
        {
            let write = attribute(before, &now, start.elapsed());
            writes.entry((runner.clone(), order, id.clone())).or_default().push(write);
        }
        last.insert(id, now);
    }
    let mut out: BTreeMap<Key, Observed> =
        targets.iter().map(|t| (t.key.clone(), Observed { window: req.observe, objects: vec![] })).collect();
    for ((key, _, (kind, namespace, name)), writes) in writes {
        if let Some(o) = out.get_mut(&key) {
            o.objects.push(ObjectWrites { kind: kind.into(), namespace, name, writes });
        }
    }
    (out, gaps)
}

/// A watch's events, labelled with what it watches (for a [`Gap`]), the
/// kind, and the kind's place in the report (Runner, children, Pods).
type Labelled = (String, &'static str, usize, Result<Event<DynamicObject>, watcher::Error>);

fn streams(client: &Client, req: &Request, targets: &[Target]) -> Vec<BoxStream<'static, Labelled>> {
    let mut resources: Vec<(&'static str, ApiResource)> = vec![("Runner", ApiResource::erase::<Runner>(&()))];
    resources.extend(kinds::all().iter().map(|k| (k.kind(), k.api_resource())));
    let pods = resources.len();
    resources.push(("Pod", ApiResource::erase::<Pod>(&())));
    let mut out = vec![];
    for ns in scopes(req) {
        for (order, (kind, ar)) in resources.iter().enumerate() {
            let config = match (&req.name, order == pods) {
                (Some(name), false) => watcher::Config::default().fields(&format!("metadata.name={name}")),
                (Some(_), true) => {
                    let uid = targets.first().map(|t| t.uid.as_str()).unwrap_or_default();
                    watcher::Config::default().labels(&format!("{RUNNER_UID_LABEL}={uid}"))
                }
                (None, false) => watcher::Config::default(),
                (None, true) => watcher::Config::default().labels(RUNNER_UID_LABEL),
            }
            .list_semantic(ListSemantic::MostRecent);
            let what = format!("watch {} {}", ar.plural, where_(ns));
            let kind: &'static str = kind;
            let events = watcher::watcher(scoped_dynamic(client, ar, ns), config)
                .default_backoff()
                .map(move |e| (what.clone(), kind, order, e));
            out.push(events.boxed());
        }
    }
    out
}
