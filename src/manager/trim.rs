//! Pure: what the manager keeps of a watched object. Every cached object
//! loses what reconcile never reads (managedFields, annotations, the Pod
//! template's defaulted fields, Service addresses, timestamps), which is
//! most of its size; memory then grows with the fields we own, not with
//! what the apiserver and other controllers add.
//!
//! The contract that keeps drift detection right: a trimmed live child
//! still holds every field [`super::desired`] sets, so `is_subset(desired,
//! trimmed)` answers as it would on the full object. The tests check it.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition};
use k8s_openapi::api::core::v1::{Container, PodSpec, Service, ServiceSpec};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::Runner;

/// Keeps identity, ownership and the fields reconcile reads.
fn meta(m: &mut ObjectMeta) {
    m.managed_fields = None;
    owned_meta(m);
}

/// A child's metadata: as [`meta`], but keeps the marker that says its
/// managedFields need [`super::managed_fields::upgraded`] before an apply.
fn child_meta(m: &mut ObjectMeta) {
    super::managed_fields::keep_marker(m);
    owned_meta(m);
}

fn owned_meta(m: &mut ObjectMeta) {
    m.annotations = None;
    m.creation_timestamp = None;
    m.generate_name = None;
}

/// A Runner as the Controller caches it: spec, status and metadata without
/// managedFields or annotations (`kubectl apply` puts the whole object in one).
pub fn runner(r: &mut Runner) {
    meta(&mut r.metadata);
}

/// A Deployment: our spec fields, the replica counts and the Progressing
/// condition's reason and message (all status reads).
pub fn deployment(d: &mut Deployment) {
    child_meta(&mut d.metadata);
    let spec = &mut d.spec;
    spec.strategy = None;
    spec.revision_history_limit = None;
    spec.progress_deadline_seconds = None;
    if let Some(m) = spec.template.metadata.as_mut() {
        meta(m);
    }
    if let Some(pod) = spec.template.spec.as_mut() {
        *pod =
            PodSpec { containers: pod.containers.drain(..).map(container).collect(), ..Default::default() };
    }
    if let Some(status) = d.status.as_mut() {
        status.collision_count = None;
        status.conditions = status.conditions.take().map(|cs| {
            cs.into_iter()
                .map(|c| DeploymentCondition {
                    type_: c.type_,
                    status: c.status,
                    reason: c.reason,
                    message: c.message,
                    ..Default::default()
                })
                .collect()
        });
    }
}

/// Name, image and ports: what the desired container sets.
fn container(c: Container) -> Container {
    Container { name: c.name, image: c.image, ports: c.ports, ..Default::default() }
}

/// A Service: type, selector and ports; no addresses, no status.
pub fn service(s: &mut Service) {
    child_meta(&mut s.metadata);
    s.spec = s.spec.take().map(|spec| ServiceSpec {
        type_: spec.type_,
        selector: spec.selector,
        ports: spec.ports,
        ..Default::default()
    });
    s.status = None;
}

/// An Ingress: its spec (all ours); the load balancer status is not read.
pub fn ingress(i: &mut Ingress) {
    child_meta(&mut i.metadata);
    i.status = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RunnerSpec;
    use crate::manager::desired;
    use crate::manager::drift::plan;

    fn is_subset(want: &Value, live: &Value) -> bool {
        !plan(want, live).apply
    }
    use serde_json::{Value, json};

    fn runner() -> Runner {
        let mut r = Runner::new(
            "web",
            RunnerSpec {
                image: "nginx:1.27".into(),
                replicas: 2,
                port: 8080,
                host: Some("web.example".into()),
            },
        );
        r.metadata.namespace = Some("team".into());
        r.metadata.uid = Some("uid-1".into());
        r
    }

    /// What the apiserver returns for a child: ours plus defaults, managed
    /// fields, annotations and status, as a live object has them.
    fn served<K: serde::Serialize + serde::de::DeserializeOwned>(want: &K, extra: Value) -> K {
        let mut v = serde_json::to_value(want).unwrap();
        merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    fn merge(a: &mut Value, b: Value) {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, bv) in b {
                    merge(a.entry(k).or_insert(Value::Null), bv);
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for (x, y) in a.iter_mut().zip(b) {
                    merge(x, y);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn managed() -> Value {
        json!({
            "uid": "d-1", "resourceVersion": "42", "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": { "deployment.kubernetes.io/revision": "1" },
            "managedFields": [{ "manager": "kubectl-runner", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": { "f:spec": {} } }],
        })
    }

    fn live_deployment(r: &Runner) -> Deployment {
        served(
            &desired::deployment(r),
            json!({
                "metadata": managed(),
                "spec": {
                    "progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
                    "strategy": { "type": "RollingUpdate" },
                    "template": { "spec": {
                        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                        "containers": [{ "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log" }],
                    } },
                },
                "status": {
                    "observedGeneration": 3, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2,
                    "conditions": [{ "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                                     "message": "ReplicaSet web-1 has successfully progressed.",
                                     "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z" }],
                },
            }),
        )
    }

    #[test]
    fn a_trimmed_deployment_still_holds_every_desired_field_and_its_status() {
        let r = runner();
        let mut d = live_deployment(&r);
        deployment(&mut d);
        let want = serde_json::to_value(desired::deployment(&r)).unwrap();
        assert!(is_subset(&want, &serde_json::to_value(&d).unwrap()));
        assert_eq!(d.metadata.uid.as_deref(), Some("d-1"));
        assert_eq!(d.metadata.generation, Some(3));
        let status = d.status.as_ref().unwrap();
        assert_eq!((status.observed_generation, status.available_replicas), (Some(3), Some(2)));
        let c = &status.conditions.as_ref().unwrap()[0];
        assert_eq!(c.reason.as_deref(), Some("NewReplicaSetAvailable"));
        assert!(c.last_update_time.is_none());
    }

    #[test]
    fn a_trimmed_deployment_drops_managed_fields_annotations_and_pod_defaults() {
        let mut d = live_deployment(&runner());
        deployment(&mut d);
        assert!(d.metadata.managed_fields.is_none() && d.metadata.annotations.is_none());
        let spec = &d.spec;
        let pod = spec.template.spec.as_ref().unwrap();
        assert!(pod.dns_policy.is_none() && pod.scheduler_name.is_none());
        assert!(pod.containers[0].termination_message_path.is_none());
        assert!(spec.strategy.is_none());
    }

    #[test]
    fn drift_in_an_owned_field_is_still_seen_after_trimming() {
        let r = runner();
        let mut d = live_deployment(&r);
        d.spec.template.spec.as_mut().unwrap().containers[0].image = Some("evil:1".into());
        deployment(&mut d);
        let want = serde_json::to_value(desired::deployment(&r)).unwrap();
        assert!(!is_subset(&want, &serde_json::to_value(&d).unwrap()));
    }

    #[test]
    fn a_trimmed_service_keeps_type_selector_and_ports_but_not_its_addresses() {
        let r = runner();
        let mut s = served(
            &desired::service(&r),
            json!({ "metadata": managed(), "spec": { "clusterIP": "10.0.0.7", "clusterIPs": ["10.0.0.7"],
                    "ipFamilies": ["IPv4"], "sessionAffinity": "None" } }),
        );
        service(&mut s);
        let want = serde_json::to_value(desired::service(&r)).unwrap();
        assert!(is_subset(&want, &serde_json::to_value(&s).unwrap()));
        assert!(s.spec.as_ref().unwrap().cluster_ip.is_none());
        assert!(s.metadata.managed_fields.is_none());
    }

    #[test]
    fn a_trimmed_ingress_and_runner_keep_their_spec() {
        let r = runner();
        let mut i = served(&desired::ingress(&r).unwrap(), json!({ "metadata": managed() }));
        ingress(&mut i);
        let want = serde_json::to_value(desired::ingress(&r).unwrap()).unwrap();
        assert!(is_subset(&want, &serde_json::to_value(&i).unwrap()));
        let mut live = served(&r, json!({ "metadata": managed() }));
        super::runner(&mut live);
        assert_eq!(live.spec, r.spec);
        assert!(live.metadata.managed_fields.is_none() && live.metadata.finalizers == r.metadata.finalizers);
    }
}
