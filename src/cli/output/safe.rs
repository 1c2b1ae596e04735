//! Terminal-safe text: the one function ([`escape`]) that makes text from
//! the cluster harmless to print, and the type ([`Safe`]) that every
//! human-readable renderer takes, so none can print cluster data raw.
//!
//! Anyone who may write a Runner, an Event or a Pod's status chooses bytes
//! that reach the terminal of whoever lists or describes them. Raw, an
//! escape sequence could retitle, recolour or clear that terminal, hide
//! lines, or fake output (the class of kubectl's CVE-2021-25743); a bidi
//! override could reorder what is shown (CVE-2021-42574). So every control
//! character is written as an escape, in Rust string syntax, the syntax the
//! log lines use too:
//!
//! | what | shown as |
//! |---|---|
//! | tab, line feed, carriage return | `\t`, `\n`, `\r` |
//! | other C0 controls (U+0000-U+001F) and DEL (U+007F) | `\x1b`, `\x07`, `\x7f` |
//! | C1 controls (U+0080-U+009F) | `\u{9b}` |
//! | bidi marks, embeddings, overrides and isolates, line and paragraph separators | `\u{202e}` |
//!
//! Everything else, a backslash included, is shown as it is: the escapes
//! are for the eye, not a reversible encoding (`-o json` and `-o yaml` are
//! the exact data). Escaping is idempotent: escaped text has nothing left
//! to escape.

use std::borrow::Cow;
use std::fmt;

/// Text fit for a terminal. The only constructors escape ([`Safe::new`] and
/// the `From` impls), so a renderer that takes `Safe` cells cannot forget
/// to; the only raw control character `Safe` text may hold is the line
/// break a renderer puts between escaped parts ([`Safe::lines`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Safe(String);

impl Safe {
    /// `text` with every control character escaped.
    pub fn new(text: impl AsRef<str>) -> Safe {
        Safe(escape(text.as_ref()).into_owned())
    }

    /// `text` escaped line by line, its line breaks kept: for messages that
    /// are several lines by design (an error listing what is missing). A
    /// line break moves the cursor and nothing else, so cluster text in
    /// them can start a line but not restyle or clear the terminal.
    pub fn multiline(text: impl AsRef<str>) -> Safe {
        Safe::lines(text.as_ref().split('\n').map(Safe::new))
    }

    /// Escaped parts, one per line (a multi-line table cell).
    pub fn lines(parts: impl IntoIterator<Item = Safe>) -> Safe {
        Safe(parts.into_iter().map(|p| p.0).collect::<Vec<_>>().join("\n"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl From<&str> for Safe {
    fn from(text: &str) -> Safe {
        Safe::new(text)
    }
}

impl From<String> for Safe {
    fn from(text: String) -> Safe {
        match escape(&text) {
            Cow::Borrowed(_) => Safe(text),
            Cow::Owned(escaped) => Safe(escaped),
        }
    }
}

impl From<&String> for Safe {
    fn from(text: &String) -> Safe {
        Safe::new(text)
    }
}

impl fmt::Display for Safe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, not `write_str`: aligned columns (`{:<8}`) need the width.
        f.pad(&self.0)
    }
}

/// Whether `c` must not reach a terminal raw: Unicode's control characters
/// (C0, DEL, C1) and the invisible characters that reorder or break lines.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every control character written as an escape (see the
/// module's table); borrowed when there is none, as in almost all text.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if unsafe_char(c) && u32::from(c) < 0x80 => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod multiline_tests {
    use super::*;

    #[test]
    fn multiline_text_keeps_its_line_breaks_and_escapes_the_rest() {
        let s = Safe::multiline("lacks 1:\n  - can't \x1b[31mcreate\r");
        assert_eq!(s.as_str(), "lacks 1:\n  - can't \\x1b[31mcreate\\r");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_everything_else_is_kept() {
        let cases = [
            ("nginx:1.27", "nginx:1.27"),
            ("", ""),
            ("nginx\u{1b}]0;PWNED\u{7}\u{1b}[31m:1", "nginx\\x1b]0;PWNED\\x07\\x1b[31m:1"),
            ("a\tb\nc\rd", "a\\tb\\nc\\rd"),
            ("\u{0}\u{1f}\u{7f}", "\\x00\\x1f\\x7f"),
            ("csi\u{9b}31m c1\u{80}\u{9f}", "csi\\u{9b}31m c1\\u{80}\\u{9f}"),
            ("abc\u{202e}fed\u{202c}", "abc\\u{202e}fed\\u{202c}"),
            ("\u{2066}\u{2069}\u{200e}\u{200f}\u{61c}", "\\u{2066}\\u{2069}\\u{200e}\\u{200f}\\u{61c}"),
            ("line\u{2028}para\u{2029}", "line\\u{2028}para\\u{2029}"),
            ("ünïcødé, 日本, emoji 👩‍💻, nbsp\u{a0}", "ünïcødé, 日本, emoji 👩‍💻, nbsp\u{a0}"),
            ("C:\\path \\x1b stays", "C:\\path \\x1b stays"),
        ];
        for (raw, shown) in cases {
            assert_eq!(escape(raw), shown, "{raw:?}");
            assert_eq!(Safe::new(raw).as_str(), shown, "{raw:?}");
            assert_eq!(Safe::from(raw.to_string()).as_str(), shown, "{raw:?}");
        }
    }

    #[test]
    fn text_without_control_characters_is_borrowed_and_escaping_twice_changes_nothing() {
        assert!(matches!(escape("web 1/3 ready"), Cow::Borrowed(_)));
        let once = escape("x\u{1b}[2J\u{9b}\u{202e}\n").into_owned();
        assert_eq!(escape(&once), once);
    }

    #[test]
    fn escaped_text_holds_no_control_character_whatever_the_input() {
        let every_char: String = (0..0x3000).filter_map(char::from_u32).collect();
        let shown = Safe::new(&every_char);
        assert!(!shown.as_str().chars().any(unsafe_char), "{shown}");
    }

    #[test]
    fn lines_joins_escaped_parts_with_the_only_raw_line_breaks() {
        let cell = Safe::lines([Safe::new("first\nline"), Safe::new("- second")]);
        assert_eq!(cell.as_str(), "first\\nline\n- second");
    }
}
