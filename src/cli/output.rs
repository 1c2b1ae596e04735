//! The only place that renders what the CLI prints: tables like `kubectl
//! get` (comfy-table, no borders), YAML, JSON, `-o name`, `describe`, the
//! `diagnose` and `e2e` reports, and the error lines `main` prints.
//!
//! Every function here is pure (data and the current time in, a `String`
//! out) except [`emit`], which writes to stdout and treats a closed pipe
//! (`kubectl runner get | head -1`) as success.
//!
//! Text for humans shows cluster data through [`Safe`] ([`safe`]): table
//! cells and `describe` values are `Safe`, so their control characters are
//! escaped, never raw. JSON and YAML are the exact data (their encoders
//! escape control characters in their own syntax).

use std::io::Write;

use comfy_table::{Cell, ContentArrangement, Table, presets};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde::Serialize;

use super::args::GetFormat;
use super::child_summary;
use super::error::{Error, Result};
use crate::api::{GROUP, Runner, condition};
use crate::client::children::Children;
use crate::error::ApiError;

pub mod columns;
pub mod describe;
pub mod diagnose;
pub mod e2e;
pub mod failure;
pub mod history;
pub mod jsonpath;
pub mod migrate;
pub mod not_readable;
pub mod safe;
pub mod sort;
pub use describe::{describe, event_time};
pub use safe::Safe;

/// Writes `text` to stdout. A broken pipe is success: the reader had enough.
pub fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::WriteOutput(e)),
    }
}

/// What `main` prints on stderr for a failed command: `error: ...`, then
/// each cause. Invalid input and API errors are one line: an API error's
/// message already holds the apiserver's reason, which its source chain
/// would repeat as a debug dump. A failure the user can act on (server
/// down, DNS, TLS, timeout, 401, 403) is kubectl's kind of line, naming the
/// server `at` or the user and verb, and what to check.
pub fn error(e: &Error, at: &failure::Endpoint) -> String {
    if let Error::Api(ApiError { source, .. }) = e
        && let Some(kind) = crate::client::failure::classify(source)
    {
        return format!("error: {}\n", Safe::new(failure::line(&kind, at)));
    }
    let mut out = match e {
        Error::Invalid(msg) => return format!("error: {}\n", Safe::multiline(msg)),
        e => format!("error: {}\n", Safe::multiline(e.to_string())),
    };
    if matches!(e, Error::Api(_)) {
        return out;
    }
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        out += &format!("  caused by: {}\n", Safe::multiline(s.to_string()));
        src = s.source();
    }
    out
}

/// A `warning: ...` line for stderr.
pub fn warning(text: &str) -> String {
    format!("warning: {}\n", Safe::new(text))
}

/// `runner.lab.cloudlab.training/NAME`, what kubectl prints for `-o name`.
pub fn resource_name(name: &str) -> String {
    format!("runner.{GROUP}/{}", Safe::new(name))
}

/// `runner.lab.cloudlab.training/web created`, with ` (server dry run)` etc.
pub fn action_line(name: &str, verb: &str, suffix: Option<&str>) -> String {
    match suffix {
        Some(s) => format!("{} {verb} ({s})\n", resource_name(name)),
        None => format!("{} {verb}\n", resource_name(name)),
    }
}

/// Age the way `kubectl get` prints it (`45s`, `3m12s`, `5h`, `4d2h`):
/// a port of apimachinery's `duration.HumanDuration`.
pub fn age(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        return if s % 60 == 0 { format!("{m}m") } else { format!("{m}m{}s", s % 60) };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = s / 3600;
    if h < 8 {
        return if m % 60 == 0 { format!("{h}h") } else { format!("{h}h{}m", m % 60) };
    }
    if h < 48 {
        return format!("{h}h");
    }
    let d = h / 24;
    if h < 24 * 8 {
        return if h % 24 == 0 { format!("{d}d") } else { format!("{d}d{}h", h % 24) };
    }
    if h < 24 * 365 * 2 {
        return format!("{d}d");
    }
    let y = d / 365;
    if h < 24 * 365 * 8 {
        return if d % 365 == 0 { format!("{y}y") } else { format!("{y}y{}d", d % 365) };
    }
    format!("{y}y")
}

/// Age of `t` at `now`, or `<unknown>`.
pub fn age_of(t: Option<&Timestamp>, now: Timestamp) -> String {
    match t {
        Some(t) => age(now.duration_since(*t).as_secs()),
        None => "<unknown>".into(),
    }
}

/// Which columns a Runner table has.
#[derive(Debug, Clone, Copy, Default)]
pub struct TableOpts {
    /// NAMESPACE first, as with `-A`.
    pub namespace_column: bool,
    /// Add CHILDREN and REASON.
    pub wide: bool,
    /// Print the header row (off for rows streamed by `get -w`).
    pub header: bool,
    /// Add LABELS last, as `--show-labels`.
    pub labels: bool,
}

/// The `kubectl get`-style table. `children` is consulted only when wide.
pub fn runner_table(runners: &[Runner], opts: TableOpts, children: &ChildIndex, now: Timestamp) -> String {
    let rows = runners.iter().map(|r| runner_cells(r, opts, children, now));
    let header = header_cells(opts);
    table(opts.header.then_some(header.as_slice()), rows)
}

/// Children by (namespace, name), as `children::index` returns them.
pub type ChildIndex = std::collections::BTreeMap<(String, String), Children>;

fn header_cells(opts: TableOpts) -> Vec<&'static str> {
    let mut header = vec!["NAME", "IMAGE", "REPLICAS", "READY", "PHASE", "URL", "AGE"];
    if opts.namespace_column {
        header.insert(0, "NAMESPACE");
    }
    if opts.wide {
        header.extend(["CHILDREN", "REASON"]);
    }
    if opts.labels {
        header.push("LABELS");
    }
    header
}

fn runner_cells(r: &Runner, opts: TableOpts, children: &ChildIndex, now: Timestamp) -> Vec<Safe> {
    let status = r.status.clone().unwrap_or_default();
    let mut row: Vec<Safe> = vec![
        r.name_any().into(),
        Safe::new(&r.spec.image),
        r.spec.replicas.to_string().into(),
        format!("{}/{}", status.ready_replicas, r.spec.replicas).into(),
        if r.metadata.deletion_timestamp.is_some() {
            "Terminating".into()
        } else {
            status.phase.to_string().into()
        },
        status.url.as_deref().unwrap_or("<none>").into(),
        age_of(r.metadata.creation_timestamp.as_ref().map(|t| &t.0), now).into(),
    ];
    if opts.namespace_column {
        row.insert(0, r.namespace().unwrap_or_default().into());
    }
    if opts.wide {
        let key = (r.namespace().unwrap_or_default(), r.name_any());
        let c = children.get(&key).cloned().unwrap_or_default();
        row.push(child_summary::short(r, &c).into());
        let reason = status
            .conditions
            .iter()
            .find(|c| c.type_ == condition::READY)
            .map(|c| c.reason.clone())
            .filter(|r| !r.is_empty());
        row.push(reason.unwrap_or_else(|| "<none>".into()).into());
    }
    if opts.labels {
        row.push(labels(r.metadata.labels.as_ref()).into());
    }
    row
}

/// Labels as `--show-labels` prints them: `k=v` sorted by key, joined by
/// commas, or `<none>`.
pub fn labels(labels: Option<&std::collections::BTreeMap<String, String>>) -> String {
    match labels {
        Some(m) if !m.is_empty() => m.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","),
        _ => "<none>".into(),
    }
}

/// Rows streamed by `get -w`, aligned with the table printed first (as
/// kubectl does): column widths start from the header and the initial rows
/// and only ever grow.
#[derive(Debug, Clone)]
pub struct WatchTable {
    opts: TableOpts,
    widths: Vec<usize>,
}

impl WatchTable {
    pub fn new(initial: &[Runner], opts: TableOpts, children: &ChildIndex, now: Timestamp) -> WatchTable {
        let mut w = WatchTable { opts, widths: Vec::new() };
        w.grow(&header_cells(opts).into_iter().map(Safe::new).collect::<Vec<_>>());
        for r in initial {
            w.grow(&runner_cells(r, opts, children, now));
        }
        w
    }

    fn grow(&mut self, cells: &[Safe]) {
        self.widths.resize(self.widths.len().max(cells.len()), 0);
        for (w, c) in self.widths.iter_mut().zip(cells) {
            *w = (*w).max(c.as_str().chars().count());
        }
    }

    /// The header line, for a watch that starts from an empty list.
    pub fn header(&mut self) -> String {
        let cells: Vec<Safe> = header_cells(self.opts).into_iter().map(Safe::new).collect();
        self.line(&cells)
    }

    /// One aligned line for `r`.
    pub fn row(&mut self, r: &Runner, children: &ChildIndex, now: Timestamp) -> String {
        let cells = runner_cells(r, self.opts, children, now);
        self.line(&cells)
    }

    fn line(&mut self, cells: &[Safe]) -> String {
        self.grow(cells);
        let mut out = String::new();
        for (c, w) in cells.iter().zip(&self.widths) {
            out += &format!("{c:<w$}   ", w = *w);
        }
        out.trim_end().to_string() + "\n"
    }
}

/// A borderless table with kubectl's three-space gutters and no trailing
/// spaces, so output diffs cleanly against `kubectl get`. Cells are
/// [`Safe`]: whatever the cluster wrote in them is escaped.
pub fn table(header: Option<&[&str]>, rows: impl IntoIterator<Item = Vec<Safe>>) -> String {
    let mut t = Table::new();
    t.load_style(presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled);
    if let Some(h) = header {
        t.set_header(h.iter().map(|c| Cell::new(Safe::new(c))));
    }
    let mut n = 0;
    for r in rows {
        t.add_row(r.into_iter().map(Cell::new));
        n += 1;
    }
    if n == 0 && t.header().is_none() {
        return String::new();
    }
    let cols = t.column_count();
    for (i, c) in t.column_iter_mut().enumerate() {
        c.set_padding((0, if i + 1 == cols { 0 } else { 3 }));
    }
    let mut out: String = t.lines().map(|l| l.trim_end().to_string() + "\n").collect();
    if out.trim().is_empty() {
        out.clear();
    }
    out
}

/// What `get` prints when the list is empty (on stderr in kubectl; here the
/// caller decides).
pub fn no_resources(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("No Runners found in {} namespace.\n", Safe::new(ns)),
        None => "No Runners found.\n".into(),
    }
}

/// Runners as YAML, JSON or names. `single` prints one object rather than
/// a `List`, as kubectl does for `get NAME`. Tables go through
/// [`runner_table`].
pub fn runners(items: &[Runner], format: GetFormat, single: bool) -> String {
    let cleaned: Vec<Runner> = items.iter().cloned().map(without_managed_fields).collect();
    match format {
        GetFormat::Name => cleaned.iter().map(|r| resource_name(&r.name_any()) + "\n").collect(),
        GetFormat::Json if single && cleaned.len() == 1 => json(&cleaned[0]),
        GetFormat::Yaml if single && cleaned.len() == 1 => yaml(&cleaned[0]),
        GetFormat::Json => json(&list(&cleaned)),
        GetFormat::Yaml => yaml(&list(&cleaned)),
        GetFormat::Table | GetFormat::Wide => {
            unreachable!("tables are rendered by runner_table")
        }
    }
}

/// One Runner per watch event: a JSON line, a YAML document, or a name.
pub fn watch_event(r: &Runner, format: GetFormat) -> String {
    let r = without_managed_fields(r.clone());
    match format {
        GetFormat::Json => serde_json::to_string(&r).unwrap_or_default() + "\n",
        GetFormat::Yaml => format!("---\n{}", yaml(&r)),
        _ => resource_name(&r.name_any()) + "\n",
    }
}

/// Runners as kubectl hands them to `-o jsonpath`, `-o custom-columns` and
/// `--sort-by`: the object itself for `get NAME` (`single`), else a `List`;
/// with managedFields, which kubectl hides only from `-o json` and `-o yaml`.
pub fn runners_data(items: &[Runner], single: bool) -> serde_json::Value {
    match items {
        [one] if single => serde_json::to_value(one).unwrap_or_default(),
        _ => list(items),
    }
}

fn list(items: &[Runner]) -> serde_json::Value {
    serde_json::json!({ "apiVersion": "v1", "kind": "List", "metadata": { "resourceVersion": "" }, "items": items })
}

/// Hidden by default, as `kubectl get -o yaml` does since 1.21.
fn without_managed_fields(mut r: Runner) -> Runner {
    r.metadata.managed_fields = None;
    r
}

/// Pretty JSON with a trailing newline.
pub fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

/// YAML (serde_yaml ends documents with a newline).
pub fn yaml<T: Serialize>(v: &T) -> String {
    serde_yaml::to_string(v).unwrap_or_default()
}

/// Lines for `install`: `Kind/name applied`.
pub fn applied(described: &[String], verb: &str) -> String {
    described.iter().map(|d| format!("{} {verb}\n", Safe::new(d))).collect()
}

/// A short progress line from a Runner's status, for a spinner and for
/// `create --wait` and `scale --wait`: `web: Progressing 1/3 ready (...)`.
pub fn progress_line(r: &Runner) -> String {
    let line = match &r.status {
        None => format!("waiting for the manager to pick up {}", r.name_any()),
        Some(st) => format!(
            "{}: {} {}/{} ready{}",
            r.name_any(),
            st.phase,
            st.ready_replicas,
            r.spec.replicas,
            st.message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default()
        ),
    };
    Safe::from(line).into_string()
}

#[cfg(test)]
mod tests;
