//! Test fixtures: live children as the apiserver serves them (ours plus
//! defaults, managed fields, annotations and status), for the tests of
//! what the manager caches of them.

use serde_json::{Value, json};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ChildKind;
use super::deployment::Deployments;
use super::drift::{Rules, plan};
use crate::api::{Runner, RunnerSpec};

/// A Runner with every optional field set (a host, two replicas), so it
/// has a child of every kind.
pub fn runner() -> Runner {
    let mut r = Runner::new("web", RunnerSpec::every_field());
    r.metadata.namespace = Some("team".into());
    r.metadata.uid = Some("uid-1".into());
    r
}

/// True when `live` carries every field of `want`, as drift judges it.
pub fn is_subset(rules: &Rules, want: &Value, live: &Value) -> bool {
    !plan(rules, want, live).apply
}

pub fn decode<V: DeserializeOwned>(v: Value) -> V {
    serde_json::from_value(v).unwrap()
}

pub fn as_json(v: &impl Serialize) -> Value {
    serde_json::to_value(v).unwrap()
}

/// What drift compares: the body without its type (list items and views
/// do not carry it).
pub fn body(want: &impl Serialize) -> Value {
    let mut v = as_json(want);
    let o = v.as_object_mut().unwrap();
    o.remove("apiVersion");
    o.remove("kind");
    v
}

/// `want` as the apiserver would serve it, with `extra` merged in.
pub fn served<K: serde::Serialize + serde::de::DeserializeOwned>(want: &K, extra: Value) -> K {
    serde_json::from_value(served_json(want, extra)).unwrap()
}

pub fn served_json<K: serde::Serialize>(want: &K, extra: Value) -> Value {
    let mut v = serde_json::to_value(want).unwrap();
    merge(&mut v, extra);
    v
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

/// What the apiserver adds to any child's metadata.
pub fn managed() -> Value {
    json!({
        "uid": "d-1", "resourceVersion": "42", "generation": 3,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "annotations": { "deployment.kubernetes.io/revision": "1" },
        "managedFields": [{ "manager": "kubectl-runner", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": { "f:spec": {} } }],
    })
}

/// The Runner's Deployment as served, rolled out.
pub fn live_deployment(r: &Runner) -> Value {
    served_json(
        &Deployments::desired(r).unwrap(),
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
