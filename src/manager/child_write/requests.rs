//! The requests that write one child: a create-only apply, an apply, a
//! delete and the take-over patch. Each is safe to repeat and none touches
//! an object the Runner does not control: the create fails on a taken
//! name, the apply and the delete carry the live UID as a precondition,
//! and the take-over is guarded by the resourceVersion it read.

use k8s_openapi::Resource as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::info;

use super::deletes::Writes;
use crate::api::FIELD_MANAGER;
use crate::kinds::drift::{self, Rules};
use crate::kinds::{ChildKind, managed_fields};

/// A resourceVersion no object holds: etcd's revisions start at 1 and
/// the first write makes 2.
const NO_OBJECT_HOLDS: &str = "1";

/// Creates the child by server-side apply ([`create_only`]), counted.
pub(super) async fn create<K: ChildKind>(
    ctx: &Writes,
    api: &Api<K::Object>,
    name: &str,
    body: Value,
) -> kube::Result<K::Object> {
    let created = create_only(api, name, body).await?;
    info!(kind = K::Object::KIND, namespace = ?created.namespace(), name, "created");
    ctx.metrics.write(&format!("create_{}", K::Object::KIND.to_lowercase()));
    Ok(created)
}

/// Creates `name` from `body` by server-side apply, so our fields are ours
/// under our Apply entry from the start and a later apply that drops one
/// removes it (a POST records them under an Update entry, which only a
/// take-over can fold into ours). The resourceVersion in the body makes it
/// create-only: the apiserver ignores it when the apply creates, and
/// compares it when the name is taken, answering 409 without writing. An
/// apply without it would merge into a same-name object someone made since
/// the cache looked, and take it over.
pub async fn create_only<K>(api: &Api<K>, name: &str, mut body: Value) -> kube::Result<K>
where
    K: kube::Resource<DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    body["metadata"]["resourceVersion"] = json!(NO_OBJECT_HOLDS);
    body["apiVersion"] = json!(<K as k8s_openapi::Resource>::API_VERSION);
    body["kind"] = json!(<K as k8s_openapi::Resource>::KIND);
    api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await
}

/// Server-side apply of our fields. The live UID in the body is a
/// precondition: if the object was replaced by someone else's since we
/// read it, the apply fails with a conflict.
pub(super) async fn apply<K: ChildKind>(
    ctx: &Writes,
    api: &Api<K::Object>,
    name: &str,
    live_uid: Option<&str>,
    mut body: Value,
) -> kube::Result<K::Object> {
    body["metadata"]["uid"] = json!(live_uid);
    body["apiVersion"] = json!(K::Object::API_VERSION);
    body["kind"] = json!(K::Object::KIND);
    let applied = api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await?;
    info!(kind = K::Object::KIND, namespace = ?applied.namespace(), name, "applied our fields");
    ctx.metrics.write(&format!("apply_{}", K::Object::KIND.to_lowercase()));
    Ok(applied)
}

/// What the apiserver answered to our DELETE.
pub(super) enum Deleted {
    /// Removed.
    Gone,
    /// Still there, waiting on finalizers of its own.
    Finalizing,
    /// Already gone before we asked.
    NotFound,
}

/// Deletes our child, once, with background propagation (the garbage
/// collector removes what it owns in turn). Its UID and resourceVersion as
/// cached are preconditions: a child detached by the garbage collector
/// since (an orphaning deletion) is no longer ours to delete, and the
/// apiserver answers 409.
pub(super) async fn delete<K: ChildKind>(
    ctx: &Writes,
    api: &Api<K::Object>,
    name: &str,
    cached: &ObjectMeta,
) -> kube::Result<Deleted> {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: cached.uid.clone(),
            resource_version: cached.resource_version.clone(),
        }),
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    let gone = match api.delete(name, &dp).await {
        // The apiserver answers with the object when it had finalizers to
        // wait on (it is still there, with a deletionTimestamp), else with a
        // Status or the object as it was when removed.
        Ok(answer) => {
            answer.left().is_none_or(|obj| obj.meta().finalizers.as_ref().is_none_or(Vec::is_empty))
        }
        Err(e) if crate::error::is_not_found(&e) => return Ok(Deleted::NotFound),
        Err(e) => return Err(e),
    };
    ctx.metrics.write(&format!("delete_{}", K::Object::KIND.to_lowercase()));
    Ok(if gone { Deleted::Gone } else { Deleted::Finalizing })
}

/// Attempts at [`take_over`] within one pass. Its guard is the child's
/// resourceVersion, and while a rollout runs the Deployment controller
/// writes the Deployment's status every few hundred milliseconds: a pass
/// that gave up at the first conflict waited the conflict requeue and
/// often lost again (a change's p99 reached 16 s at 25 changes/s). A
/// fresh read and patch at once takes milliseconds and nearly always wins.
const TAKE_OVER_ATTEMPTS: usize = 5;

/// One JSON patch, guarded by the resourceVersion just read, that makes
/// our next apply able to converge: folds our Update entry into our Apply
/// entry ([`managed_fields`]), and puts our entry in the place of one that
/// someone else gave our entry's name under another key
/// ([`drift::Renamed`]; ours, our apply replaces by itself). The entry it
/// writes is recorded under our name as Update, folded in by the next
/// take-over that needs it. Read and patched again while the guard fails,
/// [`TAKE_OVER_ATTEMPTS`] times at most.
pub(super) async fn take_over<K: crate::kinds::Object>(
    ctx: &Writes,
    api: &Api<K>,
    name: &str,
    rules: &Rules,
    want: &Value,
) -> kube::Result<()> {
    let mut attempt = 1;
    loop {
        match take_over_once(ctx, (api, name), rules, want).await {
            Err(e) if attempt < TAKE_OVER_ATTEMPTS && crate::error::is_failed_test(&e) => attempt += 1,
            done => return done,
        }
    }
}

/// One read and guarded patch of [`take_over`].
async fn take_over_once<K: crate::kinds::Object>(
    ctx: &Writes,
    (api, name): (&Api<K>, &str),
    rules: &Rules,
    want: &Value,
) -> kube::Result<()> {
    let full = api.get(name).await?;
    let full_v = serde_json::to_value(&full).map_err(kube::Error::SerdeError)?;
    let entries = full.meta().managed_fields.clone().unwrap_or_default();
    let upgraded = managed_fields::upgraded(&entries);
    let ours = managed_fields::applied_fields(upgraded.as_deref().unwrap_or(&entries));
    let mut ops =
        vec![json!({ "op": "test", "path": "/metadata/resourceVersion", "value": full.resource_version() })];
    if let Some(entries) = &upgraded {
        ops.push(json!({ "op": "replace", "path": "/metadata/managedFields", "value": entries }));
    }
    for r in drift::plan(rules, want, &full_v).renamed {
        if !managed_fields::contains(&ours, &r.field_path) {
            ops.push(json!({ "op": "replace", "path": r.pointer, "value": r.ours }));
        }
    }
    if ops.len() == 1 {
        return Ok(());
    }
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(ops)).map_err(kube::Error::SerdeError)?;
    let pp = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    api.patch(name, &pp, &Patch::<()>::Json(patch)).await?;
    info!(kind = %K::kind(&()), name, "took over our fields before applying");
    ctx.metrics.write("prepare_child");
    Ok(())
}
