//! No hand-kept list of child kinds in `src/`: every list of kinds comes
//! from the registry (`kinds::visit`, `kinds::all()`), so a new kind is
//! one module and one line there.
//!
//! A hand-kept list shows as two different kinds named (the kind or its
//! plural, any case) with only list punctuation and small words between
//! them: `Deployment, Service`, `"Service", "Ingress"`, `deployments,
//! services`, also across a line break. The names come from the registry,
//! so a new kind is checked too. A kind's own module (it implements
//! `ChildKind`) may name other kinds when it says how it relates to them.

use std::path::{Path, PathBuf};

use kubectl_runner::kinds;
use regex::Regex;

/// Lists that stay, each with its reason: text a user reads that must stay
/// byte-identical (the CLI tests compare it). (file, the list).
const ALLOWED: &[(&str, &str, &str)] = &[
    ("src/cli/create.rs", "Deployment and Service", "create's --help for NAME, kept byte-identical"),
    ("src/cli/e2e.rs", "Deployment and a\nService", "e2e's --help: what the e2e run creates"),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every list of two or more kinds in `text`, as (line, the list).
fn lists(text: &str) -> Vec<(usize, String)> {
    let names: Vec<String> =
        kinds::all().iter().flat_map(|k| [k.kind(), k.plural()]).map(regex::escape).collect();
    let name = Regex::new(&format!(r"(?i)\b({})\b", names.join("|"))).unwrap();
    let between =
        Regex::new(r#"(?i)^(?:[\s,;/!"'`()\[\]:|&*-]|\b(?:and|or|a|an|the|its|with|from)\b)*$"#).unwrap();
    let kind_of = |m: &str| {
        kinds::all()
            .iter()
            .position(|k| k.kind().eq_ignore_ascii_case(m) || k.plural().eq_ignore_ascii_case(m))
    };
    let found: Vec<_> = name.find_iter(text).collect();
    found
        .windows(2)
        .filter(|w| kind_of(w[0].as_str()) != kind_of(w[1].as_str()))
        .filter(|w| between.is_match(&text[w[0].end()..w[1].start()]))
        .map(|w| (text[..w[0].start()].lines().count().max(1), text[w[0].start()..w[1].end()].to_string()))
        .collect()
}

#[test]
fn no_file_in_src_keeps_its_own_list_of_child_kinds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![];
    rust_files(&root.join("src"), &mut files);
    let mut found = vec![];
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        if text.contains("impl ChildKind for ") {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        for (line, list) in lists(&text) {
            if !ALLOWED.iter().any(|(f, l, _)| *f == rel && *l == list) {
                found.push(format!("{rel}:{line}: {list:?}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "lists of kinds written by hand; iterate kinds::all() instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_list_is_found_in_prose_code_and_across_lines_and_a_relation_is_not() {
    let [a, b, ..] = kinds::all() else { panic!("two kinds or more") };
    let (a, b) = (a.kind(), b.kind());
    assert_eq!(lists(&format!("makes a {a}, a {b} and")).len(), 1);
    assert_eq!(lists(&format!("let all = [\"{a}\", \"{b}\"];")).len(), 1);
    assert_eq!(lists(&format!("//! the {a} or\n//! the {b}")).len(), 1);
    assert_eq!(lists(&format!("get {}, {}", a.to_lowercase(), b.to_lowercase())).len(), 1);
    assert!(lists(&format!("the {a} routes to the {b}")).is_empty());
    assert!(lists(&format!("the {a} and the {a}")).is_empty(), "one kind twice is no list");
}
