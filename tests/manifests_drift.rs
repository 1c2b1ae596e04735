//! `manifests/` is generated from code; this fails when it drifts.
//! Regenerate with `UPDATE_MANIFESTS=1 cargo test --test manifests_drift`.

use std::path::Path;

#[test]
fn committed_manifests_match_what_the_code_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests");
    let update = std::env::var_os("UPDATE_MANIFESTS").is_some();
    let mut stale = Vec::new();
    for (name, want) in kubectl_runner::manifests::files() {
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "manifests/{stale:?} differ from the generated ones; run `UPDATE_MANIFESTS=1 cargo test --test manifests_drift` and commit"
    );
}
