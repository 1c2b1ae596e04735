//! The one reader of a Runner's children, for the CLI (`describe`,
//! `delete --wait`, `get -o wide`) and `diagnose` (gather, `--fix`): the
//! same-name object of every child kind ([`crate::kinds::all`]) in the
//! Runner's namespace, whoever owns it (ownership is what the callers
//! judge), read dynamically; and the Pods labelled with the Runner's UID.

use std::collections::BTreeMap;

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;

use crate::api::RUNNER_UID_LABEL;
use crate::client::scoped_dynamic;
use crate::error::{Error, Result};
use crate::kinds::{self, Kind};

/// One child object found, and its kind.
#[derive(Debug, Clone)]
pub struct Child {
    pub kind: &'static dyn Kind,
    pub object: DynamicObject,
}

/// The children found, at most one per kind, in [`kinds::all`] order.
#[derive(Debug, Clone, Default)]
pub struct Children(Vec<Child>);

impl Children {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Child> {
        self.0.iter()
    }

    /// The object of kind `kind` (`Deployment`, ...), if found.
    pub fn get(&self, kind: &str) -> Option<&DynamicObject> {
        self.0.iter().find(|c| c.kind.kind() == kind).map(|c| &c.object)
    }

    pub fn get_mut(&mut self, kind: &str) -> Option<&mut DynamicObject> {
        self.0.iter_mut().find(|c| c.kind.kind() == kind).map(|c| &mut c.object)
    }

    /// The object of `K`'s kind, decoded as `K`.
    pub fn typed<K: k8s_openapi::Resource + DeserializeOwned>(&self) -> Option<K> {
        self.get(K::KIND).and_then(|o| kinds::typed(o).ok())
    }

    /// Adds (or replaces) the object of its kind, keeping kind order.
    pub fn insert(&mut self, kind: &'static dyn Kind, object: DynamicObject) {
        self.remove(kind.kind());
        self.0.push(Child { kind, object });
        let order = |c: &Child| kinds::all().iter().position(|k| k.kind() == c.kind.kind());
        self.0.sort_by_key(order);
    }

    pub fn remove(&mut self, kind: &str) -> Option<DynamicObject> {
        let i = self.0.iter().position(|c| c.kind.kind() == kind)?;
        Some(self.0.remove(i).object)
    }

    /// `Deployment web`-style names of the children `keep` selects.
    pub fn names(&self, keep: impl Fn(&Child) -> bool) -> Vec<String> {
        self.0
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

/// [`read`], failing on the first error.
pub async fn fetch(client: &Client, ns: &str, name: &str) -> Result<Children> {
    let mut out = Children::default();
    for r in read(client, ns, name).await {
        match r.result {
            Ok(Some(object)) => out.insert(r.kind, object),
            Ok(None) => {}
            Err(e) => return Err(Error::api("get", r.kind.kind(), ns, name, e)),
        }
    }
    Ok(out)
}

/// The Pods labelled with the Runner's UID (none without a UID).
pub async fn pods(client: &Client, ns: &str, name: &str, uid: Option<&str>) -> Result<Vec<Pod>> {
    let Some(uid) = uid else { return Ok(Vec::new()) };
    let lp = ListParams::default().labels(&format!("{RUNNER_UID_LABEL}={uid}"));
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map(|l| l.items)
        .map_err(|e| Error::api("list", "Pod", ns, name, e))
}

/// Children of many Runners at once, keyed by (namespace, name): one list
/// per kind (objects labelled with any Runner UID) instead of a get per
/// kind and Runner, for `get -o wide`.
pub async fn index(client: &Client, ns: Option<&str>) -> Result<BTreeMap<(String, String), Children>> {
    let lp = ListParams::default().labels(RUNNER_UID_LABEL);
    let mut out: BTreeMap<(String, String), Children> = BTreeMap::new();
    for &kind in kinds::all() {
        let listed = scoped_dynamic(client, &kind.api_resource(), ns)
            .list(&lp)
            .await
            .map_err(|e| Error::api("list", kind.kind(), ns.unwrap_or(""), "", e))?;
        for object in listed {
            let key = (object.namespace().unwrap_or_default(), object.name_any());
            out.entry(key).or_default().insert(kind, object);
        }
    }
    Ok(out)
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
