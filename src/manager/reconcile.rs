//! One reconcile pass: decide for the Runner ([`super::runner_step`]), then
//! for each child kind, concurrently ([`super::child_cache`], which decides
//! with [`super::child_step`] and writes with [`super::child_write`]), compute the
//! status (pure [`super::status`]) and write it ([`super::runner_patch`]).
//! Every step is safe to repeat; a pass that finds nothing to change makes
//! no API request at all.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use tracing::{debug, info, warn};

use super::child_write::Outcome;
use super::context::{Context, runner_key};
use super::deletion_record_write;
use super::error::{Error, Result};
use super::retry;
use super::runner_patch::{add_finalizer, patch_status, remove_finalizer};
use super::runner_step::{self, RunnerStep};
use super::status::{self, Observed};
use super::status_write::{self, When};
use crate::api::{Phase, Runner, RunnerStatus, condition};
use crate::kinds::Facts;

/// A refused child is not watched when it lacks our label: look again this often.
const REFUSED_RECHECK: Duration = Duration::from_secs(60);

/// Status clocks kept before the expired ones are swept.
const CLOCKS_KEPT: usize = 256;

fn key(runner: &impl Resource) -> String {
    runner_key(&runner.namespace().unwrap_or_default(), &runner.name_any())
}

/// What a pass that succeeded asks for: `None` waits for a change or the
/// Runner's resync ([`super::resync`], so a change the watches missed
/// still converges); `Some(d)` comes back after `d`.
pub type Requeue = Option<Duration>;

/// One pass over `runner` as the cache holds it.
pub async fn reconcile(runner: Arc<Runner>, ctx: Arc<Context>) -> Result<Requeue> {
    let start = Instant::now();
    // Our last status patch, if the cache has not caught up with it.
    let (ns, name) = (runner.namespace().unwrap_or_default(), runner.name_any());
    let runner = ctx.stores.own_status.fresher(Some(runner.clone()), &ns, &name).unwrap_or(runner);
    let result = reconcile_inner(&runner, &ctx).await;
    ctx.metrics.observe(start.elapsed());
    result
}

/// When a failed pass is retried: soon after a conflict (re-read, never
/// overwrite a newer spec: `Some(delay)`), else with the work queue's
/// per-Runner exponential backoff (`None`).
pub fn error_policy(runner: &impl Resource, err: &Error, ctx: &Context) -> Option<Duration> {
    ctx.metrics.error(err.metric_label());
    if err.is_conflict() {
        debug!(runner = %runner.name_any(), "conflict; requeue to re-read");
        return Some(retry::CONFLICT);
    }
    warn!(runner = %runner.name_any(), namespace = ?runner.namespace(), error = %err, "reconcile failed; retrying with backoff");
    None
}

async fn reconcile_inner(runner: &Runner, ctx: &Context) -> Result<Requeue> {
    let ns = runner.namespace().unwrap_or_default();
    let api: Api<Runner> = Api::namespaced(ctx.client.clone(), &ns);
    match runner_step::decide(runner) {
        RunnerStep::Ignore => Ok(None),
        RunnerStep::Cleanup { orphan } => cleanup(runner, ctx, &api, orphan).await,
        RunnerStep::AddFinalizer => {
            // One trip for a create: the children are written in this pass,
            // from the object the patch returned; its echo brings no pass
            // (the Runner watch knows it as our own write).
            let mut ours = add_finalizer(&api, runner).await?;
            ctx.metrics.write("add_finalizer");
            crate::kinds::trim::runner(&mut ours);
            ctx.stores.own_status.wrote(ours.clone());
            converge(&ours, ctx, &api).await
        }
        RunnerStep::Converge => converge(runner, ctx, &api).await,
    }
}

/// Each child kind brought to the spec, then the status.
async fn converge(runner: &Runner, ctx: &Context, api: &Api<Runner>) -> Result<Requeue> {
    let mut seen = Observed::default();
    // Children of one Runner are independent objects: their writes go out
    // together, so a change that touches two costs one round trip, not two.
    let passes = ctx.stores.children.iter().map(|child| async move {
        let mut facts = Facts::default();
        let outcome = child.reconcile(&ctx.writes, runner, false, &mut facts).await;
        outcome.map(|o| (o, facts))
    });
    for result in futures::future::join_all(passes).await {
        let (outcome, facts) = result?;
        seen.facts.merge(facts);
        match outcome {
            Outcome::Refused(r) => seen.refused.push(r),
            Outcome::Rejected(message) => seen.rejected.push(message),
            Outcome::Reverted(r) => {
                let (type_, reason) = (EventType::Warning, condition::REASON_REVERTED);
                publish(ctx, runner, type_, reason, "Revert", r.note()).await;
            }
            Outcome::Ours | Outcome::Gone | Outcome::Pending | Outcome::Orphaned => {}
        }
    }
    // After the children: the Deployment's rollout says which Pods are current.
    seen.pod_problem = ctx.stores.pods.first(
        &runner.namespace().unwrap_or_default(),
        &runner.uid().unwrap_or_default(),
        crate::rollout::CurrentPods::of(seen.facts.rollout.as_ref()),
    );
    let new_status = status::compute(runner, &seen, &Time(k8s_openapi::jiff::Timestamp::now()));
    let due = write_status(ctx, api, runner, new_status).await?;
    if let Some(message) = seen.rejected.first() {
        // Shown in the status; retried with backoff, since an RBAC or
        // admission change elsewhere may let it through.
        return Err(Error::ChildRejected { runner: key(runner), message: message.clone() });
    }
    let recheck = (!seen.refused.is_empty()).then_some(REFUSED_RECHECK);
    Ok(due.into_iter().chain(recheck).min())
}

/// Writes the status when [`status_write::when`] says so; returns when a
/// deferred write is due.
async fn write_status(
    ctx: &Context,
    api: &Api<Runner>,
    runner: &Runner,
    new: RunnerStatus,
) -> Result<Option<Duration>> {
    let (key, now) = (key(runner), Instant::now());
    let when = {
        let mut clocks = ctx.status_clocks();
        let clock = clocks.entry(key.clone()).or_default();
        clock.saw(new.observed_generation, now);
        let when = status_write::when(runner.status.as_ref(), &new, clock, now);
        clock.decided(when, now);
        when
    };
    match when {
        When::Never => Ok(None),
        When::After(due) => Ok(Some(due)),
        When::Now => {
            announce_refusal(ctx, runner, &new).await;
            let reason = status_write::reason(runner.status.as_ref(), &new);
            let mut stored = patch_status(api, runner, &new).await?;
            ctx.metrics.status_write(reason.as_str());
            crate::kinds::trim::runner(&mut stored);
            ctx.stores.own_status.wrote(stored);
            let mut clocks = ctx.status_clocks();
            clocks.entry(key).or_default().written = Some(now);
            if clocks.len() > CLOCKS_KEPT {
                clocks.retain(|_, c| !c.expired(now));
            }
            Ok(None)
        }
    }
}

/// Deletion: delete our children; when all are gone, drop our finalizer
/// (and only ours) and record an Event naming what went. No polling: a
/// child that is still finalizing sends a delete event that brings the
/// next pass. With `orphan` the garbage collector detaches the children.
async fn cleanup(runner: &Runner, ctx: &Context, api: &Api<Runner>, orphan: bool) -> Result<Requeue> {
    let mut orphan = orphan;
    if !orphan {
        let (mut pending, mut orphaned) = (false, false);
        for child in ctx.stores.children.iter() {
            match child.reconcile(&ctx.writes, runner, true, &mut Facts::default()).await? {
                Outcome::Pending => pending = true,
                Outcome::Orphaned => orphaned = true,
                _ => {}
            }
        }
        if pending {
            show_terminating(ctx, runner, api).await;
            return Ok(None);
        }
        // The garbage collector lifted its `orphan` finalizer before this
        // pass: the children it detached say how the Runner went.
        orphan = orphaned;
    }
    // While the Runner and its spec are still there; bounded, never blocking.
    let record =
        deletion_record_write::write(&ctx.client, &ctx.metrics, &ctx.deletion_records, runner, orphan);
    if let Err(why) = record.await {
        publish(ctx, runner, EventType::Warning, deletion_record_write::REASON_NOT_RECORDED, "Cleanup", why)
            .await;
    }
    remove_finalizer(api, runner).await?;
    ctx.metrics.write("remove_finalizer");
    ctx.status_clocks().remove(&key(runner));
    let removed = ctx.writes.forget_deletes(&runner.uid().unwrap_or_default());
    let note = runner_step::deletion_note(runner, orphan, &removed);
    // After the finalizer: a retried removal must not record a second Event.
    publish(ctx, runner, EventType::Normal, "Deleted", "Cleanup", note).await;
    info!(runner = %runner.name_any(), namespace = ?runner.namespace(), orphan, "finalizer removed");
    Ok(None)
}

/// Best effort: a failed Terminating display must not block cleanup.
async fn show_terminating(ctx: &Context, runner: &Runner, api: &Api<Runner>) {
    if runner.status.as_ref().map(|s| s.phase) == Some(Phase::Terminating) {
        return;
    }
    let mut s = runner.status.clone().unwrap_or_default();
    s.phase = Phase::Terminating;
    s.message = Some("waiting for children to finish deleting".into());
    if let Ok(mut stored) = patch_status(api, runner, &s).await {
        crate::kinds::trim::runner(&mut stored);
        ctx.stores.own_status.wrote(stored);
        ctx.metrics.status_write("terminating");
    }
}

/// A Warning Event when the ChildrenOwned condition turns False.
async fn announce_refusal(ctx: &Context, runner: &Runner, new: &RunnerStatus) {
    let owned = |s: Option<&RunnerStatus>| {
        s.and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::CHILDREN_OWNED).cloned())
    };
    let Some(now) = owned(Some(new)).filter(|c| c.status == "False") else { return };
    if owned(runner.status.as_ref()).is_some_and(|c| c.status == "False" && c.message == now.message) {
        return;
    }
    publish(ctx, runner, EventType::Warning, condition::REASON_ADOPTION_REFUSED, "Reconcile", now.message)
        .await;
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
