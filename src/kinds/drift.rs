//! Pure: does a live child still carry what we want, judged only on the
//! fields we set, the way server-side apply merges them?
//!
//! Other people and controllers add to our children: a label, an
//! annotation, a sidecar container, a port, `kubectl rollout restart`'s
//! annotation. Those are theirs and must not trigger a write (or every pass
//! would write). What we set is ours, and a changed value is drift. How a
//! field merges decides which is which: in a granular map or a keyed list
//! extra entries belong to someone else, while an atomic field (a label
//! selector, the Ingress rules) is replaced whole by our apply, so any
//! difference there is drift.
//!
//! One more case needs a write that apply cannot make: an entry of a keyed
//! list that carries the name of one of ours under another key (our `http`
//! port edited to another number by someone else). Apply would add ours back
//! next to it and the apiserver would refuse two ports named `http`; [`plan`]
//! lists such entries so the caller can put ours in their place first
//! (unless our apply owns them and replaces them anyway).

use serde_json::Value;

/// How server-side apply merges the field at a path (from the child types'
/// `x-kubernetes-list-type` / `map-type` / `structType` markers). Each kind
/// lists its non-granular paths ([`super::ChildKind::MERGE`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Merge {
    /// Maps key by key; lists without a key are replaced whole.
    Granular,
    /// Replaced whole: equal or drifted.
    Atomic,
    /// A list map: entries matched by these keys; others' entries are kept.
    Keyed(&'static [&'static str]),
    /// A list map whose entries must also have unique names (ports): an
    /// entry with our entry's name under another key is a [`Renamed`].
    KeyedNamed(&'static [&'static str]),
    /// A map of resource quantities: granular, each value compared by
    /// what it amounts to (the apiserver stores `0.5` as `500m`).
    Quantities,
}

/// A kind's merge rules: path elements are field names; a list entry is `[]`.
pub type Rules = [(&'static [&'static str], Merge)];

/// Every child's owner references: keyed by UID (others' entries stay).
const COMMON: &Rules = &[(&["metadata", "ownerReferences"], Merge::Keyed(&["uid"]))];

/// How the field at `path` merges under `rules`.
pub(super) fn merge_at(rules: &Rules, path: &[&str]) -> Merge {
    COMMON.iter().chain(rules).find(|(p, _)| *p == path).map_or(Merge::Granular, |(_, m)| *m)
}

/// What a pass must do to a live child of ours.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// A field we set has another value (or is missing): apply.
    pub apply: bool,
    /// List entries that took the name of one of ours under another key.
    pub renamed: Vec<Renamed>,
    /// The first field of ours found changed or missing, as a FieldsV1
    /// path (`f:spec`, `f:replicas`): to say what was put back, and whose
    /// `managedFields` entry holds it.
    pub drifted: Option<Vec<String>>,
}

/// A list entry of `live` that carries the name of one of ours.
#[derive(Debug, Clone, PartialEq)]
pub struct Renamed {
    /// JSON pointer to the entry in `live`.
    pub pointer: String,
    /// Its path in a `managedFields` FieldsV1 trie (`f:spec`, `k:{...}`):
    /// if our Apply entry owns it, our apply replaces it by itself.
    pub field_path: Vec<String>,
    /// Our entry, to put in its place.
    pub ours: Value,
}

/// Compares `desired` (what we apply) with `live`, merging as `rules` say.
pub fn plan(rules: &Rules, desired: &Value, live: &Value) -> Plan {
    let mut p = Plan::default();
    let mut at = At { rules, path: Vec::new(), ptr: String::new(), fields: Vec::new(), first: None };
    p.apply = !walk(&mut at, desired, live, &mut p.renamed);
    p.drifted = at.first.filter(|_| p.apply);
    p
}

/// A FieldsV1 path as a reader writes it: `spec.replicas`,
/// `spec.ports[port=80,protocol=TCP]`.
pub fn readable(fields: &[String]) -> String {
    let mut out = String::new();
    for f in fields {
        if let Some(name) = f.strip_prefix("f:") {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
        } else if let Some(key) = f.strip_prefix("k:") {
            let pairs: Vec<String> = serde_json::from_str::<serde_json::Map<String, Value>>(key)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), String::from)))
                        .collect()
                })
                .unwrap_or_else(|_| vec![key.to_string()]);
            out.push_str(&format!("[{}]", pairs.join(",")));
        }
    }
    out
}

/// Where the walk is: the schema path, the JSON pointer into `live`, and
/// the FieldsV1 path.
struct At<'a> {
    rules: &'a Rules,
    path: Vec<&'a str>,
    ptr: String,
    fields: Vec<String>,
    /// The deepest first mismatch seen ([`Plan::drifted`]).
    first: Option<Vec<String>>,
}

impl<'a> At<'a> {
    fn enter(&mut self, schema: &'a str, ptr: &str, field: String) -> usize {
        self.path.push(schema);
        let len = self.ptr.len();
        self.ptr.push('/');
        self.ptr.push_str(ptr);
        self.fields.push(field);
        len
    }

    /// Notes a mismatch here, or at `field` below here.
    fn mismatch(&mut self, field: Option<String>) {
        if self.first.is_none() {
            let mut path = self.fields.clone();
            path.extend(field);
            self.first = Some(path);
        }
    }

    fn leave(&mut self, len: usize) {
        self.path.pop();
        self.ptr.truncate(len);
        self.fields.pop();
    }
}

/// The FieldsV1 key of a list-map entry: `k:` and its key fields as JSON
/// (serde_json's map keeps keys sorted, as the apiserver writes them).
fn entry_key(keys: &[&str], v: &Value) -> String {
    let m: serde_json::Map<String, Value> =
        keys.iter().filter_map(|k| v.get(*k).map(|x| (k.to_string(), x.clone()))).collect();
    format!("k:{}", Value::Object(m))
}

/// True when `live` carries `desired` at this path; collects renamed
/// entries and the first mismatch on the way.
fn walk<'a>(at: &mut At<'a>, d: &'a Value, l: &Value, renamed: &mut Vec<Renamed>) -> bool {
    let same = walk_node(at, d, l, renamed);
    if !same {
        at.mismatch(None);
    }
    same
}

fn walk_node<'a>(at: &mut At<'a>, d: &'a Value, l: &Value, renamed: &mut Vec<Renamed>) -> bool {
    match (merge_at(at.rules, &at.path), d, l) {
        (_, Value::Null, Value::Null) => true,
        (Merge::Atomic, d, l) => d == l,
        (merge @ (Merge::Keyed(keys) | Merge::KeyedNamed(keys)), Value::Array(ds), Value::Array(ls)) => {
            let named = matches!(merge, Merge::KeyedNamed(_));
            let key_of = |v: &Value| keys.iter().map(|k| v.get(k).cloned()).collect::<Vec<_>>();
            let mut ok = true;
            for dv in ds {
                let same_key = ls.iter().position(|lv| key_of(lv) == key_of(dv));
                for (i, lv) in ls.iter().enumerate() {
                    if named
                        && Some(i) != same_key
                        && dv.get("name").is_some()
                        && lv.get("name") == dv.get("name")
                    {
                        let len = at.enter("[]", &i.to_string(), entry_key(keys, lv));
                        renamed.push(Renamed {
                            pointer: at.ptr.clone(),
                            field_path: at.fields.clone(),
                            ours: dv.clone(),
                        });
                        at.leave(len);
                    }
                }
                if same_key.is_none() {
                    at.mismatch(Some(entry_key(keys, dv)));
                }
                ok &= same_key.is_some_and(|i| {
                    let len = at.enter("[]", &i.to_string(), entry_key(keys, &ls[i]));
                    let m = walk(at, dv, &ls[i], renamed);
                    at.leave(len);
                    m
                });
            }
            ok
        }
        (Merge::Granular, Value::Object(dm), Value::Object(lm)) => {
            let mut ok = true;
            for (k, dv) in dm {
                let Some(lv) = lm.get(k) else {
                    if !dv.is_null() {
                        at.mismatch(Some(format!("f:{k}")));
                        ok = false;
                    }
                    continue;
                };
                let len = at.enter(k, &k.replace('~', "~0").replace('/', "~1"), format!("f:{k}"));
                ok &= walk(at, dv, lv, renamed);
                at.leave(len);
            }
            ok
        }
        (Merge::Quantities, Value::Object(dm), Value::Object(lm)) => {
            dm.iter().all(|(k, dv)| match (dv, lm.get(k)) {
                (Value::String(d), Some(Value::String(l))) => crate::api::pod::same_quantity(d, l),
                (dv, lv) => Some(dv) == lv,
            })
        }
        (_, d, l) => d == l,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The rules of the kinds these tests' objects stand for.
    const RULES: &Rules = &[
        (&["spec", "selector"], Merge::Atomic),
        (&["spec", "rules"], Merge::Atomic),
        (&["spec", "ports"], Merge::KeyedNamed(&["port", "protocol"])),
        (&["spec", "template", "spec", "containers"], Merge::Keyed(&["name"])),
        (
            &["spec", "template", "spec", "containers", "[]", "ports"],
            Merge::KeyedNamed(&["containerPort", "protocol"]),
        ),
    ];

    fn plan(desired: &Value, live: &Value) -> Plan {
        super::plan(RULES, desired, live)
    }

    fn svc(ports: Value, selector: Value) -> Value {
        json!({ "metadata": { "name": "web", "labels": { "a": "1" } },
                "spec": { "type": "ClusterIP", "selector": selector, "ports": ports } })
    }

    #[test]
    fn server_defaults_and_foreign_additions_are_not_drift() {
        let want = svc(json!([{ "name": "http", "port": 80, "protocol": "TCP" }]), json!({ "r": "u" }));
        let mut live = svc(
            json!([{ "name": "metrics", "port": 9090, "protocol": "TCP" },
                   { "name": "http", "port": 80, "protocol": "TCP", "targetPort": 80 }]),
            json!({ "r": "u" }),
        );
        live["metadata"]["labels"]["someone"] = json!("else");
        live["metadata"]["annotations"] = json!({ "note": "x" });
        live["spec"]["clusterIP"] = json!("10.0.0.7");
        assert_eq!(plan(&want, &live), Plan::default());
    }

    #[test]
    fn a_changed_value_of_ours_is_drift() {
        let want = svc(
            json!([{ "name": "http", "port": 80, "protocol": "TCP", "targetPort": 80 }]),
            json!({ "r": "u" }),
        );
        let drifted = |live: &Value| plan(&want, live).drifted.map(|f| readable(&f));
        let mut live = want.clone();
        live["spec"]["ports"][0]["targetPort"] = json!(81);
        assert!(plan(&want, &live).apply);
        assert_eq!(drifted(&live).as_deref(), Some("spec.ports[port=80,protocol=TCP].targetPort"));
        let mut live = want.clone();
        live["metadata"]["labels"]["a"] = json!("2");
        assert!(plan(&want, &live).apply);
        assert_eq!(drifted(&live).as_deref(), Some("metadata.labels.a"));
        let mut live = want.clone();
        live["metadata"]["labels"].as_object_mut().unwrap().remove("a");
        assert!(plan(&want, &live).apply, "a removed label of ours comes back");
        assert_eq!(drifted(&live).as_deref(), Some("metadata.labels.a"));
        let mut live = want.clone();
        live["spec"]["selector"] = json!({ "r": "other" });
        assert_eq!(drifted(&live).as_deref(), Some("spec.selector"), "an atomic field is named whole");
    }

    #[test]
    fn an_extra_key_in_an_atomic_selector_is_drift() {
        let want = svc(json!([]), json!({ "r": "u" }));
        let live = svc(json!([]), json!({ "r": "u", "extra": "x" }));
        assert!(plan(&want, &live).apply);
        let want = json!({ "spec": { "selector": { "matchLabels": { "r": "u" } } } });
        let live = json!({ "spec": { "selector": { "matchLabels": { "r": "u", "x": "y" } } } });
        assert!(plan(&want, &live).apply);
    }

    #[test]
    fn our_port_under_a_new_number_is_found_with_its_managed_fields_path() {
        let want = svc(json!([{ "name": "http", "port": 8080, "protocol": "TCP" }]), json!({}));
        let live = svc(
            json!([{ "name": "metrics", "port": 9090, "protocol": "TCP" },
                   { "name": "http", "port": 80, "protocol": "TCP" }]),
            json!({}),
        );
        let p = plan(&want, &live);
        assert!(p.apply);
        assert_eq!(p.renamed.len(), 1);
        let r = &p.renamed[0];
        assert_eq!(r.pointer, "/spec/ports/1");
        assert_eq!(r.field_path, ["f:spec", "f:ports", r#"k:{"port":80,"protocol":"TCP"}"#]);
        assert_eq!(r.ours["port"], 8080);
    }

    #[test]
    fn sidecars_and_extra_container_ports_are_kept_and_ours_are_checked() {
        let container = |image: &str| {
            json!({ "name": "runner", "image": image,
            "ports": [{ "name": "http", "containerPort": 80, "protocol": "TCP" }] })
        };
        let want = json!({ "spec": { "template": { "spec": { "containers": [container("nginx:1")] } } } });
        let mut live = json!({ "spec": { "template": { "spec": { "containers": [
            { "name": "sidecar", "image": "envoy" }, container("nginx:1") ] } } } });
        live["spec"]["template"]["spec"]["containers"][1]["ports"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "name": "admin", "containerPort": 9000, "protocol": "TCP" }));
        assert_eq!(plan(&want, &live), Plan::default());
        live["spec"]["template"]["spec"]["containers"][1]["image"] = json!("nginx:2");
        assert!(plan(&want, &live).apply);
        let mut moved = live.clone();
        moved["spec"]["template"]["spec"]["containers"][1]["ports"][0]["containerPort"] = json!(81);
        moved["spec"]["template"]["spec"]["containers"][1]["image"] = json!("nginx:1");
        let p = plan(&want, &moved);
        assert!(p.apply);
        let paths: Vec<_> = p.renamed.iter().map(|r| r.pointer.as_str()).collect();
        assert_eq!(paths, ["/spec/template/spec/containers/1/ports/0"]);
        assert_eq!(p.renamed[0].field_path[4], r#"k:{"name":"runner"}"#);
    }

    #[test]
    fn another_owner_reference_with_our_runners_name_is_someone_elses() {
        let ours = json!({ "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner", "name": "web", "uid": "u2", "controller": true });
        let theirs = json!({ "apiVersion": "v1", "kind": "ConfigMap", "name": "web", "uid": "c1" });
        let want = json!({ "metadata": { "ownerReferences": [ours.clone()] } });
        let live = json!({ "metadata": { "ownerReferences": [theirs, ours] } });
        assert_eq!(plan(&want, &live), Plan::default());
    }

    #[test]
    fn atomic_ingress_rules_must_be_equal() {
        let want = json!({ "spec": { "rules": [{ "host": "a.example" }] } });
        let live = json!({ "spec": { "rules": [{ "host": "a.example" }, { "host": "b.example" }] } });
        assert!(plan(&want, &live).apply);
        assert!(!plan(&want, &want.clone()).apply);
    }
}
