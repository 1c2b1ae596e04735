//! Leader election on a coordination.k8s.io Lease, so a local manager and an
//! in-cluster one never reconcile at the same time.
//!
//! Hand-written rather than `kube-lease-manager` (0.13, kube 5): that crate
//! judges expiry as the holder's `renewTime` plus the duration against the
//! local wall clock, so a standby whose clock runs ahead takes a healthy
//! Lease, and its Lease requests have no timeout. The protocol is client-go's:
//! - a standby never compares clocks: it notes, on its own monotonic clock,
//!   when it last saw the Lease record change, and takes the Lease only when
//!   the record has stayed the same for a whole lease duration;
//! - the leader renews every retry period and gives up leadership when no
//!   renewal has succeeded for the renew deadline, which is shorter than the
//!   lease duration, so it stops before any standby may take over;
//! - every Lease request has a timeout, so a renewal stuck on a dead
//!   connection counts as a failed one instead of blocking the loop.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use super::error::{Error, Result};
use crate::error::FromApi;

/// Lease timing: controller-runtime's defaults.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    /// How long a standby waits after the last change it saw.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// Pause between attempts, for the leader and the standbys.
    pub retry_period: Duration,
    /// Upper bound on one attempt (a get and an update).
    pub request_timeout: Duration,
}

impl LeaseConfig {
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
        }
    }
}

/// The fields of a Lease whose change proves the holder is alive.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Record {
    holder: Option<String>,
    renew_time: Option<Timestamp>,
    acquire_time: Option<Timestamp>,
    transitions: Option<i32>,
    duration_seconds: Option<i32>,
}

impl From<&LeaseSpec> for Record {
    fn from(spec: &LeaseSpec) -> Self {
        Record {
            holder: spec.holder_identity.clone().filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            transitions: spec.lease_transitions,
            duration_seconds: spec.lease_duration_seconds,
        }
    }
}

/// A Lease record and when this process first saw it, on its own clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub record: Record,
    pub since: Instant,
}

/// Pure: what we know after reading `record` at `now`. An unchanged record
/// keeps the time it was first seen; any change restarts the clock.
pub fn observe(previous: Option<&Observed>, record: Record, now: Instant) -> Observed {
    match previous {
        Some(p) if p.record == record => p.clone(),
        _ => Observed { record, since: now },
    }
}

/// Pure: may `identity` take the Lease it observed, at `now`? Yes when it is
/// free or ours, or when its record has not changed for the lease duration
/// the holder wrote (ours when it wrote none).
pub fn may_take(observed: &Observed, identity: &str, default_duration: Duration, now: Instant) -> bool {
    match observed.record.holder.as_deref() {
        None => true,
        Some(holder) if holder == identity => true,
        Some(_) => {
            let duration = observed
                .record
                .duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(default_duration, Duration::from_secs);
            now.duration_since(observed.since) >= duration
        }
    }
}

/// Pure: has the leader gone too long without a successful renewal?
pub fn renewal_overdue(last_renewed: Instant, renew_deadline: Duration, now: Instant) -> bool {
    now.duration_since(last_renewed) >= renew_deadline
}

/// Outcome of one attempt to take or renew.
#[derive(Debug, PartialEq)]
enum Attempt {
    Held,
    HeldByOther,
    /// Failed, timed out or lost a race: try again.
    Retry,
}

/// The Lease held: renewed in the background until lost or released.
pub struct Leadership {
    lost: watch::Receiver<bool>,
    renewer: tokio::task::AbortHandle,
}

impl Leadership {
    /// Turns `false` when leadership is lost.
    pub fn lost(&self) -> watch::Receiver<bool> {
        self.lost.clone()
    }

    /// Stops renewing, then gives the Lease up so the next manager need not
    /// wait for it to expire. Renewing first and releasing after would let
    /// the next renewal take the released Lease back for a process about
    /// to exit, and a standby would wait out the whole lease duration.
    pub async fn release(self, client: kube::Client, cfg: &LeaseConfig) {
        self.renewer.abort();
        give_up(client, cfg).await;
    }
}

/// Blocks until the Lease is ours, then keeps renewing it in the background.
pub async fn acquire(client: kube::Client, cfg: LeaseConfig) -> Leadership {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let mut observed = None;
    let mut waiting_logged = false;
    loop {
        let deadline = Instant::now() + cfg.request_timeout;
        match attempt(&api, &cfg, &mut observed, deadline).await {
            Ok(Attempt::Held) => break,
            Ok(_) => {}
            // A standby outlives apiserver hiccups; it has nothing to stop.
            Err(e) => warn!(error = %e, "cannot read or take the lease"),
        }
        if !waiting_logged {
            info!(lease = %cfg.name, namespace = %cfg.namespace, "another manager holds the lease; waiting");
            waiting_logged = true;
        }
        tokio::time::sleep(cfg.retry_period).await;
    }
    info!(lease = %cfg.name, identity = %cfg.identity, "acquired leadership");
    let (tx, lost) = watch::channel(true);
    let renewer = tokio::spawn(async move {
        renew_until_lost(&api, &cfg, observed).await;
        warn!(lease = %cfg.name, "lost leadership");
        let _ = tx.send(false);
    })
    .abort_handle();
    Leadership { lost, renewer }
}

/// Renews every retry period; returns when another holder has the Lease or
/// no renewal succeeded for the renew deadline.
async fn renew_until_lost(api: &Api<Lease>, cfg: &LeaseConfig, mut observed: Option<Observed>) {
    let mut last_renewed = Instant::now();
    loop {
        tokio::time::sleep(cfg.retry_period).await;
        let started = Instant::now();
        // No attempt may outlive the renew deadline.
        let deadline = (started + cfg.request_timeout).min(last_renewed + cfg.renew_deadline);
        match attempt(api, cfg, &mut observed, deadline).await {
            Ok(Attempt::Held) => last_renewed = started,
            Ok(Attempt::HeldByOther) => return,
            Ok(Attempt::Retry) => {}
            Err(e) => warn!(error = %e, "cannot renew the lease"),
        }
        if renewal_overdue(last_renewed, cfg.renew_deadline, Instant::now()) {
            warn!(deadline = ?cfg.renew_deadline, "no lease renewal succeeded within the renew deadline");
            return;
        }
    }
}

/// One attempt, abandoned at `deadline`.
async fn attempt(
    api: &Api<Lease>,
    cfg: &LeaseConfig,
    observed: &mut Option<Observed>,
    deadline: Instant,
) -> Result<Attempt> {
    match tokio::time::timeout_at(deadline, try_take(api, cfg, observed)).await {
        Ok(result) => result,
        Err(_) => {
            warn!(lease = %cfg.name, "lease request timed out");
            Ok(Attempt::Retry)
        }
    }
}

async fn try_take(api: &Api<Lease>, cfg: &LeaseConfig, observed: &mut Option<Observed>) -> Result<Attempt> {
    let err = |op, e| Error::api(op, "Lease", &cfg.namespace, &cfg.name, e);
    let Some(mut lease) = api.get_opt(&cfg.name).await.map_err(|e| err("get", e))? else {
        let now = Timestamp::now();
        let lease = Lease {
            metadata: ObjectMeta { name: Some(cfg.name.clone()), ..Default::default() },
            spec: Some(spec_for(cfg, now, now, 0)),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Held),
            Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(Attempt::Retry),
            Err(e) => Err(err("create", e)),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let seen = observe(observed.as_ref(), Record::from(&spec), Instant::now());
    let takeable = may_take(&seen, &cfg.identity, cfg.lease_duration, Instant::now());
    *observed = Some(seen);
    if !takeable {
        return Ok(Attempt::HeldByOther);
    }
    let now = Timestamp::now();
    let ours = spec.holder_identity.as_deref() == Some(cfg.identity.as_str());
    let acquired = if ours { spec.acquire_time.map(|t| t.0).unwrap_or(now) } else { now };
    let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
    lease.spec = Some(spec_for(cfg, acquired, now, transitions));
    match api.replace(&cfg.name, &PostParams::default(), &lease).await {
        Ok(written) => {
            let record = Record::from(&written.spec.unwrap_or_default());
            *observed = Some(Observed { record, since: Instant::now() });
            Ok(Attempt::Held)
        }
        // Someone wrote it since we read it: the next read says who.
        Err(kube::Error::Api(s)) if s.is_conflict() => Ok(Attempt::Retry),
        Err(e) => Err(err("update", e)),
    }
}

fn spec_for(cfg: &LeaseConfig, acquired: Timestamp, now: Timestamp, transitions: i32) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: Some(cfg.lease_duration.as_secs() as i32),
        acquire_time: Some(MicroTime(acquired)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..Default::default()
    }
}

/// Clears the holder if it is us. Best effort, bounded by the request timeout.
async fn give_up(client: kube::Client, cfg: &LeaseConfig) {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let give_up = async {
        if let Ok(Some(mut lease)) = api.get_opt(&cfg.name).await
            && let Some(spec) = lease.spec.as_mut()
            && spec.holder_identity.as_deref() == Some(cfg.identity.as_str())
        {
            spec.holder_identity = None;
            spec.renew_time = None;
            let _ = api.replace(&cfg.name, &PostParams::default(), &lease).await;
        }
    };
    if tokio::time::timeout(cfg.request_timeout, give_up).await.is_err() {
        warn!(lease = %cfg.name, "releasing the lease timed out; it expires on its own");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DURATION: Duration = Duration::from_secs(15);

    fn record(holder: &str, renewed: i64) -> Record {
        Record::from(&LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            ..Default::default()
        })
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_lease_renewed_an_hour_ago_by_the_holders_clock_is_still_not_taken_at_first_sight() {
        // The holder's clock is an hour behind ours (or ours ahead): its
        // renewTime looks stale, but we have only just seen the record.
        let t0 = Instant::now();
        let wall_now = Timestamp::now().as_second();
        let seen = observe(None, record("other", wall_now - 3600), t0);
        assert!(!may_take(&seen, "me", DURATION, t0));
        assert!(!may_take(&seen, "me", DURATION, t0 + secs(14)));
        assert!(may_take(&seen, "me", DURATION, t0 + secs(15)));
    }

    #[test]
    fn a_lease_renewed_in_the_future_by_the_holders_clock_expires_when_renewals_stop() {
        // The holder's clock is ahead: a naive check would never take it.
        let t0 = Instant::now();
        let future = Timestamp::now().as_second() + 3600;
        let seen = observe(None, record("other", future), t0);
        let again = observe(Some(&seen), record("other", future), t0 + secs(16));
        assert_eq!(again.since, t0, "an unchanged record keeps its first sighting");
        assert!(may_take(&again, "me", DURATION, t0 + secs(16)));
    }

    #[test]
    fn every_renewal_restarts_the_standbys_clock() {
        let t0 = Instant::now();
        let seen = observe(None, record("other", 100), t0);
        let renewed = observe(Some(&seen), record("other", 102), t0 + secs(10));
        assert_eq!(renewed.since, t0 + secs(10));
        assert!(!may_take(&renewed, "me", DURATION, t0 + secs(20)));
        assert!(may_take(&renewed, "me", DURATION, t0 + secs(25)));
    }

    #[test]
    fn our_own_or_a_released_lease_can_be_taken_at_once() {
        let t0 = Instant::now();
        assert!(may_take(&observe(None, record("me", 100), t0), "me", DURATION, t0));
        let released = Record::from(&LeaseSpec::default());
        assert!(may_take(&observe(None, released, t0), "me", DURATION, t0));
        let empty_holder =
            Record::from(&LeaseSpec { holder_identity: Some(String::new()), ..Default::default() });
        assert!(may_take(&observe(None, empty_holder, t0), "me", DURATION, t0));
    }

    #[test]
    fn the_holders_lease_duration_is_the_one_waited_for() {
        let t0 = Instant::now();
        let mut long = record("other", 100);
        long.duration_seconds = Some(60);
        let seen = observe(None, long, t0);
        assert!(!may_take(&seen, "me", DURATION, t0 + secs(30)));
        assert!(may_take(&seen, "me", DURATION, t0 + secs(60)));
    }

    #[test]
    fn the_leader_stops_before_any_standby_may_take_over() {
        let cfg = LeaseConfig::new("ns", "lease", "me");
        assert!(cfg.renew_deadline < cfg.lease_duration);
        assert!(cfg.request_timeout < cfg.renew_deadline);
        let renewed = Instant::now();
        assert!(!renewal_overdue(renewed, cfg.renew_deadline, renewed + secs(9)));
        assert!(renewal_overdue(renewed, cfg.renew_deadline, renewed + secs(10)));
    }
}
