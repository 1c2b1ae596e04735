//! For tests that run a script which runs cargo itself (scripts/run.sh,
//! scripts/release.sh): cargo gives a test the variables of the crate under
//! test (CARGO_MANIFEST_DIR, CARGO_PKG_*, ...). Inherited by the nested cargo,
//! they reach build scripts that track them (ring's tracks
//! CARGO_MANIFEST_DIR), so the nested build recompiles the TLS stack and the
//! next `cargo test` recompiles it back: a minute each way.

use std::process::Command;

/// Removes the per-crate variables cargo set for this test from `cmd`'s
/// environment; CARGO_HOME, CARGO_TARGET_DIR and the like stay.
pub fn without_crate_env(cmd: &mut Command) -> &mut Command {
    const SET_FOR_THE_CRATE: &[&str] = &[
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
    ];
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if SET_FOR_THE_CRATE.contains(&key)
            || key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_BIN_EXE_")
        {
            cmd.env_remove(key);
        }
    }
    cmd
}
