//! `kubectl runner get [NAME] [-A] [-l SELECTOR] [-o FORMAT] [-w]`.
//!
//! [`list`] and [`get_one`] return Runners (one LIST call, so a hundred
//! Runners cost what `kubectl get runners` costs); `run` picks the format
//! and hands the data to `output`. `-w` streams changes from a watch.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;

use super::args::GetFormat;
use super::children;
use super::output::{self, TableOpts};
use super::{Ctx, Globals};
use crate::api::Runner;
use crate::error::{Error, Result, is_not_found};

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

/// Lists Runners in `ns` (all namespaces when None), optionally filtered.
/// A 404 on the list means the CRD is missing.
pub async fn list(ctx: &Ctx, ns: Option<&str>, selector: Option<&str>) -> Result<Vec<Runner>> {
    let mut lp = ListParams::default();
    if let Some(s) = selector {
        lp = lp.labels(s);
    }
    let list = runners_api(ctx, ns).list(&lp).await.map_err(|e| list_error(e, ns))?;
    let mut items = list.items;
    // kubectl sorts -A output by namespace then name; the apiserver already
    // returns that order from etcd, but do not depend on it.
    items.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    Ok(items)
}

/// Reads one Runner.
pub async fn get_one(ctx: &Ctx, ns: &str, name: &str) -> Result<Runner> {
    runners_api(ctx, Some(ns)).get(name).await.map_err(|e| match e {
        e if crd_missing_message(&e) => Error::CrdMissing,
        e => Error::api("get", "Runner", ns, name, e),
    })
}

/// Reads one Runner, None when it does not exist.
pub async fn get_opt(ctx: &Ctx, ns: &str, name: &str) -> Result<Option<Runner>> {
    match get_one(ctx, ns, name).await {
        Ok(r) => Ok(Some(r)),
        Err(Error::Api { source, .. }) if is_not_found(&source) => Ok(None),
        Err(e) => Err(e),
    }
}

pub(crate) fn runners_api(ctx: &Ctx, ns: Option<&str>) -> Api<Runner> {
    crate::client::scoped(&ctx.client, ns)
}

/// A 404 without a Status body ("404 page not found") or with the generic
/// "the server could not find the requested resource" means the resource
/// type, not an object, is missing: the CRD is not installed.
pub(crate) fn crd_missing_message(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404
        && (s.message.contains("page not found") || s.message.contains("could not find the requested resource")))
}

pub(crate) fn list_error(e: kube::Error, ns: Option<&str>) -> Error {
    if crd_missing_message(&e) {
        Error::CrdMissing
    } else {
        Error::api("list", "Runner", ns.unwrap_or("*"), "", e)
    }
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
        Some(name) => vec![get_one(&ctx, &ctx.namespace, name).await?],
        None => list(&ctx, ns, a.selector.as_deref()).await?,
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
        Some(_) => runners_api(ctx, Some(&ctx.namespace)),
        None => runners_api(ctx, ns),
    };
    let mut stream = watcher(api, cfg).boxed();
    let mut initial = true;
    while let Some(ev) = stream.try_next().await.map_err(|e| Error::Other(format!("watch failed: {e}")))? {
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
