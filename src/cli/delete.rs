//! `kubectl runner delete (NAME... | -l SELECTOR | --all) [-i] [--wait] [--timeout]`.
//!
//! [`selection`](super::selection) reads the Runners meant; with `-i` the
//! user confirms the list first; [`delete_incarnation`] sends each delete,
//! pinned to the UID read; [`wait_gone`] polls until the Runner is gone,
//! and on timeout returns what holds it, as data, so the message can name
//! it and point at `diagnose`. It reads the Runner only: the manager's
//! cleanup finalizer holds the Runner until its children are gone, so a
//! user who may not read every child kind can still wait.

use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Preconditions};

use super::args::{parse_duration, validate_name};
use super::error::{Error, Result};
use super::output;
use super::progress::{self, Answer, Progress, Terminal};
use super::selection::{self, SelectFlags, Selection};
use super::{Ctx, Globals};
use crate::api::Runner;
use crate::client::runners;
use crate::error::{FromApi, is_not_found};

const AFTER_HELP: &str = "\
Examples:
  kubectl runner delete web
  kubectl runner delete web api --wait --timeout 2m
  kubectl runner delete -l team=web -i
  kubectl runner delete --all -A
  kubectl runner delete web --ignore-not-found";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct DeleteArgs {
    /// Runners to delete.
    pub names: Vec<String>,
    #[command(flatten)]
    pub select: SelectFlags,
    /// List the Runners and ask before deleting them; needs a terminal.
    #[arg(short = 'i', long)]
    pub interactive: bool,
    /// Wait until each Runner is gone (its finalizer holds it until its
    /// children are).
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits, e.g. 90s or 2m.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Succeed when a Runner does not exist.
    #[arg(long)]
    pub ignore_not_found: bool,
}

/// What a delete call found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// The delete was accepted; the UID identifies this incarnation, so a
    /// Runner re-created under the same name is not waited for.
    Accepted {
        name: String,
        uid: Option<String>,
    },
    NotFound {
        name: String,
    },
}

/// Delete options that only match the incarnation read before: a Runner
/// deleted and re-created under the same name in between is not touched.
pub fn delete_params(uid: Option<&str>) -> DeleteParams {
    let preconditions = uid.map(|uid| Preconditions { uid: Some(uid.to_string()), resource_version: None });
    DeleteParams { preconditions, ..DeleteParams::default() }
}

/// Deletes the Runner `name` only while its UID is `uid` (the one just
/// read). When a successor took the name in between, the apiserver answers
/// 409 and this is an error naming it, so the new Runner is never deleted.
pub async fn delete_incarnation(
    api: &Api<Runner>,
    ns: &str,
    name: &str,
    uid: Option<String>,
) -> Result<Deleted> {
    match api.delete(name, &delete_params(uid.as_deref())).await {
        Ok(_) => Ok(Deleted::Accepted { name: name.to_string(), uid }),
        Err(e) if is_not_found(&e) => Ok(Deleted::NotFound { name: name.to_string() }),
        Err(kube::Error::Api(s)) if s.code == 409 && uid.is_some() => {
            Err(Error::RunnerReplaced { namespace: ns.to_string(), name: name.to_string() })
        }
        Err(e) => Err(Error::api("delete", "Runner", ns, name, e)),
    }
}

/// What is left of a deleted Runner: empty means gone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remaining(pub Vec<String>);

impl Remaining {
    pub fn is_gone(&self) -> bool {
        self.0.is_empty()
    }
}

/// Pure: whether the deleted incarnation of the Runner (with its
/// finalizers) still exists. A successor of the same name does not count.
pub fn remaining(runner: Option<&Runner>, uid: Option<&str>) -> Remaining {
    let mut left = Vec::new();
    if let Some(r) = runner.filter(|r| uid.is_none() || r.uid().as_deref() == uid) {
        let fins = r.finalizers().join(", ");
        left.push(if fins.is_empty() { "Runner".into() } else { format!("Runner (finalizer {fins})") });
    }
    Remaining(left)
}

/// Polls every 500 ms until [`remaining`] is empty or `timeout`;
/// `on_change` sees each new remainder. Returns the last remainder, empty
/// when everything is gone.
pub async fn wait_gone(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    uid: Option<&str>,
    timeout: Duration,
    on_change: &mut dyn FnMut(&Remaining),
) -> Result<Remaining> {
    let start = Instant::now();
    let mut last = Remaining(vec!["?".into()]);
    loop {
        let runner = runners::get_opt(&ctx.client, ns, name).await?;
        let left = remaining(runner.as_ref(), uid);
        if left.is_gone() || start.elapsed() >= timeout {
            return Ok(left);
        }
        if left != last {
            on_change(&left);
            last = left;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn check_gone(ns: &str, name: &str, timeout: Duration, left: &Remaining) -> Result<()> {
    if left.is_gone() {
        return Ok(());
    }
    Err(Error::DeleteTimedOut {
        namespace: ns.to_string(),
        name: name.to_string(),
        after: timeout,
        left: left.0.clone(),
    })
}

/// What `-i` shows before asking, as kubectl lists it (with the namespace
/// when `-A` spans several).
pub fn confirmation(targets: &[(String, String)], all_namespaces: bool) -> String {
    let mut text = format!("You are about to delete the following {} Runner(s):\n", targets.len());
    for (ns, name) in targets {
        text += &output::resource_name(name);
        text += &if all_namespaces { format!(" (namespace {ns})\n") } else { "\n".into() };
    }
    text
}

pub async fn run(g: &Globals, a: DeleteArgs) -> Result<u8> {
    for n in &a.names {
        validate_name(n)?;
    }
    let sel = Selection::parse(&a.names, &a.select, g.all_namespaces, "delete")?;
    let terminal = Terminal::detect();
    if a.interactive && !terminal.can_ask() {
        return Err(Error::Invalid(
            "--interactive asks on the terminal, but stdin or stderr is not one; \
             run it in a terminal, or drop -i to delete without asking"
                .into(),
        ));
    }
    let ctx = g.connect().await?;
    let found = selection::resolve(&ctx, &sel).await?;
    let targets: Vec<(String, String)> = found.runners.iter().map(selection::namespace_and_name).collect();
    if targets.is_empty() && matches!(sel, Selection::Matching { .. }) {
        let ns = (!g.all_namespaces).then_some(ctx.namespace.as_str());
        eprint!("{}", output::no_resources(ns));
    }
    if a.interactive && !targets.is_empty() {
        eprint!("{}", confirmation(&targets, g.all_namespaces));
        if progress::ask_on("Do you want to continue?", false, terminal)? != Answer::Yes {
            // As kubectl: declining is not a failure.
            eprintln!("deletion is cancelled");
            return Ok(super::exit::OK);
        }
    }
    let mut text = String::new();
    let mut missing = found.missing;
    for (runner, (ns, name)) in found.runners.iter().zip(&targets) {
        let api = runners::api(&ctx.client, Some(ns));
        let uid = match delete_incarnation(&api, ns, name, runner.uid()).await? {
            Deleted::NotFound { name } => {
                missing.push(name);
                continue;
            }
            Deleted::Accepted { uid, .. } => uid,
        };
        if a.wait {
            let progress = Progress::spinner(format!("deleting {name}"));
            let mut on_change =
                |l: &Remaining| progress.set(format!("deleting {name}: waiting for {}", l.0.join(", ")));
            let left = wait_gone(&ctx, ns, name, uid.as_deref(), a.timeout, &mut on_change).await?;
            drop(progress);
            if let Err(e) = check_gone(ns, name, a.timeout, &left) {
                output::emit(&text)?;
                return Err(e);
            }
        }
        let where_ = g.all_namespaces.then(|| format!("namespace {ns}"));
        text += &output::action_line(name, "deleted", where_.as_deref());
    }
    output::emit(&text)?;
    if !missing.is_empty() && !a.ignore_not_found {
        return Err(Error::RunnersNotFound { namespace: ctx.namespace.clone(), names: missing });
    }
    Ok(super::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn runner(fins: &[&str]) -> Runner {
        serde_json::from_value(json!({
            "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner",
            "metadata": { "name": "web", "uid": "u1", "finalizers": fins },
            "spec": { "image": "nginx" },
        }))
        .unwrap()
    }

    #[test]
    fn the_delete_carries_the_uid_it_read_as_a_precondition() {
        let dp = serde_json::to_value(delete_params(Some("u1"))).unwrap();
        assert_eq!(dp["preconditions"], json!({ "uid": "u1" }));
        let none = serde_json::to_value(delete_params(None)).unwrap();
        assert!(none.get("preconditions").is_none_or(serde_json::Value::is_null), "{none}");
    }

    #[test]
    fn interactive_lists_each_runner_and_its_namespace_only_across_namespaces() {
        let targets = [("a".to_string(), "web".to_string()), ("b".to_string(), "api".to_string())];
        let text = confirmation(&targets, false);
        assert_eq!(
            text,
            "You are about to delete the following 2 Runner(s):\n\
             runner.lab.cloudlab.training/web\nrunner.lab.cloudlab.training/api\n"
        );
        assert!(confirmation(&targets, true).contains("runner.lab.cloudlab.training/api (namespace b)\n"));
    }

    #[test]
    fn nothing_left_means_gone() {
        assert!(remaining(None, Some("u1")).is_gone());
    }

    #[test]
    fn a_runner_held_by_its_finalizer_is_named_with_it() {
        let left = remaining(Some(&runner(&["lab.cloudlab.training/cleanup"])), Some("u1"));
        assert_eq!(left.0, vec!["Runner (finalizer lab.cloudlab.training/cleanup)"]);
    }

    #[test]
    fn a_recreated_runner_does_not_count() {
        assert!(remaining(Some(&runner(&[])), Some("u0")).is_gone());
    }

    #[test]
    fn the_timeout_message_says_what_is_left_and_suggests_diagnose() {
        let err = check_gone("ns", "web", Duration::from_secs(5), &Remaining(vec!["Service web".into()]))
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("Service web") && msg.contains("kubectl runner diagnose web -n ns"), "{msg}");
    }
}
