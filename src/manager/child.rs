//! Writes to one child: create it when absent, bring our fields back when
//! they drifted, delete it when the Runner goes. Every write is safe to
//! repeat, and none touches an object the Runner does not control.
//!
//! ```text
//! store (trimmed) ─► absent? POST ─► exists after all? GET ─► ownership ─► drift::plan
//!                                                         ─► [upgrade managedFields / drop renamed entries] ─► apply
//! ```

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tracing::info;

use super::context::Context;
use super::{child_view, drift, managed_fields};
use crate::api::{FIELD_MANAGER, Runner};
use crate::children::{Ownership, Refused, ownership};
use crate::error::{Error, Result, is_rejection};

/// A child type the manager writes.
pub trait Child:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
{
}
impl<K> Child for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug
{
}

/// Where a child stands after [`ensure`].
#[derive(Debug)]
pub enum Outcome<K> {
    /// Ours and carrying what we want (as far as this pass knows).
    Ours(K),
    /// The name is taken by an object this Runner does not control.
    Refused(Refused),
    /// The apiserver refuses our child (invalid, forbidden): its message.
    Rejected(String),
}

fn kind_of<K: Child>() -> &'static str {
    match K::kind(&()).as_ref() {
        "Deployment" => "Deployment",
        "Service" => "Service",
        "Ingress" => "Ingress",
        _ => "object",
    }
}

/// Makes the child named after the Runner equal `want` on the fields we
/// set. Errors are transient (conflict, transport) and worth a retry; a
/// rejection by the apiserver is an [`Outcome`], for the status to show.
/// The store holds `V`, the part of `K` the manager reads (a
/// [`super::child_view`], or `K` itself); what the apiserver answers is
/// converted to it.
pub async fn ensure<K: Child, V: Child>(
    ctx: &Context,
    runner: &Runner,
    store: &Store<V>,
    want: K,
) -> Result<Outcome<V>> {
    let (ns, name, uid) =
        (runner.namespace().unwrap_or_default(), runner.name_any(), runner.uid().unwrap_or_default());
    let kind = kind_of::<K>();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    let encode = |source| Error::Encode { what: kind, source };
    let live: V = match store.get(&ObjectRef::new(&name).within(&ns)) {
        Some(cached) => cached.as_ref().clone(),
        // Not in the store (it holds labelled objects only): POST, the one
        // write that never merges into a same-name object someone else made.
        None => match api
            .create(&PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }, &want)
            .await
        {
            Ok(created) => {
                info!(kind, namespace = %ns, %name, "created");
                ctx.metrics.write(&format!("create_{}", kind.to_lowercase()));
                return Ok(Outcome::Ours(child_view::of(&created).map_err(encode)?));
            }
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                let found = api.get(&name).await.map_err(|e| Error::api("get", kind, &ns, &name, e))?;
                child_view::of(&found).map_err(encode)?
            }
            Err(e) if is_rejection(&e) => return Ok(Outcome::Rejected(crate::error::describe_kube(&e))),
            Err(e) => return Err(Error::api("create", kind, &ns, &name, e)),
        },
    };
    match ownership(live.meta(), &uid) {
        Ownership::Ours => {}
        other => return Ok(Outcome::Refused(Refused { kind, namespace: ns, name, ownership: other })),
    }
    if live.meta().deletion_timestamp.is_some() {
        return Ok(Outcome::Ours(live)); // going away; its delete event brings the next pass
    }
    let mut want_v = serde_json::to_value(&want).map_err(encode)?;
    // The type is the URL's, not a field to compare: list items and views
    // do not carry it. The apply body does.
    let type_meta = ["apiVersion", "kind"].map(|k| want_v.as_object_mut().and_then(|o| o.remove_entry(k)));
    let plan = drift::plan(&want_v, &serde_json::to_value(&live).map_err(encode)?);
    if !plan.apply {
        return Ok(Outcome::Ours(live));
    }
    if managed_fields::needs_upgrade(live.meta()) || !plan.renamed.is_empty() {
        match prepare_retrying(ctx, &api, &name, &want_v).await {
            Err(e) if is_rejection(&e) => return Ok(Outcome::Rejected(crate::error::describe_kube(&e))),
            other => other.map_err(|e| Error::api("prepare", kind, &ns, &name, e))?,
        }
    }
    // The live UID in the body is a precondition: if the object was replaced
    // by someone else's since we read it, the apply fails with a conflict.
    let mut body = want_v;
    body["metadata"]["uid"] = json!(live.uid());
    for (k, v) in type_meta.into_iter().flatten() {
        body[k] = v;
    }
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    match api.patch(&name, &pp, &Patch::Apply(&body)).await {
        Ok(applied) => {
            info!(kind, namespace = %ns, %name, "applied our fields");
            ctx.metrics.write(&format!("apply_{}", kind.to_lowercase()));
            Ok(Outcome::Ours(child_view::of(&applied).map_err(encode)?))
        }
        Err(e) if is_rejection(&e) => Ok(Outcome::Rejected(crate::error::describe_kube(&e))),
        Err(e) => Err(Error::api("apply", kind, &ns, &name, e)),
    }
}

/// Attempts at [`prepare`] within one pass. Its guard is the child's
/// resourceVersion, and while a rollout runs the Deployment controller
/// writes the Deployment's status every few hundred milliseconds: a pass
/// that gave up at the first conflict waited the conflict requeue and
/// often lost again (a change's p99 reached 16 s at 25 changes/s). A
/// fresh read and patch at once takes milliseconds and nearly always wins.
const PREPARE_ATTEMPTS: usize = 5;

async fn prepare_retrying<K: Child>(
    ctx: &Context,
    api: &Api<K>,
    name: &str,
    want: &Value,
) -> kube::Result<()> {
    let mut attempt = 1;
    loop {
        match prepare(ctx, api, name, want).await {
            Err(e) if attempt < PREPARE_ATTEMPTS && crate::error::is_failed_test(&e) => attempt += 1,
            done => return done,
        }
    }
}

/// One JSON patch, guarded by the resourceVersion just read, that makes
/// our next apply able to converge: folds our Update entry into our Apply
/// entry ([`managed_fields`]), and puts our entry in the place of one that
/// someone else gave our entry's name under another key
/// ([`drift::Renamed`]; ours, our apply replaces by itself). The entry it
/// writes is recorded under our name as Update, folded in by the next one.
async fn prepare<K: Child>(ctx: &Context, api: &Api<K>, name: &str, want: &Value) -> kube::Result<()> {
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
    for r in drift::plan(want, &full_v).renamed {
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

/// Deletes the same-name child if it is ours, once, with a UID
/// precondition and background propagation (the garbage collector removes
/// its ReplicaSets and Pods). Returns true while the child still exists:
/// it has finalizers of its own, and its delete event brings the next pass.
pub async fn delete<K: Child>(ctx: &Context, store: &Store<K>, runner: &Runner) -> Result<bool> {
    let (ns, name, uid) =
        (runner.namespace().unwrap_or_default(), runner.name_any(), runner.uid().unwrap_or_default());
    let Some(live) = store.get(&ObjectRef::new(&name).within(&ns)) else { return Ok(false) };
    if ownership(live.meta(), &uid) != Ownership::Ours {
        return Ok(false);
    }
    let child = live.uid().unwrap_or_default();
    if let Some(gone) = ctx.deleted().get(&uid).and_then(|m| m.get(&child)) {
        return Ok(!gone);
    }
    if live.meta().deletion_timestamp.is_some() {
        return Ok(true); // someone else deleted it; wait for the event
    }
    let kind = kind_of::<K>();
    let dp = DeleteParams {
        preconditions: Some(Preconditions { uid: Some(child.clone()), resource_version: None }),
        propagation_policy: Some(PropagationPolicy::Background),
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
        Err(e) => return Err(Error::api("delete", kind, &ns, &name, e)),
    };
    ctx.metrics.write(&format!("delete_{}", kind.to_lowercase()));
    ctx.deleted().entry(uid).or_default().insert(child, gone);
    Ok(!gone)
}
