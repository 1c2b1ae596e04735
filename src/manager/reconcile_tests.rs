//! Scenario tests of single reconcile steps against a mock apiserver: each
//! names the exact requests the step must make, and fails on any other.
//! Behaviour across steps is proven on the real control plane (tests/).

use std::sync::Arc;

use http::{Request, Response};
use kube::client::Body;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector;
use serde_json::{Value, json};

use super::metrics::Metrics;
use super::reconcile::{Context, Stores, reconcile};
use crate::api::{FINALIZER, Runner, RunnerSpec};

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

fn context() -> (Arc<Context>, Handle) {
    let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(svc, "default");
    let stores = Stores {
        deployments: reflector::store().0,
        services: reflector::store().0,
        ingresses: reflector::store().0,
        pods: reflector::store().0,
    };
    let recorder = Recorder::new(client.clone(), Reporter { controller: "test".into(), instance: None });
    (Arc::new(Context { client, stores, recorder, metrics: Metrics::default() }), handle)
}

fn runner(finalizers: Option<Vec<&str>>, deleting: bool) -> Runner {
    let mut r =
        Runner::new("web", RunnerSpec { image: "nginx:1.27".into(), replicas: 2, port: 80, host: None });
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
async fn expect(handle: &mut Handle, method: &str, path_prefix: &str, reply: Value) -> Value {
    let (req, send) = handle.next_request().await.expect("a request");
    assert_eq!(req.method().as_str(), method, "{}", req.uri());
    assert!(req.uri().path().starts_with(path_prefix), "{} does not start with {path_prefix}", req.uri());
    let bytes = req.into_body().collect_bytes().await.unwrap();
    let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
    send.send_response(Response::builder().body(Body::from(serde_json::to_vec(&reply).unwrap())).unwrap());
    body
}

#[tokio::test]
async fn a_runner_without_the_finalizer_gets_exactly_one_patch_adding_it() {
    let (ctx, mut handle) = context();
    let r = runner(None, false);
    let reply = serde_json::to_value(&r).unwrap();
    let task = tokio::spawn(reconcile(Arc::new(r), ctx));
    let body = expect(
        &mut handle,
        "PATCH",
        "/apis/lab.cloudlab.training/v1alpha1/namespaces/team/runners/web",
        reply,
    )
    .await;
    assert_eq!(body, json!([{ "op": "add", "path": "/metadata/finalizers", "value": [FINALIZER] }]));
    task.await.unwrap().expect("reconcile ok");
    // No other request: the next pass comes from the update event.
    let next = tokio::time::timeout(std::time::Duration::from_millis(100), handle.next_request()).await;
    assert!(matches!(next, Err(_) | Ok(None)), "an unexpected second request");
}

#[tokio::test]
async fn a_deleted_runner_with_no_children_left_records_an_event_and_removes_only_its_finalizer() {
    let (ctx, mut handle) = context();
    let mut r = runner(Some(vec!["other.example/keep", FINALIZER]), true);
    r.status = Some(crate::api::RunnerStatus { phase: crate::api::Phase::Terminating, ..Default::default() });
    let reply = serde_json::to_value(&r).unwrap();
    let task = tokio::spawn(reconcile(Arc::new(r), ctx));
    let event = expect(&mut handle, "POST", "/apis/events.k8s.io/v1/namespaces/team/events", json!({})).await;
    assert_eq!(event["reason"], "Deleted");
    assert!(event["note"].as_str().unwrap().contains("nginx:1.27"));
    let patch = expect(
        &mut handle,
        "PATCH",
        "/apis/lab.cloudlab.training/v1alpha1/namespaces/team/runners/web",
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
    task.await.unwrap().expect("reconcile ok");
}
