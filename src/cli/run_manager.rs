//! `kubectl runner run-manager`: the reconcile manager, with the current
//! kubeconfig locally or the Pod's ServiceAccount in the cluster.

use std::net::SocketAddr;

use super::Globals;
use crate::error::Result;
use crate::manager::{self, Config};

const EXAMPLES: &str = "\
Examples:
  # Reconcile Runners in every namespace with your kubeconfig
  kubectl runner run-manager

  # Only the 'team-a' namespace, with metrics and health endpoints
  kubectl runner run-manager -n team-a --metrics-addr 127.0.0.1:8080 --health-addr 127.0.0.1:8081

  # Take part in leader election with the in-cluster manager
  kubectl runner run-manager --leader-elect";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Namespace scope comes from the global -n/--namespace: given, the manager
/// watches that namespace only; absent, it watches all namespaces (unlike
/// other subcommands, it does not fall back to the context's namespace).
#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct RunManagerArgs {
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:8080).
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
    /// Serve /healthz and /readyz on this address (e.g. 127.0.0.1:8081).
    #[arg(long)]
    pub health_addr: Option<SocketAddr>,
    /// Hold the leader Lease before reconciling, so only one manager acts.
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease (default: $POD_NAMESPACE or runner-system).
    #[arg(long)]
    pub lease_namespace: Option<String>,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Skip the startup check of the CRD and permissions.
    #[arg(long)]
    pub skip_preflight: bool,
}

impl RunManagerArgs {
    /// True when `--log-format json` was given.
    pub fn log_format_json(&self) -> bool {
        self.log_format == LogFormat::Json
    }
}

pub async fn run(g: &Globals, a: RunManagerArgs) -> Result<u8> {
    let ctx = g.connect().await?;
    let mut cfg = match &g.namespace {
        Some(ns) => Config::namespaced(ns),
        None => Config::all_namespaces(),
    };
    cfg.metrics_addr = a.metrics_addr;
    cfg.health_addr = a.health_addr;
    cfg.leader_elect = a.leader_elect;
    cfg.preflight = !a.skip_preflight;
    if let Some(ns) = a.lease_namespace {
        cfg.lease_namespace = ns;
    }
    manager::run(ctx.client, cfg, shutdown_signal()).await?;
    Ok(super::exit::OK)
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
