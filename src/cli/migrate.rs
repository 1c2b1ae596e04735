//! `kubectl runner migrate`: every stored Runner to the CRD's storage
//! version, then `status.storedVersions` pruned to it (see [`crate::migrate`]
//! for the why of each step). In order: read the CRD; stop early when
//! storedVersions is already the storage version alone; ask the apiserver
//! whether the user may do all of it; preflight (a round trip of every
//! Runner, nothing written); rewrite (a StorageVersionMigration where
//! served, else one guarded update per Runner, with a progress bar); prune
//! (when the CRD is as at the start but for the conditions a migrator
//! writes, guarded by the resourceVersion of that comparison's read, see
//! `crd::prune`); print the summary.
//!
//! Ctrl-C during the rewrite stops it, prints how far it got, and leaves
//! storedVersions alone; running the command again continues, because a
//! Runner already at the storage version is not written again. Ctrl-C
//! during the preflight ends the process as usual: nothing was written.

use std::time::Instant;

use super::error::{Error, Result};
use super::output;
use super::progress::Progress;
use super::{Globals, exit};
use crate::migrate::{self, Method, Plan, Prune, Summary, Tally, access, crd, rewrite, svm};

const AFTER_HELP: &str = "\
Needs: get and update/status on the CRD runners.lab.cloudlab.training, list and
update on runners in all namespaces (or create storageversionmigrations where
the apiserver serves storagemigration.k8s.io).

Examples:
  kubectl runner migrate
  kubectl runner migrate --parallel 16 -o json";

#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct MigrateArgs {
    /// Runners rewritten at once (1..=64).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub parallel: u16,
    /// Rewrite from this process with one guarded update per Runner even
    /// where the apiserver serves StorageVersionMigration.
    #[arg(long)]
    pub no_storage_version_migration: bool,
    /// Print the summary as JSON instead of text.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Format>,
}

/// `-o` for `migrate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Json,
}

/// Ends when the user presses Ctrl-C; never, when no handler can be set.
async fn ctrl_c() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

pub async fn run(g: &Globals, a: MigrateArgs) -> Result<u8> {
    let ctx = g.connect().await?;
    let client = &ctx.client;
    let started = Instant::now();
    let svm_api = match a.no_storage_version_migration {
        true => None,
        false => svm::served(client).await?,
    };
    // Asked first, so a user who may not do all of it gets the whole list
    // of what is missing rather than the first 403.
    let missing = access::missing(client, &access::needed(svm_api.is_some())).await?;
    if !missing.is_empty() {
        return Err(migrate::Error::Forbidden(missing).into());
    }
    let crd_at_start = crd::read(client).await?;
    let plan = Plan::from_crd(&crd_at_start)?;
    if !plan.needed() {
        let s =
            Summary::new(&plan, Method::Update, 0, Tally::default(), started.elapsed(), Prune::NothingToDo);
        return render(&s, a.output).map(|()| exit::OK);
    }

    let spinner = Progress::spinner("preflight: reading Runners at the old version(s)");
    let checked = crd::preflight(client, &plan, crate::api::conversion::convert, &mut |n| {
        spinner.set(format!("preflight: {n} Runner(s) round-tripped"))
    })
    .await?;
    drop(spinner);

    let (method, tally, interrupted) = match &svm_api {
        Some(gv) => {
            let spinner = Progress::spinner(format!(
                "rewriting Runners at {} by StorageVersionMigration",
                plan.storage
            ));
            let run =
                svm::run(client, gv, &plan.storage, ctrl_c(), &mut |line| spinner.set(line.to_string()))
                    .await?;
            (Method::StorageVersionMigration { name: run.name }, Tally::default(), run.interrupted)
        }
        None => {
            let total = checked as u64;
            let bar = Progress::bar(total, format!("Runners rewritten at {}", plan.storage));
            let mut listed = 0u64;
            let run =
                rewrite::run(client, &plan.storage, a.parallel.into(), ctrl_c(), &mut |t, remaining| {
                    listed = listed.max(t.done() as u64 + remaining.unwrap_or(0));
                    bar.position(t.done() as u64, total.max(listed));
                })
                .await?;
            (Method::Update, run.tally, run.interrupted)
        }
    };

    let prune = match interrupted {
        true => Prune::Interrupted,
        false => crd::prune(client, &crd_at_start, &plan, &method).await?,
    };
    let summary = Summary::new(&plan, method, checked, tally, started.elapsed(), prune.clone());
    render(&summary, a.output)?;
    match prune {
        Prune::Pruned | Prune::PrunedByMigration | Prune::NothingToDo => Ok(exit::OK),
        Prune::Interrupted => Err(Error::MigrateInterrupted { done: tally.done() }),
        Prune::CrdChanged { at_start } => Err(Error::MigrateNotPruned { at_start }),
    }
}

fn render(s: &Summary, format: Option<Format>) -> Result<()> {
    match format {
        Some(Format::Json) => output::emit(&output::json(s)),
        None => output::emit(&output::migrate::summary(s)),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    #[test]
    fn parallel_outside_its_range_is_a_usage_error_naming_the_range() {
        for bad in ["0", "65"] {
            let err = Cli::try_parse_from(["kubectl-runner", "migrate", "--parallel", bad]).unwrap_err();
            assert!(err.to_string().contains("1..=64"), "{err}");
        }
        let ok =
            Cli::try_parse_from(["kubectl-runner", "migrate", "--parallel", "16", "-o", "json"]).unwrap();
        assert!(matches!(ok.command, Command::Migrate(a) if a.parallel == 16));
    }
}
