//! Pure: whether a Lease's holder is alive. One rule for the manager's
//! Leases (the leader's, the presence Leases), and the [`SLACK`] the
//! registration checks add to the local managers' own rule
//! (`webhook::local::lease_live`), so diagnose gives every holder the same
//! few seconds.
//!
//! Judged by the wall clock: `renewTime` is written by the holder's clock
//! and compared with diagnose's ([`Snapshot::now`](super::super::Snapshot)),
//! so [`SLACK`] covers a little skew between the two machines and a
//! renewal that is late by a moment.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// How far past its duration a Lease may be before its holder counts as
/// gone: Lease durations are short (15 s), so a few seconds of skew or a
/// slow renewal must not call a live holder dead.
pub const SLACK: Duration = Duration::from_secs(5);
/// Used when the Lease does not say (the apiserver's clients' default).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(15);

/// What a Lease says about its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renewal {
    /// `holderIdentity`; `None` when empty or unset.
    pub holder: Option<String>,
    /// `renewTime`; `None`: never renewed.
    pub renewed: Option<Timestamp>,
    /// `leaseDurationSeconds`, else [`DEFAULT_DURATION`].
    pub duration: Duration,
}

impl Renewal {
    pub fn of(lease: &Lease) -> Renewal {
        let spec = lease.spec.as_ref();
        Renewal {
            holder: spec.and_then(|s| s.holder_identity.clone()).filter(|h| !h.is_empty()),
            renewed: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
            duration: spec
                .and_then(|s| s.lease_duration_seconds)
                .map_or(DEFAULT_DURATION, |d| Duration::from_secs(d.max(0) as u64)),
        }
    }

    /// When the holder stopped (or stops) counting as alive, by its own
    /// terms: the last renewal plus the duration, without [`SLACK`].
    pub fn expires(&self) -> Option<Timestamp> {
        let d = SignedDuration::try_from(self.duration).ok()?;
        self.renewed?.checked_add(d).ok()
    }

    /// Renewed within its duration plus [`SLACK`] of `now`.
    pub fn fresh(&self, now: Timestamp) -> bool {
        self.renewed.is_some_and(|r| super::age(now, r) <= self.duration + SLACK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease(renewed: Option<&str>, duration: Option<i32>) -> Lease {
        serde_json::from_value(json!({ "metadata": { "name": "l" },
            "spec": { "holderIdentity": "me", "renewTime": renewed, "leaseDurationSeconds": duration } }))
        .unwrap()
    }

    #[test]
    fn a_lease_is_fresh_until_its_duration_and_the_slack_have_passed() {
        let now: Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
        let r = Renewal::of(&lease(Some("2026-01-01T11:59:40.000000Z"), Some(15)));
        assert_eq!(r.holder.as_deref(), Some("me"));
        assert_eq!(r.expires(), Some("2026-01-01T11:59:55Z".parse().unwrap()));
        assert!(r.fresh(now), "20 s ago is within 15 s + 5 s");
        assert!(!r.fresh("2026-01-01T12:00:01Z".parse().unwrap()));
        let never = Renewal::of(&lease(None, None));
        assert_eq!((never.duration, never.expires(), never.fresh(now)), (DEFAULT_DURATION, None, false));
    }
}
