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

impl Progress {
    /// Prints a line above the spinner (or on stderr without one).
    pub fn println(&self, line: impl AsRef<str>) {
        match &self.0 {
            Some(pb) => pb.println(line),
            None => eprintln!("{}", line.as_ref()),
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

/// What a yes/no question got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Yes,
    No,
    /// No terminal to ask on, and no `--yes`.
    NoTerminal,
}

/// The one yes/no prompt: `yes` answers it; without a terminal it is not
/// asked; otherwise "`question` [y/N]" on stderr.
pub fn ask(question: &str, yes: bool) -> Result<Answer> {
    if yes {
        return Ok(Answer::Yes);
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(Answer::NoTerminal);
    }
    let answer = dialoguer::Confirm::with_theme(&dialoguer::theme::SimpleTheme)
        .with_prompt(question)
        .default(false)
        .interact()
        .map_err(|e| Error::Prompt(e.to_string()))?;
    Ok(if answer { Answer::Yes } else { Answer::No })
}

/// [`ask`], where anything but yes is an error naming the flag to pass.
pub fn confirm(question: &str, yes: bool) -> Result<()> {
    match ask(question, yes)? {
        Answer::Yes => Ok(()),
        Answer::No => Err(Error::Declined),
        Answer::NoTerminal => Err(Error::NoTerminal { question: question.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_skips_the_question() {
        assert!(confirm("delete everything?", true).is_ok());
    }

    #[test]
    fn without_a_terminal_and_without_yes_the_answer_is_a_refusal_naming_the_flag() {
        if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            return; // run by hand in a terminal: the prompt would wait for a human
        }
        let err = confirm("delete everything?", false).unwrap_err().to_string();
        assert!(err.contains("--yes"), "{err}");
    }
}
