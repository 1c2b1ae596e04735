//! Progress spinners and confirmation prompts, always on stderr so stdout
//! carries only results (`-o json | jq` keeps working).
//!
//! A spinner draws only when stderr is a terminal and `NO_COLOR` is unset;
//! otherwise its messages go to the log (`-v`). A prompt needs a terminal on
//! both stdin and stderr; without one, destructive commands refuse unless the
//! user said `--yes`, because a script must never hang on a question.

use std::io::IsTerminal;
use std::time::Duration;

use crate::error::{Error, Result};

/// True when a spinner may draw: stderr is a TTY and `NO_COLOR` is unset.
pub fn interactive() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// A spinner that is a no-op when not [`interactive`]. Cleared on drop.
pub struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    pub fn spinner(message: impl Into<String>) -> Progress {
        let message = message.into();
        tracing::info!("{message}");
        if !interactive() {
            return Progress(None);
        }
        let pb = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        pb.set_message(message);
        pb.enable_steady_tick(Duration::from_millis(120));
        Progress(Some(pb))
    }

    /// Replaces the message; logged at info level so `-v` shows it without a TTY.
    pub fn set(&self, message: impl Into<String>) {
        let message = message.into();
        tracing::info!("{message}");
        if let Some(pb) = &self.0 {
            pb.set_message(message);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}

/// Asks "`question` [y/N]" on a terminal. `yes` skips the question; no
/// terminal and no `yes` is a refusal naming the flag to pass.
pub fn confirm(question: &str, yes: bool) -> Result<()> {
    if yes {
        return Ok(());
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(Error::Other(format!(
            "refusing to proceed without confirmation ({question}): stdin is not a terminal; pass --yes"
        )));
    }
    let answer = dialoguer::Confirm::with_theme(&dialoguer::theme::SimpleTheme)
        .with_prompt(question)
        .default(false)
        .interact()
        .map_err(|e| Error::Other(format!("cannot read the answer: {e}")))?;
    if answer { Ok(()) } else { Err(Error::Other("aborted: not confirmed".into())) }
}
