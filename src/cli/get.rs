//! `kubectl runner get [NAME] [-A] [-l SELECTOR] [-o FORMAT] [-w]`.
//!
//! Reads Runners through [`crate::client::runners`], picks the format and
//! hands the data to `output`. `-w` streams changes from a watch.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher;

use super::args::GetFormat;
use super::output::{self, TableOpts};
use super::{Ctx, Globals};
use crate::client::children;
use crate::client::runners;
use crate::error::{Error, Result};

const AFTER_HELP: &str = "\
Examples:
  kubectl runner get
  kubectl runner get web -o yaml
  kubectl runner get -A -o wide
  kubectl runner get -l team=web -o name
  kubectl runner get -w";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct GetArgs {
    /// Show only this Runner.
    pub name: Option<String>,
    /// Label selector, e.g. `team=web,tier!=db`.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: GetFormat,
    /// After listing, stream changes until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
}

pub async fn run(g: &Globals, a: GetArgs) -> Result<u8> {
    if a.name.is_some() && a.selector.is_some() {
        return Err(Error::Invalid("give either NAME or -l SELECTOR, not both".into()));
    }
    if a.name.is_some() && g.all_namespaces {
        return Err(Error::Invalid("NAME cannot be used with -A; pick a namespace with -n".into()));
    }
    let ctx = g.connect().await?;
    let ns = (!ctx.all_namespaces).then_some(ctx.namespace.as_str());
    let items = match &a.name {
        Some(name) => vec![runners::get(&ctx.client, &ctx.namespace, name).await?],
        None => runners::list(&ctx.client, ns, a.selector.as_deref()).await?,
    };
    let opts =
        TableOpts { namespace_column: ctx.all_namespaces, wide: a.output == GetFormat::Wide, header: true };
    let kids = if opts.wide { children::index(&ctx.client, ns).await? } else { BTreeMap::new() };
    let rendered = match a.output {
        GetFormat::Table | GetFormat::Wide if items.is_empty() => {
            // kubectl says this on stderr and exits 0.
            eprint!("{}", output::no_resources(ns));
            String::new()
        }
        GetFormat::Table | GetFormat::Wide => output::runner_table(&items, opts, &kids, Timestamp::now()),
        f => output::runners(&items, f, a.name.is_some()),
    };
    output::emit(&rendered)?;
    if a.watch {
        let table = output::WatchTable::new(&items, opts, &kids, Timestamp::now());
        watch(&ctx, ns, &a, table, opts.wide, items.is_empty()).await?;
    }
    Ok(super::exit::OK)
}

/// Streams every change after the initial list, one row (or object) per
/// event, until the user interrupts. Rows are printed without a header
/// unless the initial list was empty.
async fn watch(
    ctx: &Ctx,
    ns: Option<&str>,
    a: &GetArgs,
    mut table: output::WatchTable,
    wide: bool,
    mut header: bool,
) -> Result<()> {
    let mut cfg = watcher::Config::default();
    if let Some(s) = &a.selector {
        cfg = cfg.labels(s);
    }
    if let Some(n) = &a.name {
        cfg = cfg.fields(&format!("metadata.name={n}"));
    }
    let api = match &a.name {
        Some(_) => runners::api(&ctx.client, Some(&ctx.namespace)),
        None => runners::api(&ctx.client, ns),
    };
    let mut stream = watcher(api, cfg).boxed();
    let mut initial = true;
    while let Some(ev) = stream.try_next().await.map_err(|e| Error::WatchRunners(e.to_string()))? {
        let changed = match ev {
            // The initial (and every re-)list was already printed or is stale
            // news; only changes after it are streamed.
            watcher::Event::Init | watcher::Event::InitApply(_) => continue,
            watcher::Event::InitDone => {
                initial = false;
                continue;
            }
            watcher::Event::Apply(r) | watcher::Event::Delete(r) if !initial => r,
            _ => continue,
        };
        let text = match a.output {
            GetFormat::Table | GetFormat::Wide => {
                let kids = if wide { children::index(&ctx.client, ns).await? } else { BTreeMap::new() };
                let mut text = if header { table.header() } else { String::new() };
                header = false;
                text += &table.row(&changed, &kids, Timestamp::now());
                text
            }
            f => output::watch_event(&changed, f),
        };
        output::emit(&text)?;
    }
    Ok(())
}
