//! The `kubectl runner` command tree. Each subcommand lives in its own file:
//! its clap `Args`, then `run(&Globals, args)` that validates, calls the API,
//! hands the data to `output` for rendering and returns the exit code from
//! [`exit`]. Results go to stdout through `output::emit`; spinners, prompts
//! and notices (`--fix`, `uninstall`) go to stderr.

use clap::{Parser, Subcommand};

use crate::service_account::ServiceAccountRef;

pub mod args;
pub mod child_summary;
pub mod completion;
pub mod connection;
pub mod create;
pub mod delete;
pub mod describe;
pub mod diagnose;
pub mod e2e;
pub mod error;
pub mod get;
pub mod history;
pub mod install;
pub mod install_back;
pub mod manager_rollout;
pub mod manifests;
pub mod migrate;
pub mod output;
pub mod progress;
pub mod run_manager;
pub mod runner_file;
pub mod scale;
pub mod selection;
pub mod uninstall;

pub use crate::exit;
pub use error::{Error, Result};

const AFTER_HELP: &str = "\
Exit codes:
  0  success
  1  failure (API error, timeout, refused action)
  2  usage error (bad flag or value; --yes missing with no terminal to ask)
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
    /// Act on all namespaces where that makes sense (get, history, diagnose; delete and scale with -l or --all).
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
    #[command(flatten)]
    pub connection: connection::ConnectionFlags,
    /// The apiserver the command talked to, once it connected: the error
    /// lines name it.
    #[arg(skip)]
    pub server: std::sync::Arc<std::sync::OnceLock<http::Uri>>,
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
    /// List deleted Runners with their last spec.
    History(history::HistoryArgs),
    /// Install the CRD and RBAC (and optionally the in-cluster manager).
    Install(install::InstallArgs),
    /// Remove what `install` installed.
    Uninstall(uninstall::UninstallArgs),
    /// Print the generated CRD, RBAC and manager manifests.
    Manifests(manifests::ManifestsArgs),
    /// Move every stored Runner to the storage version, then prune the CRD's storedVersions.
    Migrate(migrate::MigrateArgs),
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
    /// own identity is known to be allowed to. The one place where the
    /// kubeconfig and kubectl's connection flags become a client.
    pub async fn connect_as(&self, sa: Option<&ServiceAccountRef>) -> Result<Ctx> {
        let flags = &self.connection;
        flags.validate(sa)?;
        if let Some((flag, path)) = flags.files().find(|(_, p)| !p.is_file()) {
            return Err(Error::Invalid(format!("{flag} {}: no such file", path.display())));
        }
        let mut config = self.load_config().await?;
        flags.apply(&mut config);
        crate::client::identify(&mut config);
        let _ = self.server.set(config.cluster_url.clone());
        let namespace = self.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
        let build = |c: kube::Config| {
            crate::client::build(c, flags.request_timeout()).map_err(|e| Error::Kubeconfig(e.to_string()))
        };
        if let Some(sa) = sa {
            crate::service_account::act_as(&build(config.clone())?, &mut config, sa).await?;
        }
        let client = build(config)?;
        Ok(Ctx { client, namespace, all_namespaces: self.all_namespaces })
    }

    /// The kubeconfig (`--kubeconfig`, else `$KUBECONFIG` or
    /// `~/.kube/config`), with the context, cluster and user the flags pick.
    /// Without one, kubectl goes by `--server` alone, or by the Pod's
    /// in-cluster configuration.
    async fn load_config(&self) -> Result<kube::Config> {
        let flags = &self.connection;
        let opts = flags.kubeconfig_options(self.context.as_deref());
        let picks = opts.context.is_some() || opts.cluster.is_some() || opts.user.is_some();
        let kubeconfig = match &self.kubeconfig {
            Some(path) => {
                kube::config::Kubeconfig::read_from(path).map_err(|e| format!("{}: {e}", path.display()))
            }
            None => kube::config::Kubeconfig::read().map_err(|e| e.to_string()),
        };
        match kubeconfig {
            Ok(kc) => {
                flags.check_user(&kc)?;
                kube::Config::from_custom_kubeconfig(kc, &opts)
                    .await
                    .map_err(|e| Error::Kubeconfig(e.to_string()))
            }
            Err(e) if self.kubeconfig.is_some() || picks => Err(Error::Kubeconfig(e)),
            Err(e) => match (kube::Config::incluster(), &flags.server) {
                (Ok(config), _) => Ok(config),
                (Err(_), Some(server)) => Ok(kube::Config::new(server.clone())),
                (Err(in_cluster), None) => {
                    Err(Error::Kubeconfig(format!("{e}; not in a cluster either ({in_cluster})")))
                }
            },
        }
    }

    /// What the error lines need to name: the server, once connected, and
    /// the request timeout.
    pub fn endpoint(&self) -> output::failure::Endpoint {
        output::failure::Endpoint {
            server: self.server.get().cloned(),
            request_timeout: self.connection.request_timeout(),
        }
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
        Command::History(a) => history::run(g, a).await,
        Command::Install(a) => install::run_install(g, a).await,
        Command::Uninstall(a) => uninstall::run_uninstall(g, a).await,
        Command::Manifests(a) => manifests::run(a),
        Command::Migrate(a) => migrate::run(g, a).await,
        Command::RunManager(a) => run_manager::run(g, a).await,
        Command::Diagnose(a) => diagnose::run(g, a).await,
        Command::E2e(a) => e2e::run(g, a).await,
        Command::Completion(a) => completion::run(a),
    }
}
