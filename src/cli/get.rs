//! `kubectl runner get [NAME] [-A] [-l SELECTOR] [-o FORMAT] [--sort-by PATH]
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
  kubectl runner get -A -o wide --show-labels
  kubectl runner get -l team=web -o name
  kubectl runner get -o jsonpath='{range .items[*]}{.metadata.name}{\"\\t\"}{.spec.image}{\"\\n\"}{end}'
  kubectl runner get -o custom-columns=NAME:.metadata.name,READY:.status.readyReplicas
  kubectl runner get --sort-by=.metadata.creationTimestamp
  kubectl runner get -w";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct GetArgs {
    /// Show only this Runner.
    pub name: Option<String>,
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
    if a.name.is_some() && a.selector.is_some() {
        return Err(Error::Invalid("give either NAME or -l SELECTOR, not both".into()));
    }
    if a.name.is_some() && g.all_namespaces {
        return Err(Error::Invalid("NAME cannot be used with -A; pick a namespace with -n".into()));
    }
    let mut printer = printer(a.output.clone().load()?, a.show_labels, g.all_namespaces)?;
    let ctx = g.connect().await?;
    let ns = (!ctx.all_namespaces).then_some(ctx.namespace.as_str());
    let mut items = match &a.name {
        Some(name) => vec![runners::get(&ctx.client, &ctx.namespace, name).await?],
        None => runners::list(&ctx.client, ns, a.selector.as_deref()).await?,
    };
    match (&a.sort_by, &a.name) {
        // As kubectl: a watch prints the list in the server's order.
        (Some(_), None) if a.watch => {
            eprintln!("warning: --watch requested, --sort-by will be ignored for watch events received");
        }
        (Some(path), None) => items = sorted(items, path)?,
        _ => {}
    }
    let single = a.name.is_some();
    let kids = match &printer {
        Printer::Table(opts) if opts.wide => children::index(&ctx.client, ns).await?,
        _ => BTreeMap::new(),
    };
    let rendered = match &mut printer {
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
    if a.watch {
        let table = match &printer {
            Printer::Table(opts) => Some(output::WatchTable::new(&items, *opts, &kids, Timestamp::now())),
            _ => None,
        };
        watch(&ctx, ns, &a, printer, table, items.is_empty()).await?;
    }
    Ok(super::exit::OK)
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
        let text = match (&mut printer, &mut table) {
            (Printer::Table(opts), table) => {
                let kids = if opts.wide { children::index(&ctx.client, ns).await? } else { BTreeMap::new() };
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
