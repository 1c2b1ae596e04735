//! Pure: the part of a Pod the manager reads, decoded straight from the
//! watch stream. Deserializing a full `Pod` (its spec, volumes, managed
//! fields) for every Pod event was the manager's largest CPU cost; serde
//! skips what this type does not name without allocating for it.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;

/// A Pod as the manager sees it: name, namespace, labels (among them its
/// ReplicaSet's template hash) and the waiting reasons and scheduling
/// condition of its status.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodView {
    #[serde(deserialize_with = "crate::kinds::lean_meta::decode")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: PodStatusView,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatusView {
    #[serde(default)]
    pub container_statuses: Vec<ContainerStatusView>,
    #[serde(default)]
    pub conditions: Vec<PodConditionView>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ContainerStatusView {
    #[serde(default)]
    pub state: ContainerStateView,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ContainerStateView {
    pub waiting: Option<Reason>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Reason {
    pub reason: Option<String>,
    pub message: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodConditionView {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
}

impl Resource for PodView {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl PodView {
    /// Its ReplicaSet's template hash ([`crate::rollout::POD_TEMPLATE_HASH_LABEL`]).
    pub fn template_hash(&self) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(crate::rollout::POD_TEMPLATE_HASH_LABEL).map(String::as_str)
    }

    /// Why this Pod is stuck, if it is: a container's waiting reason, or
    /// Unschedulable. ContainerCreating and PodInitializing are normal progress.
    pub fn problem(&self) -> Option<(String, String)> {
        let waiting = self.status.container_statuses.iter().find_map(|cs| {
            let w = cs.state.waiting.as_ref()?;
            let reason = w.reason.clone().unwrap_or_default();
            (!reason.is_empty() && reason != "ContainerCreating" && reason != "PodInitializing")
                .then(|| (reason, w.message.clone().unwrap_or_default()))
        });
        waiting.or_else(|| {
            self.status.conditions.iter().find_map(|c| {
                (c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable"))
                .then(|| ("Unschedulable".to_string(), c.message.clone().unwrap_or_default()))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: serde_json::Value) -> PodView {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "web-a", "namespace": "team", "labels": { "app": "x", "pod-template-hash": "5d9c7b6f4" },
                          "annotations": { "big": "x" },
                          "managedFields": [{ "manager": "kubelet", "fieldsV1": { "f:status": {} } }] },
            "spec": { "containers": [{ "name": "runner", "image": "nginx" }], "volumes": [{ "name": "v" }] },
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_full_pod_decodes_to_its_identity_and_nothing_else_of_the_metadata() {
        let p = pod(json!({}));
        assert_eq!(p.metadata.name.as_deref(), Some("web-a"));
        assert_eq!(p.template_hash(), Some("5d9c7b6f4"));
        assert_eq!(p.metadata.labels.as_ref().unwrap()["app"], "x");
        assert!(p.metadata.managed_fields.is_none() && p.metadata.annotations.is_none());
    }

    #[test]
    fn a_waiting_reason_other_than_creation_is_the_problem() {
        let waiting = |r: &str| {
            pod(
                json!({ "containerStatuses": [{ "name": "runner", "state": { "waiting": { "reason": r, "message": "m" } } }] }),
            )
        };
        assert_eq!(waiting("ImagePullBackOff").problem(), Some(("ImagePullBackOff".into(), "m".into())));
        assert_eq!(waiting("ContainerCreating").problem(), None);
        let running = pod(json!({ "containerStatuses": [{ "name": "runner", "state": { "running": {} } }] }));
        assert_eq!(running.problem(), None);
    }

    #[test]
    fn an_unschedulable_pod_is_a_problem() {
        let p = pod(
            json!({ "conditions": [{ "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                             "message": "0/1 nodes are available" }] }),
        );
        assert_eq!(p.problem().map(|x| x.0).as_deref(), Some("Unschedulable"));
    }
}
