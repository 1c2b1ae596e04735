//! `kubectl runner get [NAME...] [-A] [-l SELECTOR] [-o FORMAT] [--sort-by PATH]
//! [--show-labels] [-w]`.
//!
//! Reads Runners through [`crate::client::runners`], sorts them, picks the
//! format and hands the data to `output`. `-w` streams changes from a watch.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher;

use super::args::{GetFormat, GetOutput, GetOutputParser, parse_sort_by};
use super::error::{Error, Result};
use super::output::columns::{Columns, TabWriter};
use super::output::jsonpath::Template;
use super::output::{self, TableOpts};
use super::{Ctx, Globals};
use crate::api::Runner;
use crate::client::children;
use crate::client::runners;

const AFTER_HELP: &str = "\
Templates, as kubectl's: -o jsonpath=TEMPLATE prints text around {...}
actions: fields (.spec.image, ['key'], escaped dots: .metadata.labels.app\\.io/x),
* and [*], .. (recursive descent), indices and slices ([0], [-1], [1:3], [::2]),
unions ([0,2]), filters ([?(@.status.phase==\"Available\")], with == != < > <= >=,
or [?(@.spec.host)] for presence), quoted text ({\"\\n\"}, {'\\t'}) and
{range ...}...{end}. The values of one action are joined by spaces; maps and
lists print as JSON. Custom columns and --sort-by take one path each, with or
without braces and the leading dot. Not supported: jsonpath-as-json,
go-template, --no-headers.

Examples:
  kubectl runner get
  kubectl runner get web -o yaml
  kubectl runner get web api
  kubectl runner get -A -o wide --show-labels
  kubectl runner get -l team=web -o name
  kubectl runner get -o jsonpath='{range .items[*]}{.metadata.name}{\"\\t\"}{.spec.image}{\"\\n\"}{end}'
  kubectl runner get -o custom-columns=NAME:.metadata.name,READY:.status.readyReplicas
  kubectl runner get --sort-by=.metadata.creationTimestamp
  kubectl runner get -w";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct GetArgs {
    /// Show only these Runners.
    pub names: Vec<String>,
    /// Label selector, e.g. `team=web,tier!=db`.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Output format: a plain one, or a template as kubectl's.
    #[arg(short = 'o', long, value_parser = GetOutputParser, default_value = "table")]
    pub output: GetOutput,
    /// Sort a list by this JSONPath, e.g. `.spec.replicas` or `{.metadata.name}`.
    #[arg(long, value_name = "PATH", value_parser = parse_sort_by)]
    pub sort_by: Option<Template>,
    /// Add each Runner's labels as the last column (table and wide only).
    #[arg(long)]
    pub show_labels: bool,
    /// After listing, stream changes until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// How the Runners are printed, resolved from the flags.
enum Printer {
    Table(TableOpts),
    Format(GetFormat),
    JsonPath(Template),
    Columns(Columns, TabWriter),
}

pub async fn run(g: &Globals, a: GetArgs) -> Result<u8> {
    if !a.names.is_empty() && a.selector.is_some() {
        return Err(Error::Invalid("give either NAME or -l SELECTOR, not both".into()));
    }
    if !a.names.is_empty() && g.all_namespaces {
        return Err(Error::Invalid("NAME cannot be used with -A; pick a namespace with -n".into()));
    }
    let mut printer = printer(a.output.clone().load()?, a.show_labels, g.all_namespaces)?;
    let ctx = g.connect().await?;
    let ns = (!ctx.all_namespaces).then_some(ctx.namespace.as_str());
    let single = a.names.len() == 1;
    let (mut items, missing) = read(&ctx, ns, &a).await?;
    match &a.sort_by {
        // As kubectl: a watch prints the list in the server's order.
        Some(_) if a.watch && !single => {
            eprintln!("warning: --watch requested, --sort-by will be ignored for watch events received");
        }
        Some(path) if !single => items = sorted(items, path)?,
        _ => {}
    }
    let (kids, unreadable) = match &printer {
        Printer::Table(opts) if opts.wide => children::index(&ctx.client, ns).await?,
        _ => (BTreeMap::new(), vec![]),
    };
    let rendered = match &mut printer {
        // Only names that do not exist: their error says it.
        _ if items.is_empty() && !a.names.is_empty() => String::new(),
        Printer::Table(_) if items.is_empty() => {
            // kubectl says this on stderr and exits 0.
            eprint!("{}", output::no_resources(ns));
            String::new()
        }
        Printer::Table(opts) => output::runner_table(&items, *opts, &kids, Timestamp::now()),
        Printer::Format(f) => output::runners(&items, *f, single),
        Printer::JsonPath(t) => jsonpath(t, &output::runners_data(&items, single))?,
        Printer::Columns(cols, tw) => columns(cols, tw, &items, true)?,
    };
    output::emit(&rendered)?;
    eprint!("{}", output::not_readable::warning(&unreadable, ns));
    if !missing.is_empty() {
        return Err(Error::RunnersNotFound { namespace: ctx.namespace.clone(), names: missing });
    }
    if a.watch {
        let table = match &printer {
            Printer::Table(opts) => Some(output::WatchTable::new(&items, *opts, &kids, Timestamp::now())),
            _ => None,
        };
        watch(&ctx, ns, &a, printer, table, items.is_empty()).await?;
    }
    Ok(super::exit::OK)
}

/// The Runners asked for, and the names (of several) that do not exist.
/// One name that does not exist fails as before; with several, as
/// kubectl, the others are still shown and the missing ones named after.
async fn read(ctx: &Ctx, ns: Option<&str>, a: &GetArgs) -> Result<(Vec<Runner>, Vec<String>)> {
    match a.names.as_slice() {
        [] => Ok((runners::list(&ctx.client, ns, a.selector.as_deref()).await?, vec![])),
        [name] => Ok((vec![runners::get(&ctx.client, &ctx.namespace, name).await?], vec![])),
        names => {
            let (mut found, mut missing) = (vec![], vec![]);
            for name in names {
                match runners::get_opt(&ctx.client, &ctx.namespace, name).await? {
                    Some(r) => found.push(r),
                    None => missing.push(name.clone()),
                }
            }
            Ok((found, missing))
        }
    }
}

/// Resolves `-o` and `--show-labels`, which kubectl allows only with the
/// table and `wide`.
fn printer(output: GetOutput, show_labels: bool, all_namespaces: bool) -> Result<Printer> {
    let table =
        |wide| TableOpts { namespace_column: all_namespaces, wide, header: true, labels: show_labels };
    let printer = match output {
        GetOutput::Format(GetFormat::Table) => return Ok(Printer::Table(table(false))),
        GetOutput::Format(GetFormat::Wide) => return Ok(Printer::Table(table(true))),
        GetOutput::Format(f) => Printer::Format(f),
        GetOutput::JsonPath(t) => Printer::JsonPath(t),
        GetOutput::CustomColumns(c) => Printer::Columns(c, TabWriter::default()),
        GetOutput::JsonPathFile(_) | GetOutput::CustomColumnsFile(_) => {
            return Err(Error::Invalid("-o: the template file was not read".into()));
        }
    };
    if show_labels {
        return Err(Error::Invalid(
            "--show-labels works with the table and -o wide only, not with this -o".into(),
        ));
    }
    Ok(printer)
}

/// `items` in the order `--sort-by` gives, as kubectl sorts them.
fn sorted(items: Vec<Runner>, path: &Template) -> Result<Vec<Runner>> {
    let data = output::runners_data(&items, false);
    let objects = data["items"].as_array().map(Vec::as_slice).unwrap_or_default();
    let order = output::sort::order(objects, path)
        .map_err(|message| Error::Template { flag: format!("--sort-by={}", path.source()), message })?;
    let mut slots: Vec<Option<Runner>> = items.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

fn jsonpath(t: &Template, data: &serde_json::Value) -> Result<String> {
    t.execute(data)
        .map_err(|message| Error::Template { flag: format!("-o jsonpath={}", t.source()), message })
}

/// The custom-columns table of `items`, through one [`TabWriter`] so rows
/// streamed later stay aligned.
fn columns(cols: &Columns, tw: &mut TabWriter, items: &[Runner], header: bool) -> Result<String> {
    let data = output::runners_data(items, false);
    let mut rows = if header { vec![cols.header()] } else { Vec::new() };
    for object in data["items"].as_array().into_iter().flatten() {
        rows.push(
            cols.row(object)
                .map_err(|message| Error::Template { flag: "-o custom-columns".into(), message })?,
        );
    }
    Ok(tw.render(&rows))
}

/// Streams every change after the initial list, one row (or object) per
/// event, until the user interrupts. Rows are printed without a header
/// unless the initial list was empty.
async fn watch(
    ctx: &Ctx,
    ns: Option<&str>,
    a: &GetArgs,
    mut printer: Printer,
    mut table: Option<output::WatchTable>,
    mut header: bool,
) -> Result<()> {
    let mut cfg = watcher::Config::default();
    if let Some(s) = &a.selector {
        cfg = cfg.labels(s);
    }
    // One name is watched by a field selector; several are picked from the
    // namespace's events.
    if let [n] = a.names.as_slice() {
        cfg = cfg.fields(&format!("metadata.name={n}"));
    }
    let api = match a.names.is_empty() {
        false => runners::api(&ctx.client, Some(&ctx.namespace)),
        true => runners::api(&ctx.client, ns),
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
        if !a.names.is_empty() && !a.names.iter().any(|n| changed.metadata.name.as_ref() == Some(n)) {
            continue;
        }
        let text = match (&mut printer, &mut table) {
            (Printer::Table(opts), table) => {
                // What was not readable was said once, after the list.
                let kids =
                    if opts.wide { children::index(&ctx.client, ns).await?.0 } else { BTreeMap::new() };
                let table =
                    table.get_or_insert_with(|| output::WatchTable::new(&[], *opts, &kids, Timestamp::now()));
                let mut text = if header { table.header() } else { String::new() };
                header = false;
                text += &table.row(&changed, &kids, Timestamp::now());
                text
            }
            (Printer::JsonPath(t), _) => jsonpath(t, &output::runners_data(&[changed], true))?,
            (Printer::Columns(cols, tw), _) => columns(cols, tw, &[changed], false)?,
            (Printer::Format(f), _) => output::watch_event(&changed, *f),
        };
        output::emit(&text)?;
    }
    Ok(())
}
