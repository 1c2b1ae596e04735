//! `kubectl runner install`: server-side apply of [`crate::manifests`]
//! (CRD, RBAC, and with `--with-manager` the in-cluster manager), then wait
//! for the CRD to be Established. Its inverse is in `uninstall`.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};

use super::args::{DryRun, parse_duration};
use super::error::{Error, Result};
use super::output;
use super::progress::Progress;
use super::{Ctx, Globals};
use crate::api::FIELD_MANAGER;
use crate::client::scoped_dynamic;
use crate::error::{FromApi, is_not_found};
use crate::manifests::{self, Manifest, RbacScope};

const INSTALL_HELP: &str = "\
Examples:
  kubectl runner install
  kubectl runner install --namespace-scoped team-a --namespace-scoped team-b
  kubectl runner install --with-manager --image ghcr.io/example/kubectl-runner:0.1.0 --wait
  kubectl runner install --dry-run=server";

#[derive(Debug, clap::Args)]
#[command(after_help = INSTALL_HELP)]
pub struct InstallArgs {
    /// Grant the manager access only in these namespaces (repeatable);
    /// default: a ClusterRole for all namespaces.
    #[arg(long = "namespace-scoped", value_name = "NS")]
    pub namespace_scoped: Vec<String>,
    /// Also run the manager in the cluster (needs --image).
    #[arg(long, requires = "image")]
    pub with_manager: bool,
    /// Manager image for --with-manager.
    #[arg(long, requires = "with_manager")]
    pub image: Option<String>,
    /// server: let the apiserver validate everything, store nothing.
    #[arg(long, value_enum, default_value_t, num_args = 0..=1, default_missing_value = "client", require_equals = true)]
    pub dry_run: DryRun,
    /// With --with-manager: wait until the manager's rollout is complete
    /// (as `kubectl rollout status`), naming its Pods' problems if not.
    #[arg(long, requires = "with_manager")]
    pub wait: bool,
    /// How long to wait for the CRD to be Established (and with --wait, for
    /// the manager's rollout).
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// The manifests `install` applies for these flags.
pub fn plan_install(a: &InstallArgs) -> Vec<Manifest> {
    let scope = if a.namespace_scoped.is_empty() {
        RbacScope::Cluster
    } else {
        RbacScope::Namespaces(a.namespace_scoped.clone())
    };
    manifests::all(a.with_manager.then_some(a.image.as_deref()).flatten(), &scope)
}

/// Server-side applies each manifest in order (forcing ownership of the
/// fields this tool sets, with strict field validation), then waits for the
/// CRD to be Established. Returns `Kind/name` of each applied object.
pub async fn install(
    ctx: &Ctx,
    items: &[Manifest],
    server_dry_run: bool,
    timeout: Duration,
) -> Result<Vec<String>> {
    let mut pp = PatchParams::apply(FIELD_MANAGER).force().validation_strict();
    pp.dry_run = server_dry_run;
    let mut done = Vec::new();
    // A dry run creates no Namespace, so objects in one it would create
    // cannot be checked yet; they are listed as skipped, not failed.
    let planned_ns: Vec<String> =
        items.iter().filter(|m| m.resource.kind == "Namespace").map(|m| m.object.name_any()).collect();
    for m in items {
        let name = m.object.name_any();
        let ns = m.object.namespace();
        let api = scoped_dynamic(&ctx.client, &m.resource, ns.as_deref().filter(|_| m.namespaced));
        match api.patch(&name, &pp, &Patch::Apply(&m.object)).await {
            Ok(_) => done.push(m.describe()),
            Err(e)
                if server_dry_run
                    && is_not_found(&e)
                    && ns.as_ref().is_some_and(|n| planned_ns.contains(n)) =>
            {
                done.push(format!("{} (skipped: its namespace does not exist yet)", m.describe()));
            }
            Err(e) => {
                return Err(Error::api(
                    "apply",
                    m.resource.kind.clone(),
                    ns.as_deref().unwrap_or(""),
                    &name,
                    e,
                ));
            }
        }
    }
    if !server_dry_run && items.iter().any(|m| m.resource.kind == "CustomResourceDefinition") {
        wait_established(ctx, timeout).await?;
    }
    Ok(done)
}

async fn wait_established(ctx: &Ctx, timeout: Duration) -> Result<()> {
    Ok(crate::client::wait_crd_established(&ctx.client, timeout).await?)
}

pub async fn run_install(g: &Globals, a: InstallArgs) -> Result<u8> {
    for ns in &a.namespace_scoped {
        super::args::validate_name(ns)
            .map_err(|_| Error::Invalid(format!("--namespace-scoped {ns:?} is not a namespace name")))?;
    }
    let items = plan_install(&a);
    if a.dry_run == DryRun::Client {
        return output::emit(&manifests::to_yaml(&items)).map(|()| super::exit::OK);
    }
    let ctx = g.connect().await?;
    let server_dry = a.dry_run == DryRun::Server;
    let progress = Progress::spinner(format!("applying {} objects", items.len()));
    let done = install(&ctx, &items, server_dry, a.timeout).await?;
    drop(progress);
    let verb = if server_dry { "applied (server dry run)" } else { "applied" };
    output::emit(&output::applied(&done, verb))?;
    if a.wait && !server_dry {
        let progress = Progress::spinner("waiting for the manager's rollout");
        super::manager_rollout::wait(&ctx.client, a.timeout).await?;
        drop(progress);
        output::emit(&format!(
            "deployment {}/{} rolled out\n",
            manifests::MANAGER_NAMESPACE,
            manifests::MANAGER_NAME
        ))?;
    }
    Ok(super::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_scoped_install_plans_roles_and_no_cluster_role() {
        let a = InstallArgs {
            namespace_scoped: vec!["a".into()],
            with_manager: false,
            image: None,
            dry_run: DryRun::None,
            wait: false,
            timeout: Duration::from_secs(1),
        };
        let plan: Vec<String> = plan_install(&a).iter().map(Manifest::describe).collect();
        assert!(plan.contains(&"Role a/runner-manager".to_string()), "{plan:?}");
        // The only ClusterRoles are the tenant roles, which go with the
        // (cluster-wide) CRD; the manager's grants stay in its namespaces.
        let cluster_roles: Vec<&String> = plan.iter().filter(|p| p.starts_with("ClusterRole")).collect();
        let tenant: Vec<String> =
            manifests::tenant_role_names().iter().map(|n| format!("ClusterRole/{n}")).collect();
        assert_eq!(cluster_roles, tenant.iter().collect::<Vec<_>>(), "{plan:?}");
        assert!(!plan.iter().any(|p| p.starts_with("Deployment")), "{plan:?}");
    }
}
