//! Pure: the part of a Deployment and a Service the manager caches, decoded
//! straight from the watch stream as Pods are.
//!
//! The full k8s-openapi types are mostly room for fields we never read: a
//! `Deployment` is 2.5 KB inline and its `Container` 2.3 KB more, before
//! any field is set. Decoding the full object and trimming it afterwards
//! also left the dropped fields' memory behind as holes. At 10,000 Runners
//! the cached children were most of the manager's memory
//! (`examples/cache_footprint.rs` prints the figures).
//!
//! The contract that keeps drift detection right: a view still holds every
//! field [`super::desired`] sets, and serializes them as the full type
//! does, so [`super::drift::plan`] answers on it as on the full object. The
//! tests check it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DeploymentStatus;
use k8s_openapi::api::core::v1::{ContainerPort, ServicePort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, ObjectMeta};
use kube::Resource;
use serde::{Deserialize, Deserializer, Serialize};

use crate::rollout::RolloutSource;

/// The view of a full object as the apiserver answered it (a view, or the
/// full type itself when the cache keeps that).
pub fn of<V: serde::de::DeserializeOwned>(full: &impl Serialize) -> serde_json::Result<V> {
    serde_json::from_value(serde_json::to_value(full)?)
}

/// A Deployment: our spec fields, and its status for the rollout.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DeploymentView {
    #[serde(deserialize_with = "super::lean_meta::decode")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DeploymentSpecView,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeploymentStatus>,
}

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

/// A string map as a sorted list: a `BTreeMap` allocates a 540-byte node
/// for even one entry, and a child has several small maps. Serialized as
/// the JSON object it was decoded from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Labels(Vec<(String, String)>);

impl Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut pairs: Vec<(String, String)> =
            BTreeMap::<String, String>::deserialize(d)?.into_iter().collect();
        pairs.shrink_to_fit();
        Ok(Labels(pairs))
    }
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
pub struct PodSpecView {
    /// Every container: ours is matched by name, the others stay theirs.
    #[serde(default)]
    pub containers: Vec<ContainerView>,
}

/// Name, image and ports: what the desired container sets.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ContainerView {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ContainerPort>>,
}

/// A Service: type, selector and ports; no addresses, no status.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ServiceView {
    #[serde(deserialize_with = "super::lean_meta::decode")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ServiceSpecView,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ServiceSpecView {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Labels>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ServicePort>>,
}

/// `Resource` as the full type `$full` has it: the same URL, kind and scope.
macro_rules! resource_as {
    ($view:ty, $full:ty) => {
        impl Resource for $view {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                <$full as Resource>::kind(&())
            }
            fn group(_: &()) -> Cow<'_, str> {
                <$full as Resource>::group(&())
            }
            fn version(_: &()) -> Cow<'_, str> {
                <$full as Resource>::version(&())
            }
            fn plural(_: &()) -> Cow<'_, str> {
                <$full as Resource>::plural(&())
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
resource_as!(DeploymentView, k8s_openapi::api::apps::v1::Deployment);
resource_as!(ServiceView, k8s_openapi::api::core::v1::Service);

impl RolloutSource for DeploymentView {
    fn generation(&self) -> Option<i64> {
        self.metadata.generation
    }
    fn status(&self) -> Option<&DeploymentStatus> {
        self.status.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::manager::desired;
    use crate::manager::served_fixture::{is_subset, live_deployment, managed, runner, served_json};
    use crate::rollout;

    fn decode<V: serde::de::DeserializeOwned>(v: Value) -> V {
        serde_json::from_value(v).unwrap()
    }

    fn as_json(v: &impl Serialize) -> Value {
        serde_json::to_value(v).unwrap()
    }

    /// Drift compares the body without its type ([`super::super::child`]).
    fn body(want: &impl Serialize) -> Value {
        let mut v = as_json(want);
        let o = v.as_object_mut().unwrap();
        o.remove("apiVersion");
        o.remove("kind");
        v
    }

    #[test]
    fn a_deployment_view_holds_every_desired_field_and_the_rollout() {
        let r = runner();
        let d: DeploymentView = decode(live_deployment(&r));
        assert!(is_subset(&body(&desired::deployment(&r)), &as_json(&d)));
        assert_eq!((d.metadata.uid.as_deref(), d.metadata.generation), (Some("d-1"), Some(3)));
        let rollout = rollout::of(Some(&d), 2);
        assert!(rollout.caught_up && rollout.complete, "{rollout:?}");
    }

    #[test]
    fn a_deployment_view_drops_managed_fields_annotations_and_pod_defaults() {
        let d: DeploymentView = decode(live_deployment(&runner()));
        assert!(d.metadata.managed_fields.is_none() && d.metadata.annotations.is_none());
        let v = as_json(&d);
        assert!(v["spec"].get("strategy").is_none());
        assert!(v["spec"]["template"]["spec"].get("dnsPolicy").is_none());
        assert!(v["spec"]["template"]["spec"]["containers"][0].get("terminationMessagePath").is_none());
    }

    #[test]
    fn drift_in_an_owned_field_or_a_foreign_selector_key_is_still_seen() {
        let r = runner();
        let want = body(&desired::deployment(&r));
        let mut live = live_deployment(&r);
        live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("evil:1");
        assert!(!is_subset(&want, &as_json(&decode::<DeploymentView>(live))));
        let mut live = live_deployment(&r);
        live["spec"]["selector"]["matchLabels"]["extra"] = json!("x");
        assert!(!is_subset(&want, &as_json(&decode::<DeploymentView>(live))));
    }

    #[test]
    fn a_sidecar_and_foreign_labels_are_not_drift() {
        let r = runner();
        let mut live = live_deployment(&r);
        live["metadata"]["labels"]["team"] = json!("a");
        live["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "name": "proxy", "image": "envoy:1" }));
        let d: DeploymentView = decode(live);
        assert!(is_subset(&body(&desired::deployment(&r)), &as_json(&d)));
        assert_eq!(d.spec.template.spec.containers.len(), 2);
    }

    #[test]
    fn our_update_entry_is_kept_as_a_marker_without_its_fields() {
        let r = runner();
        let mut live = live_deployment(&r);
        live["metadata"]["managedFields"].as_array_mut().unwrap().push(json!({
            "manager": "kubectl-runner", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": { "f:spec": {} }
        }));
        let d: DeploymentView = decode(live);
        assert!(crate::manager::managed_fields::needs_upgrade(&d.metadata));
        assert!(d.metadata.managed_fields.as_ref().unwrap().iter().all(|e| e.fields_v1.is_none()));
    }

    #[test]
    fn labels_decode_sorted_and_serialize_as_the_map_they_came_from() {
        let map = json!({ "b": "2", "a": "1", "c": "3" });
        let l: Labels = decode(map.clone());
        assert_eq!(l.0.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(as_json(&l), map);
        assert_eq!(as_json(&decode::<Labels>(json!({}))), json!({}));
    }

    #[test]
    fn a_service_view_keeps_type_selector_and_ports_but_not_its_addresses() {
        let r = runner();
        let live = served_json(
            &desired::service(&r),
            json!({ "metadata": managed(), "spec": { "clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"],
                    "ipFamilies": ["IPv4"], "sessionAffinity": "None" }, "status": { "loadBalancer": {} } }),
        );
        let s: ServiceView = decode(live);
        let v = as_json(&s);
        assert!(is_subset(&body(&desired::service(&r)), &v));
        assert!(v["spec"].get("clusterIP").is_none() && v.get("status").is_none());
        let mut live = as_json(&s);
        live["spec"]["ports"][0]["targetPort"] = json!(9999);
        assert!(!is_subset(&body(&desired::service(&r)), &as_json(&decode::<ServiceView>(live))));
    }
}
