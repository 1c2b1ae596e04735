//! Pure: which Pods speak for a Deployment's rollout. A stuck Pod of a
//! ReplicaSet the Deployment is replacing says nothing about the rollout:
//! the user fixed the image and the new Pods are coming. The current
//! ReplicaSet is known without caching ReplicaSets: the Deployment
//! controller names it in the Progressing condition, and every Pod carries
//! its ReplicaSet's template hash as a label. The manager's Pod view and
//! `diagnose` both ask [`CurrentPods`].

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};

use super::Rollout;

/// The label the Deployment controller gives each ReplicaSet and its Pods:
/// their Pod template's hash, also the suffix of the ReplicaSet's name.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// Which Pods speak for a Deployment's rollout: a stuck one of these fails
/// the Runner (and is an error in `diagnose`), any other is on its way out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CurrentPods {
    /// The controller has not caught up, or named no ReplicaSet while old
    /// replicas are left: the Runner is rolling out, no Pod speaks for it.
    #[default]
    Unknown,
    /// The Pods of the current ReplicaSet, by their template hash.
    Template(String),
    /// Every replica is of the current template, though no ReplicaSet is
    /// named (a Deployment without a progress deadline has no Progressing
    /// condition): every Pod.
    All,
}

impl CurrentPods {
    /// The Pods that speak for a Runner with this rollout. Without a
    /// Deployment of the Runner's (none yet, or a foreign one) there is no
    /// rollout to follow: every Pod of the Runner's does.
    pub fn of(rollout: Option<&Rollout>) -> &CurrentPods {
        rollout.map_or(&CurrentPods::All, |r| &r.current)
    }

    /// True when a Pod with this [`POD_TEMPLATE_HASH_LABEL`] value speaks
    /// for the rollout.
    pub fn includes(&self, pod_template_hash: Option<&str>) -> bool {
        match self {
            CurrentPods::Unknown => false,
            CurrentPods::Template(hash) => pod_template_hash == Some(hash.as_str()),
            CurrentPods::All => true,
        }
    }
}

/// Progressing reasons whose message names the new ReplicaSet
/// (k8s.io/kubernetes pkg/controller/deployment, sync.go and progress.go).
const NAMING_REASONS: &[&str] = &[
    "NewReplicaSetCreated",
    "FoundNewReplicaSet",
    "ReplicaSetUpdated",
    "NewReplicaSetAvailable",
    "ProgressDeadlineExceeded",
];

/// How those messages start: `Created new replica set "web-7d9c5b8f6"`,
/// `Found new replica set "…"`, `ReplicaSet "…" is progressing.` (or `has
/// successfully progressed.`, `has timed out progressing.`). Without a new
/// ReplicaSet the controller names the Deployment instead (`Deployment
/// "web" is progressing.`), which names no template.
const NAMING_PREFIXES: &[&str] = &["ReplicaSet \"", "Created new replica set \"", "Found new replica set \""];

/// The template hash of the ReplicaSet a Progressing message names: the
/// part of its name after the last `-` (the hash has none; the
/// Deployment's name before it may be cut short).
fn named_template_hash(message: &str) -> Option<&str> {
    let rest = NAMING_PREFIXES.iter().find_map(|p| message.strip_prefix(p))?;
    let (name, _) = rest.split_once('"')?;
    let (_, hash) = name.rsplit_once('-')?;
    (!hash.is_empty()).then_some(hash)
}

/// Which Pods speak for the rollout. The condition is trusted only once
/// the controller has seen the latest spec. The controller keeps a
/// condition whose reason does not change, so after a rollback to an
/// existing ReplicaSet `NewReplicaSetAvailable` still names the one rolled
/// back from: it is believed only while every replica is updated. A
/// rollback in the middle of a rollout, to a ReplicaSet whose Pods are all
/// there, keeps `ReplicaSetUpdated` naming the abandoned one until the
/// rollout ends (nothing it counts changes): until then the current
/// ReplicaSet's stuck Pods show as rolling out, and at the progress
/// deadline as its failure.
pub(super) fn judge(
    caught_up: bool,
    st: &DeploymentStatus,
    progressing: Option<&DeploymentCondition>,
) -> CurrentPods {
    if !caught_up {
        return CurrentPods::Unknown;
    }
    let all_updated = st.replicas.unwrap_or(0) == st.updated_replicas.unwrap_or(0);
    let named = progressing.and_then(|c| {
        let reason = c.reason.as_deref().unwrap_or_default();
        let trusted = reason != "NewReplicaSetAvailable" || all_updated;
        (trusted && NAMING_REASONS.contains(&reason))
            .then(|| named_template_hash(c.message.as_deref().unwrap_or_default()))
            .flatten()
    });
    match named {
        Some(hash) => CurrentPods::Template(hash.to_string()),
        None if all_updated => CurrentPods::All,
        None => CurrentPods::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;

    use super::*;
    use crate::rollout::of;

    /// A caught-up Deployment with these counts and Progressing condition.
    fn progressing(replicas: i32, updated: i32, reason: &str, message: &str) -> Deployment {
        serde_json::from_value(json!({
            "metadata": { "name": "web", "generation": 2 },
            "status": { "observedGeneration": 2, "replicas": replicas, "updatedReplicas": updated,
                        "conditions": [
                            { "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                              "message": "Deployment has minimum availability." },
                            { "type": "Progressing", "status": "True", "reason": reason, "message": message }] }
        }))
        .unwrap()
    }

    #[test]
    fn the_current_pods_are_those_of_the_replica_set_the_controller_names() {
        use CurrentPods::{All, Template, Unknown};
        let hash = || Template("7d9c5b8f6".into());
        let long = format!("ReplicaSet \"{}-7d9c5b8f6\" is progressing.", "w".repeat(242));
        let cases: Vec<(&str, Deployment, CurrentPods)> = vec![
            (
                "created",
                progressing(2, 0, "NewReplicaSetCreated", "Created new replica set \"web-7d9c5b8f6\""),
                hash(),
            ),
            (
                "found",
                progressing(2, 1, "FoundNewReplicaSet", "Found new replica set \"web-7d9c5b8f6\""),
                hash(),
            ),
            (
                "progressing",
                progressing(2, 1, "ReplicaSetUpdated", "ReplicaSet \"web-7d9c5b8f6\" is progressing."),
                hash(),
            ),
            (
                "complete",
                progressing(
                    1,
                    1,
                    "NewReplicaSetAvailable",
                    "ReplicaSet \"web-7d9c5b8f6\" has successfully progressed.",
                ),
                hash(),
            ),
            (
                "timed out",
                progressing(
                    2,
                    1,
                    "ProgressDeadlineExceeded",
                    "ReplicaSet \"web-7d9c5b8f6\" has timed out progressing.",
                ),
                hash(),
            ),
            ("a Deployment name cut short", progressing(2, 1, "ReplicaSetUpdated", &long), hash()),
            (
                "complete no more: a rollback to an older ReplicaSet keeps the old name",
                progressing(
                    2,
                    0,
                    "NewReplicaSetAvailable",
                    "ReplicaSet \"web-7d9c5b8f6\" has successfully progressed.",
                ),
                Unknown,
            ),
            (
                "no ReplicaSet named, old replicas left",
                progressing(2, 1, "ReplicaSetUpdated", "Deployment \"web\" is progressing."),
                Unknown,
            ),
            (
                "no ReplicaSet named, every replica updated",
                progressing(1, 1, "ReplicaSetUpdated", "Deployment \"web\" is progressing."),
                All,
            ),
            ("paused mid-rollout", progressing(2, 1, "DeploymentPaused", "Deployment is paused"), Unknown),
            (
                "the new ReplicaSet could not be created",
                progressing(
                    1,
                    0,
                    "ReplicaSetCreateError",
                    "Failed to create new replica set \"web-7d9c5b8f6\": quota",
                ),
                Unknown,
            ),
        ];
        for (name, d, want) in cases {
            assert_eq!(of(Some(&d), 1).current, want, "{name}");
        }
        let mut behind =
            progressing(1, 1, "ReplicaSetUpdated", "ReplicaSet \"web-7d9c5b8f6\" is progressing.");
        behind.metadata.generation = Some(3);
        assert_eq!(of(Some(&behind), 1).current, Unknown, "the controller has not seen the latest spec");
        let mut no_deadline = progressing(1, 1, "", "");
        no_deadline.status.as_mut().unwrap().conditions = None;
        assert_eq!(of(Some(&no_deadline), 1).current, All, "no progress deadline: no Progressing condition");
        assert_eq!(of::<Deployment>(None, 1).current, Unknown);
    }

    #[test]
    fn a_pod_speaks_for_the_rollout_when_its_template_is_the_current_one() {
        use CurrentPods::{All, Template, Unknown};
        let cases = [
            (Template("h1".into()), Some("h1"), true),
            (Template("h1".into()), Some("h0"), false),
            (Template("h1".into()), None, false),
            (All, Some("h0"), true),
            (All, None, true),
            (Unknown, Some("h1"), false),
        ];
        for (current, pod, want) in cases {
            assert_eq!(current.includes(pod), want, "{current:?} {pod:?}");
        }
    }
}
