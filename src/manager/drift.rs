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
//! port edited to another number). Apply would add ours back next to it and
//! the apiserver would refuse two ports named `http`; [`plan`] lists such
//! entries so the caller removes them first.

use serde_json::Value;

/// How server-side apply merges the field at a path (from the child types'
/// `x-kubernetes-list-type` / `map-type` / `structType` markers).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Merge {
    /// Maps key by key; lists without a key are replaced whole.
    Granular,
    /// Replaced whole: equal or drifted.
    Atomic,
    /// A list map: entries matched by these keys; others' entries are kept.
    Keyed(&'static [&'static str]),
}

/// Path elements are field names; a list entry is `[]`.
fn merge_at(path: &[&str]) -> Merge {
    match path {
        ["metadata", "ownerReferences"] => Merge::Keyed(&["uid"]),
        // Deployment: LabelSelector is a structType=atomic; Service: mapType=atomic.
        ["spec", "selector"] => Merge::Atomic,
        // Ingress rules: listType=atomic.
        ["spec", "rules"] => Merge::Atomic,
        ["spec", "ports"] => Merge::Keyed(&["port", "protocol"]),
        ["spec", "template", "spec", "containers"] => Merge::Keyed(&["name"]),
        ["spec", "template", "spec", "containers", "[]", "ports"] => {
            Merge::Keyed(&["containerPort", "protocol"])
        }
        _ => Merge::Granular,
    }
}

/// What a pass must do to a live child of ours.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// A field we set has another value (or is missing): apply.
    pub apply: bool,
    /// JSON pointers (into `live`) of list entries that took the name of one
    /// of ours under another key; removed before the apply.
    pub remove: Vec<String>,
}

/// Compares `desired` (what we apply) with `live`.
pub fn plan(desired: &Value, live: &Value) -> Plan {
    let mut p = Plan::default();
    p.apply = !walk(&mut Vec::new(), &mut String::new(), desired, live, &mut p.remove);
    p
}

/// True when `live` carries `desired` at this path; collects renamed
/// entries on the way.
fn walk<'a>(
    path: &mut Vec<&'a str>,
    ptr: &mut String,
    d: &'a Value,
    l: &Value,
    remove: &mut Vec<String>,
) -> bool {
    match (merge_at(path), d, l) {
        (_, Value::Null, Value::Null) => true,
        (Merge::Atomic, d, l) => d == l,
        (Merge::Keyed(keys), Value::Array(ds), Value::Array(ls)) => {
            let mut ok = true;
            for dv in ds {
                let key_of = |v: &Value| keys.iter().map(|k| v.get(k).cloned()).collect::<Vec<_>>();
                let same_key = ls.iter().position(|lv| key_of(lv) == key_of(dv));
                for (i, lv) in ls.iter().enumerate() {
                    let renamed =
                        Some(i) != same_key && dv.get("name").is_some() && lv.get("name") == dv.get("name");
                    if renamed {
                        remove.push(format!("{ptr}/{i}"));
                    }
                }
                ok &= same_key.is_some_and(|i| {
                    path.push("[]");
                    let len = ptr.len();
                    ptr.push_str(&format!("/{i}"));
                    let m = walk(path, ptr, dv, &ls[i], remove);
                    ptr.truncate(len);
                    path.pop();
                    m
                });
            }
            ok
        }
        (Merge::Granular, Value::Object(dm), Value::Object(lm)) => {
            let mut ok = true;
            for (k, dv) in dm {
                let Some(lv) = lm.get(k) else {
                    ok &= dv.is_null();
                    continue;
                };
                path.push(k);
                let len = ptr.len();
                ptr.push('/');
                ptr.push_str(&k.replace('~', "~0").replace('/', "~1"));
                ok &= walk(path, ptr, dv, lv, remove);
                ptr.truncate(len);
                path.pop();
            }
            ok
        }
        (_, d, l) => d == l,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        let mut live = want.clone();
        live["spec"]["ports"][0]["targetPort"] = json!(81);
        assert!(plan(&want, &live).apply);
        let mut live = want.clone();
        live["metadata"]["labels"]["a"] = json!("2");
        assert!(plan(&want, &live).apply);
        let mut live = want.clone();
        live["metadata"]["labels"].as_object_mut().unwrap().remove("a");
        assert!(plan(&want, &live).apply, "a removed label of ours comes back");
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
    fn our_port_under_a_new_number_is_removed_before_the_apply() {
        let want = svc(json!([{ "name": "http", "port": 8080, "protocol": "TCP" }]), json!({}));
        let live = svc(
            json!([{ "name": "metrics", "port": 9090, "protocol": "TCP" },
                   { "name": "http", "port": 80, "protocol": "TCP" }]),
            json!({}),
        );
        assert_eq!(plan(&want, &live), Plan { apply: true, remove: vec!["/spec/ports/1".into()] });
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
        assert_eq!(p.remove, vec!["/spec/template/spec/containers/1/ports/0".to_string()]);
    }

    #[test]
    fn atomic_ingress_rules_must_be_equal() {
        let want = json!({ "spec": { "rules": [{ "host": "a.example" }] } });
        let live = json!({ "spec": { "rules": [{ "host": "a.example" }, { "host": "b.example" }] } });
        assert!(plan(&want, &live).apply);
        assert!(!plan(&want, &want.clone()).apply);
    }
}
