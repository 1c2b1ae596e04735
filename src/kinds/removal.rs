//! Pure: must our next apply remove something we set before?
//!
//! A child created with POST is owned by our name under operation Update.
//! Our forced apply takes over a scalar from that entry by itself, but it
//! cannot remove a map key or list entry the Update entry owns: before such
//! an apply the entry must be folded into ours
//! ([`super::managed_fields`]), which costs a GET and a guarded patch. Most
//! applies only change a scalar (replicas, image), so the take-over is done
//! only when [`removes`] says the apply must remove something.
//!
//! What we may have set is the *universe*: the body we would apply with
//! every optional field of the spec on ([`crate::api::RunnerSpec::every_field`]).
//! A live value at a universe path that we no longer want is one to
//! remove (resource limits dropped, the restricted profile turned off). A
//! live entry of a keyed list that we do not want also counts, though it
//! may be someone else's: the take-over then costs one patch, once, and
//! never takes their field (only our own entries are folded).

use serde_json::Value;

use super::drift::{Merge, Rules, merge_at};

/// True when `live` holds, somewhere we set fields, a value or list
/// entry that `want` does not.
pub fn removes(rules: &Rules, universe: &Value, want: &Value, live: &Value) -> bool {
    walk(rules, &mut Vec::new(), universe, Some(want), live)
}

fn walk<'a>(rules: &Rules, path: &mut Vec<&'a str>, u: &'a Value, w: Option<&Value>, l: &Value) -> bool {
    match (merge_at(rules, path), u, l) {
        (Merge::Atomic, ..) => false, // replaced whole by the apply
        (Merge::Keyed(keys) | Merge::KeyedNamed(keys), Value::Array(us), Value::Array(ls)) => {
            let Some(shape) = us.first() else { return false };
            let wanted = w.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let key_of = |v: &Value| keys.iter().map(|k| v.get(k).cloned()).collect::<Vec<_>>();
            path.push("[]");
            let found = ls.iter().any(|lv| match wanted.iter().find(|wv| key_of(wv) == key_of(lv)) {
                None => true,
                Some(wv) => walk(rules, path, shape, Some(wv), lv),
            });
            path.pop();
            found
        }
        (_, Value::Object(um), Value::Object(lm)) => um.iter().any(|(k, uv)| {
            let Some(lv) = lm.get(k) else { return false };
            match w.and_then(|w| w.get(k)) {
                None if !uv.is_object() && !uv.is_array() => true,
                wv => {
                    path.push(k);
                    let found = walk(rules, path, uv, wv, lv);
                    path.pop();
                    found
                }
            }
        }),
        // A scalar, or a list replaced whole: the apply sets it.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::{Runner, RunnerSpec};
    use crate::kinds::ChildKind;
    use crate::kinds::deployment::Deployments;
    use crate::kinds::service::Services;

    fn body<K: ChildKind>(spec: RunnerSpec) -> Value {
        let mut r = Runner::new("web", spec);
        r.metadata.namespace = Some("team".into());
        r.metadata.uid = Some("u1".into());
        serde_json::to_value(K::desired(&r).expect("wanted")).unwrap()
    }

    fn removes_for<K: ChildKind>(before: RunnerSpec, after: RunnerSpec) -> bool {
        let universe = body::<K>(RunnerSpec::every_field());
        let mut live = body::<K>(before);
        // The apiserver's defaults and others' additions are not ours.
        live["metadata"]["annotations"] = json!({ "someone": "else" });
        removes(K::MERGE, &universe, &body::<K>(after), &live)
    }

    #[test]
    fn a_scalar_change_removes_nothing() {
        let base = || RunnerSpec::new("nginx:1.27").replicas(1);
        assert!(!removes_for::<Deployments>(base(), base().replicas(3)));
        assert!(!removes_for::<Deployments>(base(), RunnerSpec::new("nginx:1.28")));
        assert!(!removes_for::<Deployments>(base(), base()));
    }

    #[test]
    fn a_dropped_field_or_entry_of_ours_must_be_removed() {
        let limited = RunnerSpec::every_field();
        let plain = RunnerSpec::new("nginx:1.27").replicas(2).port(8080).host("web.example.com");
        assert!(removes_for::<Deployments>(limited, plain.clone()), "resources and securityContext dropped");
        assert!(removes_for::<Deployments>(plain.clone(), plain.clone().port(9090)), "the old containerPort");
        assert!(removes_for::<Services>(plain.clone(), plain.clone().port(9090)), "the old Service port");
        assert!(!removes_for::<Services>(plain.clone(), plain.replicas(3)));
    }

    #[test]
    fn server_defaults_outside_the_universe_are_not_ours() {
        let spec = || RunnerSpec::new("nginx:1.27");
        let universe = body::<Deployments>(RunnerSpec::every_field());
        let mut live = body::<Deployments>(spec());
        live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] = json!("/dev/x");
        live["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({});
        live["spec"]["revisionHistoryLimit"] = json!(10);
        assert!(!removes(Deployments::MERGE, &universe, &body::<Deployments>(spec()), &live));
    }
}
