//! Pure: how far a Deployment's rollout has come, judged as `kubectl rollout
//! status` does. The manager's Runner status and `install --wait` (the
//! manager's own Deployment) both read it.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};

use crate::pod_admission::{self, PodsRefused};

/// Pod waiting reasons that will not fix themselves: the Runner's phase is
/// Failed, and `diagnose` reports them as errors. Others (ContainerCreating,
/// PodInitializing, ...) are progress.
pub const FAILING_POD_REASONS: &[&str] = &[
    "ImagePullBackOff",
    "ErrImagePull",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// True for a waiting reason in [`FAILING_POD_REASONS`].
pub fn is_failing_pod_reason(reason: &str) -> bool {
    FAILING_POD_REASONS.contains(&reason)
}

/// What the rule reads of a Deployment: a full one (the CLI's) or the
/// manager's cached view of one.
pub trait RolloutSource {
    fn generation(&self) -> Option<i64>;
    fn status(&self) -> Option<&DeploymentStatus>;
}

impl RolloutSource for Deployment {
    fn generation(&self) -> Option<i64> {
        self.metadata.generation
    }
    fn status(&self) -> Option<&DeploymentStatus> {
        self.status.as_ref()
    }
}

/// The Deployment's counts, and whether its current revision is complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollout {
    pub ready: i32,
    pub updated: i32,
    pub available: i32,
    pub total: i32,
    /// The Deployment controller has seen the Deployment's latest spec.
    pub caught_up: bool,
    /// Every desired replica of the current revision is available and no
    /// old one is left.
    pub complete: bool,
    /// The message of a Progressing=ProgressDeadlineExceeded condition.
    pub deadline_exceeded: Option<String>,
    /// Admission refuses to create the Pods ([`crate::pod_admission`]).
    pub pods_refused: Option<PodsRefused>,
}

/// The rollout of `d` towards `desired` replicas (None: no Deployment yet).
pub fn of<D: RolloutSource>(d: Option<&D>, desired: i32) -> Rollout {
    let st = d.and_then(|d| d.status().cloned()).unwrap_or_default();
    let caught_up = d.is_some_and(|d| st.observed_generation.unwrap_or(0) >= d.generation().unwrap_or(0));
    let (ready, updated, available, total) = (
        st.ready_replicas.unwrap_or(0),
        st.updated_replicas.unwrap_or(0),
        st.available_replicas.unwrap_or(0),
        st.replicas.unwrap_or(0),
    );
    let conditions = st.conditions.unwrap_or_default();
    let pods_refused = pod_admission::refusal(&conditions);
    let deadline_exceeded = conditions
        .into_iter()
        .find(|c| {
            c.type_.as_deref() == Some("Progressing")
                && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
        })
        .map(|c| c.message.unwrap_or_default());
    let complete = caught_up && updated == desired && available == desired && total == desired;
    Rollout { ready, updated, available, total, caught_up, complete, deadline_exceeded, pods_refused }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(generation: i64, observed: i64, updated: i32, available: i32, total: i32) -> Deployment {
        serde_json::from_value(json!({
            "metadata": { "name": "d", "generation": generation },
            "status": { "observedGeneration": observed, "updatedReplicas": updated,
                        "availableReplicas": available, "readyReplicas": available, "replicas": total }
        }))
        .unwrap()
    }

    #[test]
    fn complete_only_when_caught_up_with_every_replica_new_and_available_and_no_old_one_left() {
        assert!(of(Some(&deployment(2, 2, 1, 1, 1)), 1).complete);
        assert!(!of(Some(&deployment(3, 2, 1, 1, 1)), 1).complete, "not caught up");
        assert!(!of(Some(&deployment(2, 2, 1, 1, 2)), 1).complete, "an old replica is left");
        assert!(!of(Some(&deployment(2, 2, 1, 0, 1)), 1).complete, "not available");
        assert!(!of::<Deployment>(None, 1).complete);
    }
}
