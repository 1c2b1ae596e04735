//! Scenario tests of single reconcile steps against a mock apiserver: each
//! names the exact requests the step must make, and fails on any other.
//! Behaviour across steps is proven on the real control plane (tests/).

use std::sync::Arc;

use http::{Request, Response};
use kube::client::Body;
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};

use super::child_cache::seeded;
use super::context::{Context, Stores};
use super::metrics::Metrics;
use super::reconcile::reconcile;
use crate::api::{FINALIZER, Runner, RunnerSpec};
use crate::kinds::ChildKind;
use crate::kinds::deployment::Deployments;

pub(super) type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

pub(super) fn context() -> (Arc<Context>, Handle) {
    context_with(vec![])
}

pub(super) fn runner(finalizers: Option<Vec<&str>>, deleting: bool) -> Runner {
    let mut r = Runner::new("web", RunnerSpec::new("nginx:1.27").replicas(2));
    r.metadata.namespace = Some("team".into());
    r.metadata.uid = Some("u1".into());
    r.metadata.resource_version = Some("7".into());
    r.metadata.finalizers = finalizers.map(|f| f.into_iter().map(String::from).collect());
    if deleting {
        r.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1_000).unwrap(),
        ));
    }
    r
}

/// Answers the next request after checking it; returns its JSON body.
pub(super) async fn expect(handle: &mut Handle, method: &str, path_prefix: &str, reply: Value) -> Value {
    let (req, send) = handle.next_request().await.expect("a request");
    assert_eq!(req.method().as_str(), method, "{}", req.uri());
    assert!(req.uri().path().starts_with(path_prefix), "{} does not start with {path_prefix}", req.uri());
    let bytes = req.into_body().collect_bytes().await.unwrap();
    let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
    send.send_response(Response::builder().body(Body::from(serde_json::to_vec(&reply).unwrap())).unwrap());
    body
}

#[tokio::test]
async fn a_new_runner_gets_its_finalizer_then_its_children_and_status_in_the_same_pass() {
    let (ctx, mut handle) = context();
    let r = runner(None, false);
    let r_version = r.metadata.resource_version.clone();
    let mut reply = serde_json::to_value(&r).unwrap();
    (reply["metadata"]["finalizers"], reply["metadata"]["resourceVersion"]) =
        (json!([FINALIZER]), json!("8"));
    let task = tokio::spawn(reconcile(Arc::new(r), ctx.clone()));
    let body = expect(
        &mut handle,
        "PATCH",
        "/apis/lab.cloudlab.training/v1beta1/namespaces/team/runners/web",
        reply.clone(),
    )
    .await;
    // Guarded: a list someone else added since our read is never replaced.
    assert_eq!(
        body,
        json!([
            { "op": "test", "path": "/metadata/resourceVersion", "value": r_version },
            { "op": "add", "path": "/metadata/finalizers", "value": [FINALIZER] },
        ])
    );
    // One trip: children (with a PodDisruptionBudget) and status follow.
    let seen = answer_each(&mut handle, 4, |_, path| {
        if path.ends_with("/status") {
            (200, reply.clone())
        } else {
            (200, json!({ "metadata": { "name": "web" } }))
        }
    })
    .await;
    let paths: Vec<&str> = seen.iter().map(|(_, p, _)| p.as_str()).collect();
    for kind in ["deployments/web", "services/web", "poddisruptionbudgets/web"] {
        assert!(paths.iter().any(|p| p.ends_with(kind)), "{kind} written: {paths:?}");
    }
    assert!(paths[3].ends_with("runners/web/status"), "the status last: {paths:?}");
    task.await.unwrap().expect("reconcile ok");
    let next = tokio::time::timeout(std::time::Duration::from_millis(100), handle.next_request()).await;
    assert!(matches!(next, Err(_) | Ok(None)), "an unexpected request after the status");
    // Kept as our own write: the finalizer's echo brings no pass.
    let kept = ctx.stores.own_status.fresher(None, "team", "web").expect("our writes are kept");
    assert_eq!(kept.metadata.finalizers.as_deref(), Some(&[FINALIZER.to_string()][..]));
}

#[tokio::test]
async fn a_deleted_runner_with_no_children_left_removes_only_its_finalizer_then_records_an_event() {
    let (ctx, mut handle) = context();
    let mut r = runner(Some(vec!["other.example/keep", FINALIZER]), true);
    r.status = Some(crate::api::RunnerStatus { phase: crate::api::Phase::Terminating, ..Default::default() });
    let reply = serde_json::to_value(&r).unwrap();
    let task = tokio::spawn(reconcile(Arc::new(r), ctx));
    let cm = record_created(&mut handle).await;
    let entry = &cm["data"]["19700101T001640Z.web.u1"];
    assert!(entry.as_str().unwrap().contains(r#""image":"nginx:1.27","replicas":2"#), "{cm}");
    let patch = expect(
        &mut handle,
        "PATCH",
        "/apis/lab.cloudlab.training/v1beta1/namespaces/team/runners/web",
        reply,
    )
    .await;
    assert_eq!(
        patch,
        json!([
            { "op": "test", "path": "/metadata/finalizers/1", "value": FINALIZER },
            { "op": "remove", "path": "/metadata/finalizers/1" },
        ])
    );
    let event = expect(&mut handle, "POST", "/apis/events.k8s.io/v1/namespaces/team/events", json!({})).await;
    assert_eq!(event["reason"], "Deleted");
    assert!(event["note"].as_str().unwrap().contains("nginx:1.27"));
    task.await.unwrap().expect("reconcile ok");
}

/// A context whose stores already hold these children.
fn context_with(deployments: Vec<k8s_openapi::api::apps::v1::Deployment>) -> (Arc<Context>, Handle) {
    let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(svc, "default");
    let objects = deployments.iter().map(|d| serde_json::to_value(d).unwrap()).collect();
    let stores = Stores {
        children: seeded(objects),
        pods: Default::default(),
        own_status: Default::default(),
        status_clocks: Default::default(),
    };
    let recorder = Recorder::new(client.clone(), Reporter { controller: "test".into(), instance: None });
    (Arc::new(Context::new(client, stores, recorder, Metrics::default())), handle)
}

fn our_deployment(r: &Runner) -> k8s_openapi::api::apps::v1::Deployment {
    let mut d = Deployments::desired(r).unwrap();
    d.metadata.uid = Some("d-1".into());
    d
}

#[tokio::test]
async fn cleanup_deletes_each_child_once_in_the_background_and_never_polls() {
    let mut r = runner(Some(vec![FINALIZER]), true);
    r.status = Some(crate::api::RunnerStatus { phase: crate::api::Phase::Terminating, ..Default::default() });
    let (ctx, mut handle) = context_with(vec![our_deployment(&r)]);
    let reply = serde_json::to_value(&r).unwrap();
    let task = tokio::spawn(reconcile(Arc::new(r.clone()), ctx.clone()));
    let (req, send) = handle.next_request().await.expect("a DELETE");
    assert_eq!(req.method().as_str(), "DELETE");
    assert_eq!(req.uri().path(), "/apis/apps/v1/namespaces/team/deployments/web");
    let body: Value = serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap();
    assert_eq!(body["propagationPolicy"], "Background");
    assert_eq!(body["preconditions"]["uid"], "d-1");
    // The apiserver answers with a Status: the Deployment is gone.
    let gone = json!({ "kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {} });
    send.send_response(Response::builder().body(Body::from(serde_json::to_vec(&gone).unwrap())).unwrap());
    let cm = record_created(&mut handle).await;
    // Then the finalizer; the apiserver refuses it this time (a conflict).
    let (req, send) = handle.next_request().await.expect("the finalizer patch");
    assert_eq!(req.method().as_str(), "PATCH");
    let conflict = json!({ "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict",
                           "code": 409, "message": "conflict", "metadata": {} });
    send.send_response(
        Response::builder().status(409).body(Body::from(serde_json::to_vec(&conflict).unwrap())).unwrap(),
    );
    assert!(task.await.unwrap().is_err());

    // The retry comes before the store sees the deletion: no second DELETE,
    // the record found already written, the finalizer, the Event, and no requeue.
    let task = tokio::spawn(reconcile(Arc::new(r), ctx));
    let (m, _, _) = answer(
        &mut handle,
        200,
        json!({ "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": cm["metadata"].clone(), "data": cm["data"].clone() }),
    )
    .await;
    assert_eq!(m, "GET", "the record is read, and not written twice");
    let (req, send) = handle.next_request().await.expect("the finalizer patch");
    assert_eq!(req.method().as_str(), "PATCH", "a second DELETE of the same child: {}", req.uri());
    send.send_response(Response::builder().body(Body::from(serde_json::to_vec(&reply).unwrap())).unwrap());
    let event = expect(&mut handle, "POST", "/apis/events.k8s.io/v1/namespaces/team/events", json!({})).await;
    assert_eq!(event["reason"], "Deleted");
    let action = task.await.unwrap().expect("reconcile ok");
    assert_eq!(action, None, "no polling");
}

#[tokio::test]
async fn status_is_written_with_a_json_patch_guarded_by_uid_and_generation() {
    let mut r = runner(Some(vec![FINALIZER]), false);
    r.metadata.generation = Some(4);
    let mut dep = our_deployment(&r);
    dep.metadata.generation = Some(1);
    dep.status = Some(
        serde_json::from_value(json!({ "observedGeneration": 1, "replicas": 2,
        "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2 }))
        .unwrap(),
    );
    let (ctx, mut handle) = context_with(vec![dep]);
    let reply = serde_json::to_value(&r).unwrap();
    let task = tokio::spawn(reconcile(Arc::new(r), ctx));
    // The Service is absent from its store: created first, by a create-only apply.
    let svc = expect(
        &mut handle,
        "PATCH",
        "/api/v1/namespaces/team/services/web",
        json!({ "metadata": { "name": "web" } }),
    )
    .await;
    assert_eq!(svc["metadata"]["resourceVersion"], "1", "create-only: {svc}");
    // Two replicas: the PodDisruptionBudget is absent too, created next.
    let pdb = expect(
        &mut handle,
        "PATCH",
        "/apis/policy/v1/namespaces/team/poddisruptionbudgets/web",
        json!({ "metadata": { "name": "web" } }),
    )
    .await;
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    let patch = expect(
        &mut handle,
        "PATCH",
        "/apis/lab.cloudlab.training/v1beta1/namespaces/team/runners/web/status",
        reply,
    )
    .await;
    assert_eq!(patch[0], json!({ "op": "test", "path": "/metadata/uid", "value": "u1" }));
    assert_eq!(patch[1], json!({ "op": "test", "path": "/metadata/generation", "value": 4 }));
    assert_eq!(patch[2]["op"], "add");
    assert_eq!(patch[2]["path"], "/status");
    assert_eq!(patch[2]["value"]["phase"], "Available");
    assert_eq!(patch[2]["value"]["observedGeneration"], 4);
    task.await.unwrap().expect("reconcile ok");
}

/// The deletion record: read (there is none yet), then created; returns
/// the ConfigMap created.
pub(super) async fn record_created(handle: &mut Handle) -> Value {
    let (m, path, _) = answer(handle, 404, conflict("NotFound", 404)).await;
    assert_eq!((m.as_str(), path.as_str()), ("GET", "/api/v1/namespaces/team/configmaps/runner-deletions"));
    let (m, path, cm) = answer(handle, 201, json!({ "apiVersion": "v1", "kind": "ConfigMap" })).await;
    assert_eq!((m.as_str(), path.as_str()), ("POST", "/api/v1/namespaces/team/configmaps"));
    cm
}

/// Answers the next request with `status` and `reply`; returns (method, path, body).
pub(super) async fn answer(handle: &mut Handle, status: u16, reply: Value) -> (String, String, Value) {
    let mut seen = answer_each(handle, 1, |_, _| (status, reply.clone())).await;
    seen.pop().expect("one request")
}

pub(super) fn conflict(reason: &str, code: u16) -> Value {
    json!({ "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code,
            "message": reason, "metadata": {} })
}

/// Answers the next `n` requests, in whatever order the pass's concurrent
/// child writes send them, each with what `reply` gives for its method and
/// path; returns them as (method, path, body) in the order they came.
async fn answer_each(
    handle: &mut Handle,
    n: usize,
    mut reply: impl FnMut(&str, &str) -> (u16, Value),
) -> Vec<(String, String, Value)> {
    let mut seen = Vec::new();
    for _ in 0..n {
        let (req, send) = handle.next_request().await.expect("a request");
        let (method, path) = (req.method().to_string(), req.uri().path().to_string());
        let bytes = req.into_body().collect_bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        let (status, value) = reply(&method, &path);
        let resp = Response::builder().status(status).body(Body::from(serde_json::to_vec(&value).unwrap()));
        send.send_response(resp.unwrap());
        seen.push((method, path, body));
    }
    seen
}

/// The requests to one path prefix, in order.
fn to(seen: &[(String, String, Value)], prefix: &str) -> Vec<(String, String, Value)> {
    seen.iter().filter(|(_, p, _)| p.starts_with(prefix)).cloned().collect()
}

const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/team/deployments/web";

#[tokio::test]
async fn a_create_that_finds_the_name_taken_reads_it_and_refuses_someone_elses() {
    let r = runner(Some(vec![FINALIZER]), false);
    let (ctx, mut handle) = context_with(vec![]);
    let reply = serde_json::to_value(&r).unwrap();
    let task = tokio::spawn(reconcile(Arc::new(r), ctx));
    // The object under the Deployment's name: someone else's, without an owner.
    let theirs = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "web", "namespace": "team", "uid": "theirs" },
        "spec": { "selector": {}, "template": {} } });
    let seen = answer_each(&mut handle, 4, |method, path| match (method, path) {
        ("PATCH", DEPLOYMENT) => (409, conflict("Conflict", 409)),
        ("GET", DEPLOYMENT) => (200, theirs.clone()),
        _ => (201, json!({ "metadata": { "name": "web" } })),
    })
    .await;
    // A create-only apply: a resourceVersion no object holds, no UID; on
    // 409, one read of what holds the name, and nothing more to it.
    let d = to(&seen, DEPLOYMENT);
    let d_calls: Vec<_> = d.iter().map(|(m, _, _)| m.as_str()).collect();
    assert_eq!(d_calls, ["PATCH", "GET"]);
    assert_eq!(d[0].2["metadata"]["resourceVersion"], "1", "{}", d[0].2);
    assert!(d[0].2["metadata"].get("uid").is_none(), "{}", d[0].2);
    // The Service and the budget are ours to create.
    for prefix in
        ["/api/v1/namespaces/team/services/web", "/apis/policy/v1/namespaces/team/poddisruptionbudgets/web"]
    {
        let calls: Vec<_> = to(&seen, prefix).into_iter().map(|(m, _, _)| m).collect();
        assert_eq!(calls, ["PATCH"], "{prefix}");
    }
    // The refusal is announced (an Event), then written in the status.
    let (m, _, event) = answer(&mut handle, 201, json!({})).await;
    assert_eq!((m.as_str(), event["reason"].as_str()), ("POST", Some("AdoptionRefused")));
    let (m, path, status) = answer(&mut handle, 200, reply).await;
    assert!(m == "PATCH" && path.ends_with("/runners/web/status"), "{m} {path}");
    assert_eq!(status[2]["value"]["phase"], "Failed");
    assert!(status[2]["value"]["message"].as_str().unwrap().contains("Deployment team/web"), "{status}");
    task.await.unwrap().expect("reconcile ok");
}

#[tokio::test]
async fn a_posted_child_whose_apply_must_remove_a_field_is_taken_over_then_applied() {
    let mut r = runner(Some(vec![FINALIZER]), false);
    r.spec.replicas = 1;
    // Posted with port 80 (our Update entry owns that container port); the
    // Runner now says 8080, and an apply alone could not remove port 80.
    r.spec.expose.port = 8080;
    let before = {
        let mut b = r.clone();
        b.spec.expose.port = 80;
        b
    };
    let mut d = our_deployment(&before);
    d.metadata.resource_version = Some("5".into());
    d.metadata.managed_fields = Some(vec![posted_entry()]);
    let (ctx, mut handle) = context_with(vec![d.clone()]);
    let task = tokio::spawn(reconcile(Arc::new(r.clone()), ctx));
    // The Deployment's three requests and the Service's create.
    let live = serde_json::to_value(&d).unwrap();
    let seen = answer_each(&mut handle, 4, |_, path| {
        if path == DEPLOYMENT { (200, live.clone()) } else { (201, json!({ "metadata": { "name": "web" } })) }
    })
    .await;
    let d = to(&seen, DEPLOYMENT);
    assert_eq!(d.len(), 3, "{seen:?}");
    assert_eq!(d[0].0, "GET", "the take-over reads first");
    let (m, ops) = (&d[1].0, &d[1].2);
    assert_eq!(m, "PATCH");
    assert_eq!(ops[0], json!({ "op": "test", "path": "/metadata/resourceVersion", "value": "5" }));
    assert_eq!(ops[1]["path"], "/metadata/managedFields");
    assert_eq!(ops[1]["value"][0]["operation"], "Apply", "our Update entry folded into an Apply entry");
    let (m, body) = (&d[2].0, &d[2].2);
    assert_eq!(m, "PATCH");
    assert_eq!(body["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 8080);
    assert_eq!(body["metadata"]["uid"], "d-1", "the live UID as a precondition");
    drop(handle);
    let _ = task.await;
}

/// Our entry as a POST records it.
fn posted_entry() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
    serde_json::from_value(json!({
        "manager": crate::api::FIELD_MANAGER, "operation": "Update", "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1", "fieldsV1": { "f:spec": { "f:replicas": {} } } }))
    .unwrap()
}

#[tokio::test]
async fn a_scalar_drift_of_a_posted_child_is_applied_without_a_take_over() {
    let mut r = runner(Some(vec![FINALIZER]), false);
    r.spec.replicas = 1;
    let mut d = our_deployment(&r);
    d.metadata.resource_version = Some("5".into());
    d.metadata.managed_fields = Some(vec![posted_entry()]);
    d.spec.template.spec.as_mut().unwrap().containers[0].image = Some("evil:1".into());
    let (ctx, mut handle) = context_with(vec![d.clone()]);
    let task = tokio::spawn(reconcile(Arc::new(r.clone()), ctx));
    let (m, path, body) = answer(&mut handle, 200, serde_json::to_value(&d).unwrap()).await;
    assert_eq!((m.as_str(), path.as_str()), ("PATCH", "/apis/apps/v1/namespaces/team/deployments/web"));
    assert_eq!(body["apiVersion"], "apps/v1", "an apply, not a take-over");
    assert_eq!(body["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27", "ours again");
    drop(handle);
    let _ = task.await;
}
