//! Pure: what the Runner's children should look like. No I/O, no clock.
//!
//! Each builder returns only the fields this project owns, which is exactly
//! what server-side apply sends: never `clusterIP`, never `status`, so the
//! apiserver's and other controllers' fields stay theirs.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::{MANAGED_BY, RUNNER_UID_LABEL, Runner};
use crate::children::{INSTANCE_LABEL, MANAGED_BY_LABEL, NAME_LABEL};

/// Labels that select the Runner's Pods: its UID, so a Runner re-created
/// under the same name never selects the previous one's Pods.
pub fn selector_labels(runner: &Runner) -> BTreeMap<String, String> {
    BTreeMap::from([(RUNNER_UID_LABEL.to_string(), runner.uid().unwrap_or_default())])
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

fn metadata(runner: &Runner) -> serde_json::Value {
    let owner = runner.controller_owner_ref(&()).map(|mut o| {
        o.block_owner_deletion = Some(true);
        o
    });
    json!({
        "name": runner.name_any(),
        "namespace": runner.namespace(),
        "labels": labels(runner),
        "ownerReferences": owner.into_iter().collect::<Vec<_>>(),
    })
}

/// The Deployment: replicas, image and port from the spec; rolling updates
/// are left to the Deployment controller.
pub fn deployment(runner: &Runner) -> Deployment {
    let spec = &runner.spec;
    serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(runner),
        "spec": {
            "replicas": spec.replicas,
            "selector": { "matchLabels": selector_labels(runner) },
            "template": {
                "metadata": { "labels": labels(runner) },
                "spec": {
                    "containers": [{
                        "name": "runner",
                        "image": spec.image,
                        "ports": [{ "name": "http", "containerPort": spec.port, "protocol": "TCP" }],
                    }],
                },
            },
        },
    }))
    .expect("desired Deployment is well-formed")
}

/// The ClusterIP Service: `port` -> targetPort `port`. No clusterIP field:
/// the apiserver allocates it and keeps owning it.
pub fn service(runner: &Runner) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(runner),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(runner),
            "ports": [{ "name": "http", "port": runner.spec.port, "targetPort": runner.spec.port, "protocol": "TCP" }],
        },
    }))
    .expect("desired Service is well-formed")
}

/// The Ingress for `spec.host` (path `/`, Prefix), or None without a host.
pub fn ingress(runner: &Runner) -> Option<Ingress> {
    let host = runner.spec.host.as_ref()?;
    Some(
        serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": metadata(runner),
            "spec": {
                "rules": [{
                    "host": host,
                    "http": { "paths": [{
                        "path": "/",
                        "pathType": "Prefix",
                        "backend": { "service": { "name": runner.name_any(), "port": { "number": runner.spec.port } } },
                    }] },
                }],
            },
        }))
        .expect("desired Ingress is well-formed"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RunnerSpec;

    pub(crate) fn runner(host: Option<&str>) -> Runner {
        let mut r = Runner::new(
            "web",
            RunnerSpec { image: "nginx:1.27".into(), replicas: 2, port: 8080, host: host.map(Into::into) },
        );
        r.metadata.namespace = Some("team".into());
        r.metadata.uid = Some("uid-1".into());
        r
    }

    #[test]
    fn the_deployment_is_controlled_by_the_runner_and_selects_its_uid() {
        let d = deployment(&runner(None));
        let owner = &d.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.uid.as_str(), owner.controller), ("uid-1", Some(true)));
        let spec = d.spec;
        assert_eq!(spec.replicas, Some(2));
        assert_eq!(spec.selector.match_labels.unwrap()[RUNNER_UID_LABEL], "uid-1");
        let c = &spec.template.spec.as_ref().unwrap().containers[0];
        assert_eq!(c.image.as_deref(), Some("nginx:1.27"));
        assert_eq!(c.ports.as_ref().unwrap()[0].container_port, 8080);
    }

    #[test]
    fn the_service_never_sets_a_cluster_ip() {
        let s = service(&runner(None));
        let v = serde_json::to_value(&s).unwrap();
        assert!(v["spec"].get("clusterIP").is_none());
        assert!(v.get("status").is_none());
        assert_eq!(v["spec"]["ports"][0]["targetPort"], 8080);
    }

    #[test]
    fn an_ingress_exists_only_with_a_host() {
        assert!(ingress(&runner(None)).is_none());
        let i = serde_json::to_value(ingress(&runner(Some("web.example.com"))).unwrap()).unwrap();
        assert_eq!(i["spec"]["rules"][0]["host"], "web.example.com");
        assert_eq!(i["spec"]["rules"][0]["http"]["paths"][0]["pathType"], "Prefix");
    }
}
