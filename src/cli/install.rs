//! `kubectl runner install`: server-side apply of [`crate::manifests`]
//! (CRD, RBAC, and with `--with-manager` the in-cluster manager with its
//! conversion webhook), then wait for the CRD to be Established. Without
//! the manager nothing converts, so the CRD serves the storage version only:
//! on a cluster that had the webhooks, install takes them back once
//! confirmed, and refuses where stored Runners would need a conversion
//! ([`super::install_back`]). Its inverse is in `uninstall`.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

use super::args::{DryRun, parse_duration};
use super::error::{Error, Result};
use super::install_back::{self, Plan};
use super::output;
use super::progress::Progress;
use super::{Ctx, Globals};
use crate::api::{CRD_NAME, FIELD_MANAGER};
use crate::client::scoped_dynamic;
use crate::error::{FromApi, is_not_found};
use crate::manifests::{self, Manifest, RbacScope};
use crate::webhook::VALIDATING_CONFIG;

const INSTALL_HELP: &str = "\
Examples:
  kubectl runner install
  kubectl runner install --namespace-scoped team-a --namespace-scoped team-b
  kubectl runner install --with-manager --image ghcr.io/example/kubectl-runner:0.1.0 --wait
  kubectl runner install --dry-run=server
  kubectl runner install --yes   # back from --with-manager: the storage version alone, no webhooks";

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
    /// (as `kubectl rollout status`), naming its Pods' problems if not, and
    /// until its webhooks answer (a server-side dry-run create of a Runner).
    #[arg(long, requires = "with_manager")]
    pub wait: bool,
    /// How long to wait for the CRD to be Established (and with --wait, for
    /// the manager's rollout, and again for its webhooks).
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Without --with-manager on a cluster that has the webhooks: take them
    /// back (as listed) without asking.
    #[arg(long, short = 'y', conflicts_with = "with_manager")]
    pub yes: bool,
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

/// Install without the manager on what is there ([`install_back::plan`]):
/// goes ahead, refuses, or takes the webhooks back once confirmed (a server
/// dry run only says what it would take back).
async fn without_manager(ctx: &Ctx, yes: bool, server_dry: bool) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(ctx.client.clone());
    let (live, validating) = tokio::join!(crds.get_opt(CRD_NAME), vwcs.get_opt(VALIDATING_CONFIG));
    let live = live.map_err(|e| Error::api("get", "CustomResourceDefinition", "", CRD_NAME, e))?;
    let validating = validating
        .map_err(|e| Error::api("get", "ValidatingWebhookConfiguration", "", VALIDATING_CONFIG, e))?
        .is_some();
    match install_back::plan(live.as_ref(), validating) {
        Plan::Apply => Ok(()),
        Plan::Refuse(why) => Err(Error::InstallRefused(why)),
        Plan::Back(changes) => {
            eprint!("{}", install_back::describe(&changes));
            if server_dry {
                return Ok(());
            }
            super::progress::confirm(install_back::QUESTION, yes)?;
            install_back::go_back(&ctx.client).await
        }
    }
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
    if !a.with_manager {
        without_manager(&ctx, a.yes, server_dry).await?;
    }
    let progress = Progress::spinner(format!("applying {} objects", items.len()));
    let done = install(&ctx, &items, server_dry, a.timeout).await?;
    drop(progress);
    let verb = if server_dry { "applied (server dry run)" } else { "applied" };
    output::emit(&output::applied(&done, verb))?;
    if a.wait && !server_dry {
        let progress = Progress::spinner("waiting for the manager's rollout");
        super::manager_rollout::wait(&ctx.client, a.timeout).await?;
        super::manager_rollout::wait_webhooks(&ctx.client, a.timeout).await?;
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
    fn without_the_manager_the_crd_serves_the_storage_version_only_with_no_conversion() {
        let a = InstallArgs {
            namespace_scoped: vec![],
            with_manager: false,
            image: None,
            dry_run: DryRun::None,
            wait: false,
            timeout: Duration::from_secs(1),
            yes: false,
        };
        let crd = &plan_install(&a)[0].object.data;
        assert!(crd["spec"].get("conversion").is_none(), "{crd}");
        let versions = crd["spec"]["versions"].as_array().unwrap();
        assert!(versions.iter().all(|v| v["served"] == v["storage"]), "{versions:?}");
        let with = plan_install(&InstallArgs { with_manager: true, image: Some("img".into()), ..a });
        let crd = &with[0].object.data;
        assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook");
        assert_eq!(crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["name"], "runner-webhook");
        assert!(crd["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle").is_none());
        let versions = crd["spec"]["versions"].as_array().unwrap();
        assert_eq!(versions.len(), crate::api::VERSIONS.len());
        assert!(versions.iter().all(|v| v["served"] == true), "{versions:?}");
        let kinds: Vec<String> = with.iter().map(Manifest::describe).collect();
        for k in ["Secret runner-system/runner-webhook-tls", "Service runner-system/runner-webhook"] {
            assert!(kinds.contains(&k.to_string()), "{k} in {kinds:?}");
        }
    }

    #[test]
    fn namespace_scoped_install_plans_roles_and_no_cluster_role() {
        let a = InstallArgs {
            namespace_scoped: vec!["a".into()],
            with_manager: false,
            image: None,
            dry_run: DryRun::None,
            wait: false,
            timeout: Duration::from_secs(1),
            yes: false,
        };
        let plan: Vec<String> = plan_install(&a).iter().map(Manifest::describe).collect();
        assert!(plan.contains(&"Role a/runner-manager".to_string()), "{plan:?}");
        // The only ClusterRoles are the tenant roles and the webhook's, which
        // go with the (cluster-wide) CRD; the manager's grants stay in its
        // namespaces.
        let cluster_roles: Vec<&String> = plan.iter().filter(|p| p.starts_with("ClusterRole/")).collect();
        let mut expected: Vec<String> = vec![format!("ClusterRole/{}", manifests::WEBHOOK_ROLE)];
        expected.extend(manifests::tenant_role_names().iter().map(|n| format!("ClusterRole/{n}")));
        assert_eq!(cluster_roles, expected.iter().collect::<Vec<_>>(), "{plan:?}");
        assert!(!plan.iter().any(|p| p.starts_with("Deployment")), "{plan:?}");
    }
}
