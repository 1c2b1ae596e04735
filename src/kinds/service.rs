//! The ClusterIP Service: `port` -> targetPort `port`, selecting the
//! Runner's Pods. No clusterIP field: the apiserver allocates it and keeps
//! owning it.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

use super::view::Labels;
use super::{ChildKind, Merge, meta, packed};
use crate::api::Runner;

/// The Service kind.
pub struct Services;

impl ChildKind for Services {
    type Object = Service;
    type View = ServiceView;
    const SHORT: &'static str = "svc";
    const WHY: &'static str = "create, repair and delete the Runner's Service";
    const MERGE: &'static [(&'static [&'static str], Merge)] = &[
        // The Service selector is a mapType=atomic.
        (&["spec", "selector"], Merge::Atomic),
        (&["spec", "ports"], Merge::KeyedNamed(&["port", "protocol"])),
    ];

    fn desired(runner: &Runner) -> Option<Service> {
        let port = runner.spec.expose.port;
        Some(Service {
            metadata: meta::metadata(runner),
            spec: Some(ServiceSpec {
                type_: Some("ClusterIP".into()),
                selector: Some(meta::selector_labels(runner)),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port,
                    target_port: Some(IntOrString::Int(port)),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        })
    }

    fn state(s: &Service) -> String {
        let spec = s.spec.clone().unwrap_or_default();
        let ports: Vec<String> = spec
            .ports
            .iter()
            .flatten()
            .map(|p| match &p.target_port {
                Some(IntOrString::Int(t)) => format!("{}->{t}", p.port),
                Some(IntOrString::String(t)) => format!("{}->{t}", p.port),
                None => p.port.to_string(),
            })
            .collect();
        format!(
            "{} {} {}",
            spec.type_.as_deref().unwrap_or("ClusterIP"),
            spec.cluster_ip.as_deref().unwrap_or("<none>"),
            ports.join(",")
        )
        .trim_end()
        .to_string()
    }
}

/// What the manager caches of a Service: type, selector and ports; no
/// addresses, no status.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ServiceView {
    #[serde(deserialize_with = "super::lean_meta::decode")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ServiceSpecView,
}
crate::resource_as!(ServiceView, Service);
packed::dictionary!(ServiceView, include_str!("service.sample.json"));

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ServiceSpecView {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Labels>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ServicePort>>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kinds::served_fixture::{as_json, body, decode, is_subset, managed, runner, served_json};

    fn desired(r: &Runner) -> Service {
        Services::desired(r).unwrap()
    }

    #[test]
    fn the_service_never_sets_a_cluster_ip() {
        let v = as_json(&desired(&runner()));
        assert!(v["spec"].get("clusterIP").is_none());
        assert!(v.get("status").is_none());
        assert_eq!(v["spec"]["ports"][0]["targetPort"], 8080);
    }

    #[test]
    fn a_service_view_keeps_type_selector_and_ports_but_not_its_addresses() {
        let r = runner();
        let live = served_json(
            &desired(&r),
            json!({ "metadata": managed(), "spec": { "clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"],
                    "ipFamilies": ["IPv4"], "sessionAffinity": "None" }, "status": { "loadBalancer": {} } }),
        );
        let s: ServiceView = decode(live.clone());
        let v = as_json(&s);
        assert!(is_subset(Services::MERGE, &body(&desired(&r)), &v));
        assert!(v["spec"].get("clusterIP").is_none() && v.get("status").is_none());
        let mut moved = v.clone();
        moved["spec"]["ports"][0]["targetPort"] = json!(9999);
        assert!(!is_subset(Services::MERGE, &body(&desired(&r)), &as_json(&decode::<ServiceView>(moved))));
        assert_eq!(Services::state(&decode(live)), "ClusterIP 10.0.0.7 8080->8080");
    }
}
