//! Pure: the metadata every child carries, and the labels that tie a child
//! and its Pods to the Runner. No I/O, no clock.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::{Resource, ResourceExt};

use crate::api::{MANAGED_BY, RUNNER_UID_LABEL, Runner};
use crate::ownership::{INSTANCE_LABEL, MANAGED_BY_LABEL, NAME_LABEL};

/// Labels that select the Runner's Pods: its UID, so a Runner re-created
/// under the same name never selects the previous one's Pods.
pub fn selector_labels(runner: &Runner) -> BTreeMap<String, String> {
    BTreeMap::from([(RUNNER_UID_LABEL.to_string(), runner.uid().unwrap_or_default())])
}

/// [`selector_labels`] as a label selector, for the kinds that select the Runner's Pods.
pub fn selector(runner: &Runner) -> LabelSelector {
    LabelSelector { match_labels: Some(selector_labels(runner)), ..Default::default() }
}

/// Selector labels plus the `app.kubernetes.io` set. `instance` carries the
/// Runner's name, which is how a Pod event finds its Runner.
pub fn labels(runner: &Runner) -> BTreeMap<String, String> {
    let mut l = selector_labels(runner);
    l.insert(NAME_LABEL.into(), "runner".into());
    l.insert(INSTANCE_LABEL.into(), runner.name_any());
    l.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    l
}

/// `cloudlab.training/runner=<uid>`: the scale subresource's selector.
pub fn selector_string(runner: &Runner) -> String {
    format!("{RUNNER_UID_LABEL}={}", runner.uid().unwrap_or_default())
}

/// A child's metadata: the Runner's name and namespace, our labels, and the
/// Runner as its controller (blocking the owner's deletion until the
/// garbage collector has removed it).
pub fn metadata(runner: &Runner) -> ObjectMeta {
    let owner = runner.controller_owner_ref(&()).map(|mut o| {
        o.block_owner_deletion = Some(true);
        o
    });
    ObjectMeta {
        name: Some(runner.name_any()),
        namespace: runner.namespace(),
        labels: Some(labels(runner)),
        owner_references: Some(owner.into_iter().collect()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RunnerSpec;

    #[test]
    fn a_child_is_controlled_by_the_runner_and_labelled_with_its_uid() {
        let mut r = Runner::new("web", RunnerSpec::new("nginx:1.27"));
        r.metadata.namespace = Some("team".into());
        r.metadata.uid = Some("uid-1".into());
        let m = metadata(&r);
        let owner = &m.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller, owner.block_owner_deletion),
            ("uid-1", Some(true), Some(true))
        );
        assert_eq!(m.labels.as_ref().unwrap()[RUNNER_UID_LABEL], "uid-1");
        assert_eq!(m.labels.as_ref().unwrap()[INSTANCE_LABEL], "web");
        assert_eq!(selector_string(&r), "cloudlab.training/runner=uid-1");
    }
}
