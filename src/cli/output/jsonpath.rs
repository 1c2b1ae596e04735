//! kubectl's JSONPath templates (`-o jsonpath=...`, and the expressions of
//! `-o custom-columns` and `--sort-by`), evaluated the way kubectl does.
//!
//! No Rust crate implements kubectl's *template* language (text around
//! `{...}` actions, `{range}`/`{end}`, results joined by spaces, maps and
//! lists printed as Go's `encoding/json` prints them); the JSONPath crates
//! implement RFC 9535 queries. So this is a port of client-go's
//! `util/jsonpath`, kept to its behaviour: [`parse`] parses, [`Template::
//! execute`] prints, [`Template::find`] returns the values for columns and
//! sorting. Supported, as in kubectl: text, `@`/`$`, `.field` (with `\.`
//! escapes), `['key']`, `*` and `[*]`, `..` recursive descent, indices and
//! `[start:end:step]` slices (negative from the end), unions `[a,b]`,
//! filters `[?(@.x == "y")]` with `== != < > <= >=` or existence, quoted
//! text with Go escapes (`"\n"`, `'\t'`), `{range ...}`...`{end}`.
//!
//! Pure: a template and a `serde_json::Value` in, a `String` out.

use serde_json::Value;

mod eval;
pub mod gofmt;
mod parse;

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    source: String,
    nodes: Vec<Node>,
}

/// One node of client-go's parse tree.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// The inside of one `{...}`: its nodes apply one after the other.
    List(Vec<Node>),
    Text(String),
    Field(String),
    Array([Param; 3]),
    Filter {
        left: Vec<Node>,
        right: Vec<Node>,
        op: FilterOp,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
    Wildcard,
    Recursive,
    Union(Vec<Vec<Node>>),
    /// `range` or `end`.
    Identifier(String),
}

/// One bound of `[start:end:step]`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Param {
    value: i64,
    known: bool,
    /// `end` of a lone index `[i]`, which is `i+1`.
    derived: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum FilterOp {
    Exists,
    Lt,
    Gt,
    Eq,
    Ne,
    Le,
    Ge,
}

impl FilterOp {
    fn parse(s: &str) -> Option<FilterOp> {
        Some(match s {
            "<" => FilterOp::Lt,
            ">" => FilterOp::Gt,
            "==" => FilterOp::Eq,
            "!=" => FilterOp::Ne,
            "<=" => FilterOp::Le,
            ">=" => FilterOp::Ge,
            _ => return None,
        })
    }
}

/// Parses a template as kubectl's `-o jsonpath=` does. The error says what
/// is wrong; the caller names the flag.
pub fn parse(text: &str) -> Result<Template, String> {
    parse::template(text).map(|nodes| Template { source: text.to_string(), nodes })
}

/// kubectl's `RelaxedJSONPathExpression` for `custom-columns` and
/// `--sort-by`: `a.b`, `.a.b`, `{a.b}` and `{.a.b}` all mean `{.a.b}`.
pub fn relaxed(expr: &str) -> Result<Template, String> {
    if expr.is_empty() {
        return parse("");
    }
    let inner = match expr.strip_prefix('{').and_then(|e| e.strip_suffix('}')) {
        Some(inner) if !inner.is_empty() && !inner.contains(['{', '}']) => inner,
        _ if !expr.contains(['{', '}']) => expr,
        _ => {
            return Err(format!(
                "unexpected path string {expr:?}, expected a 'name1.name2' or '.name1.name2' or \
                 '{{name1.name2}}' or '{{.name1.name2}}'"
            ));
        }
    };
    let inner = inner.strip_prefix('.').filter(|i| !i.is_empty()).unwrap_or(inner);
    parse(&format!("{{.{inner}}}"))
}

impl Template {
    /// The template as parsed (for `relaxed`, the `{.a.b}` form).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// What kubectl prints for this template over `data`: each action's
    /// values joined by spaces, maps and lists as compact JSON, and the text
    /// between actions as written. Fails where kubectl fails (an index out
    /// of range, a filter comparing a string with a number).
    pub fn execute(&self, data: &Value) -> Result<String, String> {
        let mut out = String::new();
        for values in eval::find(&self.nodes, data)? {
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(&gofmt::result_text(v));
            }
        }
        Ok(out)
    }

    /// The values of each action, as custom-columns and `--sort-by` read them.
    pub fn find<'a>(&self, data: &'a Value) -> Result<Vec<Vec<std::borrow::Cow<'a, Value>>>, String> {
        eval::find(&self.nodes, data)
    }
}

/// A map's entries in key order: Go prints maps sorted, and walks them in
/// an order of its own that no output may depend on.
fn sorted(m: &serde_json::Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut kv: Vec<_> = m.iter().collect();
    kv.sort_by(|a, b| a.0.cmp(b.0));
    kv
}

#[cfg(test)]
mod tests;
