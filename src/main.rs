//! Thin entry point: parse, set up logging, run, map to an exit code.

use std::process::ExitCode;

use clap::Parser;
use kubectl_runner::cli::{self, Cli, exit};

fn main() -> ExitCode {
    // kubectl's plugin completion protocol; its words are not our flags.
    if std::env::args().nth(1).as_deref() == Some("__complete") {
        return cli::completion::main_complete(std::env::args().skip(2).collect());
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { exit::OK });
        }
    };
    init_tracing(cli.globals.verbose, &cli.command);
    // The manager is one event loop: a single thread costs less CPU (no work
    // stealing, no cross-thread wakeups) and less memory (one allocator
    // arena) than a pool, and its throughput is bounded by the apiserver.
    let mut builder = match cli.command {
        cli::Command::RunManager(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    let globals = cli.globals.clone();
    match rt.block_on(cli::run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprint!("{}", cli::output::error(&e, &globals.endpoint()));
            ExitCode::from(e.exit_code())
        }
    }
}

/// Logs go to stderr; `-v` raises the level; `RUST_LOG` overrides. The
/// manager logs at info by default. A CLI command logs only its own
/// warnings unless asked: the libraries' lines (kube's "failed with error
/// client error (Connect)") say less than the one error line the command
/// ends with, and belong to `-v`. Colour only on a terminal without
/// `NO_COLOR`, the rule the spinners follow.
fn init_tracing(verbose: u8, command: &cli::Command) {
    use tracing_subscriber::EnvFilter;
    let default = match (verbose, command) {
        (0, cli::Command::RunManager(_)) => "info",
        (0, _) => "kubectl_runner=warn",
        (1, _) => "info",
        (2, _) => "debug",
        _ => "trace",
    };
    // e2e's report is the only thing on its terminal: without -v, the log of
    // the manager it runs in this process (kube's warnings about a Runner
    // deleted under a queued pass, say) goes to a file next to its artifacts.
    if let (0, cli::Command::E2e(a)) = (verbose, command)
        && let Some(file) = log_file(&a.artifacts)
    {
        let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::sync::Mutex::new(file))
            .with_ansi(false)
            .init();
        return;
    }
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let json = matches!(command, cli::Command::RunManager(a) if a.log_format_json());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(cli::progress::Terminal::detect().can_draw());
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// `<dir>/e2e.log`, truncated; None when it cannot be written (the log then
/// stays on stderr).
fn log_file(dir: &std::path::Path) -> Option<std::fs::File> {
    std::fs::create_dir_all(dir).ok()?;
    std::fs::File::create(dir.join("e2e.log")).ok()
}
