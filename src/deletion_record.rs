//! Pure: the record a deleted Runner leaves behind, so "what ran here, and
//! with which spec?" has an answer after the Runner is gone. The manager
//! writes it (`manager::deletion_record_write`) just before it removes
//! its finalizer; `kubectl runner history` reads it.
//!
//! The record is one ConfigMap per namespace, [`CONFIGMAP`], with one data
//! key per deleted Runner, keeping the newest [`MAX_ENTRIES`]:
//!
//! ```text
//! data:
//!   20260105T101502Z.web.3f0c9b1e-...: {"name":"web","uid":"3f0c9b1e-...","deletedAt":"2026-01-05T10:15:02Z",
//!                                       "image":"nginx:1.27","replicas":2,"port":8080,"host":"web.example.com",
//!                                       "hosts":["web.example.com"],"orphaned":false}
//! ```
//!
//! Why this shape:
//! - The key starts with the deletion time in a fixed-width form, so the
//!   order of the keys is the order of the deletions: `kubectl get configmap
//!   runner-deletions -o yaml` (which prints keys sorted) reads as a log,
//!   and trimming drops the smallest keys. Name and UID make it unique and
//!   only use the characters a data key allows (`[-._a-zA-Z0-9]`).
//! - The key is derived from the Runner alone (its `deletionTimestamp`, the
//!   time the deletion was asked for), so a pass retried after the record
//!   was written finds its key and writes nothing twice.
//! - The value is one line of JSON: readable as it is, and by `jq`.
//! - One key per entry lets one JSON merge patch add an entry and remove
//!   the trimmed ones without rewriting the others; the patch carries the
//!   resourceVersion it was computed from, so two Runners deleted at once
//!   cannot drop each other's entry (the loser re-reads and tries again).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::civil::DateTime;
use kube::ResourceExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{MANAGED_BY, Runner};
use crate::ownership::MANAGED_BY_LABEL;

/// The ConfigMap holding a namespace's records; the manager's RBAC names it.
pub const CONFIGMAP: &str = "runner-deletions";
/// Entries kept per namespace: the newest, by deletion time.
pub const MAX_ENTRIES: usize = 50;
/// `strftime` form of the key's time: fixed width, sorts as it reads.
const KEY_TIME: &str = "%Y%m%dT%H%M%SZ";

/// One deleted Runner: who it was and its last spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub name: String,
    pub uid: String,
    /// When the deletion was asked for (the Runner's `deletionTimestamp`).
    pub deleted_at: Time,
    pub image: String,
    pub replicas: i32,
    pub port: i32,
    /// The first host, which is all a record of v1alpha1 days holds; still
    /// written, so an older `history` reading a new record shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Every host (v1beta1's `spec.expose.hosts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Deleted with `--cascade=orphan`: its children were left in place.
    #[serde(default)]
    pub orphaned: bool,
}

impl Entry {
    /// The record of `runner`, being deleted; None when it is not (no
    /// deletionTimestamp) or has no UID.
    pub fn of(runner: &Runner, orphaned: bool) -> Option<Entry> {
        Some(Entry {
            name: runner.name_any(),
            uid: runner.uid()?,
            deleted_at: runner.metadata.deletion_timestamp.clone()?,
            image: runner.spec.image.clone(),
            replicas: runner.spec.replicas,
            port: runner.spec.expose.port,
            host: runner.spec.first_host().map(String::from),
            hosts: runner.spec.expose.hosts.clone(),
            orphaned,
        })
    }

    /// The hosts, from a record of either age.
    pub fn all_hosts(&self) -> Vec<String> {
        if self.hosts.is_empty() { self.host.iter().cloned().collect() } else { self.hosts.clone() }
    }

    /// `20260105T101502Z.NAME.UID`: see the module doc.
    pub fn key(&self) -> String {
        format!("{}.{}.{}", self.deleted_at.0.strftime(KEY_TIME), self.name, self.uid)
    }

    /// The data value: one line of JSON.
    pub fn value(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// True for a data key shaped like [`Entry::key`]: only these are trimmed.
pub fn is_entry_key(key: &str) -> bool {
    let Some((time, rest)) = key.split_once('.') else { return false };
    // jiff reads no literal `Z` as an offset: the civil time before it.
    let civil = time.strip_suffix('Z').map(|t| DateTime::strptime("%Y%m%dT%H%M%S", t));
    !rest.is_empty() && time.len() == 16 && civil.is_some_and(|c| c.is_ok())
}

/// What the write of some entries comes to, given the ConfigMap as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Every entry already there (a retried pass), or older than the
    /// newest [`MAX_ENTRIES`], so it would be trimmed at once.
    Nothing,
    /// No ConfigMap yet: create this one.
    Create(Box<ConfigMap>),
    /// A JSON merge patch adding the entries and removing the trimmed ones,
    /// guarded by the resourceVersion read (a 409 if it moved on).
    Patch(Value),
    /// A ConfigMap of that name that kubectl-runner did not create: it is
    /// left alone.
    Foreign,
}

/// Pure: how to add `new` entries to `live` (None: there is none) in
/// `namespace`, keeping the newest [`MAX_ENTRIES`].
pub fn plan(live: Option<&ConfigMap>, namespace: &str, new: &[Entry]) -> Plan {
    let data = live.and_then(|cm| cm.data.clone()).unwrap_or_default();
    let mut keys: Vec<&str> = data.keys().map(String::as_str).filter(|k| is_entry_key(k)).collect();
    let added: BTreeMap<String, String> =
        new.iter().map(|e| (e.key(), e.value())).filter(|(k, _)| !data.contains_key(k)).collect();
    keys.extend(added.keys().map(String::as_str));
    keys.sort_unstable();
    let trimmed = &keys[..keys.len().saturating_sub(MAX_ENTRIES)];
    let kept: BTreeMap<String, String> = added
        .iter()
        .filter(|(k, _)| !trimmed.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let Some(cm) = live else {
        return if kept.is_empty() {
            Plan::Nothing
        } else {
            Plan::Create(Box::new(ConfigMap {
                metadata: ObjectMeta {
                    name: Some(CONFIGMAP.into()),
                    namespace: Some(namespace.into()),
                    labels: Some(BTreeMap::from([(MANAGED_BY_LABEL.into(), MANAGED_BY.into())])),
                    ..Default::default()
                },
                data: Some(kept),
                ..Default::default()
            }))
        };
    };
    if !is_ours(cm) {
        return Plan::Foreign;
    }
    if kept.is_empty() {
        return Plan::Nothing;
    }
    let mut changes: serde_json::Map<String, Value> =
        trimmed.iter().filter(|k| data.contains_key(**k)).map(|k| (k.to_string(), Value::Null)).collect();
    changes.extend(kept.into_iter().map(|(k, v)| (k, Value::String(v))));
    Plan::Patch(json!({
        "metadata": { "resourceVersion": cm.resource_version() },
        "data": changes,
    }))
}

/// Created by kubectl-runner: it carries our managed-by label.
pub fn is_ours(cm: &ConfigMap) -> bool {
    cm.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
}

/// A data key whose value is no entry (edited by hand, or from a newer
/// version): its key and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub key: String,
    pub error: String,
}

/// The entries of one record, oldest first, and the keys that hold none.
pub fn entries(cm: &ConfigMap) -> (Vec<Entry>, Vec<Unreadable>) {
    let mut ok = vec![];
    let mut bad = vec![];
    // BTreeMap: keys in order, so entries oldest first.
    for (key, value) in cm.data.iter().flatten() {
        match serde_json::from_str::<Entry>(value) {
            Ok(e) if is_entry_key(key) => ok.push(e),
            Ok(_) => bad.push(Unreadable { key: key.clone(), error: "not a record key".into() }),
            Err(e) => bad.push(Unreadable { key: key.clone(), error: e.to_string() }),
        }
    }
    (ok, bad)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::{FINALIZER, RunnerSpec};

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(1_767_600_000 + secs).unwrap())
    }

    fn entry(name: &str, secs: i64) -> Entry {
        Entry {
            name: name.into(),
            uid: format!("uid-{name}"),
            deleted_at: at(secs),
            image: "nginx:1.27".into(),
            replicas: 2,
            port: 8080,
            host: None,
            hosts: Vec::new(),
            orphaned: false,
        }
    }

    fn ours(entries: &[Entry]) -> ConfigMap {
        let Plan::Create(mut cm) = plan(None, "team", &entries[..1]) else { panic!("want a create") };
        cm.metadata.resource_version = Some("7".into());
        cm.data = Some(entries.iter().map(|e| (e.key(), e.value())).collect());
        *cm
    }

    #[test]
    fn an_entry_holds_the_runners_last_spec_and_its_key_sorts_by_deletion_time() {
        let mut r = Runner::new("web", RunnerSpec::every_field().replicas(3));
        r.metadata.uid = Some("3f0c".into());
        r.metadata.finalizers = Some(vec![FINALIZER.into()]);
        assert_eq!(Entry::of(&r, false), None, "not being deleted");
        r.metadata.deletion_timestamp = Some(at(2));
        let e = Entry::of(&r, true).unwrap();
        assert_eq!((e.replicas, e.port, e.host.as_deref()), (3, 8080, Some("web.example.com")));
        assert_eq!(e.all_hosts(), ["web.example.com", "www.example.com"]);
        let old = Entry { hosts: Vec::new(), ..e.clone() };
        assert_eq!(old.all_hosts(), ["web.example.com"], "a record written before v1beta1");
        assert_eq!(e.key(), "20260105T080002Z.web.3f0c");
        assert!(is_entry_key(&e.key()));
        for other in
            ["note", "2026.web", "20260105T080002Z.", "20261305T080002Z.web.u", "20260105T080002.web.u"]
        {
            assert!(!is_entry_key(other), "{other}");
        }
        let v: Value = serde_json::from_str(&e.value()).unwrap();
        assert_eq!(v["deletedAt"], "2026-01-05T08:00:02Z");
        assert_eq!(v["orphaned"], true);
        assert!(!e.value().contains('\n'));
        // Lexical order of keys is the order of deletion, across a day.
        assert!(entry("zz", 0).key() < entry("aa", 1).key());
        assert!(entry("zz", 86_000).key() < entry("aa", 86_400 * 40).key());
    }

    #[test]
    fn the_first_record_creates_our_configmap() {
        let Plan::Create(cm) = plan(None, "team", &[entry("web", 0)]) else { panic!() };
        assert_eq!(cm.metadata.name.as_deref(), Some(CONFIGMAP));
        assert!(is_ours(&cm));
        assert_eq!(entries(&cm).0, vec![entry("web", 0)]);
    }

    #[test]
    fn a_new_entry_is_a_merge_patch_guarded_by_the_resource_version() {
        let cm = ours(&[entry("a", 0)]);
        let Plan::Patch(p) = plan(Some(&cm), "team", &[entry("b", 5)]) else { panic!() };
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        let data = p["data"].as_object().unwrap();
        assert_eq!(data.len(), 1, "touches only its own key: {p}");
        assert_eq!(data[&entry("b", 5).key()], entry("b", 5).value());
    }

    #[test]
    fn entries_waiting_together_go_in_one_patch_or_one_create() {
        let cm = ours(&[entry("a", 0)]);
        let Plan::Patch(p) = plan(Some(&cm), "team", &[entry("b", 5), entry("a", 0), entry("c", 6)]) else {
            panic!()
        };
        let keys: Vec<&String> = p["data"].as_object().unwrap().keys().collect();
        assert_eq!(keys, [&entry("b", 5).key(), &entry("c", 6).key()], "the new ones only: {p}");
        let many: Vec<Entry> = (0..MAX_ENTRIES as i64 + 2).map(|i| entry(&format!("r{i}"), i)).collect();
        let Plan::Create(cm) = plan(None, "team", &many) else { panic!() };
        assert_eq!(entries(&cm).0, many[2..], "the newest fifty");
    }

    #[test]
    fn a_retried_pass_writes_nothing() {
        let cm = ours(&[entry("a", 0), entry("b", 5)]);
        assert_eq!(plan(Some(&cm), "team", &[entry("b", 5)]), Plan::Nothing);
    }

    #[test]
    fn beyond_fifty_the_oldest_entries_are_removed_and_other_keys_kept() {
        let full: Vec<Entry> = (0..MAX_ENTRIES as i64).map(|i| entry(&format!("r{i}"), i)).collect();
        let mut cm = ours(&full);
        cm.data.as_mut().unwrap().insert("note".into(), "someone's".into());
        let Plan::Patch(p) = plan(Some(&cm), "team", &[entry("new", 1000)]) else { panic!() };
        let data = p["data"].as_object().unwrap();
        assert_eq!(data[&full[0].key()], Value::Null, "the oldest goes");
        assert_eq!(data.len(), 2, "one in, one out: {p}");
        assert!(!data.contains_key("note"));
        // Two over the limit (an earlier write overshot): both oldest go.
        let mut over = full.clone();
        over.push(entry("late", 60));
        let Plan::Patch(p) = plan(Some(&ours(&over)), "team", &[entry("new", 1000)]) else { panic!() };
        let removed: Vec<&String> =
            p["data"].as_object().unwrap().iter().filter(|(_, v)| v.is_null()).map(|(k, _)| k).collect();
        assert_eq!(removed, [&full[0].key(), &full[1].key()]);
    }

    #[test]
    fn an_entry_older_than_the_fifty_kept_is_not_written() {
        let full: Vec<Entry> = (0..MAX_ENTRIES as i64).map(|i| entry(&format!("r{i}"), i + 10)).collect();
        assert_eq!(plan(Some(&ours(&full)), "team", &[entry("old", 0)]), Plan::Nothing);
    }

    #[test]
    fn a_configmap_we_did_not_create_is_left_alone() {
        let mut cm = ours(&[entry("a", 0)]);
        cm.metadata.labels = None;
        assert_eq!(plan(Some(&cm), "team", &[entry("b", 5)]), Plan::Foreign);
    }

    #[test]
    fn history_reads_entries_oldest_first_and_names_unreadable_keys() {
        let mut cm = ours(&[entry("b", 5), entry("a", 0)]);
        let data = cm.data.as_mut().unwrap();
        data.insert("20260105T080009Z.c.x".into(), "{not json".into());
        data.insert("note".into(), entry("n", 1).value());
        let (ok, bad) = entries(&cm);
        assert_eq!(ok, vec![entry("a", 0), entry("b", 5)]);
        let keys: Vec<&str> = bad.iter().map(|b| b.key.as_str()).collect();
        assert_eq!(keys, ["20260105T080009Z.c.x", "note"]);
    }
}
