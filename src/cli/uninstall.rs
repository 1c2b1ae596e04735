//! `kubectl runner uninstall`: find objects carrying [`INSTALLED_BY_LABEL`]
//! (so a CRD someone else installed is never touched), refuse while Runners
//! exist unless `--force`, confirm, delete in reverse apply order. With
//! `--force` the Runners go first, and those still held by our finalizer
//! after the timeout lose that finalizer and no other.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, ListParams, Patch, PatchParams};

use super::args::parse_duration;
use super::error::{Error, Result};
use super::output;
use super::progress::{Progress, confirm};
use super::{Ctx, Globals};
use crate::api::{FINALIZER, Runner, remove_finalizer_patch};
use crate::client::{runners, scoped_dynamic};
use crate::error::{FromApi, is_not_found};
use crate::manifests::{self, INSTALLED_BY_LABEL, INSTALLED_BY_VALUE, RbacScope};

const UNINSTALL_HELP: &str = "\
Examples:
  kubectl runner uninstall
  kubectl runner uninstall --yes            # in scripts: no prompt
  kubectl runner uninstall --force --yes    # also deletes every Runner";

#[derive(Debug, clap::Args)]
#[command(after_help = UNINSTALL_HELP)]
pub struct UninstallArgs {
    /// Uninstall even while Runners exist: delete them first.
    #[arg(long)]
    pub force: bool,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// With --force: how long to wait for Runners to be cleaned up.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// An object `uninstall` will delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub name: String,
}

impl Target {
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.resource.kind, self.name),
            None => format!("{}/{}", self.resource.kind, self.name),
        }
    }
}

/// Every kind `install` can create, in apply order, once each. The
/// cluster-scoped install has them all (the leader-election Role too).
pub fn installable_kinds() -> Vec<(ApiResource, bool)> {
    let mut seen = BTreeSet::new();
    manifests::all(Some("image"), &RbacScope::Cluster)
        .into_iter()
        .filter(|m| seen.insert(m.resource.kind.clone()))
        .map(|m| (m.resource, m.namespaced))
        .collect()
}

/// Lists objects of every installable kind that carry the installed-by
/// label, in reverse apply order (manager first, CRD last).
pub async fn plan_uninstall(ctx: &Ctx) -> Result<Vec<Target>> {
    let lp = ListParams::default().labels(&format!("{INSTALLED_BY_LABEL}={INSTALLED_BY_VALUE}"));
    let mut out = Vec::new();
    for (ar, _namespaced) in installable_kinds().into_iter().rev() {
        let list = scoped_dynamic(&ctx.client, &ar, None)
            .list(&lp)
            .await
            .map_err(|e| Error::api("list", ar.kind.clone(), "", "", e))?;
        for o in list.items {
            out.push(Target { resource: ar.clone(), namespace: o.namespace(), name: o.name_any() });
        }
    }
    Ok(out)
}

/// Pure: the refusal while Runners exist and `--force` is absent.
pub fn refusal(runners: &[Runner], force: bool) -> Option<Error> {
    (!runners.is_empty() && !force).then(|| Error::RunnersExist {
        runners: runners
            .iter()
            .map(|r| format!("{}/{}", r.namespace().unwrap_or_default(), r.name_any()))
            .collect(),
    })
}

/// Runners in all namespaces; none when the CRD is absent.
async fn all_runners(ctx: &Ctx) -> Result<Vec<Runner>> {
    match runners::list(&ctx.client, None, None).await {
        Err(crate::error::Error::CrdMissing) => Ok(Vec::new()),
        other => Ok(other?),
    }
}

/// Deletes every Runner and waits for them to go (the manager, still
/// installed at this point, runs their finalizers). After `timeout`, removes
/// the cleanup finalizer from those left ([`remove_our_finalizer`]): their
/// children carry ownerReferences, so the garbage collector still removes
/// them.
pub async fn delete_all_runners(ctx: &Ctx, timeout: Duration) -> Result<Vec<String>> {
    for r in all_runners(ctx).await? {
        let ns = r.namespace().unwrap_or_default();
        let api = runners::api(&ctx.client, Some(&ns));
        match api.delete(&r.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(Error::api("delete", "Runner", &ns, &r.name_any(), e)),
        }
    }
    let start = Instant::now();
    loop {
        let left = all_runners(ctx).await?;
        if left.is_empty() {
            return Ok(Vec::new());
        }
        if start.elapsed() >= timeout {
            return strip_finalizers(ctx, &left).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Removes our finalizer from each of `runners`; returns a note for each
/// Runner it was removed from.
pub async fn strip_finalizers(ctx: &Ctx, runners: &[Runner]) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    for r in runners {
        let ns = r.namespace().unwrap_or_default();
        let api = runners::api(&ctx.client, Some(&ns));
        if remove_our_finalizer(&api, &ns, &r.name_any()).await? {
            notes.push(format!("removed the finalizer {FINALIZER} of Runner {ns}/{}", r.name_any()));
        }
    }
    Ok(notes)
}

/// Removes [`FINALIZER`] and only it, from a fresh read, with the JSON patch
/// of [`remove_finalizer_patch`]: the finalizers of other controllers stay.
/// When the list moved between the read and the patch (its `test` fails
/// with 422), reads again, up to three times. True when it removed one.
pub async fn remove_our_finalizer(api: &Api<Runner>, ns: &str, name: &str) -> Result<bool> {
    const ATTEMPTS: usize = 3;
    let op = "remove the finalizer of";
    let mut attempt = 1;
    loop {
        let Some(r) = api.get_opt(name).await.map_err(|e| Error::api("get", "Runner", ns, name, e))? else {
            return Ok(false);
        };
        let Some(patch) = remove_finalizer_patch(&r) else { return Ok(false) };
        match api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch)).await {
            Ok(_) => return Ok(true),
            Err(e) if is_not_found(&e) => return Ok(false),
            Err(kube::Error::Api(s)) if s.code == 422 && attempt < ATTEMPTS => attempt += 1,
            Err(e) => return Err(Error::api(op, "Runner", ns, name, e)),
        }
    }
}

/// Deletes `targets` in order; an object already gone is fine.
pub async fn uninstall(ctx: &Ctx, targets: &[Target]) -> Result<Vec<String>> {
    let mut done = Vec::new();
    for t in targets {
        let api = scoped_dynamic(&ctx.client, &t.resource, t.namespace.as_deref());
        match api.delete(&t.name, &DeleteParams::background()).await {
            Ok(_) => done.push(t.describe()),
            Err(e) if is_not_found(&e) => {}
            Err(e) => {
                let ns = t.namespace.as_deref().unwrap_or("");
                return Err(Error::api("delete", t.resource.kind.clone(), ns, &t.name, e));
            }
        }
    }
    Ok(done)
}

pub async fn run_uninstall(g: &Globals, a: UninstallArgs) -> Result<u8> {
    let ctx = g.connect().await?;
    // Refuse before asking anything: existing Runners would lose their
    // manager and be stuck behind their finalizer.
    let runners = all_runners(&ctx).await?;
    if let Some(refused) = refusal(&runners, a.force) {
        return Err(refused);
    }
    let targets = plan_uninstall(&ctx).await?;
    if targets.is_empty() && runners.is_empty() {
        output::emit("nothing to uninstall: no object carries the installed-by label\n")?;
        return Ok(super::exit::OK);
    }
    let mut question = format!("Delete {} object(s) installed by kubectl-runner", targets.len());
    if !runners.is_empty() {
        question += &format!(" and {} Runner(s)", runners.len());
    }
    confirm(&(question + "?"), a.yes)?;
    let mut lines = Vec::new();
    if !runners.is_empty() {
        let _p = Progress::spinner(format!("deleting {} Runner(s)", runners.len()));
        for note in delete_all_runners(&ctx, a.timeout).await? {
            eprint!("{}", output::warning(&note));
        }
        lines.extend(
            runners.iter().map(|r| format!("Runner {}/{}", r.namespace().unwrap_or_default(), r.name_any())),
        );
    }
    let _p = Progress::spinner(format!("deleting {} object(s)", targets.len()));
    lines.extend(uninstall(&ctx, &targets).await?);
    output::emit(&output::applied(&lines, "deleted"))?;
    Ok(super::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uninstall_deletes_the_manager_first_and_the_crd_last() {
        let kinds: Vec<String> = installable_kinds().into_iter().rev().map(|(ar, _)| ar.kind).collect();
        assert_eq!(kinds.first().map(String::as_str), Some("Deployment"));
        // Right after the manager: nothing is left serving it, and with
        // failurePolicy Fail it would refuse every Runner write.
        assert_eq!(kinds.get(1).map(String::as_str), Some("ValidatingWebhookConfiguration"));
        assert_eq!(kinds.last().map(String::as_str), Some("CustomResourceDefinition"));
        assert!(kinds.contains(&"ClusterRole".to_string()) && kinds.contains(&"Role".to_string()));
    }

    #[test]
    fn uninstall_refuses_while_runners_exist_and_lists_them() {
        let r: Runner = serde_json::from_value(serde_json::json!({
            "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner",
            "metadata": { "name": "web", "namespace": "team" }, "spec": { "image": "nginx" } }))
        .unwrap();
        let msg = refusal(std::slice::from_ref(&r), false).unwrap().to_string();
        assert!(msg.contains("1 Runner(s) still exist: team/web;") && msg.contains("--force"), "{msg}");
        assert!(refusal(&[r], true).is_none());
        assert!(refusal(&[], false).is_none());
    }
}
