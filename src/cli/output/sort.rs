//! `get --sort-by=PATH`, ordered as kubectl orders: the first value the
//! path finds in each object is its key; objects without one come first;
//! integers, floats and strings compare within their kind (strings that
//! both parse as quantities, like `100m` and `1`, by amount), and two keys
//! of different kinds, or a bool, map or list, cannot be sorted.
//!
//! kubectl sorts with Go's `sort.Sort`, which is not stable: [`gosort`]
//! is a port of it, so ties come out in kubectl's order too.

use serde_json::Value;

use super::jsonpath::{Template, gofmt};

mod gosort;

/// The order of `objects` sorted by `path`: `result[k]` is the index of
/// the object that goes k-th. Fails when no object has the field, or when
/// two keys cannot be compared.
pub fn order(objects: &[Value], path: &Template) -> Result<Vec<usize>, String> {
    let keys: Vec<Option<&Value>> = objects.iter().map(|o| key(o, path)).collect::<Result<_, _>>()?;
    if !objects.is_empty() && keys.iter().all(Option::is_none) {
        return Err(format!("couldn't find any field with path {:?} in the list of objects", path.source()));
    }
    comparable(&keys)?;
    Ok(gosort::sort(keys.len(), |a, b| less(keys[a], keys[b])))
}

fn key<'a>(object: &'a Value, path: &Template) -> Result<Option<&'a Value>, String> {
    let found = path.find(object)?;
    Ok(match found.first().and_then(|v| v.first()) {
        // Values found in the object are borrowed; literals in the path
        // (`{"x"}`) are not data and do not sort.
        Some(std::borrow::Cow::Borrowed(v)) => Some(v),
        _ => None,
    })
}

/// kubectl fails (exits) as soon as it compares two keys that do not
/// compare; with two or more such keys it always meets a pair, so the
/// check is done once, up front, and the sort itself cannot fail.
fn comparable(keys: &[Option<&Value>]) -> Result<(), String> {
    let kind = |v: &Value| match v {
        Value::Number(n) if n.as_i64().is_some() => Some("int64"),
        Value::Number(_) => Some("float64"),
        Value::String(_) => Some("string"),
        _ => None,
    };
    let present: Vec<&Value> = keys.iter().flatten().copied().filter(|v| !v.is_null()).collect();
    if present.len() < 2 {
        return Ok(());
    }
    if let Some(bad) = present.iter().find(|v| kind(v).is_none()) {
        return Err(format!("unsortable type: {} ({})", gofmt::type_name(bad), gofmt::sprint(bad)));
    }
    if let Some(other) = present.iter().find(|v| kind(v) != kind(present[0])) {
        return Err(format!(
            "cannot compare {} ({}) with {} ({})",
            gofmt::sprint(present[0]),
            gofmt::type_name(present[0]),
            gofmt::sprint(other),
            gofmt::type_name(other)
        ));
    }
    Ok(())
}

/// kubectl's `RuntimeSort.Less` and `isLess`, for keys [`comparable`] passed.
fn less(i: Option<&Value>, j: Option<&Value>) -> bool {
    let (Some(i), Some(j)) = (i, j) else { return i.is_none() };
    match (i, j) {
        (Value::Null, _) => !j.is_null(),
        (_, Value::Null) => false,
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(a), Some(b)) => a < b,
            _ => a.as_f64() < b.as_f64(),
        },
        (Value::String(a), Value::String(b)) => match (quantity(a), quantity(b)) {
            (Some(qa), Some(qb)) => qa < qb,
            _ => a < b,
        },
        _ => false,
    }
}

/// A Kubernetes quantity (`100m`, `1.5Gi`, `2e3`, `-1`) as a float, or
/// `None` for a string that is not one: apimachinery's grammar, digits,
/// an optional fraction, then a binary or decimal suffix or an exponent.
fn quantity(s: &str) -> Option<f64> {
    if s.is_empty() {
        return None;
    }
    let (sign, rest) = match s.as_bytes()[0] {
        b'-' => (-1.0, &s[1..]),
        b'+' => (1.0, &s[1..]),
        _ => (1.0, s),
    };
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (int, rest) = rest.split_at(int_len);
    let (frac, suffix) = match rest.strip_prefix('.') {
        Some(r) => r.split_at(r.bytes().take_while(u8::is_ascii_digit).count()),
        None => ("", rest),
    };
    let number: f64 = format!("0{int}.{frac}0").parse().ok()?;
    let multiplier = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.len() > 1 && e.starts_with(['e', 'E']) => 10f64.powi(exponent(&e[1..])?),
        _ => return None,
    };
    Some(sign * number * multiplier)
}

/// The signed integer of a decimal exponent (`3`, `-2`, `+6`).
fn exponent(s: &str) -> Option<i32> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::output::jsonpath::relaxed;
    use serde_json::json;

    fn sorted(objects: &[Value], path: &str) -> Result<Vec<usize>, String> {
        order(objects, &relaxed(path).unwrap())
    }

    #[test]
    fn strings_sort_bytewise_and_quantities_by_amount() {
        let objs = [json!({"v": "b"}), json!({"v": "B"}), json!({"v": "a"})];
        assert_eq!(sorted(&objs, ".v").unwrap(), vec![1, 2, 0]);
        let objs = [json!({"v": "1Gi"}), json!({"v": "100m"}), json!({"v": "2"}), json!({"v": "1e3"})];
        assert_eq!(sorted(&objs, "{.v}").unwrap(), vec![1, 2, 3, 0]);
    }

    #[test]
    fn objects_without_the_field_come_first_in_reverse_as_with_kubectl() {
        let objs = [json!({"v": 2}), json!({}), json!({"v": 1}), json!({"w": 0})];
        assert_eq!(sorted(&objs, ".v").unwrap(), vec![3, 1, 2, 0]);
    }

    #[test]
    fn a_field_no_object_has_is_an_error_naming_the_path() {
        let err = sorted(&[json!({"v": 1})], ".spec.x").unwrap_err();
        assert!(err.contains("{.spec.x}"), "{err}");
        assert_eq!(sorted(&[], ".spec.x").unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn keys_of_different_kinds_or_bools_cannot_be_sorted() {
        assert!(sorted(&[json!({"v": 1}), json!({"v": "a"})], ".v").is_err());
        assert!(sorted(&[json!({"v": true}), json!({"v": false})], ".v").is_err());
        assert!(sorted(&[json!({"v": 1}), json!({"v": 1.5})], ".v").is_err());
    }

    #[rustfmt::skip]
    const GO_ORDER_60: [usize; 60] = [
        40, 25, 55, 30, 20, 5, 0, 10, 15, 45, 35, 50, 58, 13, 38, 8, 48, 33, 18, 43,
        53, 3, 28, 23, 31, 36, 26, 1, 56, 51, 21, 6, 46, 11, 41, 16, 49, 24, 14, 39,
        59, 34, 54, 4, 44, 9, 29, 19, 47, 7, 37, 32, 52, 17, 42, 2, 22, 57, 27, 12,
    ];

    #[test]
    fn ties_in_long_lists_land_where_go_sort_puts_them() {
        // Recorded from Go's sort.Sort with kubectl's Less over the same keys.
        let objs: Vec<Value> = (0..60).map(|i| json!({"v": (i * 7) % 5})).collect();
        assert_eq!(sorted(&objs, ".v").unwrap(), GO_ORDER_60.to_vec());
    }

    #[test]
    fn quantities_follow_the_apimachinery_grammar() {
        for (s, want) in [("100m", Some(0.1)), ("1.5Gi", Some(1.5 * 1024f64.powi(3))), ("-2k", Some(-2000.0))]
        {
            assert_eq!(quantity(s), want, "{s}");
        }
        for (s, want) in [("1e3", Some(1000.0)), ("m", Some(0.0)), (".5", Some(0.5)), ("1.", Some(1.0))] {
            assert_eq!(quantity(s), want, "{s}");
        }
        for s in ["", "web", "nginx:1.27", "1K", "1x", "2024-01-02T03:04:05Z", "1e", "1e+"] {
            assert_eq!(quantity(s), None, "{s}");
        }
    }
}
