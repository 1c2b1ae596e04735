//! Test fixtures: live children as the apiserver serves them (ours plus
//! defaults, managed fields, annotations and status), for the tests of
//! what the manager caches of them.

use serde_json::{Value, json};

use crate::api::{Runner, RunnerSpec};
use crate::manager::desired;
use crate::manager::drift::plan;

/// A Runner with a host, so it has all three children.
pub fn runner() -> Runner {
    let mut r = Runner::new(
        "web",
        RunnerSpec { image: "nginx:1.27".into(), replicas: 2, port: 8080, host: Some("web.example".into()) },
    );
    r.metadata.namespace = Some("team".into());
    r.metadata.uid = Some("uid-1".into());
    r
}

/// True when `live` carries every field of `want`, as drift judges it.
pub fn is_subset(want: &Value, live: &Value) -> bool {
    !plan(want, live).apply
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
