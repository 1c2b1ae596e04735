//! `history` as text: a `kubectl get`-style table of deleted Runners, or
//! the records as JSON or YAML. Names, images and hosts come from the
//! cluster (anyone who may edit the ConfigMap writes them), so every cell
//! and warning is [`Safe`]; JSON and YAML are the exact data.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::{Safe, age_of};
use crate::deletion_record::{CONFIGMAP, Entry, Unreadable};

/// One record with the namespace it was found in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Deleted {
    pub namespace: String,
    #[serde(flatten)]
    pub entry: Entry,
}

#[derive(Serialize)]
struct Items<'a> {
    items: &'a [Deleted],
}

/// The table, oldest deletion first within each namespace.
pub fn table(items: &[Deleted], namespace_column: bool, now: Timestamp) -> String {
    let mut header = vec!["NAME", "IMAGE", "REPLICAS", "PORT", "HOSTS", "CHILDREN", "DELETED", "UID"];
    if namespace_column {
        header.insert(0, "NAMESPACE");
    }
    let rows = items.iter().map(|d| {
        let e = &d.entry;
        let mut row: Vec<Safe> = vec![
            Safe::new(&e.name),
            Safe::new(&e.image),
            e.replicas.to_string().into(),
            e.port.to_string().into(),
            Safe::new(
                Some(e.all_hosts().join(",")).filter(|h| !h.is_empty()).unwrap_or_else(|| "<none>".into()),
            ),
            if e.orphaned { "orphaned" } else { "deleted" }.into(),
            age_of(Some(&e.deleted_at.0), now).into(),
            Safe::new(&e.uid),
        ];
        if namespace_column {
            row.insert(0, Safe::new(&d.namespace));
        }
        row
    });
    super::table(Some(&header), rows)
}

/// `{"items": [...]}`, pretty.
pub fn json(items: &[Deleted]) -> String {
    super::json(&Items { items })
}

/// `items: [...]`.
pub fn yaml(items: &[Deleted]) -> String {
    super::yaml(&Items { items })
}

/// For stderr, as kubectl says it for an empty list.
pub fn no_records(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("No deleted Runners recorded in {} namespace.\n", Safe::new(ns)),
        None => "No deleted Runners recorded.\n".into(),
    }
}

/// A warning: the namespace's ConfigMap is someone else's.
pub fn foreign(namespace: &str) -> String {
    super::warning(&format!(
        "ConfigMap {namespace}/{CONFIGMAP} was not created by kubectl-runner; its data is not shown"
    ))
}

/// A warning: a key that holds no record.
pub fn unreadable(namespace: &str, u: &Unreadable) -> String {
    super::warning(&format!(
        "ConfigMap {namespace}/{CONFIGMAP}: key {:?} holds no record: {}",
        u.key, u.error
    ))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn deleted(name: &str, image: &str) -> Deleted {
        Deleted {
            namespace: "team".into(),
            entry: Entry {
                name: name.into(),
                uid: "3f0c".into(),
                deleted_at: Time(Timestamp::from_second(1_767_600_000).unwrap()),
                image: image.into(),
                replicas: 3,
                port: 8080,
                host: None,
                hosts: Vec::new(),
                orphaned: true,
            },
        }
    }

    #[test]
    fn the_table_reads_like_kubectl_get() {
        let now = Timestamp::from_second(1_767_600_300).unwrap();
        let t = table(&[deleted("web", "nginx:1.27")], true, now);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["NAMESPACE", "NAME", "IMAGE", "REPLICAS", "PORT", "HOSTS", "CHILDREN", "DELETED", "UID"]
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["team", "web", "nginx:1.27", "3", "8080", "<none>", "orphaned", "5m", "3f0c"]
        );
    }

    #[test]
    fn cluster_text_is_escaped_in_the_table_and_warnings_and_exact_in_json() {
        let evil = "nginx\u{1b}]0;owned\u{7}";
        let now = Timestamp::from_second(1_767_600_000).unwrap();
        let t = table(&[deleted("web", evil)], false, now);
        assert!(!t.contains('\u{1b}') && t.contains("nginx\\x1b]0;owned\\x07"), "{t}");
        let u = Unreadable { key: "k\u{9b}2J".into(), error: "e\u{202e}".into() };
        let w = unreadable("team\u{1b}", &u);
        assert!(!w.contains(['\u{1b}', '\u{9b}', '\u{202e}']), "{w}");
        let j: serde_json::Value = serde_json::from_str(&json(&[deleted("web", evil)])).unwrap();
        assert_eq!(j["items"][0]["image"], evil);
        assert_eq!(j["items"][0]["namespace"], "team");
        assert_eq!(j["items"][0]["deletedAt"], "2026-01-05T08:00:00Z");
    }
}
