//! `kubectl runner history [NAME] [-A] [-o table|json|yaml]`: the Runners
//! deleted in a namespace, with their last spec, from the record the
//! manager keeps ([`crate::deletion_record`]). Reads one ConfigMap per
//! namespace (a GET, or with `-A` one list by name), hands the entries to
//! `output::history`; a ConfigMap or key it cannot read is a warning on
//! stderr, never a failure.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::args::validate_name;
use super::error::{Error, Result};
use super::output::{self, history::Deleted};
use super::{Globals, exit};
use crate::deletion_record::{CONFIGMAP, entries, is_ours};
use crate::error::FromApi;

const AFTER_HELP: &str = "\
The manager records each Runner it finalizes in the ConfigMap runner-deletions
of the Runner's namespace, keeping the newest 50: name, UID, when the deletion
was asked for, image, replicas, port, host, and whether its children were
orphaned. -o json and -o yaml print {\"items\": [...]}, each item one record
with its namespace.

Examples:
  kubectl runner history
  kubectl runner history web -n team-a
  kubectl runner history -A -o json";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct HistoryArgs {
    /// Show only the records of Runners of this name.
    pub name: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Yaml,
}

pub async fn run(g: &Globals, a: HistoryArgs) -> Result<u8> {
    if let Some(name) = &a.name {
        validate_name(name)?;
    }
    let ctx = g.connect().await?;
    let ns = (!ctx.all_namespaces).then_some(ctx.namespace.as_str());
    let records = read(&ctx.client, ns).await?;
    let mut items = vec![];
    for cm in &records {
        let namespace = cm.namespace().unwrap_or_default();
        if !is_ours(cm) {
            eprint!("{}", output::history::foreign(&namespace));
            continue;
        }
        let (ok, bad) = entries(cm);
        for u in &bad {
            eprint!("{}", output::history::unreadable(&namespace, u));
        }
        let wanted = ok.into_iter().filter(|e| a.name.as_ref().is_none_or(|n| *n == e.name));
        items.extend(wanted.map(|entry| Deleted { namespace: namespace.clone(), entry }));
    }
    let text = match a.output {
        Format::Table if items.is_empty() => {
            eprint!("{}", output::history::no_records(ns));
            String::new()
        }
        Format::Table => {
            output::history::table(&items, ctx.all_namespaces, k8s_openapi::jiff::Timestamp::now())
        }
        Format::Json => output::history::json(&items),
        Format::Yaml => output::history::yaml(&items),
    };
    output::emit(&text)?;
    Ok(exit::OK)
}

/// The record of `ns` (none yet: empty), or of every namespace, in
/// namespace order.
async fn read(client: &kube::Client, ns: Option<&str>) -> Result<Vec<ConfigMap>> {
    let where_ = ns.unwrap_or("*");
    let mut found = match ns {
        Some(ns) => Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get_opt(CONFIGMAP)
            .await
            .map_err(|e| Error::api("get", "ConfigMap", where_, CONFIGMAP, e))?
            .into_iter()
            .collect(),
        None => {
            let lp = ListParams::default().fields(&format!("metadata.name={CONFIGMAP}"));
            Api::<ConfigMap>::all(client.clone())
                .list(&lp)
                .await
                .map_err(|e| Error::api("list", "ConfigMap", where_, CONFIGMAP, e))?
                .items
        }
    };
    found.sort_by_key(|cm| cm.namespace());
    Ok(found)
}
