//! The PodDisruptionBudget: `minAvailable: 1` over the Runner's Pods, for
//! Runners with two or more replicas, so a node drain (an eviction) never
//! takes the last ready Pod. With one replica a budget of one would block
//! every drain, so the Runner has none, and scaling down to one removes it.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{ChildKind, Merge, meta, packed};
use crate::api::Runner;

/// The PodDisruptionBudget kind.
pub struct Budgets;

/// Replicas from which a Runner has a budget.
pub const MIN_REPLICAS: i32 = 2;
/// Pods the budget keeps available through voluntary disruptions.
pub const MIN_AVAILABLE: i32 = 1;

impl ChildKind for Budgets {
    type Object = PodDisruptionBudget;
    /// The full type, trimmed: its spec is all ours and small.
    type View = PodDisruptionBudget;
    const SHORT: &'static str = "pdb";
    const WHY: &'static str =
        "create, repair and delete the Runner's PodDisruptionBudget when it has 2 or more replicas";
    // LabelSelector is a structType=atomic.
    const WHEN: &'static str = "from 2 replicas";
    const MERGE: &'static [(&'static [&'static str], Merge)] = &[(&["spec", "selector"], Merge::Atomic)];

    fn desired(runner: &Runner) -> Option<PodDisruptionBudget> {
        (runner.spec.replicas >= MIN_REPLICAS).then(|| PodDisruptionBudget {
            metadata: meta::metadata(runner),
            spec: Some(PodDisruptionBudgetSpec {
                min_available: Some(IntOrString::Int(MIN_AVAILABLE)),
                selector: Some(meta::selector(runner)),
                ..Default::default()
            }),
            status: None,
        })
    }

    /// Its status (healthy counts, conditions) is not read by reconcile.
    fn trim(p: &mut PodDisruptionBudget) {
        p.status = None;
    }

    fn state(p: &PodDisruptionBudget) -> String {
        let min = match p.spec.as_ref().and_then(|s| s.min_available.as_ref()) {
            Some(IntOrString::Int(n)) => n.to_string(),
            Some(IntOrString::String(s)) => s.clone(),
            None => "-".into(),
        };
        let st = p.status.clone().unwrap_or_default();
        format!(
            "min available {min}, {}/{} healthy, {} disruptions allowed",
            st.current_healthy.unwrap_or(0),
            st.desired_healthy.unwrap_or(0),
            st.disruptions_allowed.unwrap_or(0)
        )
    }
}

packed::dictionary!(PodDisruptionBudget, include_str!("pdb.sample.json"));

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::RUNNER_UID_LABEL;
    use crate::kinds::served_fixture::{as_json, body, decode, is_subset, managed, runner, served};
    use crate::kinds::trim::child_meta;

    #[test]
    fn a_budget_exists_from_two_replicas_and_keeps_one_pod_of_the_runner() {
        let mut r = runner();
        let v = as_json(&Budgets::desired(&r).unwrap());
        assert_eq!(
            (v["apiVersion"].as_str(), v["kind"].as_str()),
            (Some("policy/v1"), Some("PodDisruptionBudget"))
        );
        assert_eq!(v["spec"]["minAvailable"], 1);
        assert_eq!(v["spec"]["selector"]["matchLabels"][RUNNER_UID_LABEL], "uid-1");
        assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert!(v["spec"].get("maxUnavailable").is_none() && v.get("status").is_none());
        r.spec.replicas = 1;
        assert!(Budgets::desired(&r).is_none(), "one replica: no budget");
        r.spec.replicas = 3;
        assert!(Budgets::desired(&r).is_some());
    }

    #[test]
    fn a_changed_minimum_or_an_extra_selector_key_is_drift_and_a_label_is_not() {
        let r = runner();
        let want = Budgets::desired(&r).unwrap();
        let mut live = served(
            &want,
            json!({ "metadata": managed(), "status": { "currentHealthy": 2, "desiredHealthy": 1,
            "disruptionsAllowed": 1, "expectedPods": 2 } }),
        );
        child_meta(&mut live.metadata);
        Budgets::trim(&mut live);
        assert!(live.status.is_none());
        let mut v = as_json(&live);
        assert!(is_subset(Budgets::MERGE, &body(&want), &v));
        v["metadata"]["labels"]["team"] = json!("a");
        assert!(is_subset(Budgets::MERGE, &body(&want), &v), "a foreign label is theirs");
        let mut moved = v.clone();
        moved["spec"]["minAvailable"] = json!(2);
        assert!(!is_subset(Budgets::MERGE, &body(&want), &moved));
        let mut widened = v;
        widened["spec"]["selector"]["matchLabels"]["extra"] = json!("x");
        assert!(!is_subset(Budgets::MERGE, &body(&want), &widened));
    }

    #[test]
    fn describe_shows_the_minimum_and_the_disruptions_allowed() {
        let live: PodDisruptionBudget = decode(json!({ "metadata": {}, "spec": { "minAvailable": 1 },
            "status": { "currentHealthy": 2, "desiredHealthy": 1, "disruptionsAllowed": 1, "expectedPods": 2 } }));
        assert_eq!(Budgets::state(&live), "min available 1, 2/1 healthy, 1 disruptions allowed");
    }
}
