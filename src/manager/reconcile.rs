//! One reconcile pass: fetch (from the reflector stores), compute (pure
//! `desired` and `status`), write ([`super::child`], [`super::runner_patch`]).
//! Every step is safe to repeat; a pass that finds nothing to change makes
//! no API request at all.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use tracing::{debug, info, warn};

use super::child::{self, Outcome};
use super::context::Context;
use super::runner_patch::{add_finalizer, patch_status, remove_finalizer};
use super::status::{self, Observed};
use super::{desired, retry};
use crate::api::{FINALIZER, Phase, Runner, RunnerStatus, condition};
use crate::children::Refused;
use crate::error::{Error, Result};

/// A refused child is not watched when it lacks our label: look again this often.
const REFUSED_RECHECK: Duration = Duration::from_secs(60);

fn key(runner: &Runner) -> String {
    format!("{}/{}", runner.namespace().unwrap_or_default(), runner.name_any())
}

/// Entry point for the Controller. A pass that succeeds comes back after a
/// jittered resync period, so a change the watches missed still converges.
pub async fn reconcile(runner: Arc<Runner>, ctx: Arc<Context>) -> Result<Action> {
    let start = Instant::now();
    let result = reconcile_inner(&runner, &ctx).await;
    ctx.metrics.observe(start.elapsed());
    if result.is_ok() {
        ctx.failures().remove(&key(&runner));
    }
    result
}

/// Retries a failed pass: soon after a conflict (re-read, never overwrite a
/// newer spec), else with a per-Runner exponential backoff.
pub fn error_policy(runner: Arc<Runner>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.error(err.metric_label());
    if err.is_conflict() {
        debug!(runner = %runner.name_any(), "conflict; requeue to re-read");
        return Action::requeue(retry::CONFLICT);
    }
    let failures = {
        let mut f = ctx.failures();
        let n = f.entry(key(&runner)).or_default();
        *n = n.saturating_add(1);
        *n
    };
    let delay = retry::backoff(failures, rand::random());
    warn!(runner = %runner.name_any(), namespace = ?runner.namespace(), error = %err, failures, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
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
        add_finalizer(&api, runner).await?;
        ctx.metrics.write("add_finalizer");
        // The update event brings the next pass.
        return Ok(Action::await_change());
    }

    let deployment = child::ensure(ctx, runner, &ctx.stores.deployments, desired::deployment(runner)).await?;
    let service = child::ensure(ctx, runner, &ctx.stores.services, desired::service(runner)).await?;
    let ingress = match desired::ingress(runner) {
        Some(ing) => Some(child::ensure(ctx, runner, &ctx.stores.ingresses, ing).await?),
        None => {
            child::delete(ctx, &ctx.stores.ingresses, runner).await?;
            None
        }
    };
    let (mut refused, mut rejected) = (Vec::new(), Vec::new());
    let deployment = sort(deployment, &mut refused, &mut rejected);
    sort(service, &mut refused, &mut rejected);
    let ingress = ingress.and_then(|i| sort(i, &mut refused, &mut rejected)).is_some();
    let seen = Observed {
        deployment: deployment.as_ref(),
        pod_problem: ctx.stores.pods.first(&ns, &runner.uid().unwrap_or_default()),
        refused,
        rejected,
        ingress,
    };

    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let new_status = status::compute(runner, &seen, &now);
    if runner.status.as_ref() != Some(&new_status) {
        announce_refusal(ctx, runner, &new_status).await;
        patch_status(&api, runner, &new_status).await?;
        ctx.metrics.write("patch_status");
    }
    if let Some(message) = seen.rejected.first() {
        // Shown in the status; retried with backoff, since an RBAC or
        // admission change elsewhere may let it through.
        return Err(Error::ChildRejected { runner: key(runner), message: message.clone() });
    }
    Ok(if seen.refused.is_empty() {
        Action::requeue(retry::resync(rand::random()))
    } else {
        Action::requeue(REFUSED_RECHECK)
    })
}

/// Sorts one child's outcome into what the status sees; the live child
/// when it is ours.
fn sort<K>(outcome: Outcome<K>, refused: &mut Vec<Refused>, rejected: &mut Vec<String>) -> Option<K> {
    match outcome {
        Outcome::Ours(k) => Some(k),
        Outcome::Refused(r) => {
            refused.push(r);
            None
        }
        Outcome::Rejected(message) => {
            rejected.push(message);
            None
        }
    }
}

/// Deletion: delete our children; when all are gone, record an Event with
/// what was deleted and drop our finalizer (and only ours). No polling: a
/// child that is still finalizing sends a delete event that brings the
/// next pass. `kubectl delete --cascade=orphan` keeps the children: the
/// garbage collector's `orphan` finalizer is on the Runner, and it detaches
/// them itself.
async fn cleanup(runner: &Runner, ctx: &Context, api: &Api<Runner>) -> Result<Action> {
    let orphan = runner.finalizers().iter().any(|f| f == "orphan");
    if !orphan {
        let mut pending = false;
        pending |= child::delete(ctx, &ctx.stores.deployments, runner).await?;
        pending |= child::delete(ctx, &ctx.stores.services, runner).await?;
        pending |= child::delete(ctx, &ctx.stores.ingresses, runner).await?;
        if pending {
            show_terminating(ctx, runner, api).await;
            return Ok(Action::await_change());
        }
    }
    let note = if orphan {
        format!(
            "Runner deleted with its children orphaned: image {}, {} replicas",
            runner.spec.image, runner.spec.replicas
        )
    } else {
        format!(
            "Runner deleted: image {}, {} replicas; Deployment and Service removed",
            runner.spec.image, runner.spec.replicas
        )
    };
    remove_finalizer(api, runner).await?;
    ctx.metrics.write("remove_finalizer");
    ctx.deleted().remove(&runner.uid().unwrap_or_default());
    // After the finalizer: a retried removal must not record a second Event.
    publish(ctx, runner, EventType::Normal, "Deleted", "Cleanup", note).await;
    info!(runner = %runner.name_any(), namespace = ?runner.namespace(), orphan, "finalizer removed");
    Ok(Action::await_change())
}

/// Best effort: a failed Terminating display must not block cleanup.
async fn show_terminating(ctx: &Context, runner: &Runner, api: &Api<Runner>) {
    if runner.status.as_ref().map(|s| s.phase) == Some(Phase::Terminating) {
        return;
    }
    let mut s = runner.status.clone().unwrap_or_default();
    s.phase = Phase::Terminating;
    s.message = Some("waiting for children to finish deleting".into());
    if patch_status(api, runner, &s).await.is_ok() {
        ctx.metrics.write("patch_status");
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
