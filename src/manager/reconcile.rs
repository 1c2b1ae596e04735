//! One reconcile pass: fetch (from the reflector stores), compute (pure
//! `desired` and `status`), apply, patch. Every step is safe to repeat; a pass
//! that finds nothing to change makes no API request at all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tracing::{debug, info, warn};

use super::desired;
use super::metrics::Metrics;
use super::pod_problems::PodProblems;
use super::status::{self, Observed};
use crate::api::{FIELD_MANAGER, FINALIZER, RUNNER_UID_LABEL, Runner, condition};
use crate::error::{Error, Result};

/// Reflector stores of the children (filtered by the UID label, trimmed by
/// [`super::trim`]) and the Pod problem view.
#[derive(Clone)]
pub struct Stores {
    pub deployments: Store<Deployment>,
    pub services: Store<Service>,
    pub ingresses: Store<Ingress>,
    pub pods: PodProblems,
}

/// What every pass shares.
pub struct Context {
    pub client: Client,
    pub stores: Stores,
    pub recorder: Recorder,
    pub metrics: Metrics,
    /// Children this manager has sent a DELETE for, by Runner UID then child
    /// UID: true once the apiserver answered "gone", false while the child
    /// waits on finalizers of its own. The stores learn of a deletion a
    /// moment later; this keeps a pass in that moment from deleting twice.
    /// A Runner's entry goes with its finalizer (an Ingress removed from a
    /// live Runner leaves one small entry until then).
    pub deleted: Mutex<HashMap<String, HashMap<String, bool>>>,
}

impl Context {
    pub fn new(client: Client, stores: Stores, recorder: Recorder, metrics: Metrics) -> Self {
        Context { client, stores, recorder, metrics, deleted: Mutex::default() }
    }

    fn deleted(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<String, bool>>> {
        self.deleted.lock().unwrap_or_else(|e| e.into_inner())
    }
}
/// A refused child is not watched (it lacks our label): look again this often.
const REFUSED_RECHECK: Duration = Duration::from_secs(60);

/// Entry point for the Controller.
pub async fn reconcile(runner: Arc<Runner>, ctx: Arc<Context>) -> Result<Action> {
    let start = Instant::now();
    let result = reconcile_inner(&runner, &ctx).await;
    ctx.metrics.observe(start.elapsed());
    result
}

/// Retries a failed pass: soon after a conflict (re-read, never overwrite a
/// newer spec), with a longer pause otherwise.
pub fn error_policy(runner: Arc<Runner>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.error(err.metric_label());
    if err.is_conflict() {
        debug!(runner = %runner.name_any(), "conflict; requeue to re-read");
        return Action::requeue(Duration::from_millis(500));
    }
    warn!(runner = %runner.name_any(), namespace = ?runner.namespace(), error = %err, "reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile_inner(runner: &Runner, ctx: &Context) -> Result<Action> {
    let ns = runner.namespace().unwrap_or_default();
    let api: Api<Runner> = Api::namespaced(ctx.client.clone(), &ns);
    let has_finalizer = runner.finalizers().iter().any(|f| f == FINALIZER);

    if runner.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        return cleanup(runner, ctx, &api).await;
    }
    if !has_finalizer {
        add_finalizer(runner, &api).await?;
        ctx.metrics.write("add_finalizer");
        // The update event brings the next pass.
        return Ok(Action::await_change());
    }

    let uid = runner.uid().unwrap_or_default();
    let mut refused = Vec::new();
    let deployment =
        ensure_child(ctx, runner, &ctx.stores.deployments, desired::deployment(runner), &mut refused).await?;
    ensure_child(ctx, runner, &ctx.stores.services, desired::service(runner), &mut refused).await?;
    let ingress = match desired::ingress(runner) {
        Some(ing) => ensure_child(ctx, runner, &ctx.stores.ingresses, ing, &mut refused).await?.is_some(),
        None => {
            delete_owned(ctx, &ctx.stores.ingresses, runner).await?;
            false
        }
    };

    let seen = Observed {
        deployment: deployment.as_ref(),
        pod_problem: ctx.stores.pods.first(&uid),
        refused: refused.clone(),
        ingress,
    };
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let new_status = status::compute(runner, &seen, &now);
    if runner.status.as_ref() != Some(&new_status) {
        announce_refusal(ctx, runner, &new_status).await;
        patch_status(&api, runner, &new_status).await?;
        ctx.metrics.write("patch_status");
    }
    Ok(if refused.is_empty() { Action::await_change() } else { Action::requeue(REFUSED_RECHECK) })
}

/// How a child of this name stands relative to the Runner.
enum Ownership<K> {
    Absent,
    Ours(Arc<K>),
    Foreign,
}

fn ownership<K: Resource>(live: Option<Arc<K>>, uid: &str) -> Ownership<K> {
    match live {
        None => Ownership::Absent,
        Some(obj) if is_ours(obj.as_ref(), uid) => Ownership::Ours(obj),
        Some(_) => Ownership::Foreign,
    }
}

/// Controlled by this Runner's UID *and* labelled with it. A child left by an
/// earlier Runner of the same name carries the old UID: foreign.
pub fn is_ours<K: Resource>(obj: &K, uid: &str) -> bool {
    let controlled =
        obj.meta().owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.uid == uid);
    let labelled =
        obj.meta().labels.as_ref().and_then(|l| l.get(RUNNER_UID_LABEL)).map(String::as_str) == Some(uid);
    controlled && labelled
}

/// Creates the child if absent, re-applies our fields if they drifted, and
/// refuses (records, never touches) a same-name object we do not control.
/// Returns the live object when it is ours.
async fn ensure_child<K>(
    ctx: &Context,
    runner: &Runner,
    store: &Store<K>,
    want: K,
    refused: &mut Vec<String>,
) -> Result<Option<K>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let ns = runner.namespace().unwrap_or_default();
    let name = runner.name_any();
    let kind = K::kind(&()).to_string();
    let uid = runner.uid().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    let kind_s: &'static str = static_kind(&kind);
    match ownership(store.get(&ObjectRef::new(&name).within(&ns)), &uid) {
        Ownership::Foreign => {
            refused.push(format!("{kind} {ns}/{name}"));
            Ok(None)
        }
        Ownership::Ours(live) => {
            let want_v = serde_json::to_value(&want).map_err(|e| Error::Other(e.to_string()))?;
            let live_v = serde_json::to_value(live.as_ref()).map_err(|e| Error::Other(e.to_string()))?;
            if desired::is_subset(&want_v, &live_v) {
                return Ok(Some(live.as_ref().clone()));
            }
            // The live UID in the body is a precondition: if the object was
            // replaced by someone else's since the store saw it, this fails.
            let mut body = want_v;
            body["metadata"]["uid"] = json!(live.uid());
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            let applied = api
                .patch(&name, &pp, &Patch::Apply(&body))
                .await
                .map_err(|e| Error::api("apply", kind_s, &ns, &name, e))?;
            info!(%kind, namespace = %ns, %name, "reverted drift");
            ctx.metrics.write(&format!("apply_{}", kind.to_lowercase()));
            Ok(Some(applied))
        }
        Ownership::Absent => {
            // POST, not apply: apply would merge into a same-name object the
            // store has not seen yet (it is unlabelled), which is adoption.
            let pp = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
            match api.create(&pp, &want).await {
                Ok(created) => {
                    info!(%kind, namespace = %ns, %name, "created");
                    ctx.metrics.write(&format!("create_{}", kind.to_lowercase()));
                    Ok(Some(created))
                }
                Err(e) if matches!(&e, kube::Error::Api(s) if s.is_already_exists()) => {
                    let live = api.get(&name).await.map_err(|e| Error::api("get", kind_s, &ns, &name, e))?;
                    if is_ours(&live, &uid) {
                        Ok(Some(live))
                    } else {
                        refused.push(format!("{kind} {ns}/{name}"));
                        Ok(None)
                    }
                }
                Err(e) => Err(Error::api("create", kind_s, &ns, &name, e)),
            }
        }
    }
}

fn static_kind(kind: &str) -> &'static str {
    match kind {
        "Deployment" => "Deployment",
        "Service" => "Service",
        "Ingress" => "Ingress",
        _ => "object",
    }
}

/// Deletes the same-name child if it is ours, once, with a UID
/// precondition and background propagation (the garbage collector removes
/// its ReplicaSets and Pods). Returns true while the child still exists:
/// it has finalizers of its own, and its delete event brings the next pass.
async fn delete_owned<K>(ctx: &Context, store: &Store<K>, runner: &Runner) -> Result<bool>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let ns = runner.namespace().unwrap_or_default();
    let name = runner.name_any();
    let uid = runner.uid().unwrap_or_default();
    let Ownership::Ours(live) = ownership(store.get(&ObjectRef::new(&name).within(&ns)), &uid) else {
        return Ok(false);
    };
    let child = live.uid().unwrap_or_default();
    if let Some(gone) = ctx.deleted().get(&uid).and_then(|m| m.get(&child)) {
        return Ok(!gone);
    }
    if live.meta().deletion_timestamp.is_some() {
        return Ok(true); // someone else deleted it; wait for the event
    }
    let kind = K::kind(&()).to_string();
    let dp = DeleteParams {
        preconditions: Some(Preconditions { uid: Some(child.clone()), resource_version: None }),
        propagation_policy: Some(kube::api::PropagationPolicy::Background),
        ..Default::default()
    };
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    let gone = match api.delete(&name, &dp).await {
        // The apiserver answers with the object when it had finalizers to
        // wait on (it is still there, with a deletionTimestamp), else with a
        // Status or the object as it was when removed.
        Ok(answer) => {
            answer.left().is_none_or(|obj| obj.meta().finalizers.as_ref().is_none_or(Vec::is_empty))
        }
        Err(e) if crate::error::is_not_found(&e) => return Ok(false),
        Err(e) => return Err(Error::api("delete", static_kind(&kind), &ns, &name, e)),
    };
    ctx.metrics.write(&format!("delete_{}", kind.to_lowercase()));
    ctx.deleted().entry(uid).or_default().insert(child, gone);
    Ok(!gone)
}

/// Deletion: delete our children; when all are gone, record an Event with
/// what was deleted and drop our finalizer (and only ours). No polling: a
/// child that is still finalizing sends a delete event that brings the
/// next pass.
async fn cleanup(runner: &Runner, ctx: &Context, api: &Api<Runner>) -> Result<Action> {
    let mut pending = false;
    pending |= delete_owned(ctx, &ctx.stores.deployments, runner).await?;
    pending |= delete_owned(ctx, &ctx.stores.services, runner).await?;
    pending |= delete_owned(ctx, &ctx.stores.ingresses, runner).await?;
    if pending {
        if runner.status.as_ref().map(|s| s.phase) != Some(crate::api::Phase::Terminating) {
            let mut s = runner.status.clone().unwrap_or_default();
            s.phase = crate::api::Phase::Terminating;
            s.message = Some("waiting for children to finish deleting".into());
            // Best effort: a failed Terminating display must not block cleanup.
            if patch_status(api, runner, &s).await.is_ok() {
                ctx.metrics.write("patch_status");
            }
        }
        return Ok(Action::await_change());
    }
    let note = format!(
        "Runner deleted: image {}, {} replicas; Deployment and Service removed",
        runner.spec.image, runner.spec.replicas
    );
    remove_finalizer(runner, api).await?;
    ctx.metrics.write("remove_finalizer");
    ctx.deleted().remove(&runner.uid().unwrap_or_default());
    // After the finalizer: a retried removal must not record a second Event.
    publish(ctx, runner, EventType::Normal, "Deleted", "Cleanup", note).await;
    info!(runner = %runner.name_any(), namespace = ?runner.namespace(), "children gone; finalizer removed");
    Ok(Action::await_change())
}

async fn add_finalizer(runner: &Runner, api: &Api<Runner>) -> Result<()> {
    let ops = match &runner.metadata.finalizers {
        None => json!([{ "op": "add", "path": "/metadata/finalizers", "value": [FINALIZER] }]),
        Some(current) => json!([
            { "op": "test", "path": "/metadata/finalizers", "value": current },
            { "op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER },
        ]),
    };
    json_patch(api, runner, ops, "add the finalizer to", false).await
}

/// A JSON patch that tests the finalizer is still at that index, so a
/// concurrent change never makes us remove someone else's finalizer.
async fn remove_finalizer(runner: &Runner, api: &Api<Runner>) -> Result<()> {
    let Some(i) = runner.finalizers().iter().position(|f| f == FINALIZER) else { return Ok(()) };
    let path = format!("/metadata/finalizers/{i}");
    let ops = json!([{ "op": "test", "path": path, "value": FINALIZER }, { "op": "remove", "path": path }]);
    json_patch(api, runner, ops, "remove the finalizer from", false).await
}

/// A JSON patch of the Runner (or of its status subresource). Its `test`
/// operations are the preconditions: a failed one (422) means the object
/// moved on, reported as a conflict so the pass re-reads and retries.
async fn json_patch(
    api: &Api<Runner>,
    runner: &Runner,
    ops: serde_json::Value,
    op: &'static str,
    status: bool,
) -> Result<()> {
    let name = runner.name_any();
    let ns = runner.namespace().unwrap_or_default();
    let patch: json_patch::Patch = serde_json::from_value(ops).map_err(|e| Error::Other(e.to_string()))?;
    let pp = PatchParams::default();
    let res = if status {
        api.patch_status(&name, &pp, &Patch::<()>::Json(patch)).await
    } else {
        api.patch(&name, &pp, &Patch::<()>::Json(patch)).await
    };
    match res {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 422 => {
            Err(Error::api(op, "Runner", &ns, &name, kube::Error::Api(Box::new((*s).with_code(409)))))
        }
        Err(e) => Err(Error::api(op, "Runner", &ns, &name, e)),
    }
}

/// Status through the status subresource, guarded by the Runner's UID and
/// generation rather than its resourceVersion: our own finalizer or status
/// writes do not make it fail, a spec change does (the next pass re-reads),
/// so Ready is never written for an old generation or a same-name successor.
async fn patch_status(api: &Api<Runner>, runner: &Runner, status: &crate::api::RunnerStatus) -> Result<()> {
    let ops = json!([
        { "op": "test", "path": "/metadata/uid", "value": runner.uid() },
        { "op": "test", "path": "/metadata/generation", "value": runner.metadata.generation },
        { "op": "add", "path": "/status", "value": status },
    ]);
    json_patch(api, runner, ops, "patch status of", true).await
}

/// A Warning Event when the ChildrenOwned condition turns False.
async fn announce_refusal(ctx: &Context, runner: &Runner, new: &crate::api::RunnerStatus) {
    let find = |s: Option<&crate::api::RunnerStatus>| {
        s.and_then(|s| {
            s.conditions.iter().find(|c| c.type_ == condition::CHILDREN_OWNED).map(|c| c.status.clone())
        })
    };
    let now_refused = find(Some(new)).as_deref() == Some("False");
    if now_refused && find(runner.status.as_ref()).as_deref() != Some("False") {
        let msg = new
            .conditions
            .iter()
            .find(|c| c.type_ == condition::CHILDREN_OWNED)
            .map(|c| c.message.clone())
            .unwrap_or_default();
        publish(ctx, runner, EventType::Warning, condition::REASON_ADOPTION_REFUSED, "Reconcile", msg).await;
    }
}

async fn publish(ctx: &Context, runner: &Runner, type_: EventType, reason: &str, action: &str, note: String) {
    let ev = Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: None };
    match ctx.recorder.publish(&ev, &runner.object_ref(&())).await {
        Ok(()) => ctx.metrics.write("event"),
        Err(e) => {
            warn!(runner = %runner.name_any(), error = %crate::error::describe_kube(&e), "cannot record Event")
        }
    }
}
