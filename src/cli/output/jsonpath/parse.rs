//! The parser of kubectl's JSONPath templates: a port of client-go's
//! `util/jsonpath/parser.go`, case for case, so a template means here what
//! it means to kubectl (`['a.b']` is two fields, `[]` is the first element,
//! an unknown escape in a quoted string is an error). Where client-go only
//! fails while executing (`{foo}`, an `{end}` without `{range}`, a filter
//! operator like `=<`), this parser refuses the template up front, so a
//! mistake is a usage error before any request.

use super::{FilterOp, Node, Param};

/// Parses a whole template: text, and actions between `{` and `}`.
pub fn template(text: &str) -> Result<Vec<Node>, String> {
    let nodes = Parser { input: text, pos: 0, start: 0, width: 0 }.parse()?;
    check_ranges(&nodes)?;
    Ok(nodes)
}

/// client-go's `parseAction`: `text` as the inside of one `{...}`.
fn action(text: &str) -> Result<Vec<Node>, String> {
    let root = Parser { input: &format!("{{{text}}}"), pos: 0, start: 0, width: 0 }.parse()?;
    match root.into_iter().next() {
        Some(Node::List(nodes)) => Ok(nodes),
        _ => Err(format!("invalid expression {text:?}")),
    }
}

struct Parser<'t> {
    input: &'t str,
    pos: usize,
    start: usize,
    width: usize,
}

const EOF: Option<char> = None;

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.input[self.pos..]
    }

    fn next(&mut self) -> Option<char> {
        let c = self.rest().chars().next();
        self.width = c.map_or(0, char::len_utf8);
        self.pos += self.width;
        c
    }

    fn backup(&mut self) {
        self.pos -= self.width;
    }

    fn peek(&mut self) -> Option<char> {
        let c = self.next();
        self.backup();
        c
    }

    fn consume(&mut self) -> String {
        let s = self.input[self.start..self.pos].to_string();
        self.start = self.pos;
        s
    }

    /// The byte before the last one read (client-go's `input[pos-2]`).
    fn byte_before_last(&self) -> Option<u8> {
        self.pos.checked_sub(2).map(|i| self.input.as_bytes()[i])
    }

    /// Text up to each `{`, then the action up to its `}`, until the end.
    fn parse(mut self) -> Result<Vec<Node>, String> {
        let mut root = Vec::new();
        loop {
            if self.rest().starts_with('{') {
                if self.pos > self.start {
                    root.push(Node::Text(self.consume()));
                }
                self.pos += 1;
                self.consume();
                root.push(Node::List(self.inside_action()?));
                continue;
            }
            if self.next() == EOF {
                break;
            }
        }
        if self.pos > self.start {
            root.push(Node::Text(self.consume()));
        }
        Ok(root)
    }

    /// One action, up to and including its closing `}`.
    fn inside_action(&mut self) -> Result<Vec<Node>, String> {
        let mut cur = Vec::new();
        loop {
            if self.rest().starts_with('}') {
                self.pos += 1;
                self.consume();
                return Ok(cur);
            }
            if self.rest().starts_with("[?(") {
                self.filter(&mut cur)?;
                continue;
            }
            if self.rest().starts_with("..") {
                if matches!(cur.last(), Some(Node::Recursive)) {
                    return Err("invalid multiple recursive descent".into());
                }
                self.pos += 2;
                self.consume();
                cur.push(Node::Recursive);
                if self.peek().is_some_and(is_alphanumeric) {
                    self.field(&mut cur);
                }
                continue;
            }
            match self.next() {
                None | Some('\r' | '\n') => return Err("unclosed action".into()),
                Some(' ' | '@' | '$') => {
                    self.consume();
                }
                Some('[') => self.array(&mut cur)?,
                Some(q @ ('"' | '\'')) => self.quote(&mut cur, q)?,
                Some('.') => self.field(&mut cur),
                Some(c) if c == '+' || c == '-' || c.is_ascii_digit() => {
                    self.backup();
                    self.number(&mut cur)?;
                }
                Some(c) if is_alphanumeric(c) => {
                    self.backup();
                    self.identifier(&mut cur)?;
                }
                Some(c) => return Err(format!("unrecognized character in action: {c:?}")),
            }
        }
    }

    fn identifier(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        while !is_terminator(self.next()) {}
        self.backup();
        let value = self.consume();
        cur.push(match value.as_str() {
            "true" => Node::Bool(true),
            "false" => Node::Bool(false),
            "range" | "end" => Node::Identifier(value),
            _ => return Err(format!("unrecognized identifier {value}")),
        });
        Ok(())
    }

    fn number(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        if matches!(self.peek(), Some('+' | '-')) {
            self.next();
        }
        while matches!(self.next(), Some(c) if c == '.' || c.is_ascii_digit()) {}
        self.backup();
        let value = self.consume();
        if let Ok(i) = value.parse::<i64>() {
            cur.push(Node::Int(i));
        } else if let Ok(f) = value.parse::<f64>() {
            cur.push(Node::Float(f));
        } else {
            return Err(format!("cannot parse number {value}"));
        }
        Ok(())
    }

    fn array(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated array".into()),
                Some(']') => break,
                Some(_) => {}
            }
        }
        let consumed = self.consume();
        let mut text = &consumed[1..consumed.len() - 1];
        if text == "*" {
            text = ":";
        }
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() > 1 {
            let union = parts
                .iter()
                .map(|p| action(&format!("[{}]", p.trim_matches(' '))))
                .collect::<Result<_, _>>()?;
            cur.push(Node::Union(union));
            return Ok(());
        }
        if let Some(key) =
            text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')).filter(|k| !k.contains('\''))
        {
            cur.extend(action(&format!(".{key}"))?);
            return Ok(());
        }
        cur.push(Node::Array(slice(text)?));
        Ok(())
    }

    fn filter(&mut self, cur: &mut Vec<Node>) -> Result<(), String> {
        self.pos += 3;
        self.consume();
        let (mut begin, mut end, mut pair) = (false, false, '"');
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated filter".into()),
                Some(q @ ('"' | '\'')) if !begin => {
                    begin = true;
                    pair = q;
                }
                Some(q @ ('"' | '\'')) => {
                    if self.byte_before_last() != Some(b'\\') && q == pair {
                        end = true;
                    }
                }
                Some(')') if begin == end => break,
                Some(_) => {}
            }
        }
        if self.next() != Some(']') {
            return Err("unclosed array expect ]".into());
        }
        let consumed = self.consume();
        let text = &consumed[..consumed.len() - 2];
        match split_comparison(text) {
            None => cur.push(Node::Filter { left: action(text)?, right: Vec::new(), op: FilterOp::Exists }),
            Some((left, op, right)) => {
                let op = FilterOp::parse(op).ok_or_else(|| format!("unrecognized filter operator {op}"))?;
                cur.push(Node::Filter { left: action(left)?, right: action(right)?, op });
            }
        }
        Ok(())
    }

    fn quote(&mut self, cur: &mut Vec<Node>, end: char) -> Result<(), String> {
        loop {
            match self.next() {
                None | Some('\n') => return Err("unterminated quoted string".into()),
                Some(c) if c == end && self.byte_before_last() != Some(b'\\') => break,
                Some(_) => {}
            }
        }
        let value = self.consume();
        let text = unquote(&value).map_err(|e| format!("unquote string {value} error {e}"))?;
        cur.push(Node::Text(text));
        Ok(())
    }

    fn field(&mut self, cur: &mut Vec<Node>) {
        self.consume();
        loop {
            let c = self.next();
            if c == Some('\\') {
                self.next();
            } else if is_terminator(c) {
                self.backup();
                break;
            }
        }
        let value = self.consume();
        cur.push(if value == "*" { Node::Wildcard } else { Node::Field(value.replace('\\', "")) });
    }
}

fn is_terminator(c: Option<char>) -> bool {
    matches!(c, None | Some(' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'))
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// `[start:end:step]`, client-go's `^(-?\d*)(:-?\d*)?(:-?\d*)?$`: a lone
/// index `i` means `i:i+1`, marked derived so `[-1]` is the last element.
fn slice(text: &str) -> Result<[Param; 3], String> {
    let groups: Vec<&str> = text.split(':').collect();
    let is_int = |s: &str| s.strip_prefix('-').unwrap_or(s).bytes().all(|b| b.is_ascii_digit());
    if groups.len() > 3 || !groups.iter().all(|g| is_int(g)) {
        return Err(format!("invalid array index {text}"));
    }
    let mut params = [Param::default(); 3];
    for (i, p) in params.iter_mut().enumerate() {
        match groups.get(i) {
            Some(&"") => {}
            Some(g) => {
                p.known = true;
                p.value = g.parse().map_err(|_| format!("array index {g} is not a number"))?;
            }
            None if i == 1 => {
                *p = Param { known: true, value: 0, derived: true };
            }
            None => {}
        }
    }
    if params[1].derived {
        params[1].value = params[0].value + 1;
    }
    Ok(params)
}

/// client-go's `^([^!<>=]+)([!<>=]+)(.+?)$` on a filter's text.
fn split_comparison(text: &str) -> Option<(&str, &str, &str)> {
    let is_op = |c: char| matches!(c, '!' | '<' | '>' | '=');
    let left_end = text.find(is_op)?;
    let op_len = text[left_end..].find(|c| !is_op(c)).unwrap_or(text.len() - left_end);
    // The operator gives back one character when nothing follows it.
    let op_len = if left_end + op_len == text.len() { op_len - 1 } else { op_len };
    let (left, op, right) =
        (&text[..left_end], &text[left_end..left_end + op_len], &text[left_end + op_len..]);
    (!left.is_empty() && !op.is_empty() && !right.is_empty()).then_some((left, op, right))
}

/// Go's `strconv.Unquote` for either quote: `\n`, `\t`, `\xNN`, `\uNNNN`,
/// octal, and the quote itself; any other escape is an error.
fn unquote(s: &str) -> Result<String, &'static str> {
    let quote = s.chars().next().ok_or("invalid syntax")?;
    let body =
        s.get(1..s.len() - 1).filter(|_| s.len() >= 2 && s.ends_with(quote)).ok_or("invalid syntax")?;
    let mut out = Vec::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c == quote {
            return Err("invalid syntax");
        }
        if c != '\\' {
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
            continue;
        }
        let e = chars.next().ok_or("invalid syntax")?;
        let simple = match e {
            'a' => Some(7u8),
            'b' => Some(8),
            'f' => Some(12),
            'n' => Some(b'\n'),
            'r' => Some(b'\r'),
            't' => Some(b'\t'),
            'v' => Some(11),
            '\\' => Some(b'\\'),
            '\'' | '"' if e == quote => Some(e as u8),
            _ => None,
        };
        if let Some(b) = simple {
            out.push(b);
            continue;
        }
        let (digits, radix) = match e {
            'x' => (2, 16),
            'u' => (4, 16),
            'U' => (8, 16),
            '0'..='7' => (2, 8),
            _ => return Err("invalid syntax"),
        };
        let mut code: String = if radix == 8 { e.to_string() } else { String::new() };
        for _ in 0..digits {
            code.push(chars.next().ok_or("invalid syntax")?);
        }
        let n = u32::from_str_radix(&code, radix).map_err(|_| "invalid syntax")?;
        if e == 'x' || radix == 8 {
            out.push(u8::try_from(n).map_err(|_| "invalid syntax")?);
        } else {
            let c = char::from_u32(n).ok_or("invalid syntax")?;
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
    }
    String::from_utf8(out).map_err(|_| "not UTF-8")
}

/// Every `{end}` closes a `{range}` and every `{range}` is closed: client-go
/// would fail on the first while printing, and print the rest of the
/// template twice for the second.
fn check_ranges(nodes: &[Node]) -> Result<(), String> {
    let mut depth = 0usize;
    for n in nodes {
        let Node::List(items) = n else { continue };
        for i in items {
            match i {
                Node::Identifier(id) if id == "range" => depth += 1,
                Node::Identifier(_) => {
                    depth = depth.checked_sub(1).ok_or("{end} without a {range} before it")?;
                }
                _ => {}
            }
        }
    }
    if depth > 0 {
        return Err("{range} without an {end}".into());
    }
    Ok(())
}
