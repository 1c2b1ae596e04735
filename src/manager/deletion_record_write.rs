//! Writes a deleted Runner's record ([`crate::deletion_record`]) before the
//! finalizer goes, without ever holding the deletion up for long:
//!
//! - a conflict (two Runners of one namespace deleted at once, the
//!   ConfigMap created or changed since the read) re-reads and tries again,
//!   so no entry is lost;
//! - a transient failure (429, 5xx, no answer) is retried with a short
//!   backoff;
//! - a refusal (403 without the ConfigMap rules, a namespace being
//!   terminated, an invalid object) or a ConfigMap we did not create is not
//!   retried: the caller records a Warning Event and the deletion proceeds;
//! - all of it within [`BUDGET`], which also cuts kube's own retries of a
//!   429 or 503 (minutes, honouring Retry-After).
//!
//! The manager's own passes do not race each other for a namespace's one
//! ConfigMap: they queue their entries ([`Queues`]), and whichever holds
//! the namespace's turn writes every entry waiting in one patch. Deleting
//! 100 Runners at once then costs a few writes and no conflict; a conflict
//! means someone else wrote the record.
//!
//! [`next`] decides, [`record`] acts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::metrics::Metrics;
use crate::api::Runner;
use crate::deletion_record::{CONFIGMAP, Entry, Plan, plan};

/// The longest a deletion waits for its record.
pub const BUDGET: Duration = Duration::from_secs(4);
/// First pause after a transient failure; doubles, up to [`PAUSE_MAX`].
const PAUSE: Duration = Duration::from_millis(100);
const PAUSE_MAX: Duration = Duration::from_secs(1);
/// Reason of the Warning Event when no record could be written.
pub const REASON_NOT_RECORDED: &str = "DeletionNotRecorded";

/// How a failed attempt stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The ConfigMap moved on (or appeared, or went) since the read.
    Conflict,
    /// May pass on its own: throttled, an apiserver or network failure.
    Transient,
    /// Will fail again the same way: forbidden, invalid, not ours.
    Refused,
}

/// Pure: the kind of a failed request.
pub fn classify(e: &kube::Error) -> Failure {
    match e {
        // The resourceVersion moved, or AlreadyExists on create.
        kube::Error::Api(s) if s.code == 409 => Failure::Conflict,
        // 404: the ConfigMap went between the read and the patch (the next
        // read creates it), or the namespace is gone (the budget ends it).
        kube::Error::Api(s) if s.code == 404 || s.code == 429 || s.code >= 500 => Failure::Transient,
        kube::Error::Api(_) => Failure::Refused,
        // Transport: refused connection, reset, request timeout.
        _ => Failure::Transient,
    }
}

/// What to do after failed attempt number `attempt` (1 = the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Retry(Duration),
    GiveUp,
}

/// Pure: conflicts re-read at once, transient failures after a pause
/// doubling from [`PAUSE`] to [`PAUSE_MAX`], refusals never. The caller's
/// deadline bounds the attempts.
pub fn next(failure: Failure, attempt: u32) -> Next {
    match failure {
        Failure::Conflict => Next::Retry(Duration::ZERO),
        Failure::Transient => {
            Next::Retry(PAUSE.saturating_mul(1 << attempt.saturating_sub(1).min(8)).min(PAUSE_MAX))
        }
        Failure::Refused => Next::GiveUp,
    }
}

/// A record written, or found already there; and in how many attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    pub attempts: u32,
}

/// An entry waiting for its namespace's turn, with its deadline and who
/// awaits the outcome.
struct Waiting {
    entry: Entry,
    deadline: Instant,
    done: oneshot::Sender<Result<Recorded, String>>,
}

/// One namespace's waiting entries and its turn.
#[derive(Default)]
struct Queue {
    turn: tokio::sync::Mutex<()>,
    waiting: Mutex<Vec<Waiting>>,
}

/// The entries waiting to be written, per namespace (one small queue per
/// namespace that has seen a deletion).
#[derive(Default)]
pub struct Queues(Mutex<HashMap<String, Arc<Queue>>>);

impl Queues {
    fn of(&self, ns: &str) -> Arc<Queue> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(ns.to_string()).or_default().clone()
    }
}

/// Writes `runner`'s record before its finalizer is removed, in its
/// namespace's turn of `queues`. Err: why not, for the Warning Event;
/// already logged.
pub async fn write(
    client: &kube::Client,
    metrics: &Metrics,
    queues: &Queues,
    runner: &Runner,
    orphaned: bool,
) -> Result<(), String> {
    let Some(entry) = Entry::of(runner, orphaned) else { return Ok(()) };
    let (name, ns) = (entry.name.clone(), runner.namespace().unwrap_or_default());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let queue = queues.of(&ns);
    let (done, mut outcome) = oneshot::channel();
    let deadline = Instant::now() + BUDGET;
    queue.waiting.lock().unwrap_or_else(|e| e.into_inner()).push(Waiting { entry, deadline, done });
    // Our entry is written by the turn that takes it: an earlier one (then
    // the outcome comes without our own turn, and no later batch holds us
    // up) or ours, which takes every entry waiting.
    let result = tokio::select! {
        biased;
        outcome = &mut outcome => outcome,
        turn = queue.turn.lock() => {
            write_waiting(&api, &ns, &queue).await;
            drop(turn);
            outcome.await
        }
    };
    let result = result.unwrap_or_else(|_| Err("the write of the record was dropped".into()));
    match result {
        Ok(r) => {
            metrics.write("deletion_record");
            debug!(runner = %name, namespace = %ns, attempts = r.attempts, "deletion recorded");
            Ok(())
        }
        Err(why) => {
            metrics.error("deletion_record".into());
            warn!(runner = %name, namespace = %ns, error = %why, "deletion not recorded; deleting anyway");
            Err(format!("the deletion was not recorded in ConfigMap {CONFIGMAP}: {why}"))
        }
    }
}

/// Writes every entry waiting in `queue` in one go, by the earliest of
/// their deadlines, and tells each waiter the outcome.
async fn write_waiting(api: &Api<ConfigMap>, ns: &str, queue: &Queue) {
    let batch = std::mem::take(&mut *queue.waiting.lock().unwrap_or_else(|e| e.into_inner()));
    let Some(deadline) = batch.iter().map(|w| w.deadline).min() else { return };
    let entries: Vec<Entry> = batch.iter().map(|w| w.entry.clone()).collect();
    let result = record(api, ns, &entries, deadline).await;
    for w in batch {
        let _ = w.done.send(result.clone());
    }
}

/// Adds `entries` to the record in `ns` through `api`, by `deadline`.
/// Err: why they are not there.
pub async fn record(
    api: &Api<ConfigMap>,
    ns: &str,
    entries: &[Entry],
    deadline: Instant,
) -> Result<Recorded, String> {
    match tokio::time::timeout_at(deadline, attempts(api, ns, entries, deadline)).await {
        Ok(result) => result,
        Err(_) => Err(format!("no success within {}s", BUDGET.as_secs())),
    }
}

async fn attempts(
    api: &Api<ConfigMap>,
    ns: &str,
    entries: &[Entry],
    deadline: Instant,
) -> Result<Recorded, String> {
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let e = match once(api, ns, entries).await {
            Ok(true) => return Ok(Recorded { attempts: attempt }),
            Ok(false) => {
                return Err(format!(
                    "ConfigMap {ns}/{CONFIGMAP} was not created by kubectl-runner (no {}={} label); left alone",
                    crate::ownership::MANAGED_BY_LABEL,
                    crate::api::MANAGED_BY
                ));
            }
            Err(e) => e,
        };
        match next(classify(&e), attempt) {
            Next::GiveUp => return Err(crate::error::describe_kube(&e)),
            Next::Retry(pause) if Instant::now() + pause >= deadline => {
                return Err(format!(
                    "still failing after {attempt} attempts: {}",
                    crate::error::describe_kube(&e)
                ));
            }
            Next::Retry(pause) => tokio::time::sleep(pause).await,
        }
    }
}

/// One read and write. Ok(false): the ConfigMap is not ours.
async fn once(api: &Api<ConfigMap>, ns: &str, entries: &[Entry]) -> kube::Result<bool> {
    let live = api.get_opt(CONFIGMAP).await?;
    match plan(live.as_ref(), ns, entries) {
        Plan::Nothing => {}
        Plan::Foreign => return Ok(false),
        Plan::Create(cm) => {
            api.create(&PostParams::default(), &*cm).await?;
        }
        Plan::Patch(p) => {
            api.patch(CONFIGMAP, &PatchParams::default(), &Patch::Merge(&p)).await?;
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure("m", reason).with_code(code)))
    }

    #[test]
    fn refusals_are_not_retried_conflicts_are_at_once_the_rest_with_a_pause() {
        let rows = [
            (api_error(403, "Forbidden"), Failure::Refused, Next::GiveUp),
            (api_error(422, "Invalid"), Failure::Refused, Next::GiveUp),
            (api_error(400, "BadRequest"), Failure::Refused, Next::GiveUp),
            (api_error(409, "Conflict"), Failure::Conflict, Next::Retry(Duration::ZERO)),
            (api_error(409, "AlreadyExists"), Failure::Conflict, Next::Retry(Duration::ZERO)),
            (api_error(404, "NotFound"), Failure::Transient, Next::Retry(PAUSE)),
            (api_error(429, "TooManyRequests"), Failure::Transient, Next::Retry(PAUSE)),
            (api_error(503, "ServiceUnavailable"), Failure::Transient, Next::Retry(PAUSE)),
            (kube::Error::LinesCodecMaxLineLengthExceeded, Failure::Transient, Next::Retry(PAUSE)),
        ];
        for (e, failure, first) in rows {
            assert_eq!(classify(&e), failure, "{e}");
            assert_eq!(next(failure, 1), first, "{e}");
        }
    }

    #[test]
    fn transient_pauses_double_up_to_a_second_and_fit_the_budget_many_times() {
        let pauses: Vec<Duration> = (1..=6)
            .map(|a| match next(Failure::Transient, a) {
                Next::Retry(d) => d,
                Next::GiveUp => panic!("gave up on attempt {a}"),
            })
            .collect();
        let ms: Vec<u128> = pauses.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(next(Failure::Transient, u32::MAX), Next::Retry(PAUSE_MAX));
        assert!(pauses[..4].iter().sum::<Duration>() < BUDGET);
    }
}
