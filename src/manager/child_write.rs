//! Writes to one child of any kind: performs the [`Step`] that
//! [`child_step::decide`] chose. Every write is safe to repeat, and none
//! touches an object the Runner does not control.
//!
//! ```text
//! cache ─► decide ─► Create: create-only apply ─► 409? GET, decide again
//!                 ─► TakeOverThenApply: guarded JSON patch of managedFields ─► apply
//!                 ─► Apply: server-side apply, the live UID as precondition
//!                 ─► Delete: UID precondition, background propagation, once
//! ```

use k8s_openapi::Resource as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::info;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::Client;

use super::child_step::{self, Live, Step};
use super::metrics::Metrics;
use super::own_writes::Recent;
use super::revert_attribution::{self as revert, Revert};
use crate::api::{FIELD_MANAGER, Runner};
use crate::error::{Error, Result, is_rejection};
use crate::kinds::drift::{self, Rules};
use crate::kinds::packed::Packed;
use crate::kinds::{ChildKind, Facts, managed_fields, trim, view};
use crate::ownership::Refused;

/// What a pass reads of kind `K`: the watch's cache, the answers of our
/// writes it has not delivered yet ([`Recent`]), and the universe of
/// fields we may set ([`crate::kinds::removal`]).
pub struct Cache<K: ChildKind> {
    pub store: Store<Packed<K::View>>,
    pub recent: Arc<Recent<Packed<K::View>>>,
    universe: Value,
}

impl<K: ChildKind> Cache<K> {
    pub fn new(store: Store<Packed<K::View>>, recent: Arc<Recent<Packed<K::View>>>) -> Self {
        let mut r = Runner::new("universe", crate::api::RunnerSpec::every_field());
        r.metadata.uid = Some("universe".into());
        let mut universe = K::desired(&r).and_then(|o| serde_json::to_value(o).ok()).unwrap_or_default();
        untyped(&mut universe);
        Cache { store, recent, universe }
    }

    /// The child as a pass should judge it: the newer of the cache's copy
    /// and our last write's answer.
    fn live(&self, namespace: &str, name: &str) -> Result<Option<K::View>> {
        let cached = self.store.get(&ObjectRef::new(name).within(namespace));
        let encode = |source| Error::Encode { what: K::Object::KIND, source };
        self.recent.fresher(cached, namespace, name).map(|c| c.unpack().map_err(encode)).transpose()
    }
}

/// What the write path needs of the manager: the client, the metrics, and
/// the memory of the deletes it sent.
pub struct Writes {
    pub client: Client,
    pub metrics: Metrics,
    /// Children this manager has sent a DELETE for, by Runner UID then child
    /// UID. The caches learn of a deletion a moment later; this keeps a pass
    /// in that moment from deleting twice, and tells the deletion Event
    /// which kinds went. A Runner's entry goes with its finalizer (a child
    /// removed from a live Runner leaves one small entry until then).
    deleted: Mutex<HashMap<String, HashMap<String, Deleted>>>,
}

/// What the apiserver answered to one DELETE we sent.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Deleted {
    kind: &'static str,
    /// True once gone; false while it waits on finalizers of its own.
    gone: bool,
}

impl Writes {
    pub fn new(client: Client, metrics: Metrics) -> Self {
        Writes { client, metrics, deleted: Mutex::default() }
    }

    fn deleted(&self) -> MutexGuard<'_, HashMap<String, HashMap<String, Deleted>>> {
        self.deleted.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What our DELETE of child `child_uid` of Runner `runner_uid` was
    /// answered (true: gone), if we sent one.
    fn delete_answer(&self, runner_uid: &str, child_uid: &str) -> Option<bool> {
        self.deleted().get(runner_uid)?.get(child_uid).map(|d| d.gone)
    }

    fn record_delete(&self, runner_uid: &str, child_uid: String, kind: &'static str, gone: bool) {
        self.deleted().entry(runner_uid.to_string()).or_default().insert(child_uid, Deleted { kind, gone });
    }

    /// Forgets the Runner's deletes; returns the kinds we deleted, in
    /// [`crate::kinds::visit`] order.
    pub fn forget_deletes(&self, runner_uid: &str) -> Vec<&'static str> {
        let sent = self.deleted().remove(runner_uid).unwrap_or_default();
        crate::kinds::all()
            .iter()
            .map(|k| k.kind())
            .filter(|kind| sent.values().any(|d| d.kind == *kind))
            .collect()
    }
}

/// Where a child stands after a pass.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Ours and carrying what we want (as far as this pass knows); its
    /// facts are in the pass's [`Facts`].
    Ours,
    /// Not wanted and not there (or not ours to remove).
    Gone,
    /// Not wanted, and detached from the Runner by the garbage collector:
    /// the Runner's deletion orphans its children
    /// ([`crate::ownership::orphaned_from`]).
    Orphaned,
    /// Not wanted, ours, and still finalizing after our DELETE.
    Pending,
    /// The name is taken by an object this Runner does not control.
    Refused(Refused),
    /// The apiserver refuses our child (invalid, forbidden): its message.
    Rejected(String),
    /// Ours, and a field of ours someone else changed was put back.
    Reverted(Revert),
}

/// The body drift compares: no apiVersion or kind (the URL's, not fields;
/// list items and views do not carry them). The apply body adds them back.
fn untyped(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        o.remove("apiVersion");
        o.remove("kind");
    }
}

/// Brings the child of kind `K` named after the Runner to `want` (None:
/// it should not exist). Errors are transient (conflict, transport) and
/// worth a retry; a rejection by the apiserver is an [`Outcome`], for the
/// status to show.
pub async fn reconcile<K: ChildKind>(
    ctx: &Writes,
    cache: &Cache<K>,
    runner: &Runner,
    want: Option<K::Object>,
    facts: &mut Facts,
) -> Result<Outcome> {
    let (ns, name, uid) =
        (runner.namespace().unwrap_or_default(), runner.name_any(), runner.uid().unwrap_or_default());
    let kind = K::Object::KIND;
    let encode = |source| Error::Encode { what: kind, source };
    let api: Api<K::Object> = Api::namespaced(ctx.client.clone(), &ns);
    let want_v = want.as_ref().map(serde_json::to_value).transpose().map_err(encode)?.map(|mut v| {
        untyped(&mut v);
        v
    });
    let mut live: Option<K::View> = cache.live(&ns, &name)?;
    // A POST that finds the name taken reads the object (a live object is
    // never decided Create); a DELETE whose preconditions fail reads it too,
    // a few times at most: a child whose status keeps changing is retried
    // by the next pass.
    let mut conflicts = 0;
    // The spec not yet in the status: drift found is the change, not a revert.
    let spec_new = !revert::is_revert(runner);
    loop {
        let live_v = live.as_ref().map(serde_json::to_value).transpose().map_err(encode)?;
        let sent = live.as_ref().and_then(|l| ctx.delete_answer(&uid, l.meta().uid.as_deref()?));
        let found = live.as_ref().zip(live_v.as_ref()).map(|(l, body)| Live { meta: l.meta(), body });
        let step =
            child_step::decide(K::MERGE, &cache.universe, want_v.as_ref(), found, &uid, sent, spec_new);
        let ours = |view: &K::View, facts: &mut Facts| {
            K::facts(view, runner, facts);
            Outcome::Ours
        };
        let wrote = |obj: &K::Object, facts: &mut Facts| -> Result<Outcome> {
            let mut view: K::View = view::of(obj).map_err(encode)?;
            trim::child_meta(kube::Resource::meta_mut(&mut view));
            K::trim(&mut view);
            let outcome = ours(&view, facts);
            cache.recent.wrote(Packed::pack(view).map_err(encode)?);
            Ok(outcome)
        };
        match step {
            Step::Create => {
                let want_v = want_v.clone().expect("Create is decided only for a wanted child");
                match create::<K>(ctx, &api, &name, want_v).await {
                    Ok(created) => return wrote(&created, facts),
                    // The name was taken since the cache looked: read it
                    // and decide again (someone else's is refused).
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        let found =
                            api.get(&name).await.map_err(|e| Error::api("get", kind, &ns, &name, e))?;
                        live = Some(view::of(&found).map_err(encode)?);
                    }
                    Err(e) if is_rejection(&e) => {
                        return Ok(Outcome::Rejected(crate::error::describe_kube(&e)));
                    }
                    Err(e) => return Err(Error::api("create", kind, &ns, &name, e)),
                }
            }
            Step::Refuse(ownership) => {
                return Ok(Outcome::Refused(Refused { kind, namespace: ns, name, ownership }));
            }
            // Going away; its delete event brings the next pass.
            Step::Wait if want.is_some() => {
                return Ok(ours(live.as_ref().expect("Wait has a live child"), facts));
            }
            Step::Wait => return Ok(Outcome::Pending),
            Step::Nothing if want.is_some() => {
                return Ok(ours(live.as_ref().expect("a wanted child left alone is live"), facts));
            }
            Step::Nothing => {
                let orphaned = live.as_ref().is_some_and(|l| crate::ownership::orphaned_from(l.meta(), &uid));
                return Ok(if orphaned { Outcome::Orphaned } else { Outcome::Gone });
            }
            Step::TakeOverThenApply | Step::Apply => {
                let (live, want_v) =
                    (live.as_ref().expect("Apply has a live child"), want_v.expect("and a want"));
                let reverted = match live_v.as_ref().filter(|_| !spec_new) {
                    Some(body) => match drift::plan(K::MERGE, &want_v, body).drifted {
                        Some(fields) => Some(revert::attribute(&api, kind, &name, &fields).await),
                        None => None,
                    },
                    None => None,
                };
                let mut take_over = step == Step::TakeOverThenApply;
                // Applied directly though an entry carries our entry's name
                // under another key (a new spec's port change): refused, it
                // was someone else's entry, taken over before a second apply.
                let may_take_over = !take_over
                    && live_v.as_ref().is_some_and(|b| !drift::plan(K::MERGE, &want_v, b).renamed.is_empty());
                loop {
                    if take_over {
                        match prepare_retrying(ctx, &api, &name, K::MERGE, &want_v).await {
                            Err(e) if is_rejection(&e) => {
                                return Ok(Outcome::Rejected(crate::error::describe_kube(&e)));
                            }
                            other => other.map_err(|e| Error::api("prepare", kind, &ns, &name, e))?,
                        }
                    }
                    let uid = live.meta().uid.as_deref();
                    return match apply::<K>(ctx, &api, &name, uid, want_v.clone()).await {
                        Ok(applied) => {
                            let ours = wrote(&applied, facts)?;
                            Ok(reverted.map_or(ours, Outcome::Reverted))
                        }
                        Err(e) if is_rejection(&e) && may_take_over && !take_over => {
                            take_over = true;
                            continue;
                        }
                        Err(e) if is_rejection(&e) => Ok(Outcome::Rejected(crate::error::describe_kube(&e))),
                        Err(e) => Err(Error::api("apply", kind, &ns, &name, e)),
                    };
                }
            }
            Step::Delete => {
                let meta = live.as_ref().map(|l| l.meta().clone()).unwrap_or_default();
                match delete::<K>(ctx, &api, (&ns, &name), &uid, meta).await {
                    // Changed since the cache saw it (the garbage collector
                    // may have detached it): read it and decide again.
                    Err(Error::Api { source, .. })
                        if is_conflict(&source) && conflicts < DELETE_CONFLICTS =>
                    {
                        conflicts += 1;
                        let found =
                            api.get_opt(&name).await.map_err(|e| Error::api("get", kind, &ns, &name, e))?;
                        live = found.as_ref().map(view::of).transpose().map_err(encode)?;
                    }
                    done => return done,
                }
            }
        }
    }
}

/// A resourceVersion no object holds: etcd's revisions start at 1 and
/// the first write makes 2.
const NO_OBJECT_HOLDS: &str = "1";

/// Creates the child by server-side apply ([`create_only`]), counted.
async fn create<K: ChildKind>(
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
/// removes it (a POST records them under an Update entry, and each child
/// then needed a take-over, a GET and a patch, before its first apply that
/// removes anything). The resourceVersion in the body makes it create-only:
/// the apiserver ignores it when the apply creates, and compares it when
/// the name is taken, answering 409 without writing. An apply without it
/// would merge into a same-name object someone made since the cache
/// looked, and take it over.
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
async fn apply<K: ChildKind>(
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

/// DELETEs of one child within a pass that may find it changed since read.
const DELETE_CONFLICTS: usize = 3;

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Deletes our child, once, with background propagation (the garbage
/// collector removes what it owns in turn). Its UID and resourceVersion as
/// cached are preconditions: a child detached by the garbage collector
/// since (an orphaning deletion) is no longer ours to delete. A 409: it
/// changed since the cache saw it.
async fn delete<K: ChildKind>(
    ctx: &Writes,
    api: &Api<K::Object>,
    (ns, name): (&str, &str),
    runner_uid: &str,
    cached: ObjectMeta,
) -> Result<Outcome> {
    let kind = K::Object::KIND;
    let child_uid = cached.uid.unwrap_or_default();
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(child_uid.clone()),
            resource_version: cached.resource_version,
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
        Err(e) if crate::error::is_not_found(&e) => return Ok(Outcome::Gone),
        Err(e) => return Err(Error::api("delete", kind, ns, name, e)),
    };
    ctx.metrics.write(&format!("delete_{}", kind.to_lowercase()));
    ctx.record_delete(runner_uid, child_uid, kind, gone);
    Ok(if gone { Outcome::Gone } else { Outcome::Pending })
}

/// Attempts at [`prepare`] within one pass. Its guard is the child's
/// resourceVersion, and while a rollout runs the Deployment controller
/// writes the Deployment's status every few hundred milliseconds: a pass
/// that gave up at the first conflict waited the conflict requeue and
/// often lost again (a change's p99 reached 16 s at 25 changes/s). A
/// fresh read and patch at once takes milliseconds and nearly always wins.
const PREPARE_ATTEMPTS: usize = 5;

async fn prepare_retrying<K: crate::kinds::Object>(
    ctx: &Writes,
    api: &Api<K>,
    name: &str,
    rules: &Rules,
    want: &Value,
) -> kube::Result<()> {
    let mut attempt = 1;
    loop {
        match prepare(ctx, api, name, rules, want).await {
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
async fn prepare<K: crate::kinds::Object>(
    ctx: &Writes,
    api: &Api<K>,
    name: &str,
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
