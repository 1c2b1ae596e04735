//! Values printed the way kubectl (a Go program) prints them, so output is
//! byte for byte kubectl's: `encoding/json`'s compact form for maps and
//! lists in `-o jsonpath` (keys sorted; `<`, `>`, `&`, U+2028 and U+2029
//! escaped), `fmt.Sprint` for custom-columns cells (`map[k:v]`, `[a b]`,
//! `<nil>`), and Go's `%v` for floats (`1e+06`).

use serde_json::Value;

use super::sorted;

/// One value of an action in `-o jsonpath`: maps and lists as compact JSON,
/// anything else as text (`null` for null).
pub fn result_text(v: &Value) -> String {
    match v {
        Value::Object(_) | Value::Array(_) => json(v),
        Value::Null => "null".into(),
        other => sprint(other),
    }
}

/// Go's `fmt.Sprint` of a value decoded from JSON.
pub fn sprint(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => float_v(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(sprint).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let kv: Vec<String> = sorted(m).into_iter().map(|(k, v)| format!("{k}:{}", sprint(v))).collect();
            format!("map[{}]", kv.join(" "))
        }
    }
}

/// The Go type a JSON value decodes to, for error messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_i64().is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Go's `json.Marshal` of a value decoded from JSON.
pub fn json(v: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, v);
    out
}

fn write_json(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&i.to_string()),
            None => out.push_str(&float_json(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => write_string(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, item)) in sorted(m).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_json(out, item);
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The shortest decimal digits of `f` and its exponent: `1.5e6` is
/// `("15", 6)`.
fn digits(f: f64) -> (String, i32) {
    let e = format!("{:e}", f.abs());
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    (mantissa.replace('.', ""), exp.parse().unwrap_or(0))
}

/// Go's `%v` for a float64: `%g` with the shortest digits, which switches
/// to the exponent form below 1e-4 and from 1e6 on (`1e+06`, `1.5e-05`).
pub fn float_v(f: f64) -> String {
    if !f.is_finite() {
        return go_special(f);
    }
    let (_, exp) = digits(f);
    if f != 0.0 && !(-4..6).contains(&exp) { exponent_form(f, 2) } else { plain(f) }
}

/// Go's `json.Marshal` of a float64: plain from 1e-6 up to 1e21, else an
/// exponent without a leading zero (`1e-7`, `1e+21`).
fn float_json(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) { exponent_form(f, 1) } else { plain(f) }
}

fn plain(f: f64) -> String {
    format!("{f}")
}

/// `d.ddde±XX` with at least `width` exponent digits.
fn exponent_form(f: f64, width: usize) -> String {
    let (ds, exp) = digits(f);
    let sign = if f < 0.0 { "-" } else { "" };
    let mantissa = if ds.len() > 1 { format!("{}.{}", &ds[..1], &ds[1..]) } else { ds };
    let esign = if exp < 0 { '-' } else { '+' };
    format!("{sign}{mantissa}e{esign}{:0width$}", exp.abs())
}

fn go_special(f: f64) -> String {
    match f {
        f if f.is_nan() => "NaN".into(),
        f if f > 0.0 => "+Inf".into(),
        _ => "-Inf".into(),
    }
}
