//! The preflight's judgement, pure: a Runner as read at an old version is
//! converted to the storage version and back in process, and must come
//! back the same. Rewriting stores the storage version's form for good, so
//! whatever the old form holds that the new one cannot is lost by the
//! rewrite; this finds it before anything is written, and names the Runner
//! and the first field that would change.
//!
//! The converter is a parameter so the tests can give a lossy one; the
//! command passes the project's conversion (the same function the
//! conversion webhook serves).

use serde_json::Value;

/// A Runner the round trip would change, or could not convert.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Runner {namespace}/{name} would not survive the migration: converted {from} -> {to} -> {from}, {field} {change}"
)]
pub struct Refusal {
    pub namespace: String,
    pub name: String,
    /// The version it was read at.
    pub from: String,
    /// The storage version.
    pub to: String,
    /// The first field that differs (`spec.host`, `metadata.annotations["a/b"]`),
    /// or `the object` when a conversion failed.
    pub field: String,
    /// What happens to it.
    pub change: String,
}

/// Round-trips `object` (an apiVersion `from` object) through `to` with
/// `convert`, and refuses when the result differs or a step fails.
pub fn check<F>(object: &Value, from: &str, to: &str, convert: F) -> Result<(), Box<Refusal>>
where
    F: Fn(&Value, &str) -> Result<Value, String>,
{
    let refusal = |field: String, change: String| {
        Box::new(Refusal {
            namespace: text(object, "namespace"),
            name: text(object, "name"),
            from: from.to_string(),
            to: to.to_string(),
            field,
            change,
        })
    };
    let there =
        convert(object, to).map_err(|e| refusal("the object".into(), format!("fails to convert: {e}")))?;
    let back = convert(&there, from)
        .map_err(|e| refusal("the object".into(), format!("fails to convert back: {e}")))?;
    match first_difference(object, &back, &mut String::new()) {
        None => Ok(()),
        Some((field, change)) => Err(refusal(field, change)),
    }
}

fn text(object: &Value, key: &str) -> String {
    object["metadata"][key].as_str().unwrap_or_default().to_string()
}

/// The first path (in key order) where `a` and `b` differ, with what
/// becomes of it: `was X, becomes Y`, `is dropped` or `appears as Y`.
pub fn first_difference(a: &Value, b: &Value, path: &mut String) -> Option<(String, String)> {
    // The members of a map (in key order) or a list: the path's next
    // segment, and the member on each side.
    let members: Vec<(String, Option<&Value>, Option<&Value>)> = match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().map(|k| (key_segment(path.is_empty(), k), x.get(k), y.get(k))).collect()
        }
        (Value::Array(x), Value::Array(y)) => {
            (0..x.len().max(y.len())).map(|i| (format!("[{i}]"), x.get(i), y.get(i))).collect()
        }
        (x, y) if x == y => return None,
        (x, y) => return Some((path.clone(), format!("was {}, becomes {}", short(x), short(y)))),
    };
    members.into_iter().find_map(|(segment, x, y)| {
        let len = path.len();
        path.push_str(&segment);
        let found = member_difference(x, y, path);
        path.truncate(len);
        found
    })
}

/// The difference at one key or index of a map or list, on either side.
fn member_difference(a: Option<&Value>, b: Option<&Value>, path: &mut String) -> Option<(String, String)> {
    match (a, b) {
        (Some(v), Some(w)) => first_difference(v, w, path),
        (Some(v), None) => Some((path.clone(), format!("was {}, is dropped", short(v)))),
        (None, Some(w)) => Some((path.clone(), format!("appears as {}", short(w)))),
        (None, None) => None,
    }
}

/// The segment `key` adds to a path (`first`: the path is empty): `host`
/// in `spec.host`, or `["lab.cloudlab.training/x"]` for a key that is not
/// a plain name.
fn key_segment(first: bool, key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    match (plain, first) {
        (true, true) => key.to_string(),
        (true, false) => format!(".{key}"),
        (false, _) => format!("[{}]", Value::String(key.to_string())),
    }
}

/// A value as JSON, cut to 80 characters: enough to recognise it.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 { s.chars().take(77).collect::<String>() + "..." } else { s }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn runner(spec: Value) -> Value {
        json!({ "apiVersion": "g/v1", "kind": "Runner", "metadata": { "name": "web", "namespace": "app" }, "spec": spec })
    }

    /// Sets apiVersion and keeps everything else: a lossless conversion.
    fn lossless(o: &Value, to: &str) -> Result<Value, String> {
        let mut o = o.clone();
        o["apiVersion"] = json!(to);
        Ok(o)
    }

    /// Keeps only the first host on the way to g/v2, as a careless
    /// conversion of a list into a single field would.
    fn drops_later_hosts(o: &Value, to: &str) -> Result<Value, String> {
        let mut o = lossless(o, to)?;
        if let Some(hosts) = o["spec"]["hosts"].as_array_mut() {
            hosts.truncate(1);
        }
        Ok(o)
    }

    #[test]
    fn a_lossless_round_trip_passes() {
        let r = runner(json!({ "image": "nginx", "hosts": ["a", "b"], "port": 80 }));
        assert_eq!(check(&r, "g/v1", "g/v2", lossless), Ok(()));
    }

    #[test]
    fn a_round_trip_that_loses_a_value_is_refused_naming_the_runner_and_the_field() {
        let r = runner(json!({ "image": "nginx", "hosts": ["a", "b"] }));
        let refusal = check(&r, "g/v1", "g/v2", drops_later_hosts).unwrap_err();
        assert_eq!((refusal.namespace.as_str(), refusal.name.as_str()), ("app", "web"));
        assert_eq!(refusal.field, "spec.hosts[1]");
        assert_eq!(
            refusal.to_string(),
            "Runner app/web would not survive the migration: converted g/v1 -> g/v2 -> g/v1, spec.hosts[1] \
             was \"b\", is dropped"
        );
    }

    #[test]
    fn a_conversion_that_fails_is_refused_with_its_reason() {
        let r = runner(json!({ "image": "nginx" }));
        let fails = |_: &Value, _: &str| Err::<Value, _>("port out of range".to_string());
        let refusal = check(&r, "g/v1", "g/v2", fails).unwrap_err();
        assert_eq!(refusal.field, "the object");
        assert_eq!(refusal.change, "fails to convert: port out of range");
    }

    #[test]
    fn differences_name_the_first_path_in_key_order_with_what_becomes_of_it() {
        let cases = [
            (json!({ "a": 1 }), json!({ "a": 2 }), Some(("a", "was 1, becomes 2"))),
            (json!({ "a": { "b": "x" } }), json!({ "a": {} }), Some(("a.b", "was \"x\", is dropped"))),
            (json!({ "a": [] }), json!({ "a": [true] }), Some(("a[0]", "appears as true"))),
            (
                json!({ "metadata": { "annotations": { "x.io/h": "a" } } }),
                json!({ "metadata": { "annotations": {} } }),
                Some(("metadata.annotations[\"x.io/h\"]", "was \"a\", is dropped")),
            ),
            (json!({ "b": 1, "a": 1 }), json!({ "a": 2, "b": 2 }), Some(("a", "was 1, becomes 2"))),
            (json!({ "a": [1, { "b": null }] }), json!({ "a": [1, { "b": null }] }), None),
        ];
        for (a, b, want) in cases {
            let got = first_difference(&a, &b, &mut String::new());
            let want = want.map(|(p, c)| (p.to_string(), c.to_string()));
            assert_eq!(got, want, "{a} vs {b}");
        }
    }

    #[test]
    fn the_projects_conversion_round_trips_a_v1alpha1_runner_with_a_host() {
        let r = json!({ "apiVersion": "lab.cloudlab.training/v1alpha1", "kind": "Runner",
                        "metadata": { "name": "web", "namespace": "app" },
                        "spec": { "image": "nginx", "replicas": 2, "port": 8080, "host": "a.example" } });
        let to = "lab.cloudlab.training/v1beta1";
        assert_eq!(check(&r, "lab.cloudlab.training/v1alpha1", to, crate::api::conversion::convert), Ok(()));
    }

    #[test]
    fn hosts_kept_for_v1alpha1_without_a_host_are_refused_naming_the_annotation() {
        // A v1alpha1 client that removed spec.host removed every host; the
        // annotation that listed the others goes on the way to v1beta1.
        let key = crate::api::conversion::EXTRA_HOSTS_ANNOTATION;
        let r = json!({ "apiVersion": "lab.cloudlab.training/v1alpha1", "kind": "Runner",
                        "metadata": { "name": "web", "namespace": "app", "annotations": { key: "{\"hosts\":[\"b.example\"]}" } },
                        "spec": { "image": "nginx", "port": 80 } });
        let to = "lab.cloudlab.training/v1beta1";
        let refusal =
            check(&r, "lab.cloudlab.training/v1alpha1", to, crate::api::conversion::convert).unwrap_err();
        assert_eq!((refusal.name.as_str(), refusal.field.as_str()), ("web", "metadata.annotations"));
        assert!(
            refusal.change.contains("b.example") && refusal.change.ends_with("is dropped"),
            "{}",
            refusal.change
        );
    }

    #[test]
    fn a_long_value_is_cut_so_the_line_stays_readable() {
        let long = "x".repeat(200);
        let (_, change) = first_difference(&json!({ "a": long }), &json!({}), &mut String::new()).unwrap();
        assert!(change.len() < 100 && change.ends_with("..., is dropped"), "{change}");
    }
}
