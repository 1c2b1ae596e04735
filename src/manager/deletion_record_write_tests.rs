//! Scenario tests of the deletion record in the cleanup pass, against a
//! mock apiserver (helpers from [`super::reconcile_tests`]): a refusal is
//! not retried and does not hold the deletion, a conflict re-reads and
//! keeps the other writer's entry, a transient failure is retried, and
//! deletions at once take turns, the waiting ones in one patch.

use std::sync::Arc;

use serde_json::{Value, json};

use super::reconcile::reconcile;
use super::reconcile_tests::{Handle, answer, conflict, context, record_created, runner};
use crate::api::FINALIZER;

const RECORD: &str = "/api/v1/namespaces/team/configmaps/runner-deletions";
const RUNNER: &str = "/apis/lab.cloudlab.training/v1beta1/namespaces/team/runners/web";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/team/events";

/// Our record with `keys`, at `version`.
fn record(version: &str, keys: &[&str]) -> Value {
    let data: serde_json::Map<String, Value> =
        keys.iter().map(|k| (k.to_string(), Value::String("{}".into()))).collect();
    json!({ "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "runner-deletions", "namespace": "team", "resourceVersion": version,
                      "labels": { "app.kubernetes.io/managed-by": "kubectl-runner" } },
        "data": data })
}

/// The finalizer patch and the Deleted Event end the pass.
async fn finalizer_then_deleted_event(handle: &mut Handle, reply: Value) {
    let (m, path, _) = answer(handle, 200, reply).await;
    assert_eq!((m.as_str(), path.as_str()), ("PATCH", RUNNER));
    let (m, path, event) = answer(handle, 201, json!({})).await;
    assert_eq!((m.as_str(), path.as_str(), event["reason"].as_str()), ("POST", EVENTS, Some("Deleted")));
}

#[tokio::test]
async fn a_forbidden_record_is_not_retried_warns_and_the_deletion_proceeds() {
    let (ctx, mut handle) = context();
    let r = runner(Some(vec![FINALIZER]), true);
    let reply = serde_json::to_value(&r).unwrap();
    let task = tokio::spawn(reconcile(Arc::new(r), ctx));
    let mut denied = conflict("Forbidden", 403);
    denied["message"] = json!("configmaps \"runner-deletions\" is forbidden: User \"mgr\" cannot get");
    let (m, path, _) = answer(&mut handle, 403, denied).await;
    assert_eq!((m.as_str(), path.as_str()), ("GET", RECORD));
    // Next: no second read, the Warning Event.
    let (m, path, event) = answer(&mut handle, 201, json!({})).await;
    assert_eq!((m.as_str(), path.as_str()), ("POST", EVENTS));
    assert_eq!(
        (event["type"].as_str(), event["reason"].as_str()),
        (Some("Warning"), Some("DeletionNotRecorded"))
    );
    assert!(event["note"].as_str().unwrap().contains("cannot get"), "{event}");
    finalizer_then_deleted_event(&mut handle, reply).await;
    task.await.unwrap().expect("reconcile ok");
}

#[tokio::test]
async fn a_conflicting_write_rereads_and_keeps_the_entry_written_meanwhile() {
    let (ctx, mut handle) = context();
    let r = runner(Some(vec![FINALIZER]), true);
    let reply = serde_json::to_value(&r).unwrap();
    let task = tokio::spawn(reconcile(Arc::new(r), ctx));
    let ours = "19700101T001640Z.web.u1";
    let (m, _, _) = answer(&mut handle, 200, record("7", &["19700101T000000Z.a.ua"])).await;
    assert_eq!(m, "GET");
    let (m, path, patch) = answer(&mut handle, 409, conflict("Conflict", 409)).await;
    assert_eq!((m.as_str(), path.as_str()), ("PATCH", RECORD));
    assert_eq!(patch["metadata"]["resourceVersion"], "7");
    // Another Runner's entry landed in between: read again, patch on top of it.
    let meanwhile = record("8", &["19700101T000000Z.a.ua", "19700101T000500Z.b.ub"]);
    let (m, _, _) = answer(&mut handle, 200, meanwhile.clone()).await;
    assert_eq!(m, "GET");
    let (m, _, patch) = answer(&mut handle, 200, meanwhile).await;
    assert_eq!(m, "PATCH");
    assert_eq!(patch["metadata"]["resourceVersion"], "8");
    let data = patch["data"].as_object().unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), [ours], "adds its own key, removes none: {patch}");
    finalizer_then_deleted_event(&mut handle, reply).await;
    task.await.unwrap().expect("reconcile ok");
}

#[tokio::test]
async fn a_transient_failure_is_retried() {
    let (ctx, mut handle) = context();
    let r = runner(Some(vec![FINALIZER]), true);
    let reply = serde_json::to_value(&r).unwrap();
    let task = tokio::spawn(reconcile(Arc::new(r), ctx));
    let (m, _, _) = answer(&mut handle, 503, conflict("ServiceUnavailable", 503)).await;
    assert_eq!(m, "GET");
    let cm = record_created(&mut handle).await;
    assert!(cm["data"]["19700101T001640Z.web.u1"].is_string(), "{cm}");
    finalizer_then_deleted_event(&mut handle, reply).await;
    task.await.unwrap().expect("reconcile ok");
}

/// A deleting Runner of namespace team named `name`, UID `uid`.
fn deleting(name: &str, uid: &str) -> Arc<crate::api::Runner> {
    let mut r = runner(Some(vec![FINALIZER]), true);
    r.metadata.name = Some(name.into());
    r.metadata.uid = Some(uid.into());
    Arc::new(r)
}

#[tokio::test]
async fn deletions_at_once_wait_for_the_turn_and_the_waiting_go_in_one_patch() {
    use std::time::Duration;
    let (ctx, mut handle) = context();
    let web = tokio::spawn(reconcile(deleting("web", "u1"), ctx.clone()));
    let (req, first_read) = handle.next_request().await.expect("web reads the record");
    assert_eq!((req.method().as_str(), req.uri().path()), ("GET", RECORD));
    // While web's turn is on, the other two queue and send nothing.
    let others: Vec<_> = [("api", "u2"), ("db", "u3")]
        .into_iter()
        .map(|(n, u)| tokio::spawn(reconcile(deleting(n, u), ctx.clone())))
        .collect();
    let quiet = tokio::time::timeout(Duration::from_millis(200), handle.next_request()).await;
    assert!(quiet.is_err(), "a second writer of the record while the first one's turn is on");
    let not_found = serde_json::to_vec(&conflict("NotFound", 404)).unwrap();
    first_read.send_response(http::Response::builder().status(404).body(not_found.into()).unwrap());
    // From here: answer everything, and keep the record's writes.
    let mut writes = Vec::new();
    let mut record = Value::Null;
    while writes.len() < 2 || !web.is_finished() || others.iter().any(|t| !t.is_finished()) {
        let Ok(Some((req, send))) = tokio::time::timeout(Duration::from_secs(1), handle.next_request()).await
        else {
            break;
        };
        let (method, path) = (req.method().to_string(), req.uri().path().to_string());
        let bytes = req.into_body().collect_bytes().await.unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let (status, reply) = match (method.as_str(), path.as_str()) {
            ("GET", RECORD) if record.is_null() => (404, conflict("NotFound", 404)),
            ("GET", RECORD) => (200, record.clone()),
            ("POST", "/api/v1/namespaces/team/configmaps") => {
                writes.push(("create", body.clone()));
                record = body;
                record["metadata"]["resourceVersion"] = json!("1");
                (201, record.clone())
            }
            ("PATCH", RECORD) => {
                writes.push(("patch", body.clone()));
                (200, record.clone())
            }
            (_, p) if p.starts_with("/apis/lab.cloudlab.training/") => {
                let name = p.rsplit('/').next().unwrap();
                (200, serde_json::to_value(&*deleting(name, "u")).unwrap())
            }
            _ => (201, json!({})),
        };
        let resp = http::Response::builder().status(status).body(serde_json::to_vec(&reply).unwrap().into());
        send.send_response(resp.unwrap());
    }
    web.await.unwrap().expect("web reconciled");
    for t in others {
        t.await.unwrap().expect("reconciled");
    }
    let keys =
        |v: &Value| v["data"].as_object().map(|d| d.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
    assert_eq!(writes.len(), 2, "web's create, then one patch for the two waiting: {writes:?}");
    assert_eq!((writes[0].0, keys(&writes[0].1)), ("create", vec!["19700101T001640Z.web.u1".to_string()]));
    assert_eq!(writes[1].0, "patch");
    assert_eq!(keys(&writes[1].1), ["19700101T001640Z.api.u2", "19700101T001640Z.db.u3"]);
    assert_eq!(
        writes[1].1["metadata"]["resourceVersion"], "1",
        "guarded by the version read after the create"
    );
}
