//! Evaluation: client-go's `FindResults` and `walk`, over `serde_json`
//! values. Values found in the data are borrowed; literals (quoted text,
//! numbers, the bytes `*` yields from a string) are owned.
//!
//! Two deliberate differences, both where Go's output is not defined: maps
//! are walked in key order (Go's map order is random), and a `{range}` over
//! nothing evaluates its body once on null only to find its `{end}`, as
//! client-go does, without printing it.

use std::borrow::Cow;

use serde_json::Value;

use super::{FilterOp, Node, Param, sorted};

type Vals<'a> = Vec<Cow<'a, Value>>;

/// Every top-level node's values, one list per node, ranges expanded.
pub fn find<'a>(nodes: &[Node], data: &'a Value) -> Result<Vec<Vals<'a>>, String> {
    let mut ex = Exec { root: nodes, begin_range: 0, in_range: 0, end_range: 0, last_end: None };
    ex.find_results(0, Cow::Borrowed(data))
}

/// client-go's range bookkeeping: `{range}` raises `begin_range`, the loop
/// body runs from the next top-level node until an `{end}` at this depth.
struct Exec<'n> {
    root: &'n [Node],
    begin_range: usize,
    in_range: usize,
    end_range: usize,
    last_end: Option<usize>,
}

impl Exec<'_> {
    fn find_results<'a>(&mut self, start: usize, data: Cow<'a, Value>) -> Result<Vec<Vals<'a>>, String> {
        let cur = vec![data];
        let mut full = Vec::new();
        let mut i = start;
        while i < self.root.len() {
            let results = self.walk(cur.clone(), &self.root[i])?;
            if self.end_range > 0 && self.end_range <= self.in_range {
                self.end_range -= 1;
                self.last_end = Some(i);
                break;
            }
            if self.begin_range > 0 {
                self.begin_range -= 1;
                self.in_range += 1;
                if results.is_empty() {
                    self.find_results(i + 1, Cow::Owned(Value::Null))?;
                }
                for v in results {
                    full.extend(self.find_results(i + 1, v)?);
                }
                self.in_range -= 1;
                if let Some(k) = self.last_end.filter(|k| *k > i) {
                    i = k;
                }
                i += 1;
                continue;
            }
            full.push(results);
            i += 1;
        }
        Ok(full)
    }

    fn walk<'a>(&mut self, input: Vals<'a>, node: &Node) -> Result<Vals<'a>, String> {
        match node {
            Node::List(nodes) => self.list(input, nodes),
            Node::Text(t) => Ok(vec![Cow::Owned(Value::String(t.clone()))]),
            Node::Field(name) => Ok(input.iter().filter_map(|v| field(v, name)).collect()),
            Node::Array(params) => array(&input, params),
            Node::Filter { left, right, op } => self.filter(&input, left, right, *op),
            Node::Int(n) => Ok(input.iter().map(|_| Cow::Owned(Value::from(*n))).collect()),
            Node::Float(f) => Ok(input.iter().map(|_| Cow::Owned(Value::from(*f))).collect()),
            Node::Bool(b) => Ok(input.iter().map(|_| Cow::Owned(Value::Bool(*b))).collect()),
            Node::Wildcard => Ok(input.iter().flat_map(children).collect()),
            Node::Recursive => Ok(recursive(&input)),
            Node::Union(lists) => {
                let mut out = Vec::new();
                for l in lists {
                    out.extend(self.list(input.clone(), l)?);
                }
                Ok(out)
            }
            Node::Identifier(id) if id == "range" => {
                self.begin_range += 1;
                Ok(input)
            }
            Node::Identifier(_) if self.in_range > 0 => {
                self.end_range += 1;
                Ok(Vec::new())
            }
            Node::Identifier(_) => Err("not in range, nothing to end".into()),
        }
    }

    fn list<'a>(&mut self, input: Vals<'a>, nodes: &[Node]) -> Result<Vals<'a>, String> {
        nodes.iter().try_fold(input, |cur, n| self.walk(cur, n))
    }

    /// client-go ignores an error of the left side of an existence filter
    /// and looks at what the failing node was given instead.
    fn list_lenient<'a>(&mut self, input: Vals<'a>, nodes: &[Node]) -> Vals<'a> {
        let mut cur = input;
        for n in nodes {
            match self.walk(cur.clone(), n) {
                Ok(next) => cur = next,
                Err(_) => break,
            }
        }
        cur
    }

    fn filter<'a>(
        &mut self,
        input: &Vals<'a>,
        left: &[Node],
        right: &[Node],
        op: FilterOp,
    ) -> Result<Vals<'a>, String> {
        let mut out = Vec::new();
        for v in input {
            let Value::Array(items) = v.as_ref() else {
                return Err(format!(
                    "{} is not array or slice and cannot be filtered",
                    super::gofmt::sprint(v)
                ));
            };
            for (ix, item) in items.iter().enumerate() {
                let elem = element(v, item, ix);
                if op == FilterOp::Exists {
                    if !self.list_lenient(vec![elem.clone()], left).is_empty() {
                        out.push(elem);
                    }
                    continue;
                }
                let lefts = self.list(vec![elem.clone()], left)?;
                let Some(l) = single(&lefts)? else { continue };
                let rights = self.list(vec![elem.clone()], right)?;
                let Some(r) = single(&rights)? else { continue };
                if compare(l, r, op)? {
                    out.push(elem);
                }
            }
        }
        Ok(out)
    }
}

fn single<'v>(vals: &'v [Cow<'_, Value>]) -> Result<Option<&'v Value>, String> {
    match vals {
        [] => Ok(None),
        [v] => Ok(Some(v.as_ref())),
        _ => Err("can only compare one element at a time".into()),
    }
}

/// Item `ix` of the array `parent`, borrowed when the array is.
fn element<'a>(parent: &Cow<'a, Value>, item: &Value, ix: usize) -> Cow<'a, Value> {
    match parent {
        Cow::Borrowed(Value::Array(a)) => Cow::Borrowed(&a[ix]),
        _ => Cow::Owned(item.clone()),
    }
}

fn field<'a>(v: &Cow<'a, Value>, name: &str) -> Option<Cow<'a, Value>> {
    match v {
        Cow::Borrowed(Value::Object(m)) => m.get(name).map(Cow::Borrowed),
        Cow::Owned(Value::Object(m)) => m.get(name).cloned().map(Cow::Owned),
        _ => None,
    }
}

/// What `*` yields: a map's values (in key order), a list's items, a
/// string's bytes (as Go indexes strings); nothing for anything else.
fn children<'a>(v: &Cow<'a, Value>) -> Vals<'a> {
    match v {
        Cow::Borrowed(Value::Object(m)) => sorted(m).into_iter().map(|(_, v)| Cow::Borrowed(v)).collect(),
        Cow::Borrowed(Value::Array(a)) => a.iter().map(Cow::Borrowed).collect(),
        Cow::Owned(Value::Object(m)) => sorted(m).into_iter().map(|(_, v)| Cow::Owned(v.clone())).collect(),
        Cow::Owned(Value::Array(a)) => a.iter().cloned().map(Cow::Owned).collect(),
        _ => match v.as_ref() {
            Value::String(s) => s.bytes().map(|b| Cow::Owned(Value::from(b))).collect(),
            _ => Vec::new(),
        },
    }
}

/// `..`: every value that has children, followed by its descendants.
fn recursive<'a>(input: &Vals<'a>) -> Vals<'a> {
    let mut out = Vec::new();
    for v in input {
        let kids = children(v);
        if !kids.is_empty() {
            out.push(v.clone());
            out.extend(recursive(&kids));
        }
    }
    out
}

fn array<'a>(input: &Vals<'a>, params: &[Param; 3]) -> Result<Vals<'a>, String> {
    let mut out = Vec::new();
    for v in input {
        let items = match v.as_ref() {
            Value::Null => continue,
            Value::Array(items) => items,
            other => return Err(format!("{} is not array or slice", super::gofmt::type_name(other))),
        };
        let len = items.len() as i64;
        let [mut start, mut end, step] = *params;
        if !start.known {
            start.value = 0;
        }
        if start.value < 0 {
            start.value += len;
        }
        if !end.known {
            end.value = len;
        }
        if end.value < 0 || (end.value == 0 && end.derived) {
            end.value += len;
        }
        if end.value == start.value {
            return Ok(out);
        }
        if start.value >= len || start.value < 0 {
            return Err(format!("array index out of bounds: index {}, length {len}", start.value));
        }
        if end.value > len || end.value < 0 {
            return Err(format!("array index out of bounds: index {}, length {len}", end.value - 1));
        }
        if start.value > end.value {
            return Err(format!("starting index {} is greater than ending index {}", start.value, end.value));
        }
        let step = match step {
            Param { known: true, value, .. } if value <= 0 => return Err("step must be > 0".into()),
            Param { known: true, value, .. } => value as usize,
            _ => 1,
        };
        for ix in (start.value as usize..end.value as usize).step_by(step) {
            out.push(element(v, &items[ix], ix));
        }
    }
    Ok(out)
}

/// The kinds Go's template comparison knows; anything else is refused.
#[derive(PartialEq, PartialOrd)]
enum Basic<'v> {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'v str),
}

fn basic(v: &Value) -> Result<Basic<'_>, String> {
    match v {
        Value::Bool(b) => Ok(Basic::Bool(*b)),
        Value::Number(n) => {
            Ok(n.as_i64().map_or_else(|| Basic::Float(n.as_f64().unwrap_or(f64::NAN)), Basic::Int))
        }
        Value::String(s) => Ok(Basic::Str(s)),
        _ => Err("invalid type for comparison".into()),
    }
}

fn compare(l: &Value, r: &Value, op: FilterOp) -> Result<bool, String> {
    let (l, r) = (basic(l)?, basic(r)?);
    if std::mem::discriminant(&l) != std::mem::discriminant(&r) {
        return Err("incompatible types for comparison".into());
    }
    if matches!(l, Basic::Bool(_)) && !matches!(op, FilterOp::Eq | FilterOp::Ne) {
        return Err("invalid type for comparison".into());
    }
    // Go's `le` is `lt || eq`, `gt` is `!le` and `ge` is `!lt`: a NaN is
    // neither less nor equal, so it is greater.
    let (lt, eq) = (l.partial_cmp(&r) == Some(std::cmp::Ordering::Less), l == r);
    Ok(match op {
        FilterOp::Eq => eq,
        FilterOp::Ne => !eq,
        FilterOp::Lt => lt,
        FilterOp::Le => lt || eq,
        FilterOp::Gt => !(lt || eq),
        FilterOp::Ge => !lt,
        FilterOp::Exists => true,
    })
}
