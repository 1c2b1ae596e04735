//! Exit codes, shared by every subcommand (documented in `--help`). Below
//! the CLI, so `diagnose` and `e2e` can say which code their verdict means
//! without importing the CLI.

pub const OK: u8 = 0;
pub const FAILURE: u8 = 1;
pub const USAGE: u8 = 2;
/// `diagnose` (and `e2e`'s oracle) found at least one error.
pub const FINDINGS: u8 = 3;
