//! Pure: which fields one write changed, and whose `managedFields` entry
//! holds them. Two versions of an object (as JSON) give the paths of the
//! leaves whose value differs; a `FieldsV1` trie says whether it owns a path.
//!
//! Paths are read the way server-side apply reads objects: maps by key,
//! lists of objects that all carry a `name` (containers, ports) or a `type`
//! (conditions) by that key, every other list as one value. A subtree that
//! appears or disappears whole is one path, not one per leaf.
//! `metadata.resourceVersion`, `metadata.managedFields` and
//! `metadata.generation` change with every write or follow from the others,
//! and `apiVersion` and `kind` are absent from a list's items but not from
//! watch events: none of them is a field a write "changed".

use std::fmt;

use serde_json::{Map, Value};

/// One step into an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// A map key (`f:KEY` in `FieldsV1`).
    Field(String),
    /// The list item whose `key` is `value` (`k:{"key":"value"}`).
    Item { key: &'static str, value: String },
}

/// A field, from the object's root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FieldPath(pub Vec<Step>);

/// `spec.replicas`, `metadata.annotations[example.org/tick]`,
/// `spec.template.spec.containers[name=app].image`: dotted while the keys
/// are plain words, a key holding `.` or `/` in brackets.
impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.0.iter().enumerate() {
            match step {
                Step::Field(k) if k.contains(['.', '/', '[', ']']) || k.is_empty() => write!(f, "[{k}]")?,
                Step::Field(k) if i == 0 => write!(f, "{k}")?,
                Step::Field(k) => write!(f, ".{k}")?,
                Step::Item { key, value } => write!(f, "[{key}={value}]")?,
            }
        }
        Ok(())
    }
}

impl FieldPath {
    /// The path lies under the top-level `status`.
    pub fn is_status(&self) -> bool {
        matches!(self.0.first(), Some(Step::Field(k)) if k == "status")
    }
}

/// Top-level metadata fields that every write changes or that follow from
/// the others.
const NOISE: [&str; 3] = ["resourceVersion", "managedFields", "generation"];

/// Top-level fields a list leaves out of its items.
const TYPE: [&str; 2] = ["apiVersion", "kind"];

/// The fields whose value differs between `before` and `after`, sorted.
pub fn changed(before: &Value, after: &Value) -> Vec<FieldPath> {
    let mut out = vec![];
    let mut path = vec![];
    walk(before, after, &mut path, &mut out);
    out.sort();
    out
}

fn walk(a: &Value, b: &Value, path: &mut Vec<Step>, out: &mut Vec<FieldPath>) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let metadata = path.len() == 1 && path[0] == Step::Field("metadata".into());
            for key in keys(a, b) {
                if (metadata && NOISE.contains(&key.as_str()))
                    || (path.is_empty() && TYPE.contains(&key.as_str()))
                {
                    continue;
                }
                path.push(Step::Field(key.clone()));
                walk(a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null), path, out);
                path.pop();
            }
        }
        (Value::Array(a), Value::Array(b)) => match list_key(a, b) {
            Some(key) => {
                let (a, b) = (by_key(a, key), by_key(b, key));
                for value in keys(&a, &b) {
                    path.push(Step::Item { key, value: value.clone() });
                    walk(
                        a.get(value).unwrap_or(&Value::Null),
                        b.get(value).unwrap_or(&Value::Null),
                        path,
                        out,
                    );
                    path.pop();
                }
            }
            None if a != b => out.push(FieldPath(path.clone())),
            None => {}
        },
        _ if a != b => out.push(FieldPath(path.clone())),
        _ => {}
    }
}

fn keys<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> std::collections::BTreeSet<&'a String> {
    a.keys().chain(b.keys()).collect()
}

/// `name` when every item of both lists is an object with a distinct string
/// `name`, else the same for `type`; `None`: the list is one value.
fn list_key(a: &[Value], b: &[Value]) -> Option<&'static str> {
    ["name", "type"].into_iter().find(|key| {
        [a, b].iter().all(|list| {
            let values: Vec<&str> = list.iter().filter_map(|v| v.get(key)?.as_str()).collect();
            let distinct: std::collections::BTreeSet<&&str> = values.iter().collect();
            values.len() == list.len() && distinct.len() == values.len()
        })
    })
}

fn by_key(list: &[Value], key: &str) -> Map<String, Value> {
    list.iter().filter_map(|v| Some((v.get(key)?.as_str()?.to_string(), v.clone()))).collect()
}

/// True when the `FieldsV1` trie owns `path` or an ancestor of it held as
/// one value (a leaf `{}` above the end of the path).
pub fn owns(trie: &Value, path: &FieldPath) -> bool {
    let mut node = trie;
    for (depth, step) in path.0.iter().enumerate() {
        let next = match step {
            Step::Field(k) => node.get(format!("f:{k}")),
            Step::Item { key, value } => node
                .as_object()
                .and_then(|o| o.iter().find(|(k, _)| item_matches(k, key, value)).map(|(_, v)| v)),
        };
        match next {
            Some(n) => node = n,
            None => return depth > 0 && node.as_object().is_some_and(|o| o.is_empty()),
        }
    }
    true
}

/// `k:{"name":"app"}` (or `k:{"containerPort":80,"name":"http"}`) names the
/// item whose `key` is `value`.
fn item_matches(trie_key: &str, key: &str, value: &str) -> bool {
    let Some(json) = trie_key.strip_prefix("k:") else { return false };
    serde_json::from_str::<Value>(json)
        .ok()
        .is_some_and(|v| v.get(key).and_then(Value::as_str) == Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(a: Value, b: Value) -> Vec<String> {
        changed(&a, &b).iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn changed_fields_are_leaves_read_the_way_apply_reads_them() {
        type Case = (&'static str, Value, Value, &'static [&'static str]);
        let cases: &[Case] = &[
            (
                "a scalar",
                json!({ "spec": { "replicas": 2 } }),
                json!({ "spec": { "replicas": 5 } }),
                &["spec.replicas"],
            ),
            (
                "write noise only",
                json!({ "metadata": { "resourceVersion": "1", "generation": 1, "managedFields": [] } }),
                json!({ "metadata": { "resourceVersion": "2", "generation": 2, "managedFields": [{}] } }),
                &[],
            ),
            (
                "the type, left out of a list's items",
                json!({ "metadata": {}, "spec": { "kind": "a" } }),
                json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}, "spec": { "kind": "b" } }),
                &["spec.kind"],
            ),
            (
                "an annotation key with dots and a slash",
                json!({ "metadata": { "annotations": { "example.org/tick": "1", "a": "x" } } }),
                json!({ "metadata": { "annotations": { "example.org/tick": "2", "a": "x" } } }),
                &["metadata.annotations[example.org/tick]"],
            ),
            (
                "a container by name",
                json!({ "spec": { "containers": [{ "name": "app", "image": "a" }, { "name": "b", "image": "b" }] } }),
                json!({ "spec": { "containers": [{ "name": "b", "image": "b" }, { "name": "app", "image": "c" }] } }),
                &["spec.containers[name=app].image"],
            ),
            (
                "a condition by type",
                json!({ "status": { "conditions": [{ "type": "Ready", "status": "False" }] } }),
                json!({ "status": { "conditions": [{ "type": "Ready", "status": "True" }] } }),
                &["status.conditions[type=Ready].status"],
            ),
            (
                "a list without keys is one value",
                json!({ "spec": { "args": ["a", "b"] } }),
                json!({ "spec": { "args": ["b", "a"] } }),
                &["spec.args"],
            ),
            (
                "a subtree that appears is one path",
                json!({ "metadata": {} }),
                json!({ "metadata": { "annotations": { "x": "1", "y": "2" } } }),
                &["metadata.annotations"],
            ),
            ("nothing", json!({ "spec": { "a": [1] } }), json!({ "spec": { "a": [1] } }), &[]),
        ];
        for (name, a, b, want) in cases {
            assert_eq!(shown(a.clone(), b.clone()), *want, "{name}");
        }
    }

    #[test]
    fn resource_version_is_noise_only_in_metadata() {
        let got =
            shown(json!({ "spec": { "resourceVersion": 1 } }), json!({ "spec": { "resourceVersion": 2 } }));
        assert_eq!(got, ["spec.resourceVersion"]);
    }

    #[test]
    fn a_trie_owns_its_fields_and_what_lies_under_an_atomic_leaf() {
        let trie = json!({ "f:spec": { "f:replicas": {}, "f:args": {},
                           "f:template": { "f:spec": { "f:containers": {
                               "k:{\"name\":\"app\"}": { ".": {}, "f:image": {} } } } } } });
        let path = |a: Value, b: Value| changed(&a, &b).remove(0);
        let replicas = path(json!({ "spec": { "replicas": 1 } }), json!({ "spec": { "replicas": 2 } }));
        let image = path(
            json!({ "spec": { "template": { "spec": { "containers": [{ "name": "app", "image": "a" }] } } } }),
            json!({ "spec": { "template": { "spec": { "containers": [{ "name": "app", "image": "b" }] } } } }),
        );
        let other = path(
            json!({ "spec": { "template": { "spec": { "containers": [{ "name": "side", "image": "a" }] } } } }),
            json!({ "spec": { "template": { "spec": { "containers": [{ "name": "side", "image": "b" }] } } } }),
        );
        let under_leaf =
            FieldPath(vec![Step::Field("spec".into()), Step::Field("args".into()), Step::Field("x".into())]);
        let paused = path(json!({ "spec": {} }), json!({ "spec": { "paused": true } }));
        assert!(owns(&trie, &replicas) && owns(&trie, &image) && owns(&trie, &under_leaf));
        assert!(!owns(&trie, &other) && !owns(&trie, &paused));
        assert!(!owns(&json!({}), &replicas), "an empty trie owns nothing");
    }

    #[test]
    fn status_paths_are_those_under_the_top_level_status() {
        let p = changed(
            &json!({ "status": { "x": 1 }, "spec": { "status": 1 } }),
            &json!({ "status": { "x": 2 }, "spec": { "status": 2 } }),
        );
        assert_eq!(p.iter().map(FieldPath::is_status).collect::<Vec<_>>(), [false, true]);
    }
}
