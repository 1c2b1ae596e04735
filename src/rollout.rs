//! Pure: how far a Deployment's rollout has come, judged as `kubectl rollout
//! status` does, and which of its Pods speak for it ([`CurrentPods`]). The
//! manager's Runner status, `diagnose` and `install --wait` (the manager's
//! own Deployment) all read it.

use std::borrow::Cow;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use serde::{Deserialize, Deserializer};

use crate::pods_refused::{self, PodsRefused};

mod current_pods;

pub use current_pods::{CurrentPods, POD_TEMPLATE_HASH_LABEL};

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
    /// Admission refuses to create the Pods ([`crate::pods_refused`]).
    pub pods_refused: Option<PodsRefused>,
    /// Whose Pod problems are the rollout's.
    pub current: CurrentPods,
}

impl Rollout {
    /// What the Runner's status decides from the rollout alone: whether it
    /// is complete, has failed its deadline, or has its Pods refused.
    /// Counts are progress, which the status says in its message and
    /// writes spaced. So is which ReplicaSet is current: a Pod problem
    /// brings its own pass, which reads the current one from the cache;
    /// only a problem that came before the controller named its ReplicaSet
    /// waits for the progress pass (seconds) to fail the Runner.
    pub fn same_verdict(&self, other: &Rollout) -> bool {
        (self.complete, &self.deadline_exceeded, &self.pods_refused)
            == (other.complete, &other.deadline_exceeded, &other.pods_refused)
    }
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
    let conditions = st.conditions.as_deref().unwrap_or_default();
    let pods_refused = pods_refused::refusal(conditions);
    let progressing = conditions.iter().find(|c| c.type_.as_deref() == Some("Progressing"));
    let deadline_exceeded = progressing
        .filter(|c| c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
        .map(|c| c.message.clone().unwrap_or_default());
    let current = current_pods::judge(caught_up, &st, progressing);
    let complete = caught_up && updated == desired && available == desired && total == desired;
    Rollout {
        ready,
        updated,
        available,
        total,
        caught_up,
        complete,
        deadline_exceeded,
        pods_refused,
        current,
    }
}

/// Conditions [`of`] reads: Progressing (the current ReplicaSet,
/// the deadline) and ReplicaFailure (Pods admission refuses).
const ROLLOUT_CONDITIONS: &[&str] = &["Progressing", "ReplicaFailure"];

/// A Deployment's status as [`of`] reads it, for the manager's cache: the
/// counts and the [`ROLLOUT_CONDITIONS`] without their timestamps. The
/// Available condition, the collision count and the unavailable and
/// terminating counts are skipped unkept.
pub fn decode_status<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DeploymentStatus>, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Lean<'a> {
        observed_generation: Option<i64>,
        replicas: Option<i32>,
        updated_replicas: Option<i32>,
        ready_replicas: Option<i32>,
        available_replicas: Option<i32>,
        #[serde(borrow, default)]
        conditions: Vec<Condition<'a>>,
    }
    #[derive(Deserialize)]
    struct Condition<'a> {
        #[serde(borrow, rename = "type")]
        type_: Cow<'a, str>,
        #[serde(borrow)]
        status: Option<Cow<'a, str>>,
        #[serde(borrow)]
        reason: Option<Cow<'a, str>>,
        #[serde(borrow)]
        message: Option<Cow<'a, str>>,
    }
    let Some(l) = Option::<Lean>::deserialize(d)? else { return Ok(None) };
    let mut conditions: Vec<DeploymentCondition> = l
        .conditions
        .into_iter()
        .filter(|c| ROLLOUT_CONDITIONS.contains(&c.type_.as_ref()))
        .map(|c| DeploymentCondition {
            type_: Some(c.type_.into_owned()),
            status: c.status.map(Cow::into_owned),
            reason: c.reason.map(Cow::into_owned),
            message: c.message.map(Cow::into_owned),
            ..Default::default()
        })
        .collect();
    conditions.shrink_to_fit();
    Ok(Some(DeploymentStatus {
        observed_generation: l.observed_generation,
        replicas: l.replicas,
        updated_replicas: l.updated_replicas,
        ready_replicas: l.ready_replicas,
        available_replicas: l.available_replicas,
        conditions: (!conditions.is_empty()).then_some(conditions),
        ..Default::default()
    }))
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
