//! The one reader of a Runner's children, for the CLI (`describe`,
//! `delete --wait`, `get -o wide`) and `diagnose` (gather, `--fix`): the
//! same-name object of every child kind ([`crate::kinds::all`]) in the
//! Runner's namespace, whoever owns it (ownership is what the callers
//! judge), read dynamically; and the Pods labelled with the Runner's UID.
//!
//! One Runner is read with a GET per kind ([`read`]); many are read with a
//! few lists per kind and scope, joined in memory by (namespace, name)
//! ([`list`], [`versions`], [`index`]), so the cost does not grow with one
//! request per Runner and kind.

use std::collections::{BTreeMap, BTreeSet};

use futures::future::join_all;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;

use crate::api::RUNNER_UID_LABEL;
use crate::client::scoped_dynamic;
use crate::error::{Error, FromApi, Result};
use crate::kinds::{self, Kind};

/// One child object found, and its kind.
#[derive(Debug, Clone)]
pub struct Child {
    pub kind: &'static dyn Kind,
    pub object: DynamicObject,
}

/// A read the apiserver refused (403): the caller may not read this kind,
/// which says nothing about whether an object of it exists. Readers show
/// what they could read and name these once, with the permission that
/// would show them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NotReadable {
    /// `PodDisruptionBudget`, `Pod`, `Event`.
    pub kind: &'static str,
    /// The verb refused: `get` or `list`.
    pub verb: &'static str,
    /// As `kubectl auth can-i` spells it: `poddisruptionbudgets.policy`.
    pub resource: String,
}

impl NotReadable {
    /// A child kind refused for `verb`.
    pub fn of(kind: &dyn Kind, verb: &'static str) -> NotReadable {
        let resource = match kind.group() {
            "" => kind.plural().to_string(),
            group => format!("{}.{group}", kind.plural()),
        };
        NotReadable { kind: kind.kind(), verb, resource }
    }
}

/// True when the apiserver refused the read for lack of permission.
pub fn is_forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403)
}

/// Adds `n` to `list` unless it is there, keeping the list sorted.
pub fn note_unreadable(list: &mut Vec<NotReadable>, n: NotReadable) {
    if let Err(at) = list.binary_search(&n) {
        list.insert(at, n);
    }
}

/// The children found, at most one per kind, in [`kinds::all`] order, and
/// the kinds that could not be read (neither found nor known absent).
#[derive(Debug, Clone, Default)]
pub struct Children {
    found: Vec<Child>,
    unreadable: Vec<NotReadable>,
}

impl Children {
    /// No child found (kinds not readable are not counted).
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Child> {
        self.found.iter()
    }

    /// The object of kind `kind` (`Deployment`, ...), if found.
    pub fn get(&self, kind: &str) -> Option<&DynamicObject> {
        self.found.iter().find(|c| c.kind.kind() == kind).map(|c| &c.object)
    }

    pub fn get_mut(&mut self, kind: &str) -> Option<&mut DynamicObject> {
        self.found.iter_mut().find(|c| c.kind.kind() == kind).map(|c| &mut c.object)
    }

    /// The kinds whose read was refused, sorted.
    pub fn unreadable(&self) -> &[NotReadable] {
        &self.unreadable
    }

    /// False when the read of kind `kind` was refused: its absence from
    /// [`Self::get`] then means nothing.
    pub fn is_readable(&self, kind: &str) -> bool {
        !self.unreadable.iter().any(|n| n.kind == kind)
    }

    /// Records that `n` could not be read.
    pub fn mark_unreadable(&mut self, n: NotReadable) {
        note_unreadable(&mut self.unreadable, n);
    }

    /// The object of `K`'s kind, decoded as `K`.
    pub fn typed<K: k8s_openapi::Resource + DeserializeOwned>(&self) -> Option<K> {
        self.get(K::KIND).and_then(|o| kinds::typed(o).ok())
    }

    /// Adds (or replaces) the object of its kind, keeping kind order.
    pub fn insert(&mut self, kind: &'static dyn Kind, object: DynamicObject) {
        self.remove(kind.kind());
        self.found.push(Child { kind, object });
        let order = |c: &Child| kinds::all().iter().position(|k| k.kind() == c.kind.kind());
        self.found.sort_by_key(order);
    }

    pub fn remove(&mut self, kind: &str) -> Option<DynamicObject> {
        let i = self.found.iter().position(|c| c.kind.kind() == kind)?;
        Some(self.found.remove(i).object)
    }

    /// `Deployment web`-style names of the children `keep` selects.
    pub fn names(&self, keep: impl Fn(&Child) -> bool) -> Vec<String> {
        self.found
            .iter()
            .filter(|c| keep(c))
            .map(|c| format!("{} {}", c.kind.kind(), c.object.name_any()))
            .collect()
    }
}

/// What one kind's read gave: the object, none, or the error.
pub struct Read {
    pub kind: &'static dyn Kind,
    pub result: kube::Result<Option<DynamicObject>>,
}

/// Reads the object of every kind named `name` in `ns`, all at once.
pub async fn read(client: &Client, ns: &str, name: &str) -> Vec<Read> {
    join_all(kinds::all().iter().map(|&kind| async move {
        let api = scoped_dynamic(client, &kind.api_resource(), Some(ns));
        Read { kind, result: api.get_opt(name).await }
    }))
    .await
}

/// [`read`]: a kind whose read is refused (403) is marked not readable;
/// any other error fails.
pub async fn fetch(client: &Client, ns: &str, name: &str) -> Result<Children> {
    let mut out = Children::default();
    for r in read(client, ns, name).await {
        match r.result {
            Ok(Some(object)) => out.insert(r.kind, object),
            Ok(None) => {}
            Err(e) if is_forbidden(&e) => out.mark_unreadable(NotReadable::of(r.kind, "get")),
            Err(e) => return Err(Error::api("get", r.kind.kind(), ns, name, e)),
        }
    }
    Ok(out)
}

/// The Pods labelled with the Runner's UID (none without a UID). A refused
/// list (403) is noted in `unreadable` and reads as none.
pub async fn pods(
    client: &Client,
    ns: &str,
    name: &str,
    uid: Option<&str>,
    unreadable: &mut Vec<NotReadable>,
) -> Result<Vec<Pod>> {
    let Some(uid) = uid else { return Ok(Vec::new()) };
    let lp = ListParams::default().labels(&format!("{RUNNER_UID_LABEL}={uid}"));
    match Api::<Pod>::namespaced(client.clone(), ns).list(&lp).await {
        Ok(l) => Ok(l.items),
        Err(e) if is_forbidden(&e) => {
            note_unreadable(unreadable, NotReadable { kind: "Pod", verb: "list", resource: "pods".into() });
            Ok(Vec::new())
        }
        Err(e) => Err(Error::api("list", "Pod", ns, name, e)),
    }
}

/// A Runner's (or a child's) namespace and name: the key of the joins.
pub type Key = (String, String);

/// The key of a listed object.
fn key_of(meta: &kube::api::ObjectMeta) -> Key {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

/// A list (or a GET it led to) that failed: of which kind, what was read,
/// and why.
#[derive(Debug)]
pub struct ListFailure {
    pub kind: &'static dyn Kind,
    pub what: String,
    pub error: kube::Error,
}

fn where_(ns: Option<&str>) -> String {
    ns.map(|n| format!("in {n}")).unwrap_or("in all namespaces".into())
}

/// Pure: the objects listed, grouped by (namespace, name) into the
/// Runners' [`Children`]. With `runners`, only those keys are kept and each
/// has an entry (empty when it has no children); without, every key found.
pub fn join(
    listed: impl IntoIterator<Item = (&'static dyn Kind, DynamicObject)>,
    runners: Option<&BTreeSet<Key>>,
) -> BTreeMap<Key, Children> {
    let mut out: BTreeMap<Key, Children> =
        runners.into_iter().flatten().map(|k| (k.clone(), Children::default())).collect();
    for (kind, object) in listed {
        let key = key_of(&object.metadata);
        match runners {
            Some(keep) if !keep.contains(&key) => {}
            _ => out.entry(key).or_default().insert(kind, object),
        }
    }
    out
}

/// Pure: of the unlabelled objects listed (metadata only), the ones named
/// like a Runner, to be read in full: same-name objects someone else made.
pub fn foreign<'a>(
    listed: impl IntoIterator<Item = (&'static dyn Kind, &'a PartialObjectMeta<DynamicObject>)>,
    runners: &BTreeSet<Key>,
) -> Vec<(&'static dyn Kind, Key)> {
    listed
        .into_iter()
        .map(|(kind, m)| (kind, key_of(&m.metadata)))
        .filter(|(_, key)| runners.contains(key))
        .collect()
}

/// Children of many Runners at once, keyed by (namespace, name): one list
/// per kind (objects labelled with any Runner UID) instead of a get per
/// kind and Runner, for `get -o wide` (it shows what we made, so it does
/// not look for objects of others). A kind whose list is refused (403) is
/// returned as not readable; any other error fails.
pub async fn index(client: &Client, ns: Option<&str>) -> Result<(BTreeMap<Key, Children>, Vec<NotReadable>)> {
    let mut listed = vec![];
    let mut unreadable = vec![];
    for &kind in kinds::all() {
        match labelled_objects(client, kind, ns).await {
            Ok(objects) => listed.extend(objects.into_iter().map(|o| (kind, o))),
            Err(e) if is_forbidden(&e) => note_unreadable(&mut unreadable, NotReadable::of(kind, "list")),
            Err(e) => return Err(Error::api("list", kind.kind(), ns.unwrap_or(""), "", e)),
        }
    }
    Ok((join(listed, None), unreadable))
}

async fn labelled_objects(
    client: &Client,
    kind: &'static dyn Kind,
    ns: Option<&str>,
) -> kube::Result<Vec<DynamicObject>> {
    let lp = ListParams::default().labels(RUNNER_UID_LABEL);
    Ok(scoped_dynamic(client, &kind.api_resource(), ns).list(&lp).await?.items)
}

/// GETs at once for the foreign same-name objects of one scope.
const FOREIGN_CONCURRENCY: usize = 8;

/// The children of the `runners` in scope `ns` (`None`: all namespaces),
/// whoever owns them, as [`read`] finds them for one Runner, from two
/// lists per kind: the objects labelled with a Runner UID in full (ours,
/// and copies of ours), and the unlabelled ones as metadata only, of which
/// the few named like a Runner are then read in full. A namespace full of
/// unrelated objects costs their metadata, not their specs; a failed list
/// or read is returned with what it was, and the rest still joined.
pub async fn list(
    client: &Client,
    ns: Option<&str>,
    runners: &BTreeSet<Key>,
) -> (BTreeMap<Key, Children>, Vec<ListFailure>) {
    let per_kind = join_all(kinds::all().iter().map(|&kind| list_kind(client, kind, ns, runners))).await;
    let mut listed = vec![];
    let mut failed = vec![];
    for (objects, failures) in per_kind {
        listed.extend(objects);
        failed.extend(failures);
    }
    (join(listed, Some(runners)), failed)
}

async fn list_kind(
    client: &Client,
    kind: &'static dyn Kind,
    ns: Option<&str>,
    runners: &BTreeSet<Key>,
) -> (Vec<(&'static dyn Kind, DynamicObject)>, Vec<ListFailure>) {
    let api = scoped_dynamic(client, &kind.api_resource(), ns);
    let unlabelled = ListParams::default().labels(&format!("!{RUNNER_UID_LABEL}"));
    let (ours, others) = tokio::join!(labelled_objects(client, kind, ns), api.list_metadata(&unlabelled));
    let mut failed = vec![];
    let mut out = vec![];
    match ours {
        Ok(objects) => out.extend(objects.into_iter().map(|o| (kind, o))),
        Err(error) => {
            failed.push(ListFailure { kind, what: format!("list {} {}", kind.plural(), where_(ns)), error })
        }
    }
    let others = match others {
        Ok(l) => l.items,
        Err(error) => {
            let what = format!("list unlabelled {} {}", kind.plural(), where_(ns));
            failed.push(ListFailure { kind, what, error });
            vec![]
        }
    };
    let wanted = foreign(others.iter().map(|m| (kind, m)), runners);
    let reads: Vec<_> = stream::iter(wanted)
        .map(|(kind, (ns, name))| async move {
            let api = scoped_dynamic(client, &kind.api_resource(), Some(&ns));
            let what = format!("get {} {ns}/{name}", kind.kind());
            (what, api.get_opt(&name).await)
        })
        .buffer_unordered(FOREIGN_CONCURRENCY)
        .collect()
        .await;
    for (what, read) in reads {
        match read {
            Ok(Some(object)) => out.push((kind, object)),
            Ok(None) => {}
            Err(error) => failed.push(ListFailure { kind, what, error }),
        }
    }
    (out, failed)
}

/// The resourceVersions of the same-name objects of every kind for the
/// `runners` in scope `ns`, by Runner and kind: one metadata list per kind
/// (without a selector: a foreign object's churn counts too). A failed
/// list is returned; the Runners then have no versions of that kind.
pub async fn versions(
    client: &Client,
    ns: Option<&str>,
    runners: &BTreeSet<Key>,
) -> (BTreeMap<Key, BTreeMap<&'static str, String>>, Vec<ListFailure>) {
    let lists = join_all(kinds::all().iter().map(|&kind| async move {
        let api = scoped_dynamic(client, &kind.api_resource(), ns);
        (kind, api.list_metadata(&ListParams::default()).await)
    }))
    .await;
    let mut out: BTreeMap<Key, BTreeMap<&'static str, String>> = BTreeMap::new();
    let mut failed = vec![];
    for (kind, listed) in lists {
        match listed {
            Ok(l) => {
                for m in l.items {
                    let key = key_of(&m.metadata);
                    if let (true, Some(rv)) = (runners.contains(&key), m.metadata.resource_version) {
                        out.entry(key).or_default().insert(kind.kind(), rv);
                    }
                }
            }
            Err(error) => failed.push(ListFailure {
                kind,
                what: format!("list {} {}", kind.plural(), where_(ns)),
                error,
            }),
        }
    }
    (out, failed)
}

/// `Deployment ns/x`-style names of every object labelled with `uid`, of
/// any child kind: what a Runner's deletion has not removed yet.
pub async fn labelled(client: &Client, ns: &str, uid: &str) -> Result<Vec<String>> {
    let lp = ListParams::default().labels(&format!("{RUNNER_UID_LABEL}={uid}"));
    let mut out = vec![];
    for &kind in kinds::all() {
        let listed = scoped_dynamic(client, &kind.api_resource(), Some(ns))
            .list_metadata(&lp)
            .await
            .map_err(|e| Error::api("list", kind.kind(), ns, &format!("-l {RUNNER_UID_LABEL}={uid}"), e))?;
        out.extend(listed.items.iter().map(|m| format!("{} {ns}/{}", kind.kind(), m.name_any())));
    }
    Ok(out)
}

#[cfg(test)]
#[path = "children_tests.rs"]
mod tests;
