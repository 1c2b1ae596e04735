//! `kubectl runner scale (NAME | -l SELECTOR | --all) --replicas N
//! [--current-replicas M] [--wait]`, through the Runner's scale subresource
//! (what `kubectl scale` and an HPA use), so the CLI exercises the same path
//! as other clients.

use std::time::Duration;

use k8s_openapi::api::autoscaling::v1::Scale;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::args::{ObjectFormat, parse_duration, validate_name};
use super::error::{Error, Result};
use super::output;
use super::progress::Progress;
use super::selection::{self, SelectFlags, Selection};
use super::{Ctx, Globals};
use crate::api::{FIELD_MANAGER, Runner, RunnerSpec};
use crate::client::runners;
use crate::error::is_failed_test;

const AFTER_HELP: &str = "\
Examples:
  kubectl runner scale web --replicas 3
  kubectl runner scale web --replicas 1 --wait --timeout 1m
  kubectl runner scale web --replicas 3 --current-replicas 2
  kubectl runner scale -l team=web --replicas 2";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct ScaleArgs {
    /// Runner to scale.
    pub name: Option<String>,
    #[command(flatten)]
    pub select: SelectFlags,
    /// New replica count (1..=3).
    #[arg(long, allow_negative_numbers = true)]
    pub replicas: i32,
    /// Scale only a Runner that has this many replicas now; the apiserver
    /// checks it in the same request, so a concurrent change is never
    /// overwritten. -1 (as in kubectl) means no condition.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub current_replicas: Option<i32>,
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

/// `--current-replicas`: `None` and -1 mean no condition; any other
/// negative number is a usage error.
pub fn precondition(current: Option<i32>) -> Result<Option<i32>> {
    match current {
        None | Some(-1) => Ok(None),
        Some(n) if n < 0 => Err(Error::Invalid(format!(
            "--current-replicas: {n} is not a replica count; use 0 or more, or -1 for none"
        ))),
        Some(n) => Ok(Some(n)),
    }
}

/// The patch of the scale subresource. With a precondition it is a JSON
/// patch whose `test` makes the apiserver refuse the whole request unless
/// `spec.replicas` is still `current`: no window between read and write.
pub fn scale_patch(replicas: i32, current: Option<i32>) -> Patch<serde_json::Value> {
    match current {
        None => Patch::Merge(json!({ "spec": { "replicas": replicas } })),
        Some(n) => {
            use json_patch::{PatchOperation, ReplaceOperation, TestOperation, jsonptr::PointerBuf};
            let path = || PointerBuf::from_tokens(["spec", "replicas"]);
            Patch::Json(json_patch::Patch(vec![
                PatchOperation::Test(TestOperation { path: path(), value: json!(n) }),
                PatchOperation::Replace(ReplaceOperation { path: path(), value: json!(replicas) }),
            ]))
        }
    }
}

/// Patches `spec.replicas` through the scale subresource, with
/// `fieldValidation=Strict`, only while it is `current` when that is given.
/// Returns the Scale the apiserver wrote.
pub async fn scale(ctx: &Ctx, ns: &str, name: &str, replicas: i32, current: Option<i32>) -> Result<Scale> {
    validate_replicas(replicas)?;
    let api = runners::api(&ctx.client, Some(ns));
    let pp =
        PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() }.validation_strict();
    match api.patch_scale(name, &pp, &scale_patch(replicas, current)).await {
        Ok(s) => Ok(s),
        Err(e) if is_failed_test(&e) => {
            // Only to say what the count was; the refusal already happened.
            let actual =
                runners::get_opt(&ctx.client, ns, name).await.ok().flatten().map(|r| r.spec.replicas);
            let (namespace, name) = (ns.to_string(), name.to_string());
            Err(Error::ScalePrecondition { namespace, name, expected: current.unwrap_or_default(), actual })
        }
        Err(e) => Err(runners::error("scale", ns, name, e).into()),
    }
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
    let names: Vec<String> = a.name.iter().cloned().collect();
    for n in &names {
        validate_name(n)?;
    }
    validate_replicas(a.replicas)?;
    let current = precondition(a.current_replicas)?;
    let sel = Selection::parse(&names, &a.select, g.all_namespaces, "scale")?;
    let ctx = g.connect().await?;
    // A name is scaled without reading it first (a 404 names it); a
    // selector lists the Runners it means.
    let targets: Vec<(String, String)> = match &sel {
        Selection::Names(names) => names.iter().map(|n| (ctx.namespace.clone(), n.clone())).collect(),
        matching => selection::resolve(&ctx, matching)
            .await?
            .runners
            .iter()
            .map(selection::namespace_and_name)
            .collect(),
    };
    if targets.is_empty() {
        eprint!("{}", output::no_resources((!g.all_namespaces).then_some(ctx.namespace.as_str())));
    }
    let mut text = String::new();
    let mut printed = Vec::new();
    for (ns, name) in &targets {
        if let Err(e) = scale(&ctx, ns, name, a.replicas, current).await {
            output::emit(&text)?;
            return Err(e);
        }
        let runner = if a.wait {
            let progress = Progress::spinner(format!("waiting for {name} to reach {} ready", a.replicas));
            let mut on_change = |r: &Runner| progress.set(super::create::progress_line(r));
            Some(wait_scaled(&ctx, ns, name, a.timeout, &mut on_change).await?)
        } else {
            None
        };
        let where_ = g.all_namespaces.then(|| format!("namespace {ns}"));
        match (a.output, runner) {
            (Some(_), Some(r)) => printed.push(r),
            (Some(_), None) => printed.push(runners::get(&ctx.client, ns, name).await?),
            (None, Some(r)) => {
                text += &output::action_line(name, "scaled", where_.as_deref());
                text += &(super::create::progress_line(&r) + "\n");
            }
            (None, None) => text += &output::action_line(name, "scaled", where_.as_deref()),
        }
    }
    if let Some(f) = a.output {
        text += &output::runners(&printed, f.into(), matches!(sel, Selection::Names(_)));
    }
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
    fn current_replicas_minus_one_means_none_and_below_is_refused() {
        assert_eq!(precondition(None).unwrap(), None);
        assert_eq!(precondition(Some(-1)).unwrap(), None);
        assert_eq!(precondition(Some(0)).unwrap(), Some(0));
        let err = precondition(Some(-2)).unwrap_err();
        assert!(matches!(err, Error::Invalid(_)) && err.to_string().contains("--current-replicas"), "{err}");
    }

    #[test]
    fn a_precondition_is_a_json_patch_that_tests_before_it_replaces() {
        let Patch::Json(p) = scale_patch(3, Some(2)) else { panic!("not a JSON patch") };
        let v = serde_json::to_value(p).unwrap();
        assert_eq!(v[0], json!({ "op": "test", "path": "/spec/replicas", "value": 2 }));
        assert_eq!(v[1], json!({ "op": "replace", "path": "/spec/replicas", "value": 3 }));
        assert!(matches!(scale_patch(3, None), Patch::Merge(_)));
    }

    #[test]
    fn scaling_to_zero_is_rejected_because_the_crd_minimum_is_one() {
        assert!(validate_replicas(0).is_err());
        assert!(validate_replicas(3).is_ok());
    }
}
