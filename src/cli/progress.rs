//! Progress spinners and confirmation prompts, always on stderr so stdout
//! carries only results (`-o json | jq` keeps working).
//!
//! Every message and question is [`Safe`]: a Runner's status message or
//! name shown while waiting has its control characters escaped.
//!
//! A spinner draws only when stderr is a terminal and `NO_COLOR` is unset;
//! otherwise its messages go to the log (`-v`). A prompt needs a terminal on
//! both stdin and stderr; without one, destructive commands refuse unless the
//! user said `--yes`, because a script must never hang on a question. What
//! is a terminal is read once per call ([`Terminal::detect`]) and passed in,
//! so the rules are testable wherever the tests run.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::error::{Error, Result};
use super::output::Safe;

/// Which of our streams a human is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terminal {
    pub stdin: bool,
    pub stderr: bool,
    /// `NO_COLOR` is set: no animation either.
    pub no_color: bool,
}

impl Terminal {
    /// The process's own stdin, stderr and environment.
    pub fn detect() -> Terminal {
        Terminal {
            stdin: std::io::stdin().is_terminal(),
            stderr: std::io::stderr().is_terminal(),
            no_color: std::env::var_os("NO_COLOR").is_some(),
        }
    }

    /// A spinner may draw: stderr is a TTY and `NO_COLOR` is unset.
    pub fn can_draw(self) -> bool {
        self.stderr && !self.no_color
    }

    /// A question may be asked: someone can read it and answer.
    pub fn can_ask(self) -> bool {
        self.stdin && self.stderr
    }
}

/// A spinner that is a no-op when it may not draw. Cleared on drop.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A spinner on stderr, when [`Terminal::can_draw`] says it may.
    pub fn spinner(message: impl Into<Safe>) -> Progress {
        Progress::on(message, Terminal::detect().can_draw(), ProgressDrawTarget::stderr())
    }

    /// A spinner drawing to `target` when `draw`, else only logging.
    pub fn on(message: impl Into<Safe>, draw: bool, target: ProgressDrawTarget) -> Progress {
        let message = message.into().into_string();
        tracing::info!("{message}");
        if !draw {
            return Progress(None);
        }
        let pb = ProgressBar::with_draw_target(None, target);
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        pb.set_message(message);
        pb.enable_steady_tick(Duration::from_millis(120));
        Progress(Some(pb))
    }

    /// A bar of `len` steps on stderr (`migrate`), when
    /// [`Terminal::can_draw`] says it may; [`Progress::position`] moves it.
    pub fn bar(len: u64, message: impl Into<Safe>) -> Progress {
        Progress::bar_on(len, message, Terminal::detect().can_draw(), ProgressDrawTarget::stderr())
    }

    /// A bar drawing to `target` when `draw`, else only logging.
    pub fn bar_on(len: u64, message: impl Into<Safe>, draw: bool, target: ProgressDrawTarget) -> Progress {
        let message = message.into().into_string();
        tracing::info!("{message}");
        if !draw {
            return Progress(None);
        }
        let pb = ProgressBar::with_draw_target(Some(len), target);
        pb.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb.set_message(message);
        pb.enable_steady_tick(Duration::from_millis(250));
        Progress(Some(pb))
    }

    /// Moves a bar to `pos` of `len` (the length grows when more turned up
    /// than expected); a spinner ignores it.
    pub fn position(&self, pos: u64, len: u64) {
        if let Some(pb) = &self.0 {
            pb.set_length(len.max(pos));
            pb.set_position(pos);
        }
    }

    /// Where a bar is: `(pos, len)`; `None` when it does not draw.
    pub fn at(&self) -> Option<(u64, u64)> {
        self.0.as_ref().map(|pb| (pb.position(), pb.length().unwrap_or_default()))
    }

    /// Replaces the message; logged at info level so `-v` shows it without a TTY.
    pub fn set(&self, message: impl Into<Safe>) {
        let message = message.into().into_string();
        tracing::info!("{message}");
        if let Some(pb) = &self.0 {
            pb.set_message(message);
        }
    }

    /// The message a drawing spinner shows; `None` when it does not draw.
    pub fn message(&self) -> Option<String> {
        self.0.as_ref().map(|pb| pb.message())
    }

    /// Prints a line above the spinner (or on stderr without one).
    pub fn println(&self, line: impl Into<Safe>) {
        let line = line.into();
        match &self.0 {
            Some(pb) => pb.println(line.as_str()),
            None => eprintln!("{line}"),
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
    ask_on(question, yes, Terminal::detect())
}

/// [`ask`] for the given terminal.
pub fn ask_on(question: &str, yes: bool, terminal: Terminal) -> Result<Answer> {
    if yes {
        return Ok(Answer::Yes);
    }
    if !terminal.can_ask() {
        return Ok(Answer::NoTerminal);
    }
    let answer = dialoguer::Confirm::with_theme(&dialoguer::theme::SimpleTheme)
        .with_prompt(Safe::new(question).into_string())
        .default(false)
        .interact()
        .map_err(|e| Error::Prompt(e.to_string()))?;
    Ok(if answer { Answer::Yes } else { Answer::No })
}

/// [`ask`], where anything but yes is an error naming the flag to pass.
pub fn confirm(question: &str, yes: bool) -> Result<()> {
    confirm_on(question, yes, Terminal::detect())
}

/// [`confirm`] for the given terminal.
pub fn confirm_on(question: &str, yes: bool, terminal: Terminal) -> Result<()> {
    match ask_on(question, yes, terminal)? {
        Answer::Yes => Ok(()),
        Answer::No => Err(Error::Declined),
        Answer::NoTerminal => Err(Error::NoTerminal { question: question.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUMAN: Terminal = Terminal { stdin: true, stderr: true, no_color: false };
    const PIPED: Terminal = Terminal { stdin: false, stderr: false, no_color: false };

    #[test]
    fn a_spinner_draws_only_on_a_terminal_without_no_color() {
        let cases = [
            (HUMAN, true),
            (Terminal { no_color: true, ..HUMAN }, false),
            (Terminal { stderr: false, ..HUMAN }, false),
            (Terminal { stdin: false, ..HUMAN }, true),
            (PIPED, false),
        ];
        for (terminal, want) in cases {
            assert_eq!(terminal.can_draw(), want, "{terminal:?}");
        }
    }

    #[test]
    fn a_drawing_spinner_shows_the_latest_message_and_a_silent_one_none() {
        let p = Progress::on("applying", true, ProgressDrawTarget::hidden());
        assert_eq!(p.message().as_deref(), Some("applying"));
        p.set("waiting for web");
        assert_eq!(p.message().as_deref(), Some("waiting for web"));
        let silent = Progress::on("applying", PIPED.can_draw(), ProgressDrawTarget::hidden());
        silent.set("waiting for web");
        assert_eq!(silent.message(), None);
    }

    #[test]
    fn a_spinner_message_from_the_cluster_is_escaped() {
        let p = Progress::on("waiting for web", true, ProgressDrawTarget::hidden());
        p.set("web: Progressing 0/1 ready (\u{1b}]0;PWNED\u{7})".to_string());
        assert_eq!(p.message().as_deref(), Some("web: Progressing 0/1 ready (\\x1b]0;PWNED\\x07)"));
    }

    #[test]
    fn a_bar_grows_when_more_turned_up_than_expected() {
        let p = Progress::bar_on(10, "rewriting", true, ProgressDrawTarget::hidden());
        p.position(4, 10);
        assert_eq!(p.at(), Some((4, 10)));
        p.position(12, 10);
        assert_eq!(p.at(), Some((12, 12)));
        let silent = Progress::bar_on(10, "rewriting", PIPED.can_draw(), ProgressDrawTarget::hidden());
        silent.position(4, 10);
        assert_eq!(silent.at(), None);
    }

    #[test]
    fn yes_skips_the_question_even_without_a_terminal() {
        assert_eq!(ask_on("delete everything?", true, PIPED).unwrap(), Answer::Yes);
        assert!(confirm_on("delete everything?", true, PIPED).is_ok());
    }

    #[test]
    fn without_a_terminal_on_stdin_or_stderr_the_question_is_not_asked() {
        for terminal in [PIPED, Terminal { stdin: false, ..HUMAN }, Terminal { stderr: false, ..HUMAN }] {
            assert_eq!(
                ask_on("delete everything?", false, terminal).unwrap(),
                Answer::NoTerminal,
                "{terminal:?}"
            );
        }
    }

    #[test]
    fn without_a_terminal_and_without_yes_the_answer_is_a_refusal_naming_the_flag() {
        let err = confirm_on("delete everything?", false, PIPED).unwrap_err();
        assert!(matches!(err, Error::NoTerminal { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("delete everything?") && msg.contains("--yes"), "{msg}");
    }
}
