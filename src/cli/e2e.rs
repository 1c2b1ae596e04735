//! `kubectl runner e2e`: the whole lifecycle on the current cluster.

use crate::manager::webhook::local::LocalConfig;
use std::time::Duration;

use super::error::{Error, Result};
use super::{Globals, output};
use crate::e2e::{self, Options};

const EXAMPLES: &str = "\
What it creates: a namespace runner-e2e-XXXXXX (labelled lab.cloudlab.training/e2e=true),
the Runner CRD if absent (removed again afterwards), and Runners, a Deployment and a
Service in that namespace. It removes only those, on success, failure or Ctrl-C.

Examples:
  # Prove the lifecycle with a manager started in this process
  kubectl runner e2e

  # Against the manager already running in the cluster
  kubectl runner e2e --use-running-manager

  # Keep the namespace for inspection, JSON report on stdout
  kubectl runner e2e --keep -o json

The report is all it prints: the in-process manager's log goes to
<artifacts>/e2e.log, or to stderr with -v. On kind, a Runner image the node
cannot pull fails the step at once; `kind load docker-image IMAGE` puts a
local image there.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum E2eOutput {
    Table,
    Json,
}

#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct E2eArgs {
    /// Use the manager running in the cluster instead of an in-process one.
    #[arg(long)]
    pub use_running_manager: bool,
    /// Leave the namespace and what is in it.
    #[arg(long)]
    pub keep: bool,
    /// Run even if the context name looks like production.
    #[arg(long)]
    pub yes: bool,
    /// Image of the test Runners.
    #[arg(long, default_value = "nginx:1.27")]
    pub image: String,
    /// Image the rollout step switches to.
    #[arg(long, default_value = "nginx:1.27-alpine")]
    pub image_update: String,
    /// Timeout of each step, in seconds.
    #[arg(long, default_value_t = 120)]
    pub step_timeout: u64,
    /// Where failed runs dump Events and objects.
    #[arg(long, default_value = "e2e-artifacts")]
    pub artifacts: std::path::PathBuf,
    /// Annotate the test namespace, KEY=VALUE (repeatable): for admission
    /// that reads namespaces, e.g. a node selector for the test Pods.
    #[arg(long = "namespace-annotation", value_name = "KEY=VALUE", value_parser = parse_annotation)]
    pub namespace_annotations: Vec<(String, String)>,
    /// Serve the conversion and validating webhooks from e2e's own manager
    /// (as `run-manager --local-webhooks` does; put back when e2e ends), so
    /// the webhook step runs on a cluster installed without the manager.
    #[arg(long, conflicts_with = "use_running_manager")]
    pub local_webhooks: bool,
    /// Report format on stdout.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: E2eOutput,
}

pub async fn run(g: &Globals, a: E2eArgs) -> Result<u8> {
    let context = current_context(g);
    if e2e::looks_like_production(&context) && !a.yes {
        return Err(Error::Invalid(format!(
            "context {context:?} looks like production; e2e creates a namespace, the Runner CRD if absent, and Runners. \
             Re-run with --yes if that is what you want"
        )));
    }
    let ctx = g.connect().await?;
    let version = ctx
        .client
        .apiserver_version()
        .await
        .map_err(|e| Error::ClusterUnreachable(crate::error::describe_kube(&e)))?;
    eprint!("{}", output::e2e::banner(&context, &version.major, &version.minor));
    let opts = Options {
        context: context.clone(),
        use_running_manager: a.use_running_manager,
        keep: a.keep,
        image: a.image,
        image_update: a.image_update,
        timeout: Duration::from_secs(a.step_timeout),
        artifacts: a.artifacts,
        namespace_annotations: a.namespace_annotations.into_iter().collect(),
        local_webhooks: a.local_webhooks.then(|| LocalConfig {
            host: None,
            listen: None,
            take_over: false,
            lease_namespace: String::new(),
            server_host: g.server.get().and_then(|u| u.host()).map(str::to_string),
            probe_namespace: String::new(),
        }),
    };
    let spinner = super::progress::Progress::spinner("running the lifecycle");
    let progress = |s: &e2e::StepResult| spinner.println(output::e2e::step_line(s));
    let report = e2e::run(ctx.client, opts, &progress).await?;
    drop(spinner);
    output::emit(&match a.output {
        E2eOutput::Json => output::e2e::json(&report),
        E2eOutput::Table => output::e2e::summary(&report),
    })?;
    Ok(super::exit::e2e(report.passed()))
}

/// The context that will be used: --context, else the kubeconfig's current one.
fn current_context(g: &Globals) -> String {
    if let Some(c) = &g.context {
        return c.clone();
    }
    let kc = match &g.kubeconfig {
        Some(p) => kube::config::Kubeconfig::read_from(p).ok(),
        None => kube::config::Kubeconfig::read().ok(),
    };
    kc.and_then(|k| k.current_context).unwrap_or_else(|| "in-cluster".into())
}

/// `KEY=VALUE`, the key non-empty.
fn parse_annotation(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

#[cfg(test)]
mod annotation_tests {
    use super::parse_annotation;

    #[test]
    fn an_annotation_is_key_equals_value_and_the_value_may_hold_equals_signs() {
        assert_eq!(parse_annotation("a/b=k=v"), Ok(("a/b".into(), "k=v".into())));
        assert_eq!(parse_annotation("a="), Ok(("a".into(), String::new())));
        assert!(parse_annotation("=v").is_err());
        assert!(parse_annotation("novalue").is_err());
    }
}
