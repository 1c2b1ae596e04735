//! Pure: when a Runner's next pass comes. Conflicts retry at once-ish (the
//! store has the newer object by then); other failures back off
//! exponentially per Runner, so one broken Runner costs little and a
//! flapping apiserver is not hammered. A successful pass comes back at the
//! Runner's resync, once per five minutes (the resync module).

use std::time::Duration;

/// After a conflict: long enough for the watch to deliver the newer object.
pub const CONFLICT: Duration = Duration::from_millis(500);
/// First retry after a failure; doubles per failure in a row.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Longest wait between retries: a user who fixes RBAC or a quota waits at
/// most this long for the Runner to heal.
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Delay before retry number `failures` (1 = first failure), with `jitter`
/// in [0, 1) adding up to a tenth.
pub fn backoff(failures: u32, jitter: f64) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    spread(exp.min(BACKOFF_MAX), jitter)
}

/// A watch's wait between attempts after an error: 0.5 s doubling to 5 s,
/// reset by the watch on success. kube's default grows to 30 s, so a watch
/// that failed through a short apiserver outage could sleep half a minute
/// after the apiserver is back.
#[derive(Debug, Default)]
pub struct WatchBackoff {
    failures: u32,
}

/// Longest wait of a watch between attempts.
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(5);

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.failures = self.failures.saturating_add(1);
        Some(backoff(self.failures, rand::random()).min(WATCH_BACKOFF_MAX))
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

fn spread(d: Duration, jitter: f64) -> Duration {
    d + d.mul_f64(jitter.clamp(0.0, 1.0) / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_failure_and_is_capped() {
        assert_eq!(backoff(1, 0.0), Duration::from_millis(500));
        assert_eq!(backoff(2, 0.0), Duration::from_secs(1));
        assert_eq!(backoff(5, 0.0), Duration::from_secs(8));
        assert_eq!(backoff(40, 0.0), BACKOFF_MAX);
        assert!(backoff(40, 0.99) <= BACKOFF_MAX.mul_f64(1.1));
    }

    #[test]
    fn a_watch_backs_off_to_five_seconds_and_starts_over_after_a_reset() {
        use kube::runtime::utils::Backoff;
        let mut b = WatchBackoff::default();
        let first = b.next().unwrap();
        assert!(first >= Duration::from_millis(500) && first < Duration::from_millis(560));
        assert_eq!(b.by_ref().nth(20), Some(WATCH_BACKOFF_MAX));
        b.reset();
        assert!(b.next().unwrap() < Duration::from_millis(560));
    }
}
