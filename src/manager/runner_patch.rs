//! Writes to the Runner itself: our finalizer and the status. Each is a JSON
//! patch whose `test` operations are its preconditions, so a write based on
//! a stale read fails (and the pass re-reads) instead of overwriting a newer
//! spec or someone else's finalizer.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::error::{Error, Result};
use crate::api::{FINALIZER, Runner, RunnerStatus};
use crate::error::FromApi;

/// Adds our finalizer. With no list yet, `add /metadata/finalizers` would
/// replace a list someone else created since our read: the
/// resourceVersion guards it. With a list, the list itself is the guard.
/// Adds our finalizer; the Runner as the apiserver stored it.
pub async fn add_finalizer(api: &Api<Runner>, runner: &Runner) -> Result<Runner> {
    json_patch(api, runner, add_finalizer_ops(runner), "add the finalizer to", false).await
}

fn add_finalizer_ops(runner: &Runner) -> Value {
    match &runner.metadata.finalizers {
        None => json!([
            { "op": "test", "path": "/metadata/resourceVersion", "value": runner.resource_version() },
            { "op": "add", "path": "/metadata/finalizers", "value": [FINALIZER] },
        ]),
        Some(current) => json!([
            { "op": "test", "path": "/metadata/finalizers", "value": current },
            { "op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER },
        ]),
    }
}

/// Removes our finalizer and only ours ([`crate::api::remove_finalizer_patch`]).
pub async fn remove_finalizer(api: &Api<Runner>, runner: &Runner) -> Result<()> {
    let Some(patch) = crate::api::remove_finalizer_patch(runner) else { return Ok(()) };
    send(api, runner, patch, "remove the finalizer from", false).await.map(drop)
}

/// Status through the status subresource, guarded by the Runner's UID and
/// generation rather than its resourceVersion: our own finalizer or status
/// writes do not make it fail, a spec change does (the next pass re-reads),
/// so Ready is never written for an old generation or a same-name successor.
/// Returns the Runner as the apiserver stored it.
pub async fn patch_status(api: &Api<Runner>, runner: &Runner, status: &RunnerStatus) -> Result<Runner> {
    let ops = json!([
        { "op": "test", "path": "/metadata/uid", "value": runner.uid() },
        { "op": "test", "path": "/metadata/generation", "value": runner.metadata.generation },
        { "op": "add", "path": "/status", "value": status },
    ]);
    json_patch(api, runner, ops, "patch status of", true).await
}

async fn json_patch(
    api: &Api<Runner>,
    runner: &Runner,
    ops: Value,
    op: &'static str,
    status: bool,
) -> Result<Runner> {
    let patch: json_patch::Patch =
        serde_json::from_value(ops).map_err(|source| Error::Encode { what: "a JSON patch", source })?;
    send(api, runner, patch, op, status).await
}

/// A failed `test` comes back as an error for which
/// [`Error::is_conflict`] is true: the pass re-reads and retries.
async fn send(
    api: &Api<Runner>,
    runner: &Runner,
    patch: json_patch::Patch,
    op: &'static str,
    status: bool,
) -> Result<Runner> {
    let (name, ns) = (runner.name_any(), runner.namespace().unwrap_or_default());
    let pp = PatchParams::default();
    let res = if status {
        api.patch_status(&name, &pp, &Patch::<()>::Json(patch)).await
    } else {
        api.patch(&name, &pp, &Patch::<()>::Json(patch)).await
    };
    res.map_err(|e| Error::api(op, "Runner", &ns, &name, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RunnerSpec;

    #[test]
    fn adding_the_first_finalizer_is_guarded_by_the_resource_version() {
        let mut r = Runner::new("web", RunnerSpec::new("x"));
        r.metadata.resource_version = Some("41".into());
        let ops = add_finalizer_ops(&r);
        assert_eq!(ops[0], json!({ "op": "test", "path": "/metadata/resourceVersion", "value": "41" }));
        r.metadata.finalizers = Some(vec!["someone.else/keep".into()]);
        let ops = add_finalizer_ops(&r);
        assert_eq!(ops[0]["value"], json!(["someone.else/keep"]));
        assert_eq!(ops[1]["path"], "/metadata/finalizers/-");
    }
}
