//! The `kubectl runner` command tree. Each subcommand lives in its own file:
//! its clap `Args`, then `run(&Globals, args)` that validates, calls the API,
//! hands the data to `output` for rendering and returns the exit code from
//! [`exit`]. Results go to stdout through `output::emit`; spinners, prompts
//! and notices (`--fix`, `uninstall`) go to stderr.

use clap::{Parser, Subcommand};

use crate::error::{Error, Result};
use crate::service_account::ServiceAccountRef;

pub mod args;
pub mod children;
pub mod completion;
pub mod create;
pub mod delete;
pub mod describe;
pub mod diagnose;
pub mod e2e;
pub mod get;
pub mod install;
pub mod manager_rollout;
pub mod manifests;
pub mod output;
pub mod progress;
pub mod run_manager;
pub mod runner_file;
pub mod scale;
pub mod selection;
pub mod uninstall;

pub use crate::exit;

const AFTER_HELP: &str = "\
Exit codes:
  0  success
  1  failure (API error, timeout, refused action)
  2  usage error (bad flag or value)
  3  diagnose found errors

Examples:
  kubectl runner create web --image nginx:1.27 --replicas 2 --wait
  kubectl runner get -A
  kubectl runner diagnose web";

/// Manage Runners: create, scale, inspect and delete them, run the reconcile
/// manager, diagnose failures, and prove the lifecycle end to end.
#[derive(Debug, Parser)]
#[command(name = "kubectl-runner", bin_name = "kubectl runner", version, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(flatten)]
    pub globals: Globals,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every subcommand accepts, kubectl-style.
#[derive(Debug, Clone, clap::Args)]
pub struct Globals {
    /// Namespace to use (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Act on all namespaces where that makes sense (get, diagnose; delete and scale with -l or --all).
    #[arg(short = 'A', long = "all-namespaces", global = true)]
    pub all_namespaces: bool,
    /// Kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// More logs on stderr: -v info, -vv debug, -vvv trace.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a Runner from flags or from a manifest file.
    Create(create::CreateArgs),
    /// Change a Runner's replica count through the scale subresource.
    Scale(scale::ScaleArgs),
    /// List Runners, or show one.
    Get(get::GetArgs),
    /// Show a Runner's spec, status, conditions, children and Events.
    Describe(describe::DescribeArgs),
    /// Delete Runners, optionally waiting until their children are gone.
    Delete(delete::DeleteArgs),
    /// Install the CRD and RBAC (and optionally the in-cluster manager).
    Install(install::InstallArgs),
    /// Remove what `install` installed.
    Uninstall(uninstall::UninstallArgs),
    /// Print the generated CRD, RBAC and manager manifests.
    Manifests(manifests::ManifestsArgs),
    /// Run the reconcile manager with the current kubeconfig.
    RunManager(run_manager::RunManagerArgs),
    /// Explain why a Runner or the manager is not working.
    Diagnose(diagnose::DiagnoseArgs),
    /// Prove the whole Runner lifecycle on the current cluster.
    E2e(e2e::E2eArgs),
    /// Print a shell completion script.
    Completion(completion::CompletionArgs),
}

/// A connected client and the namespace the user meant.
#[derive(Clone)]
pub struct Ctx {
    pub client: kube::Client,
    /// `-n`, else the context's namespace, else "default".
    pub namespace: String,
    pub all_namespaces: bool,
}

impl Globals {
    /// Loads the kubeconfig (honouring --kubeconfig and --context) and
    /// connects. Only subcommands that talk to a cluster call this.
    pub async fn connect(&self) -> Result<Ctx> {
        self.connect_as(None).await
    }

    /// Like [`connect`](Self::connect), but with `sa` every request acts as
    /// that ServiceAccount (`--as-service-account`), once the kubeconfig's
    /// own identity is known to be allowed to.
    pub async fn connect_as(&self, sa: Option<&ServiceAccountRef>) -> Result<Ctx> {
        let opts = kube::config::KubeConfigOptions { context: self.context.clone(), ..Default::default() };
        let kc_err = |e: kube::config::KubeconfigError| Error::Kubeconfig(e.to_string());
        let config = match &self.kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| Error::Kubeconfig(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(kc, &opts).await.map_err(kc_err)?
            }
            None if self.context.is_some() => kube::Config::from_kubeconfig(&opts).await.map_err(kc_err)?,
            // No flags: in-cluster config when running as a Pod, else the kubeconfig.
            None => kube::Config::infer().await.map_err(|e| Error::Kubeconfig(e.to_string()))?,
        };
        let namespace = self.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
        let mut config = config;
        crate::client::identify(&mut config);
        if let Some(sa) = sa {
            crate::service_account::act_as(&mut config, sa).await?;
        }
        let client = kube::Client::try_from(config).map_err(|e| Error::Kubeconfig(e.to_string()))?;
        Ok(Ctx { client, namespace, all_namespaces: self.all_namespaces })
    }
}

/// Runs the parsed command and returns the process exit code.
pub async fn run(cli: Cli) -> Result<u8> {
    let g = &cli.globals;
    match cli.command {
        Command::Create(a) => create::run(g, a).await,
        Command::Scale(a) => scale::run(g, a).await,
        Command::Get(a) => get::run(g, a).await,
        Command::Describe(a) => describe::run(g, a).await,
        Command::Delete(a) => delete::run(g, a).await,
        Command::Install(a) => install::run_install(g, a).await,
        Command::Uninstall(a) => uninstall::run_uninstall(g, a).await,
        Command::Manifests(a) => manifests::run(a),
        Command::RunManager(a) => run_manager::run(g, a).await,
        Command::Diagnose(a) => diagnose::run(g, a).await,
        Command::E2e(a) => e2e::run(g, a).await,
        Command::Completion(a) => completion::run(a),
    }
}
