//! Called by kubectl's own shell completion for `kubectl runner <TAB>`:
//! prints candidates in Cobra's `__complete` format. See
//! `kubectl_runner::cli::completion`.

fn main() -> std::process::ExitCode {
    kubectl_runner::cli::completion::main_complete(std::env::args().skip(1).collect())
}
