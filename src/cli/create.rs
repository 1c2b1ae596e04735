//! `kubectl runner create NAME --image IMG ...` and `create -f FILE`.
//!
//! Flags or a manifest become validated Runners ([`from_flags`],
//! [`from_manifests`] in `runner_file`, both pure) before anything connects; then
//! [`create_runner`] POSTs each with `fieldValidation=Strict`, and with
//! `--wait` [`wait_ready`] polls until the manager reports it Available.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::api::PostParams;
use kube::{Resource, ResourceExt};

use super::args::{DryRun, ObjectFormat, parse_duration, validate_name};
use super::error::{Error, Result};
use super::output;
use super::progress::Progress;
use super::{Ctx, Globals};
use crate::api::{
    Amounts, DEFAULT_PORT, DEFAULT_REPLICAS, FIELD_MANAGER, PodSecurity, Resources, Runner, RunnerSpec,
};
use crate::client::runners;
use crate::error::FromApi;

pub use super::runner_file::from_manifests;

const AFTER_HELP: &str = "\
Examples:
  kubectl runner create web --image nginx:1.27
  kubectl runner create web --image nginx:1.27 --replicas 2 --host web.example.com --wait
  kubectl runner create web --image nginx:1.27 --dry-run=client -o yaml > web.yaml
  kubectl runner create web --image nginxinc/nginx-unprivileged:1.27 --port 8080 --pod-security restricted \\
      --requests cpu=100m,memory=64Mi --limits cpu=500m,memory=128Mi
  kubectl runner create -f web.yaml";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct CreateArgs {
    /// Name of the Runner (also the name of its Deployment and Service).
    #[arg(required_unless_present = "filename", conflicts_with = "filename")]
    pub name: Option<String>,
    /// Container image, e.g. nginx:1.27.
    #[arg(long, required_unless_present = "filename", conflicts_with = "filename")]
    pub image: Option<String>,
    /// Number of Pods (1..=3).
    #[arg(long, default_value_t = DEFAULT_REPLICAS, allow_negative_numbers = true)]
    pub replicas: i32,
    /// Container port the Service forwards to (1..=65535).
    #[arg(long, default_value_t = DEFAULT_PORT, allow_negative_numbers = true)]
    pub port: i32,
    /// Host name; makes an Ingress that routes it to the Service. Repeat it
    /// (or separate names with commas) for several (at most 16).
    #[arg(long, value_delimiter = ',')]
    pub host: Vec<String>,
    /// Requests of the container, e.g. cpu=100m,memory=64Mi.
    #[arg(long, value_name = "cpu=Q,memory=Q", value_parser = parse_amounts)]
    pub requests: Option<Amounts>,
    /// Limits of the container, e.g. cpu=500m,memory=128Mi (a ResourceQuota on cpu or memory needs them).
    #[arg(long, value_name = "cpu=Q,memory=Q", value_parser = parse_amounts)]
    pub limits: Option<Amounts>,
    /// Make the Pods satisfy a Pod Security profile: restricted (the image must run as a non-root user).
    #[arg(long, value_name = "PROFILE", value_parser = |s: &str| s.parse::<PodSecurity>())]
    pub pod_security: Option<PodSecurity>,
    /// Create from a Runner manifest (several YAML documents allowed; `-` is stdin).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filename: Option<PathBuf>,
    /// Wait until each Runner is Available.
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits, e.g. 90s or 2m.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// client: print what would be sent; server: let the apiserver validate, store nothing.
    #[arg(long, value_enum, default_value_t, num_args = 0..=1, default_missing_value = "client", require_equals = true)]
    pub dry_run: DryRun,
    /// Print the created object instead of a one-line summary.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<ObjectFormat>,
}

/// `cpu=100m,memory=64Mi` as amounts; the quantities themselves are checked
/// with the rest of the spec, so the message names the spec field.
fn parse_amounts(s: &str) -> std::result::Result<Amounts, String> {
    let mut a = Amounts::default();
    for pair in s.split(',').filter(|p| !p.is_empty()) {
        let slot = match pair.split_once('=') {
            Some(("cpu", v)) => (&mut a.cpu, v),
            Some(("memory", v)) => (&mut a.memory, v),
            _ => return Err(format!("{pair:?}: expected cpu=QUANTITY or memory=QUANTITY, comma-separated")),
        };
        *slot.0 = Some(slot.1.to_string());
    }
    Ok(a)
}

/// `spec.resources` from `--requests` and `--limits`, if either was given.
fn resources(requests: Option<Amounts>, limits: Option<Amounts>) -> Option<Resources> {
    (requests.is_some() || limits.is_some()).then_some(Resources { requests, limits })
}

/// A Runner from flags, validated with the same bounds as the CRD schema.
pub fn from_flags(name: &str, namespace: &str, spec: RunnerSpec) -> Result<Runner> {
    validate_name(name)?;
    spec.validate().map_err(Error::Invalid)?;
    let mut r = Runner::new(name, spec);
    r.metadata.namespace = Some(namespace.to_string());
    Ok(r)
}

/// POSTs `runner` with `fieldValidation=Strict` (kube's `PostParams` has no
/// such field, so the query parameter is added to the built request), and
/// `dryRun=All` when `server_dry_run`. Returns what the apiserver stored.
pub async fn create_runner(ctx: &Ctx, runner: &Runner, server_dry_run: bool) -> Result<Runner> {
    let ns = runner.namespace().unwrap_or_else(|| ctx.namespace.clone());
    let name = runner.name_any();
    let api_err = |e| Error::api("create", "Runner", &ns, &name, e);
    let pp = PostParams { dry_run: server_dry_run, field_manager: Some(FIELD_MANAGER.into()) };
    let body = serde_json::to_vec(runner).map_err(|source| Error::Encode { what: "Runner", source })?;
    let mut req = kube::core::Request::new(Runner::url_path(&(), Some(&ns)))
        .create(&pp, body)
        .map_err(|e| api_err(kube::Error::BuildRequest(e)))?;
    let uri = format!("{}&fieldValidation=Strict", req.uri());
    *req.uri_mut() =
        uri.parse().map_err(|e: http::uri::InvalidUri| api_err(kube::Error::HttpError(e.into())))?;
    ctx.client.request::<Runner>(req).await.map_err(|e| runners::error("create", &ns, &name, e).into())
}

pub use crate::api::is_ready;

pub use super::output::progress_line;

/// Polls until [`is_ready`] or `timeout`. `on_change` sees each new state
/// (the CLI feeds a spinner; `e2e` can log). On timeout the error names the
/// last state and suggests `diagnose`.
pub async fn wait_ready(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    timeout: Duration,
    on_change: &mut dyn FnMut(&Runner),
) -> Result<Runner> {
    let start = Instant::now();
    let mut last = String::new();
    loop {
        let r = runners::get(&ctx.client, ns, name).await?;
        if is_ready(&r) {
            return Ok(r);
        }
        let line = progress_line(&r);
        if line != last {
            on_change(&r);
            last = line;
        }
        if start.elapsed() >= timeout {
            return Err(Error::WaitRunner {
                namespace: ns.to_string(),
                name: name.to_string(),
                goal: "be Available",
                after: timeout,
                last,
                has_status: r.status.is_some(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub async fn run(g: &Globals, a: CreateArgs) -> Result<u8> {
    // Parse and validate everything before connecting, so bad input exits 2
    // without a kubeconfig.
    let requested_ns = g.namespace.clone();
    let runners = match (&a.filename, &a.name, &a.image) {
        (Some(path), _, _) => {
            let text = if path.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())
            } else {
                std::fs::read_to_string(path)
            }
            .map_err(|e| Error::Invalid(format!("cannot read {}: {e}", path.display())))?;
            from_manifests(&text, requested_ns.as_deref().unwrap_or(""))?
        }
        (None, Some(name), Some(image)) => {
            let mut spec = RunnerSpec::new(image.clone()).replicas(a.replicas).port(a.port);
            spec.expose.hosts = a.host.clone();
            let spec = RunnerSpec { resources: resources(a.requests.clone(), a.limits.clone()), ..spec };
            let spec = RunnerSpec { pod_security: a.pod_security, ..spec };
            vec![from_flags(name, requested_ns.as_deref().unwrap_or(""), spec)?]
        }
        _ => return Err(Error::Invalid("give NAME and --image, or -f FILE".into())),
    };
    if a.dry_run == DryRun::Client {
        // Nothing is sent; the namespace is left out when the user gave none,
        // as `kubectl create --dry-run=client` does.
        let mut text = String::new();
        for mut r in runners {
            if r.metadata.namespace.as_deref() == Some("") {
                r.metadata.namespace = None;
            }
            text += &render(&r, a.output, "created", Some("dry run"));
        }
        return output::emit(&text).map(|()| super::exit::OK);
    }
    let ctx = g.connect().await?;
    let mut text = String::new();
    for mut r in runners {
        if r.metadata.namespace.as_deref().is_none_or(str::is_empty) {
            r.metadata.namespace = Some(ctx.namespace.clone());
        }
        let server_dry = a.dry_run == DryRun::Server;
        let created = create_runner(&ctx, &r, server_dry).await?;
        let mut shown = created.clone();
        if a.wait && !server_dry {
            let ns = created.namespace().unwrap_or_default();
            let progress = Progress::spinner(format!("waiting for {} to be Available", created.name_any()));
            let mut on_change = |r: &Runner| progress.set(progress_line(r));
            shown = wait_ready(&ctx, &ns, &created.name_any(), a.timeout, &mut on_change).await?;
        }
        let suffix = server_dry.then_some("server dry run");
        text += &render(&shown, a.output, "created", suffix);
        if a.wait && !server_dry && a.output.is_none() {
            text += &format!("{}\n", progress_line(&shown));
        }
    }
    output::emit(&text)?;
    Ok(super::exit::OK)
}

fn render(r: &Runner, format: Option<ObjectFormat>, verb: &str, suffix: Option<&str>) -> String {
    match format {
        None => output::action_line(&r.name_any(), verb, suffix),
        Some(f) => output::runners(std::slice::from_ref(r), f.into(), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Phase;

    fn spec(replicas: i32) -> RunnerSpec {
        RunnerSpec::new("nginx").replicas(replicas)
    }

    #[test]
    fn four_replicas_fail_naming_the_field_and_the_allowed_range() {
        let err = from_flags("web", "ns", spec(4)).unwrap_err();
        assert!(matches!(err, Error::Invalid(_)));
        assert!(err.to_string().contains("spec.replicas: 4 is out of range; allowed 1..=3"), "{err}");
    }

    #[test]
    fn resource_flags_become_spec_resources_and_bad_quantities_name_the_field() {
        let a = parse_amounts("cpu=100m,memory=64Mi").unwrap();
        assert_eq!((a.cpu.as_deref(), a.memory.as_deref()), (Some("100m"), Some("64Mi")));
        assert!(parse_amounts("gpu=1").unwrap_err().contains("cpu=QUANTITY"));
        assert_eq!(resources(None, None), None);
        let limits = parse_amounts("cpu=lots").unwrap();
        let spec = RunnerSpec { resources: resources(None, Some(limits)), ..spec(1) };
        let err = from_flags("web", "ns", spec).unwrap_err().to_string();
        assert!(err.contains("spec.resources.limits.cpu: \"lots\" must be a positive quantity"), "{err}");
    }

    #[test]
    fn flags_become_a_runner_in_the_given_namespace() {
        let r = from_flags("web", "ns", spec(2)).unwrap();
        assert_eq!(r.namespace().as_deref(), Some("ns"));
        assert_eq!(r.spec.replicas, 2);
    }

    #[test]
    fn a_runner_is_ready_only_when_its_status_is_current_and_available() {
        let mut r = from_flags("web", "ns", spec(1)).unwrap();
        assert!(!is_ready(&r));
        r.metadata.generation = Some(2);
        r.status = Some(crate::api::RunnerStatus {
            observed_generation: Some(1),
            ready_replicas: 1,
            phase: Phase::Available,
            conditions: vec![
                serde_json::from_value(serde_json::json!({
                "type": "Ready", "status": "True", "reason": "Available", "message": "",
                "lastTransitionTime": "2024-01-01T00:00:00Z" }))
                .unwrap(),
            ],
            ..Default::default()
        });
        assert!(!is_ready(&r), "a status for an older generation is not ready");
        r.status.as_mut().unwrap().observed_generation = Some(2);
        assert!(is_ready(&r));
    }
}
