//! What the manager reports on a Runner: the status subresource's types
//! and the condition types and reasons it writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Coarse lifecycle of a Runner, as the `Phase` column shows it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, JsonSchema)]
pub enum Phase {
    #[default]
    Pending,
    Progressing,
    Available,
    Failed,
    Terminating,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Phase::Pending => "Pending",
            Phase::Progressing => "Progressing",
            Phase::Available => "Available",
            Phase::Failed => "Failed",
            Phase::Terminating => "Terminating",
        };
        f.write_str(s)
    }
}

/// What the manager observed. Written only through the status subresource.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerStatus {
    /// The generation this status describes; behind `metadata.generation`
    /// means the manager has not caught up with the latest spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods the Deployment has (for the scale subresource).
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default)]
    pub updated_replicas: i32,
    #[serde(default)]
    pub available_replicas: i32,
    #[serde(default)]
    pub phase: Phase,
    /// `http://<host>` with an Ingress, else the in-cluster Service URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A sentence for humans: "2/3 replicas ready", or a Pod's waiting reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Label selector of the Pods, as a string (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// `Ready`, and `ChildrenOwned` (reason `AdoptionRefused` when a same-name
    /// object belongs to someone else). Keyed by `type`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Condition types the manager writes.
pub mod condition {
    /// True when every desired replica of the current revision is available.
    pub const READY: &str = "Ready";
    /// False with reason `AdoptionRefused` when a child's name is taken.
    pub const CHILDREN_OWNED: &str = "ChildrenOwned";
    pub const REASON_ADOPTION_REFUSED: &str = "AdoptionRefused";
    /// Ready is False with this reason when the apiserver refuses a child.
    pub const REASON_CHILD_REJECTED: &str = "ChildRejected";
    /// Ready is False with this reason when admission refuses the Pods.
    pub const REASON_PODS_REFUSED: &str = crate::pods_refused::REASON;
    /// The reason of the Event the manager records when it puts back a
    /// field of ours that another field manager changed.
    pub const REASON_REVERTED: &str = "Reverted";
}
