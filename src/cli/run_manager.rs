//! `kubectl runner run-manager`: the reconcile manager, with the current
//! kubeconfig locally or the Pod's ServiceAccount in the cluster; locally
//! with `--as-service-account`, as that ServiceAccount (impersonated), so it
//! meets exactly the permissions the in-cluster manager would.

use std::net::SocketAddr;

use super::Globals;
use super::diagnose::parse_service_account;
use super::error::{Error, Result};
use crate::manager::webhook::WebhookConfig;
use crate::manager::webhook::local::LocalConfig;
use crate::manager::{self, Config};
use crate::service_account::{MANAGER_SERVICE_ACCOUNT, ServiceAccountRef};
use crate::webhook::Target;

const EXAMPLES: &str = "\
Examples:
  # Reconcile Runners in every namespace with your kubeconfig
  kubectl runner run-manager

  # Only the 'team-a' namespace, with metrics and health endpoints
  kubectl runner run-manager -n team-a --metrics-addr 127.0.0.1:8080 --health-addr 127.0.0.1:8081

  # Exactly the namespaces 'team-a' and 'team-b'
  kubectl runner run-manager --watch-namespace team-a,team-b

  # Take part in leader election with the in-cluster manager
  kubectl runner run-manager --leader-elect

  # With exactly the installed manager's permissions (needs: impersonate
  # serviceaccounts in runner-system); denials show up here, not in the cluster
  kubectl runner run-manager --as-service-account

  # As another ServiceAccount; its Lease lives in its namespace, as in a Pod
  kubectl runner run-manager -n team-a --as-service-account team-a/runner --leader-elect

  # Serve the conversion and validating webhooks from this process: the
  # Runner CRD and the ValidatingWebhookConfiguration point here until you
  # stop it (Ctrl-C puts them back); the address is found (the loopback for
  # a local control plane, the Docker network's gateway for kind)
  kubectl runner run-manager --local-webhooks

  # The same, at an address you choose, while the in-cluster manager leads
  # (it gets the registrations back on exit)
  kubectl runner run-manager --local-webhooks --webhook-host 192.168.1.20 --take-over

  # The same identity without the check first (kubectl's flag)
  kubectl runner run-manager -n team-a --as system:serviceaccount:team-a:runner";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Namespace scope: `--watch-namespace a,b` watches exactly those; the
/// global -n/--namespace alone watches that one; neither watches all
/// namespaces (unlike other subcommands, it does not fall back to the
/// context's namespace).
#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct RunManagerArgs {
    /// Watch exactly these namespaces (comma separated or repeated); a
    /// watch per kind and namespace feeds one cache. Instead of -n.
    #[arg(long, value_name = "NS[,NS...]", value_delimiter = ',')]
    pub watch_namespace: Vec<String>,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:8080).
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
    /// Serve /metrics only to callers whose bearer token the apiserver
    /// accepts and who may `get` /metrics (TokenReview and
    /// SubjectAccessReview; bind the runner-metrics-reader ClusterRole).
    #[arg(long, requires = "metrics_addr")]
    pub metrics_auth: bool,
    /// Serve /healthz and /readyz on this address (e.g. 127.0.0.1:8081).
    #[arg(long)]
    pub health_addr: Option<SocketAddr>,
    /// Hold the leader Lease before reconciling, so only one manager acts.
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease (default: the --as-service-account
    /// namespace, else $POD_NAMESPACE, else runner-system).
    #[arg(long)]
    pub lease_namespace: Option<String>,
    /// Reconcile passes in flight at once (each holds one connection to the
    /// apiserver while it writes).
    #[arg(long, default_value_t = manager::DEFAULT_CONCURRENCY,
          value_parser = clap::value_parser!(u16).range(1..=manager::MAX_CONCURRENCY as i64))]
    pub concurrency: u16,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Serve the conversion and validating webhooks (HTTPS /convert and
    /// /validate) on this address,
    /// with a certificate kept in the Secret runner-webhook-tls of the
    /// manager's namespace (the Lease namespace); the in-cluster manager
    /// listens on 0.0.0.0:9443 behind the Service runner-webhook.
    #[arg(long, value_name = "ADDR")]
    pub webhook_listen: Option<SocketAddr>,
    /// Serve the conversion and validating webhooks from this process with a
    /// throwaway certificate, point the Runner CRD and the
    /// ValidatingWebhookConfiguration here, and put them back on exit
    /// (after a crash: `kubectl runner diagnose --fix`). --webhook-listen
    /// then picks the bound address (default: the host's, a free port).
    #[arg(long)]
    pub local_webhooks: bool,
    /// With --local-webhooks: the IP address or DNS name the apiserver
    /// dials (default: this machine's address on the route to the
    /// apiserver).
    #[arg(long, value_name = "HOST", requires = "local_webhooks", value_parser = parse_webhook_host)]
    pub webhook_host: Option<String>,
    /// With --local-webhooks: serve them even while an in-cluster manager
    /// leads; its registrations are handed back on exit.
    #[arg(long, requires = "local_webhooks")]
    pub take_over: bool,
    /// Skip the startup check of the CRD and permissions.
    #[arg(long)]
    pub skip_preflight: bool,
    /// Act as this ServiceAccount, NS/NAME (alone: the installed manager's,
    /// runner-system/runner-controller-manager): every request is
    /// impersonated, so the preflight and every reconcile meet its RBAC.
    /// Your own identity needs `impersonate` on that ServiceAccount, which
    /// is checked first. It is `--as system:serviceaccount:NS:NAME` with that
    /// check, so it cannot be combined with --as, --as-group or --as-uid
    /// (the apiserver impersonates one identity per request).
    #[arg(long, value_name = "NS/NAME", num_args = 0..=1,
          default_missing_value = MANAGER_SERVICE_ACCOUNT, value_parser = parse_service_account)]
    pub as_service_account: Option<ServiceAccountRef>,
}

impl RunManagerArgs {
    /// True when `--log-format json` was given.
    pub fn log_format_json(&self) -> bool {
        self.log_format == LogFormat::Json
    }
}

pub async fn run(g: &Globals, a: RunManagerArgs) -> Result<u8> {
    let namespaces = watched(g.namespace.as_deref(), &a.watch_namespace)?;
    let ctx = g.connect_as(a.as_service_account.as_ref()).await?;
    let mut cfg = Config::all_namespaces();
    cfg.namespaces = namespaces;
    cfg.metrics_addr = a.metrics_addr;
    cfg.health_addr = a.health_addr;
    cfg.leader_elect = a.leader_elect;
    cfg.metrics_auth = a.metrics_auth;
    cfg.concurrency = a.concurrency;
    cfg.preflight = !a.skip_preflight;
    if let Some(sa) = &a.as_service_account {
        tracing::info!(user = %sa.user(), "acting as ServiceAccount {sa}");
        // A Pod runs in its ServiceAccount's namespace and keeps its Lease there.
        cfg.lease_namespace = sa.namespace.clone();
    }
    if let Some(ns) = a.lease_namespace {
        cfg.lease_namespace = ns;
    }
    if a.local_webhooks {
        cfg.local_webhooks = Some(LocalConfig {
            host: a.webhook_host,
            listen: a.webhook_listen,
            take_over: a.take_over,
            lease_namespace: cfg.lease_namespace.clone(),
            server_host: g.server.get().and_then(|u| u.host()).map(str::to_string),
            probe_namespace: cfg.namespaces.first().cloned().unwrap_or_else(|| ctx.namespace.clone()),
        });
    }
    cfg.webhook = a.webhook_listen.filter(|_| !a.local_webhooks).map(|listen| {
        let namespace = cfg.lease_namespace.clone();
        WebhookConfig { listen, target: Target::Service { namespace: namespace.clone() }, namespace }
    });
    manager::run(ctx.client, cfg, shutdown_signal()).await?;
    Ok(super::exit::OK)
}

/// The namespaces to watch (empty: all), validated before any API call.
fn watched(namespace: Option<&str>, watch: &[String]) -> Result<Vec<String>> {
    let namespaces: Vec<String> = match (namespace, watch) {
        (Some(_), [_, ..]) => {
            return Err(Error::Invalid(
                "--watch-namespace and -n/--namespace: give one (--watch-namespace takes a list)".into(),
            ));
        }
        (Some(ns), []) => vec![ns.to_string()],
        (None, list) => list.to_vec(),
    };
    let mut unique = Vec::new();
    for ns in namespaces {
        super::args::validate_name(&ns).map_err(|_| {
            Error::Invalid(format!(
                "namespace {ns:?} (-n/--watch-namespace) is not a namespace name (a lowercase RFC 1123 label)"
            ))
        })?;
        if !unique.contains(&ns) {
            unique.push(ns);
        }
    }
    Ok(unique)
}

/// `--webhook-host`: an IP address, or a DNS name the certificate can hold.
fn parse_webhook_host(host: &str) -> std::result::Result<String, String> {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return Ok(host.to_string());
    }
    crate::api::rules::check_host("--webhook-host", host)
        .map(|()| host.to_string())
        .map_err(|e| format!("{e} (or give an IP address)"))
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};
    use crate::service_account::ServiceAccountRef;

    #[test]
    fn concurrency_outside_its_range_is_refused_naming_the_flag_and_range() {
        let argv = ["kubectl-runner", "run-manager", "--concurrency", "0"];
        let err = Cli::try_parse_from(argv).unwrap_err().to_string();
        assert!(err.contains("--concurrency") && err.contains("1..="), "{err}");
        assert_eq!(parse(&["--concurrency", "16"]).concurrency, 16);
        assert_eq!(parse(&[]).concurrency, crate::manager::DEFAULT_CONCURRENCY);
    }

    fn parse(args: &[&str]) -> super::RunManagerArgs {
        let argv = ["kubectl-runner", "run-manager"].iter().chain(args);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::RunManager(a) => a,
            _ => unreachable!("parsed as run-manager"),
        }
    }

    #[test]
    fn watch_namespace_takes_a_list_and_n_alone_stays_one_namespace() {
        assert_eq!(parse(&["--watch-namespace", "a,b"]).watch_namespace, ["a", "b"]);
        assert_eq!(parse(&["--watch-namespace", "a", "--watch-namespace=b"]).watch_namespace, ["a", "b"]);
        assert_eq!(super::watched(None, &["a".into(), "b".into(), "a".into()]).unwrap(), ["a", "b"]);
        assert!(super::watched(Some("a,b"), &[]).unwrap_err().to_string().contains("\"a,b\""), "-n is one");
        assert_eq!(super::watched(Some("team"), &[]).unwrap(), ["team"]);
        assert!(super::watched(None, &[]).unwrap().is_empty(), "neither: all namespaces");
        let both = super::watched(Some("a"), &["b".into()]).unwrap_err().to_string();
        assert!(both.contains("--watch-namespace") && both.contains("-n"), "{both}");
        let bad = super::watched(None, &["Team_A".into()]).unwrap_err().to_string();
        assert!(bad.contains("namespace \"Team_A\" (-n/--watch-namespace)"), "{bad}");
    }

    #[test]
    fn local_webhooks_take_a_host_and_refuse_a_bad_host_and_there_is_no_webhook_url() {
        let a = parse(&["--local-webhooks", "--webhook-host", "172.18.0.1", "--take-over"]);
        assert!(a.local_webhooks && a.take_over);
        assert_eq!(a.webhook_host.as_deref(), Some("172.18.0.1"));
        assert_eq!(
            parse(&["--local-webhooks", "--webhook-host", "dev.example"]).webhook_host.as_deref(),
            Some("dev.example")
        );
        let run = |args: &[&str]| {
            let argv = ["kubectl-runner", "run-manager"].iter().chain(args);
            Cli::try_parse_from(argv).map(|_| ()).unwrap_err().to_string()
        };
        let e = run(&["--local-webhooks", "--webhook-host", "Bad_Host"]);
        assert!(e.contains("--webhook-host") && e.contains("Bad_Host"), "{e}");
        assert!(run(&["--take-over"]).contains("--local-webhooks"));
        let e = run(&["--webhook-listen", "127.0.0.1:1", "--webhook-url", "https://h/convert"]);
        assert!(e.contains("--webhook-url"), "a flag that is gone: {e}");
    }

    #[test]
    fn as_service_account_alone_means_the_installed_manager() {
        assert_eq!(parse(&["--as-service-account"]).as_service_account, Some(ServiceAccountRef::manager()));
        assert_eq!(
            parse(&["--as-service-account", "-n", "team"]).as_service_account,
            Some(ServiceAccountRef::manager())
        );
        assert_eq!(parse(&[]).as_service_account, None);
    }

    #[test]
    fn as_service_account_takes_namespace_slash_name() {
        let a = parse(&["--as-service-account", "team/runner", "--leader-elect"]);
        assert_eq!(a.as_service_account, Some("team/runner".parse().unwrap()));
        assert!(a.leader_elect);
        let a = parse(&["--as-service-account=team/runner"]);
        assert_eq!(a.as_service_account.unwrap().name, "runner");
        let argv = ["kubectl-runner", "run-manager", "--as-service-account", "runner"];
        assert!(Cli::try_parse_from(argv).is_err(), "a name without its namespace");
    }
}
