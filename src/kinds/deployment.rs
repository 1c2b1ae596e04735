//! The Deployment: the Runner's workload. Replicas, image and port come from
//! the spec; rolling updates are left to the Deployment controller. Its
//! rollout is what the Runner's status reports.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStatus};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSecurityContext, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, ObjectMeta};
use serde::{Deserialize, Serialize};

use super::packed::{self, Packed};
use super::view::Labels;
use super::{ChildKind, Facts, Merge, Wake, meta, pod_fields};
use crate::api::Runner;
use crate::rollout::{self, RolloutSource};

/// The Deployment kind.
pub struct Deployments;

/// The name of our container in the Pod template.
pub const CONTAINER: &str = "runner";

impl ChildKind for Deployments {
    type Object = Deployment;
    type View = DeploymentView;
    const SHORT: &'static str = "deploy";
    const WHY: &'static str = "create, repair and delete the Runner's Deployment";
    const MERGE: &'static [(&'static [&'static str], Merge)] = &[
        // LabelSelector is a structType=atomic.
        (&["spec", "selector"], Merge::Atomic),
        (&["spec", "template", "spec", "containers"], Merge::Keyed(&["name"])),
        (
            &["spec", "template", "spec", "containers", "[]", "ports"],
            Merge::KeyedNamed(&["containerPort", "protocol"]),
        ),
        // The apiserver stores quantities canonically: `0.5` comes back `500m`.
        (&["spec", "template", "spec", "containers", "[]", "resources", "requests"], Merge::Quantities),
        (&["spec", "template", "spec", "containers", "[]", "resources", "limits"], Merge::Quantities),
    ];

    fn desired(runner: &Runner) -> Option<Deployment> {
        let spec = &runner.spec;
        let container = Container {
            name: CONTAINER.into(),
            image: Some(spec.image.clone()),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: spec.expose.port,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            resources: spec.resources.as_ref().map(pod_fields::resources),
            security_context: spec.pod_security.map(pod_fields::container_security),
            ..Default::default()
        };
        let pod = PodSpec {
            containers: vec![container],
            security_context: spec.pod_security.map(pod_fields::pod_security),
            ..Default::default()
        };
        Some(Deployment {
            metadata: meta::metadata(runner),
            spec: DeploymentSpec {
                replicas: Some(spec.replicas),
                selector: meta::selector(runner),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta { labels: Some(meta::labels(runner)), ..Default::default() }),
                    spec: Some(pod),
                },
                ..Default::default()
            },
            status: None,
        })
    }

    fn facts(view: &DeploymentView, runner: &Runner, facts: &mut Facts) {
        facts.rollout = Some(rollout::of(Some(view), runner.spec.replicas));
    }

    /// When nothing but the status changed: nothing, if the rollout as
    /// the status reads it ([`rollout::of`]) is the one it was; progress, if
    /// its verdict ([`rollout::Rollout::same_verdict`]) is. A rollout's
    /// status events come every few hundred milliseconds, and each woke a
    /// pass that had only progress to write, spaced anyway; on a busy
    /// control plane many of them moved nothing the status reads (the
    /// Progressing condition's message before the controller has seen the
    /// new spec, for one), and their passes wrote nothing: 0.87 a change
    /// at 1,000 Runners and 10 changes/s (`runner_idle_passes_total`),
    /// 0.30 with this rule.
    fn wake(before: &Packed<DeploymentView>, now: &Packed<DeploymentView>) -> Wake {
        let (Ok(mut b), Ok(mut n)) = (before.unpack(), now.unpack()) else { return Wake::Now };
        let desired = n.spec.replicas.unwrap_or(1);
        let (was, is) = (rollout::of(Some(&b), desired), rollout::of(Some(&n), desired));
        if !was.same_verdict(&is) {
            return Wake::Now;
        }
        for v in [&mut b, &mut n] {
            v.status = None;
            v.metadata.resource_version = None;
        }
        match (serde_json::to_value(&b), serde_json::to_value(&n)) {
            (Ok(b), Ok(n)) if b == n && was == is => Wake::Nothing,
            (Ok(b), Ok(n)) if b == n => Wake::Progress,
            _ => Wake::Now,
        }
    }

    fn state(d: &Deployment) -> String {
        let st = d.status.clone().unwrap_or_default();
        let want = d.spec.replicas.unwrap_or(1);
        format!(
            "{}/{want} ready, {} updated, {} available",
            st.ready_replicas.unwrap_or(0),
            st.updated_replicas.unwrap_or(0),
            st.available_replicas.unwrap_or(0)
        )
    }

    fn brief(d: &Deployment) -> Option<String> {
        let ready = d.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0);
        let want = d.spec.replicas.unwrap_or(1);
        Some(format!("{ready}/{want}"))
    }
}

/// What the manager caches of a Deployment: our spec fields, and of its
/// status what the rollout reads ([`rollout::decode_status`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DeploymentView {
    #[serde(deserialize_with = "super::lean_meta::decode")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DeploymentSpecView,
    #[serde(default, deserialize_with = "rollout::decode_status", skip_serializing_if = "Option::is_none")]
    pub status: Option<DeploymentStatus>,
}

crate::resource_as!(DeploymentView, Deployment);
packed::dictionary!(DeploymentView, include_str!("deployment.sample.json"));

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DeploymentSpecView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// All of it: the selector is atomic, an extra key is drift.
    #[serde(default)]
    pub selector: SelectorView,
    #[serde(default)]
    pub template: TemplateView,
}

/// A label selector, its labels as [`Labels`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectorView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<Labels>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TemplateView {
    #[serde(default)]
    pub metadata: LabelsView,
    #[serde(default)]
    pub spec: PodSpecView,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LabelsView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecView {
    /// Every container: ours is matched by name, the others stay theirs.
    #[serde(default)]
    pub containers: Vec<ContainerView>,
    /// Set with `spec.podSecurity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
}

/// Name, image, ports, resources and security context: what the desired
/// container sets.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ContainerPort>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
}

impl RolloutSource for DeploymentView {
    fn generation(&self) -> Option<i64> {
        self.metadata.generation
    }
    fn status(&self) -> Option<&DeploymentStatus> {
        self.status.as_ref()
    }
}

#[cfg(test)]
#[path = "deployment_tests.rs"]
mod tests;
