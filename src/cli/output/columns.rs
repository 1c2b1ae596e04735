//! `get -o custom-columns=HEADER:PATH,...` and `-o custom-columns-file=FILE`,
//! printed as kubectl prints them: each PATH is a relaxed JSONPath
//! ([`super::jsonpath::relaxed`]), a cell joins the values it finds with
//! commas as Go's `fmt.Sprint` prints them (`<none>` when there are none),
//! and the table is aligned by kubectl's tabwriter ([`TabWriter`]).
//!
//! Cells hold data written by whoever may create a Runner, for a human to
//! read: every one is made by [`cell`], the single place to make them safe
//! for a terminal.

use serde_json::Value;

use super::jsonpath::{self, Template, gofmt};

/// Parsed columns: a header and a path each.
#[derive(Debug, Clone, PartialEq)]
pub struct Columns(Vec<Column>);

#[derive(Debug, Clone, PartialEq)]
struct Column {
    header: String,
    path: Template,
}

impl Columns {
    /// `NAME:.metadata.name,IMAGE:.spec.image`, as kubectl splits it: on
    /// every comma, then on the first colon.
    pub fn parse_spec(spec: &str) -> Result<Columns, String> {
        if spec.is_empty() {
            return Err("custom-columns format specified but no custom columns given".into());
        }
        let cols = spec.split(',').map(|part| match part.split_once(':') {
            Some((header, path)) => column(header, path),
            None => {
                Err(format!("unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>"))
            }
        });
        cols.collect::<Result<_, _>>().map(Columns)
    }

    /// A custom-columns file: a line of headers, then a line of paths,
    /// separated by whitespace.
    pub fn parse_file(text: &str) -> Result<Columns, String> {
        let mut lines = text.lines();
        let expected = "Expected format is one line of space separated headers, one line of space separated \
                        column specs.";
        let headers: Vec<&str> = lines
            .next()
            .ok_or(format!("invalid template, missing header line. {expected}"))?
            .split_whitespace()
            .collect();
        let paths: Vec<&str> = lines
            .next()
            .ok_or(format!("invalid template, missing spec line. {expected}"))?
            .split_whitespace()
            .collect();
        if headers.len() != paths.len() {
            return Err(format!(
                "number of headers ({}) and field specifications ({}) don't match",
                headers.len(),
                paths.len()
            ));
        }
        headers.iter().zip(&paths).map(|(h, p)| column(h, p)).collect::<Result<_, _>>().map(Columns)
    }

    /// The header row.
    pub fn header(&self) -> Vec<String> {
        self.0.iter().map(|c| c.header.clone()).collect()
    }

    /// One row for `object`. Fails where kubectl's jsonpath fails.
    pub fn row(&self, object: &Value) -> Result<Vec<String>, String> {
        self.0
            .iter()
            .map(|c| {
                let found = c.path.find(object)?;
                if found.first().is_none_or(Vec::is_empty) {
                    return Ok("<none>".to_string());
                }
                Ok(found.iter().flatten().map(|v| cell(v)).collect::<Vec<_>>().join(","))
            })
            .collect()
    }
}

fn column(header: &str, path: &str) -> Result<Column, String> {
    Ok(Column { header: header.to_string(), path: jsonpath::relaxed(path)? })
}

/// One cell's text: Go's formatting of the value, with control characters
/// escaped by the output layer's one rule ([`super::safe`]); data without
/// them prints as kubectl prints it.
pub fn cell(value: &Value) -> String {
    super::safe::Safe::new(gofmt::sprint(value)).to_string()
}

/// kubectl's tabwriter: each cell but a line's last is padded to its
/// column's width, the widest cell plus 3 and at least 6, in characters.
/// Widths are remembered across calls and only grow, so rows streamed by
/// `get -w` stay aligned with the table printed first.
#[derive(Debug, Clone, Default)]
pub struct TabWriter {
    widths: Vec<usize>,
}

impl TabWriter {
    const MIN_WIDTH: usize = 6;
    const PADDING: usize = 3;

    /// Aligns `rows` (the header being one) and returns the lines.
    pub fn render(&mut self, rows: &[Vec<String>]) -> String {
        for row in rows {
            for (i, c) in row.iter().enumerate().take(row.len().saturating_sub(1)) {
                if self.widths.len() <= i {
                    self.widths.push(Self::MIN_WIDTH);
                }
                self.widths[i] = self.widths[i].max(c.chars().count() + Self::PADDING);
            }
        }
        let mut out = String::new();
        for row in rows {
            for (i, c) in row.iter().enumerate() {
                out.push_str(c);
                if i + 1 < row.len() {
                    let pad = self.widths[i] - c.chars().count();
                    out.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn web() -> Value {
        json!({"metadata": {"name": "web", "labels": {"team": "web", "tier": "front"}},
               "spec": {"image": "nginx:1.27", "replicas": 2},
               "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "False"}]}})
    }

    #[test]
    fn a_spec_is_header_colon_path_pairs_in_any_relaxed_spelling() {
        let cols = Columns::parse_spec("NAME:.metadata.name,IMAGE:spec.image,N:{.spec.replicas}").unwrap();
        assert_eq!(cols.header(), vec!["NAME", "IMAGE", "N"]);
        assert_eq!(cols.row(&web()).unwrap(), vec!["web", "nginx:1.27", "2"]);
    }

    #[test]
    fn missing_values_are_none_and_several_are_joined_by_commas() {
        let cols = Columns::parse_spec("HOST:.spec.host,ST:.status.conditions[*].status,L:.metadata.labels")
            .unwrap();
        assert_eq!(cols.row(&web()).unwrap(), vec!["<none>", "True,False", "map[team:web tier:front]"]);
    }

    #[test]
    fn bad_specs_say_what_kubectl_expects() {
        for (spec, needle) in [
            ("", "no custom columns given"),
            ("NAME", "expected <header>:<json-path-expr>"),
            ("NAME:{.a}{.b}", "unexpected path string"),
            ("NAME:.a[", "unterminated array"),
        ] {
            let err = Columns::parse_spec(spec).unwrap_err();
            assert!(err.contains(needle), "{spec:?}: {err}");
        }
    }

    #[test]
    fn a_file_holds_a_header_line_and_a_path_line() {
        let cols = Columns::parse_file("NAME   IMAGE\n.metadata.name  {.spec.image}\n").unwrap();
        assert_eq!(cols.row(&web()).unwrap(), vec!["web", "nginx:1.27"]);
        assert!(Columns::parse_file("NAME IMAGE\n.metadata.name\n").unwrap_err().contains("don't match"));
        assert!(Columns::parse_file("NAME\n").unwrap_err().contains("missing spec line"));
    }

    #[test]
    fn the_tabwriter_pads_to_the_widest_cell_plus_three_and_at_least_six() {
        let rows = vec![
            vec!["N".to_string(), "IMAGE".into(), "X".into()],
            vec!["web".into(), "a".into(), "y".into()],
        ];
        assert_eq!(TabWriter::default().render(&rows), "N     IMAGE   X\nweb   a       y\n");
    }

    #[test]
    fn the_tabwriter_remembers_widths_for_later_rows() {
        let mut tw = TabWriter::default();
        tw.render(&[vec!["NAME".to_string(), "A".into()], vec!["a-long-name".into(), "1".into()]]);
        assert_eq!(tw.render(&[vec!["b".to_string(), "2".into()]]), format!("b{}2\n", " ".repeat(13)));
    }

    #[test]
    fn cells_escape_control_characters_with_the_output_layers_rule() {
        let c = cell(&json!("a\x1b]0;x\rb\u{202e}"));
        assert_eq!(c, "a\\x1b]0;x\\rb\\u{202e}");
        assert_eq!(cell(&json!("web")), "web", "plain data prints as kubectl prints it");
    }
}
