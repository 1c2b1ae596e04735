//! `kubectl runner install`: server-side apply of [`crate::manifests`]
//! (CRD, RBAC, and with `--with-manager` the in-cluster manager with its
//! conversion webhook), then wait for the CRD to be Established. Without
//! the manager nothing converts, so the CRD serves the storage version only,
//! and install refuses where stored Runners would need a conversion
//! ([`without_webhook`]). Its inverse is in `uninstall`.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

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
    /// (as `kubectl rollout status`), naming its Pods' problems if not, and
    /// until its webhooks answer (a server-side dry-run create of a Runner).
    #[arg(long, requires = "with_manager")]
    pub wait: bool,
    /// How long to wait for the CRD to be Established (and with --wait, for
    /// the manager's rollout, and again for its webhooks).
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
    if !a.with_manager {
        let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
        let live = crds
            .get_opt(crate::api::CRD_NAME)
            .await
            .map_err(|e| Error::api("get", "CustomResourceDefinition", "", crate::api::CRD_NAME, e))?;
        without_webhook(live.as_ref()).map_err(Error::InstallRefused)?;
    }
    let server_dry = a.dry_run == DryRun::Server;
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

/// Pure: Ok when the CRD may serve the storage version alone, with no
/// conversion: it is absent, or every stored Runner is at that version and
/// no webhook converts (a manager installed with it would be cut off).
/// Else what is missing, and the command that provides it.
pub fn without_webhook(live: Option<&CustomResourceDefinition>) -> std::result::Result<(), String> {
    let Some(live) = live else { return Ok(()) };
    let served = manifests::crd().spec.versions.into_iter().filter(|v| v.served);
    let storage = served.map(|v| v.name).collect::<Vec<_>>();
    let with_manager = "kubectl runner install --with-manager --image IMAGE";
    if live.spec.conversion.as_ref().is_some_and(|c| c.strategy == "Webhook") {
        return Err(format!(
            "the Runner CRD converts between its versions through the manager's webhook; without --with-manager \
             install would remove it. Keep it: `{with_manager}`"
        ));
    }
    let stored = live.status.as_ref().and_then(|s| s.stored_versions.clone()).unwrap_or_default();
    let old: Vec<&String> = stored.iter().filter(|v| !storage.contains(v)).collect();
    if old.is_empty() {
        return Ok(());
    }
    let old = old.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ");
    Err(format!(
        "Runners are stored as {old}, which only a conversion can serve as {}; install without the manager \
         serves {} alone and would leave them unreadable. Missing: the conversion webhook: `{with_manager}` \
         (then `kubectl runner migrate` moves them to {})",
        storage.join(", "),
        storage.join(", "),
        storage.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(stored: &[&str], strategy: &str) -> CustomResourceDefinition {
        let mut crd = manifests::runner_crd();
        crd.spec.conversion = Some(Default::default());
        crd.spec.conversion.as_mut().unwrap().strategy = strategy.into();
        crd.status = Some(Default::default());
        crd.status.as_mut().unwrap().stored_versions = Some(stored.iter().map(|s| s.to_string()).collect());
        crd
    }

    #[test]
    fn without_the_manager_install_goes_ahead_only_where_nothing_needs_converting() {
        let storage = crate::api::VERSION;
        assert_eq!(without_webhook(None), Ok(()), "no CRD yet");
        assert_eq!(without_webhook(Some(&live(&[storage], "None"))), Ok(()));
        let e = without_webhook(Some(&live(&["v0old", storage], "None"))).unwrap_err();
        assert!(e.starts_with("Runners are stored as v0old,"), "{e}");
        assert!(e.contains("install --with-manager"), "{e}");
        let e = without_webhook(Some(&live(&[storage], "Webhook"))).unwrap_err();
        assert!(e.contains("through the manager's webhook") && e.contains("install --with-manager"), "{e}");
    }

    #[test]
    fn without_the_manager_the_crd_serves_the_storage_version_only_with_no_conversion() {
        let a = InstallArgs {
            namespace_scoped: vec![],
            with_manager: false,
            image: None,
            dry_run: DryRun::None,
            wait: false,
            timeout: Duration::from_secs(1),
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
