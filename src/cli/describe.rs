//! `kubectl runner describe NAME...`: gathers each Runner, its children and
//! the recent Events of all of them into a [`Description`] (API reads
//! only), which `output::describe` renders; several are separated as
//! kubectl separates them. What the caller may not read (a child kind,
//! Pods, Events) is left out and named once on stderr.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::args::validate_name;
use super::child_summary;
use super::error::{Error, Result};
use super::output;
pub use super::output::describe::Description;
use super::{Ctx, Globals};
use crate::api::Runner;
use crate::client::children::{self, NotReadable, is_forbidden, note_unreadable};
use crate::client::runners;
use crate::error::FromApi;

/// How many Events `describe` shows, newest last.
pub const MAX_EVENTS: usize = 20;

const AFTER_HELP: &str = "\
Examples:
  kubectl runner describe web
  kubectl runner describe web api -n team-a";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct DescribeArgs {
    /// Runners to describe.
    #[arg(required = true)]
    pub names: Vec<String>,
}

/// Reads the Runner, its children, and Events in its namespace. What may
/// not be read is left out and noted in `unreadable`.
pub async fn describe(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    unreadable: &mut Vec<NotReadable>,
) -> Result<Description> {
    let runner = runners::get(&ctx.client, ns, name).await?;
    describe_runner(ctx, runner, unreadable).await
}

/// [`describe`] of a Runner already read.
async fn describe_runner(
    ctx: &Ctx,
    runner: Runner,
    unreadable: &mut Vec<NotReadable>,
) -> Result<Description> {
    let (ns, name) = (runner.namespace().unwrap_or_default(), runner.name_any());
    let kids = children::fetch(&ctx.client, &ns, &name).await?;
    for n in kids.unreadable() {
        note_unreadable(unreadable, n.clone());
    }
    let pods = children::pods(&ctx.client, &ns, &name, runner.uid().as_deref(), unreadable).await?;
    let summaries = child_summary::summarize(&runner, &kids, &pods);
    let mut uids: HashSet<String> = runner.uid().into_iter().collect();
    uids.extend(kids.iter().filter_map(|c| c.object.uid()));
    uids.extend(pods.iter().filter_map(|p| p.uid()));
    let all = match Api::<Event>::namespaced(ctx.client.clone(), &ns).list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) if is_forbidden(&e) => {
            let refused = NotReadable { kind: "Event", verb: "list", resource: "events".into() };
            note_unreadable(unreadable, refused);
            vec![]
        }
        Err(e) => return Err(Error::api("list", "Event", &ns, "", e)),
    };
    let events = related_events(all, &uids, &name);
    Ok(Description { runner, children: summaries, events })
}

/// Events about one of `uids`, or about a ReplicaSet of the Runner's
/// Deployment (named `NAME-<hash>`; the hash has no '-', so Runner
/// `web-2`'s ReplicaSets are not taken for `web`'s), oldest first, at most [`MAX_EVENTS`].
pub fn related_events(events: Vec<Event>, uids: &HashSet<String>, name: &str) -> Vec<Event> {
    let rs_prefix = format!("{name}-");
    let mut out: Vec<Event> = events
        .into_iter()
        .filter(|e| {
            let o = &e.involved_object;
            o.uid.as_ref().is_some_and(|u| uids.contains(u))
                || (o.kind.as_deref() == Some("ReplicaSet")
                    && o.name
                        .as_deref()
                        .and_then(|n| n.strip_prefix(&rs_prefix))
                        .is_some_and(|h| !h.contains('-')))
        })
        .collect();
    out.sort_by_key(output::event_time);
    let skip = out.len().saturating_sub(MAX_EVENTS);
    out.drain(..skip);
    out
}

/// Describes each name in order. One name that does not exist fails as
/// before; with several, as kubectl, the others are still described and
/// the missing ones named at the end (exit 1).
pub async fn run(g: &Globals, a: DescribeArgs) -> Result<u8> {
    for name in &a.names {
        validate_name(name)?;
    }
    let ctx = g.connect().await?;
    let ns = ctx.namespace.clone();
    let mut unreadable = vec![];
    let mut texts = vec![];
    let mut missing = vec![];
    for name in &a.names {
        let runner = match a.names.len() {
            1 => runners::get(&ctx.client, &ns, name).await?,
            _ => match runners::get_opt(&ctx.client, &ns, name).await? {
                Some(r) => r,
                None => {
                    missing.push(name.clone());
                    continue;
                }
            },
        };
        let d = describe_runner(&ctx, runner, &mut unreadable).await?;
        texts.push(output::describe(&d, k8s_openapi::jiff::Timestamp::now()));
    }
    output::emit(&texts.join("\n\n"))?;
    eprint!("{}", output::not_readable::warning(&unreadable, Some(&ns)));
    if !missing.is_empty() {
        return Err(Error::RunnersNotFound { namespace: ns, names: missing });
    }
    Ok(super::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(uid: &str, kind: &str, name: &str, at: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": format!("{name}.{at}") },
            "involvedObject": { "uid": uid, "kind": kind, "name": name },
            "lastTimestamp": at,
        }))
        .unwrap()
    }

    #[test]
    fn only_events_of_the_runner_its_children_and_replicasets_are_kept_oldest_first() {
        let uids: HashSet<String> = ["r".to_string(), "d".to_string()].into();
        let events = vec![
            event("d", "Deployment", "web", "2024-01-01T00:00:02Z"),
            event("x", "Deployment", "other", "2024-01-01T00:00:00Z"),
            event("r", "Runner", "web", "2024-01-01T00:00:01Z"),
            event("q", "ReplicaSet", "web-5d9f", "2024-01-01T00:00:03Z"),
            event("q2", "ReplicaSet", "webby-1", "2024-01-01T00:00:04Z"),
            event("q3", "ReplicaSet", "web-2-abc", "2024-01-01T00:00:05Z"),
        ];
        let kept: Vec<String> = related_events(events, &uids, "web")
            .iter()
            .map(|e| e.involved_object.uid.clone().unwrap())
            .collect();
        assert_eq!(kept, vec!["r", "d", "q"]);
    }

    #[test]
    fn at_most_the_newest_twenty_events_are_kept() {
        let uids: HashSet<String> = ["r".to_string()].into();
        let events: Vec<Event> =
            (0..30).map(|i| event("r", "Runner", "web", &format!("2024-01-01T00:00:{i:02}Z"))).collect();
        let kept = related_events(events, &uids, "web");
        assert_eq!(kept.len(), MAX_EVENTS);
        assert_eq!(kept[0].last_timestamp.as_ref().unwrap().0.to_string(), "2024-01-01T00:00:10Z");
    }
}
