//! Saying what the manager put back. When a pass finds a field of ours
//! changed on a child while the Runner's spec did not change (its status
//! has observed the current generation), someone else wrote it: the apply
//! reverts it, and an Event on the Runner names the child, the field and
//! the other field manager (`Reverted spec.replicas on Deployment web:
//! changed by kubectl`). The Event recorder folds repeats into one Event's
//! series, so a fight shows as one Event with a count, which `describe`
//! shows and `diagnose` reads.
//!
//! Naming the other manager takes the child's full `managedFields`, which
//! the cache does not keep: one GET, made only for a revert.

use kube::api::Api;

use crate::api::Runner;
use crate::kinds::drift::readable;
use crate::kinds::{Object, managed_fields};
pub use crate::revert::Revert;

/// Pure: is drift found on an existing child a revert of someone else's
/// change? Only when the Runner's status has observed its current spec:
/// otherwise the spec changed, and the apply carries the change.
pub fn is_revert(runner: &Runner) -> bool {
    let observed = runner.status.as_ref().and_then(|s| s.observed_generation);
    observed.is_some() && observed == runner.metadata.generation
}

/// Who changed the field at `fields` of child `name`: one GET.
pub async fn attribute<K: Object>(api: &Api<K>, kind: &'static str, name: &str, fields: &[String]) -> Revert {
    let by = match api.get(name).await {
        Ok(obj) => managed_fields::owner_of(obj.meta().managed_fields.as_deref().unwrap_or_default(), fields),
        Err(_) => None,
    };
    Revert { kind: kind.into(), name: name.to_string(), field: readable(fields), by }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RunnerSpec;

    #[test]
    fn drift_is_a_revert_only_once_the_status_has_observed_the_spec() {
        let mut r = Runner::new("web", RunnerSpec::new("nginx"));
        assert!(!is_revert(&r), "no generation, no status");
        r.metadata.generation = Some(2);
        assert!(!is_revert(&r), "no status yet: the children are being made");
        r.status = Some(crate::api::RunnerStatus { observed_generation: Some(1), ..Default::default() });
        assert!(!is_revert(&r), "the spec changed since");
        r.status.as_mut().unwrap().observed_generation = Some(2);
        assert!(is_revert(&r));
    }
}
