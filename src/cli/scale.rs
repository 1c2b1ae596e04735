//! `kubectl runner scale NAME --replicas N [--wait]`, through the Runner's
//! scale subresource (what `kubectl scale` and an HPA use), so the CLI
//! exercises the same path as other clients.

use std::time::Duration;

use k8s_openapi::api::autoscaling::v1::Scale;
use kube::api::{Patch, PatchParams};

use super::args::{ObjectFormat, parse_duration, validate_name};
use super::output;
use super::progress::Progress;
use super::{Ctx, Globals};
use crate::api::{FIELD_MANAGER, Runner, RunnerSpec};
use crate::client::runners;
use crate::error::{Error, Result};

const AFTER_HELP: &str = "\
Examples:
  kubectl runner scale web --replicas 3
  kubectl runner scale web --replicas 1 --wait --timeout 1m";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct ScaleArgs {
    /// Runner to scale.
    pub name: String,
    /// New replica count (1..=3).
    #[arg(long, allow_negative_numbers = true)]
    pub replicas: i32,
    /// Wait until the new count is ready.
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits, e.g. 90s or 2m.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Print the Runner afterwards instead of a one-line summary.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<ObjectFormat>,
}

/// Checks `replicas` with the same function and bounds as a whole spec, so
/// the message is identical to `create`'s ("spec.replicas: 4 is out of
/// range; allowed 1..=3"). The other fields are placeholders that pass.
pub fn validate_replicas(replicas: i32) -> Result<()> {
    RunnerSpec::new("placeholder").replicas(replicas).validate().map_err(Error::Invalid)
}

/// Merge-patches `spec.replicas` through the scale subresource, with
/// `fieldValidation=Strict`. Returns the Scale the apiserver wrote.
pub async fn scale(ctx: &Ctx, ns: &str, name: &str, replicas: i32) -> Result<Scale> {
    validate_replicas(replicas)?;
    let api = runners::api(&ctx.client, Some(ns));
    let pp =
        PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }.validation_strict();
    let patch = serde_json::json!({ "spec": { "replicas": replicas } });
    api.patch_scale(name, &pp, &Patch::Merge(&patch)).await.map_err(|e| runners::error("scale", ns, name, e))
}

/// Polls until the Runner is ready at its current spec (see
/// [`super::create::is_ready`]) or `timeout`.
pub async fn wait_scaled(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    timeout: Duration,
    on_change: &mut dyn FnMut(&Runner),
) -> Result<Runner> {
    super::create::wait_ready(ctx, ns, name, timeout, on_change).await.map_err(|e| match e {
        Error::WaitRunner { namespace, name, after, last, has_status, .. } => {
            Error::WaitRunner { namespace, name, goal: "scale", after, last, has_status }
        }
        e => e,
    })
}

pub async fn run(g: &Globals, a: ScaleArgs) -> Result<u8> {
    validate_name(&a.name)?;
    validate_replicas(a.replicas)?;
    let ctx = g.connect().await?;
    let ns = ctx.namespace.clone();
    scale(&ctx, &ns, &a.name, a.replicas).await?;
    let runner = if a.wait {
        let progress = Progress::spinner(format!("waiting for {} to reach {} ready", a.name, a.replicas));
        let mut on_change = |r: &Runner| progress.set(super::create::progress_line(r));
        Some(wait_scaled(&ctx, &ns, &a.name, a.timeout, &mut on_change).await?)
    } else {
        None
    };
    let text = match (a.output, runner) {
        (Some(f), Some(r)) => output::runners(&[r], f.into(), true),
        (Some(f), None) => output::runners(&[runners::get(&ctx.client, &ns, &a.name).await?], f.into(), true),
        (None, Some(r)) => {
            output::action_line(&a.name, "scaled", None) + &super::create::progress_line(&r) + "\n"
        }
        (None, None) => output::action_line(&a.name, "scaled", None),
    };
    output::emit(&text)?;
    Ok(super::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_to_four_fails_with_the_same_message_as_create() {
        let err = validate_replicas(4).unwrap_err().to_string();
        assert!(err.contains("spec.replicas: 4 is out of range; allowed 1..=3"), "{err}");
    }

    #[test]
    fn scaling_to_zero_is_rejected_because_the_crd_minimum_is_one() {
        assert!(validate_replicas(0).is_err());
        assert!(validate_replicas(3).is_ok());
    }
}
