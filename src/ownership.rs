//! Pure: whose a child is. One rule for the manager, `describe`, `delete`,
//! `diagnose` and `e2e`: a child is the Runner's when its *controller*
//! ownerReference carries the Runner's UID. Labels are fields we set and
//! put back when removed; they never decide ownership.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::GROUP;

/// `app.kubernetes.io/name` on every child and Pod: `runner`.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/instance`: the Runner's name. A Pod event finds its
/// Runner through it, so the manager's desired labels and its Pod view must
/// spell it the same.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// `app.kubernetes.io/managed-by`: [`crate::api::MANAGED_BY`].
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// How a same-name object stands relative to a Runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// Controlled by this Runner (its UID).
    Ours,
    /// Controlled by an earlier Runner of the same kind (another UID): it is
    /// going away with that Runner, or was orphaned from it.
    StaleOwner,
    /// Anything else: someone else's object that happens to have the name.
    Foreign,
}

/// The ownership of `child` for the Runner with `runner_uid`.
pub fn ownership(child: &ObjectMeta, runner_uid: &str) -> Ownership {
    let controller = child.owner_references.iter().flatten().find(|o| o.controller == Some(true));
    match controller {
        Some(o) if !runner_uid.is_empty() && o.uid == runner_uid => Ownership::Ours,
        Some(o) if is_runner(o) => Ownership::StaleOwner,
        _ => Ownership::Foreign,
    }
}

/// Controlled by some Runner (any UID): the admission webhook counts such
/// an Ingress's hosts as that Runner's, not as a second holder.
pub fn controlled_by_a_runner(child: &ObjectMeta) -> bool {
    child.owner_references.iter().flatten().any(|o| o.controller == Some(true) && is_runner(o))
}

fn is_runner(o: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference) -> bool {
    o.kind == "Runner" && o.api_version.split('/').next() == Some(GROUP)
}

/// Made for the Runner with `runner_uid` (it carries its UID label) and
/// controlled by nothing: the garbage collector detached it, as it does
/// for `kubectl delete --cascade=orphan` before it lifts its `orphan`
/// finalizer. A pass that comes after that lift reads the deletion as
/// orphaning from the children.
pub fn orphaned_from(child: &ObjectMeta, runner_uid: &str) -> bool {
    let labelled = child.labels.as_ref().and_then(|l| l.get(crate::api::RUNNER_UID_LABEL));
    !runner_uid.is_empty()
        && labelled.map(String::as_str) == Some(runner_uid)
        && !child.owner_references.iter().flatten().any(|o| o.controller == Some(true))
}

/// A child the Runner may not touch, for its status and Events.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// The child's Kubernetes kind (`Deployment`).
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub ownership: Ownership,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Refused { kind, namespace, name, .. } = self;
        match self.ownership {
            Ownership::StaleOwner => {
                write!(f, "{kind} {namespace}/{name} still belongs to an earlier Runner of this name")
            }
            _ => write!(f, "{kind} {namespace}/{name} exists and is not controlled by this Runner"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn meta(owner: Option<(&str, &str, bool)>, labelled_uid: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            owner_references: owner.map(|(kind, uid, controller)| {
                vec![OwnerReference {
                    api_version: format!("{GROUP}/v1alpha1"),
                    kind: kind.into(),
                    name: "web".into(),
                    uid: uid.into(),
                    controller: Some(controller),
                    block_owner_deletion: Some(true),
                }]
            }),
            labels: labelled_uid.map(|u| [(crate::api::RUNNER_UID_LABEL.to_string(), u.to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_controller_reference_alone_decides() {
        assert_eq!(ownership(&meta(Some(("Runner", "u1", true)), Some("u1")), "u1"), Ownership::Ours);
        assert_eq!(
            ownership(&meta(Some(("Runner", "u1", true)), None), "u1"),
            Ownership::Ours,
            "label removed"
        );
        assert_eq!(
            ownership(&meta(None, Some("u1")), "u1"),
            Ownership::Foreign,
            "a copied label is not ownership"
        );
        assert_eq!(ownership(&meta(Some(("Runner", "u1", false)), Some("u1")), "u1"), Ownership::Foreign);
    }

    #[test]
    fn a_child_made_for_the_runner_and_controlled_by_nothing_was_orphaned() {
        assert!(orphaned_from(&meta(None, Some("u1")), "u1"));
        assert!(!orphaned_from(&meta(None, Some("u0")), "u1"), "another Runner's");
        assert!(!orphaned_from(&meta(None, None), "u1"), "never ours");
        assert!(!orphaned_from(&meta(Some(("Runner", "u1", true)), Some("u1")), "u1"), "still controlled");
        assert!(!orphaned_from(&meta(None, Some("")), ""));
    }

    #[test]
    fn any_runners_controller_reference_counts_as_controlled_by_a_runner() {
        assert!(controlled_by_a_runner(&meta(Some(("Runner", "u0", true)), None)));
        assert!(!controlled_by_a_runner(&meta(Some(("Runner", "u0", false)), None)), "not the controller");
        assert!(!controlled_by_a_runner(&meta(Some(("ReplicaSet", "x", true)), None)));
        assert!(!controlled_by_a_runner(&meta(None, Some("u0"))), "a label is not ownership");
    }

    #[test]
    fn an_earlier_runners_child_is_stale_and_anothers_is_foreign() {
        assert_eq!(ownership(&meta(Some(("Runner", "u0", true)), Some("u0")), "u1"), Ownership::StaleOwner);
        assert_eq!(ownership(&meta(Some(("ReplicaSet", "x", true)), None), "u1"), Ownership::Foreign);
        assert_eq!(ownership(&meta(Some(("Runner", "u1", true)), None), ""), Ownership::StaleOwner);
    }
}
