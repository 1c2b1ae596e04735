//! Pure: when a Runner's next pass comes. Conflicts retry at once-ish (the
//! store has the newer object by then); other failures back off
//! exponentially per Runner, so one broken Runner costs little and a
//! flapping apiserver is not hammered; a successful pass comes back after a
//! jittered resync period, so a change the watches missed (a delete during
//! a relist) still converges without a herd of passes at the same instant.

use std::time::Duration;

/// After a conflict: long enough for the watch to deliver the newer object.
pub const CONFLICT: Duration = Duration::from_millis(500);
/// First retry after a failure; doubles per failure in a row.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Longest wait between retries.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// Resync period of a settled Runner, before jitter.
pub const RESYNC: Duration = Duration::from_secs(300);

/// Delay before retry number `failures` (1 = first failure), with `jitter`
/// in [0, 1) adding up to a tenth.
pub fn backoff(failures: u32, jitter: f64) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    spread(exp.min(BACKOFF_MAX), jitter)
}

/// The resync period with `jitter` in [0, 1) adding up to a tenth.
pub fn resync(jitter: f64) -> Duration {
    spread(RESYNC, jitter)
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
    fn resync_is_spread_over_a_tenth_of_the_period() {
        assert_eq!(resync(0.0), RESYNC);
        let late = resync(0.999);
        assert!(late > RESYNC && late < RESYNC.mul_f64(1.1));
    }
}
