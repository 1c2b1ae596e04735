//! Exit codes (documented in `--help`) and the mappings from what a
//! command ended with to its code. Below the CLI, which calls it for every
//! command, so `main` and the in-process tests agree; a failed command's
//! code is `cli::Error::exit_code`, next to the error it reads.

pub const OK: u8 = 0;
pub const FAILURE: u8 = 1;
pub const USAGE: u8 = 2;
/// `diagnose` found at least one error.
pub const FINDINGS: u8 = 3;

/// `diagnose`: 3 with any error finding; else 1 when a `--fix` was declined
/// (the user asked for a change that did not happen); else 0.
pub fn diagnose(errors: usize, fix_declined: bool) -> u8 {
    match (errors, fix_declined) {
        (1.., _) => FINDINGS,
        (0, true) => FAILURE,
        (0, false) => OK,
    }
}

/// `e2e`: 0 when every step passed, else 1.
pub fn e2e(passed: bool) -> u8 {
    if passed { OK } else { FAILURE }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnose_errors_exit_3_a_declined_fix_1_and_anything_less_0() {
        let cases = [((2, false), 3), ((1, true), 3), ((0, true), 1), ((0, false), 0)];
        for ((errors, declined), want) in cases {
            assert_eq!(diagnose(errors, declined), want, "{errors} errors, fix declined: {declined}");
        }
    }

    #[test]
    fn e2e_exits_0_when_every_step_passed_and_1_otherwise() {
        assert_eq!((e2e(true), e2e(false)), (OK, FAILURE));
    }
}
