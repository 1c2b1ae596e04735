//! Pure: the one line that says which kinds a command could not read and
//! which permission would show them. Commands that read a Runner's
//! children print what they could read, then this once, on stderr, and
//! exit as they would otherwise.

use crate::client::children::NotReadable;

/// `warning: not readable with your permissions, so not shown: ...`, or
/// nothing when everything was read. `namespace` None: all namespaces.
pub fn warning(unreadable: &[NotReadable], namespace: Option<&str>) -> String {
    if unreadable.is_empty() {
        return String::new();
    }
    let mut kinds: Vec<&str> = unreadable.iter().map(|n| n.kind).collect();
    kinds.dedup();
    let grants: Vec<String> = unreadable.iter().map(|n| format!("{} {}", n.verb, n.resource)).collect();
    let scope = match namespace {
        Some(ns) => format!("in namespace {ns}"),
        None => "in all namespaces".into(),
    };
    super::warning(&format!(
        "not readable with your permissions, so not shown: {}; to see them: {} {scope} (the built-in view role has them)",
        kinds.join(", "),
        grants.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(kind: &str, verb: &'static str) -> NotReadable {
        NotReadable::of(crate::kinds::by_name(kind).unwrap(), verb)
    }

    #[test]
    fn everything_read_says_nothing() {
        assert_eq!(warning(&[], Some("t")), "");
    }

    #[test]
    fn the_line_names_each_kind_once_and_the_permission_that_would_show_it() {
        // Two kinds of the registry, the last first: the line keeps the order given.
        let (a, b) = (crate::kinds::all()[3], crate::kinds::all()[2]);
        let line = warning(&[refused(a.kind(), "get"), refused(b.kind(), "get")], Some("team"));
        let resource = |k: &dyn crate::kinds::Kind| {
            if k.group().is_empty() {
                k.plural().to_string()
            } else {
                format!("{}.{}", k.plural(), k.group())
            }
        };
        assert_eq!(
            line,
            format!(
                "warning: not readable with your permissions, so not shown: {}, {}; \
                 to see them: get {}, get {} in namespace team (the built-in view role has them)\n",
                a.kind(),
                b.kind(),
                resource(a),
                resource(b)
            )
        );
        let all = warning(&[refused("Service", "list")], None);
        assert!(all.contains("list services in all namespaces"), "{all}");
    }

    #[test]
    fn a_namespace_from_the_cluster_is_escaped() {
        let line = warning(&[refused("Service", "get")], Some("t\x1b[2J"));
        assert!(line.contains("t\\x1b[2J") && !line.contains('\x1b'), "{line:?}");
    }
}
