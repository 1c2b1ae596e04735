//! Pure: who made one write. Given an object before and after a write (as
//! the watch delivered them), the fields that changed ([`super::diff`]) and
//! the field manager whose `managedFields` entry made them.
//!
//! A write by one manager moves its own entry: the apiserver stamps a new
//! `time` (to the second) or changes its field set (an `Update` that sets
//! someone else's field takes it over). A manager that writes its own
//! fields twice within a second leaves its entry as it was, but it still
//! owns what changed. So the writer is, in order: a moved entry that now
//! owns a changed field; else an entry that owns one; else the moved entry
//! stamped last; else unknown. An entry that only lost fields (the loser of
//! a take-over) owns none of them any more and is never named.

use std::time::Duration;

use serde_json::Value;

use super::diff::{self, FieldPath};
use super::{Write, Writer};

/// One `managedFields` entry, read from the JSON as sent (untrusted: a
/// missing or odd field reads as empty).
struct Entry<'a> {
    writer: Writer,
    time: &'a str,
    fields: &'a Value,
}

fn entries(object: &Value) -> Vec<Entry<'_>> {
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| Entry {
            writer: Writer {
                manager: text(e, "manager"),
                operation: text(e, "operation"),
                subresource: text(e, "subresource"),
            },
            time: e.get("time").and_then(Value::as_str).unwrap_or_default(),
            fields: e.get("fieldsV1").unwrap_or(&Value::Null),
        })
        .collect()
}

/// The write that turned `before` into `after`, `at` into the window.
pub fn attribute(before: &Value, after: &Value, at: Duration) -> Write {
    let fields = diff::changed(before, after);
    let generation = |o: &Value| o.pointer("/metadata/generation").cloned();
    Write {
        at,
        writer: writer(&entries(before), &entries(after), &fields),
        status_only: !fields.is_empty() && fields.iter().all(FieldPath::is_status),
        fields: fields.iter().map(ToString::to_string).collect(),
        generation_changed: generation(before) != generation(after),
    }
}

fn writer(before: &[Entry], after: &[Entry], fields: &[FieldPath]) -> Option<Writer> {
    let moved =
        |e: &Entry| !before.iter().any(|b| b.writer == e.writer && b.time == e.time && b.fields == e.fields);
    let owned = |e: &Entry| fields.iter().filter(|p| diff::owns(e.fields, p)).count();
    let best = |pick: &dyn Fn(&Entry) -> bool| {
        after.iter().filter(|e| pick(e) && owned(e) > 0).max_by_key(|e| (owned(e), e.time))
    };
    best(&|e| moved(e))
        .or_else(|| best(&|_| true))
        .or_else(|| after.iter().filter(|e| moved(e)).max_by_key(|e| e.time))
        .map(|e| e.writer.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(manager: &str, op: &str, sub: Option<&str>, time: &str, fields: Value) -> Value {
        let mut e = json!({ "manager": manager, "operation": op, "time": time, "fieldsV1": fields });
        if let Some(s) = sub {
            e["subresource"] = json!(s);
        }
        e
    }

    fn object(replicas: i64, generation: i64, entries: Vec<Value>) -> Value {
        json!({ "metadata": { "name": "web", "generation": generation, "managedFields": entries },
                "spec": { "replicas": replicas }, "status": { "replicas": 2 } })
    }

    fn replicas() -> Value {
        json!({ "f:spec": { "f:replicas": {} } })
    }

    fn who(w: &Write) -> Option<(&str, &str)> {
        w.writer.as_ref().map(|w| (w.manager.as_str(), w.operation.as_str()))
    }

    #[test]
    fn the_writer_is_the_entry_that_moved_and_owns_the_change() {
        type Case = (&'static str, Value, Value, Option<(&'static str, &'static str)>);
        let ours = |t: &str, f: Value| entry("kubectl-runner", "Apply", None, t, f);
        let kubectl = |t: &str, f: Value| entry("kubectl", "Update", None, t, f);
        let cases: Vec<Case> = vec![
            (
                "kubectl takes replicas over: our entry lost it, kubectl's owns it",
                object(2, 1, vec![ours("T1", replicas())]),
                object(5, 2, vec![ours("T1", json!({ "f:spec": {} })), kubectl("T2", replicas())]),
                Some(("kubectl", "Update")),
            ),
            (
                "we force it back: kubectl's entry is gone",
                object(5, 2, vec![ours("T1", json!({ "f:spec": {} })), kubectl("T2", replicas())]),
                object(2, 3, vec![ours("T3", replicas())]),
                Some(("kubectl-runner", "Apply")),
            ),
            (
                "the same manager twice within a second: nothing moved, the owner wrote",
                object(2, 1, vec![ours("T1", json!({})), kubectl("T2", replicas())]),
                object(3, 2, vec![ours("T1", json!({})), kubectl("T2", replicas())]),
                Some(("kubectl", "Update")),
            ),
            (
                "only a timestamp moved and it owns nothing that changed",
                object(2, 1, vec![kubectl("T1", json!({ "f:metadata": {} }))]),
                object(2, 1, vec![kubectl("T2", json!({ "f:metadata": {} }))]),
                Some(("kubectl", "Update")),
            ),
            ("no managedFields at all", object(2, 1, vec![]), object(3, 2, vec![]), None),
        ];
        for (name, before, after, want) in cases {
            let w = attribute(&before, &after, Duration::ZERO);
            assert_eq!(who(&w), want, "{name}");
        }
    }

    #[test]
    fn a_status_write_names_the_subresource_and_is_status_only() {
        let before =
            object(2, 1, vec![entry("kcm", "Update", Some("status"), "T1", json!({ "f:status": {} }))]);
        let mut after =
            object(2, 1, vec![entry("kcm", "Update", Some("status"), "T2", json!({ "f:status": {} }))]);
        after["status"]["replicas"] = json!(3);
        let w = attribute(&before, &after, Duration::from_secs(1));
        let writer = w.writer.unwrap();
        assert_eq!((writer.manager.as_str(), writer.subresource.as_str()), ("kcm", "status"));
        assert!(w.status_only && !w.generation_changed);
        assert_eq!(w.fields, ["status.replicas"]);
    }

    #[test]
    fn a_spec_write_changes_the_generation_and_is_not_status_only() {
        let w = attribute(&object(2, 1, vec![]), &object(3, 2, vec![]), Duration::ZERO);
        assert!(w.generation_changed && !w.status_only);
        assert_eq!(w.fields, ["spec.replicas"]);
    }

    #[test]
    fn odd_managed_fields_are_read_as_empty_not_a_panic() {
        let odd = json!({ "metadata": { "managedFields": [7, { "manager": 3, "fieldsV1": "x" }] } });
        let w = attribute(&odd, &json!({ "metadata": { "managedFields": "no" }, "spec": 1 }), Duration::ZERO);
        assert_eq!(w.fields, ["spec"]);
    }
}
