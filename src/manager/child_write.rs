//! Writes to one child of any kind: performs the [`Step`] that
//! [`child_step::decide`] chose. Every write is safe to repeat, and none
//! touches an object the Runner does not control.
//!
//! ```text
//! cache ─► decide ─► Create: create-only apply ─┐ 409: read it, decide again
//!                 ─► Delete: UID precondition ──┘ (a few times at most)
//!                 ─► Apply: server-side apply, the live UID as precondition,
//!                           after or on refusal of a take-over where one is due
//!                 ─► Refuse, Wait, Nothing: no write
//! ```
//!
//! The requests themselves are in `requests`, the memory of the DELETEs
//! sent in `deletes`, what a pass reads of the kind in `cache`.

mod cache;
mod deletes;
mod requests;

use k8s_openapi::Resource as _;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use serde_json::Value;

pub use cache::Cache;
pub use deletes::Writes;
pub use requests::create_only;

use super::child_step::{self, Live, Step, TakeOver};
use super::error::{Error, Result};
use super::revert_attribution::{self as revert, Revert};
use crate::api::Runner;
use crate::error::{FromApi, is_conflict, is_rejection};
use crate::kinds::drift;
use crate::kinds::packed::Packed;
use crate::kinds::{ChildKind, Facts, trim, view};
use crate::ownership::Refused;
use requests::Deleted;

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

/// Reads of a child found changed since the cache looked (a name taken by
/// the time we create, a delete whose preconditions fail) within one pass;
/// a child whose status keeps changing is retried by the next pass.
const REREADS: usize = 3;

/// The body drift compares: no apiVersion or kind (the URL's, not fields;
/// list items and views do not carry them). The apply body adds them back.
pub(super) fn untyped(v: &mut Value) {
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
    // The spec not yet in the status: drift found is the change, not a revert.
    let spec_new = !revert::is_revert(runner);
    let mut live: Option<K::View> = cache.live(&ns, &name)?;
    let mut rereads = 0;
    loop {
        let live_v = live.as_ref().map(serde_json::to_value).transpose().map_err(encode)?;
        let sent = live.as_ref().and_then(|l| ctx.delete_answer(&uid, l.meta().uid.as_deref()?));
        let found = live.as_ref().zip(live_v.as_ref()).map(|(l, body)| Live { meta: l.meta(), body });
        let step =
            child_step::decide(K::MERGE, &cache.universe, want_v.as_ref(), found, &uid, sent, spec_new);
        let (op, conflict) = match (step, live.as_ref(), want_v.clone()) {
            (Step::Create, _, Some(body)) => match requests::create::<K>(ctx, &api, &name, body).await {
                Ok(created) => return wrote(cache, runner, &created, facts),
                Err(e) if is_conflict(&e) => ("create", e),
                Err(e) if is_rejection(&e) => return Ok(Outcome::Rejected(crate::error::describe_kube(&e))),
                Err(e) => return Err(Error::api("create", kind, &ns, &name, e)),
            },
            (Step::Refuse(ownership), ..) => {
                return Ok(Outcome::Refused(Refused { kind, namespace: ns, name, ownership }));
            }
            // Ours and going away (its delete event brings the next pass),
            // or as wanted.
            (Step::Wait | Step::Nothing, Some(l), Some(_)) => {
                K::facts(l, runner, facts);
                return Ok(Outcome::Ours);
            }
            (Step::Wait, ..) => return Ok(Outcome::Pending),
            (Step::Nothing, l, _) => {
                let orphaned = l.is_some_and(|l| crate::ownership::orphaned_from(l.meta(), &uid));
                return Ok(if orphaned { Outcome::Orphaned } else { Outcome::Gone });
            }
            (Step::Apply(take_over), Some(l), Some(body)) => {
                let target = Target { api: &api, name: &name, live: l, live_v: live_v.as_ref(), spec_new };
                return apply_step(ctx, cache, runner, target, (body, take_over), facts).await;
            }
            (Step::Delete, Some(l), _) => match requests::delete::<K>(ctx, &api, &name, l.meta()).await {
                Ok(Deleted::NotFound) => return Ok(Outcome::Gone),
                Ok(answer) => {
                    let gone = matches!(answer, Deleted::Gone);
                    ctx.record_delete(&uid, l.meta().uid.clone().unwrap_or_default(), kind, gone);
                    return Ok(if gone { Outcome::Gone } else { Outcome::Pending });
                }
                // Changed since the cache saw it (the garbage collector may
                // have detached it): read it and decide again.
                Err(e) if is_conflict(&e) => ("delete", e),
                Err(e) => return Err(Error::api("delete", kind, &ns, &name, e)),
            },
            (step, ..) => unreachable!("{step:?} is decided only with a live child and a want as it needs"),
        };
        if rereads == REREADS {
            return Err(Error::api(op, kind, &ns, &name, conflict));
        }
        rereads += 1;
        let found = api.get_opt(&name).await.map_err(|e| Error::api("get", kind, &ns, &name, e))?;
        live = found.as_ref().map(view::of).transpose().map_err(encode)?;
    }
}

/// The child an apply writes, as the pass read it.
struct Target<'a, K: ChildKind> {
    api: &'a Api<K::Object>,
    name: &'a str,
    live: &'a K::View,
    live_v: Option<&'a Value>,
    /// The Runner's spec is not yet in its status ([`revert::is_revert`]).
    spec_new: bool,
}

/// Applies `want` to our live child, taking our fields over first or on
/// refusal as `take_over` says; a drift found while the spec stood still
/// is someone else's change, put back and attributed (one GET).
async fn apply_step<K: ChildKind>(
    ctx: &Writes,
    cache: &Cache<K>,
    runner: &Runner,
    target: Target<'_, K>,
    (want, take_over): (Value, TakeOver),
    facts: &mut Facts,
) -> Result<Outcome> {
    let Target { api, name, live, live_v, spec_new } = target;
    let (kind, ns) = (K::Object::KIND, runner.namespace().unwrap_or_default());
    let reverted = match live_v.filter(|_| !spec_new).and_then(|b| drift::plan(K::MERGE, &want, b).drifted) {
        Some(fields) => Some(revert::attribute(api, kind, name, &fields).await),
        None => None,
    };
    let rejected = |e: &kube::Error| Outcome::Rejected(crate::error::describe_kube(e));
    let take_over_now = || requests::take_over(ctx, api, name, K::MERGE, &want);
    if take_over == TakeOver::First {
        match take_over_now().await {
            Err(e) if is_rejection(&e) => return Ok(rejected(&e)),
            other => other.map_err(|e| Error::api("prepare", kind, &ns, name, e))?,
        }
    }
    let uid = live.meta().uid.as_deref();
    let mut applied = requests::apply::<K>(ctx, api, name, uid, want.clone()).await;
    // Refused though the entry under our port's name was most likely ours:
    // it was someone else's, taken over before a second apply.
    if take_over == TakeOver::IfRefused && applied.as_ref().is_err_and(is_rejection) {
        match take_over_now().await {
            Err(e) if is_rejection(&e) => return Ok(rejected(&e)),
            other => other.map_err(|e| Error::api("prepare", kind, &ns, name, e))?,
        }
        applied = requests::apply::<K>(ctx, api, name, uid, want.clone()).await;
    }
    match applied {
        Ok(obj) => wrote(cache, runner, &obj, facts).map(|ours| reverted.map_or(ours, Outcome::Reverted)),
        Err(e) if is_rejection(&e) => Ok(rejected(&e)),
        Err(e) => Err(Error::api("apply", kind, &ns, name, e)),
    }
}

/// What the apiserver answered to our write: the child's facts, and the
/// answer kept until the watch delivers it ([`super::own_writes`]).
fn wrote<K: ChildKind>(
    cache: &Cache<K>,
    runner: &Runner,
    obj: &K::Object,
    facts: &mut Facts,
) -> Result<Outcome> {
    let encode = |source| Error::Encode { what: K::Object::KIND, source };
    let mut view: K::View = view::of(obj).map_err(encode)?;
    trim::child_meta(kube::Resource::meta_mut(&mut view));
    K::trim(&mut view);
    K::facts(&view, runner, facts);
    cache.recent.wrote(Packed::pack(view).map_err(encode)?);
    Ok(Outcome::Ours)
}
