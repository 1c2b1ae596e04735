//! Pure readings of a [`Snapshot`](super::Snapshot) that more than one side
//! needs: `gather` reads the manager's watch scope to know where to ask
//! about permissions, and the checks judge the manager and the Runners by
//! the same view. Below both, so gather never depends on checks.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

pub mod conversion;
pub mod lease;
pub mod manager;
pub mod registrations;

/// How long ago `t` was, never negative (clocks skew).
pub(crate) fn age(now: Timestamp, t: Timestamp) -> Duration {
    now.duration_since(t).try_into().unwrap_or(Duration::ZERO)
}

/// `1m30s`-style rendering of an age, for messages.
pub(crate) fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{}s", s / 60, s % 60),
        3600..=86399 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_render_like_kubectl() {
        for (secs, want) in [(5, "5s"), (90, "1m30s"), (7260, "2h1m"), (90000, "1d1h")] {
            assert_eq!(human(Duration::from_secs(secs)), want);
        }
    }

    #[test]
    fn an_age_in_the_future_is_zero() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let later = now.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(10)).unwrap();
        assert_eq!(age(now, later), Duration::ZERO);
    }
}
