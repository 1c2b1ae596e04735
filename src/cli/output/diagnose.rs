//! `diagnose`'s report as the user reads it: a borderless table grouped by
//! object with a one-line summary, or the stable JSON documented in
//! [`crate::diagnose::report`].

use super::Safe;
use crate::diagnose::finding::{Finding, ObjectRef};
use crate::diagnose::report::Report;

/// The table (when there is anything to show) and the summary line.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    if !report.findings.is_empty() {
        out.push_str(&findings_table(&report.findings));
    }
    out.push_str(&summary_line(report));
    out.push('\n');
    out
}

/// Pretty JSON with a trailing newline.
pub fn json(report: &Report) -> String {
    super::json(report)
}

/// `2 errors, 1 warning in 1 Runner in app` / `No problems found ...`.
pub fn summary_line(report: &Report) -> String {
    let s = &report.summary;
    let where_ = match (&report.scope.name, report.scope.namespaces.as_slice()) {
        (Some(n), [ns]) => format!("Runner {}/{}", Safe::new(ns), Safe::new(n)),
        (_, []) => format!("{} in all namespaces", plural(s.runners, "Runner")),
        (_, nss) => format!("{} in {}", plural(s.runners, "Runner"), Safe::new(nss.join(", "))),
    };
    // "0 Runners" where the list failed would read as "none there".
    let where_ = match s.runners_not_read.as_slice() {
        [] => where_,
        not_read => format!("{where_}; the Runners {} could not be read", Safe::new(not_read.join(", "))),
    };
    let notes = if s.info > 0 { format!(" ({})", plural(s.info, "note")) } else { String::new() };
    if s.errors == 0 && s.warnings == 0 {
        format!("No problems found: {where_}, the manager and its permissions{notes}.")
    } else {
        format!("{}, {}: {where_}{notes}.", plural(s.errors, "error"), plural(s.warnings, "warning"))
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

/// Rows grouped by object (in order of each object's most severe finding);
/// the object is named on the first row of its group only.
fn findings_table(findings: &[Finding]) -> String {
    let mut order: Vec<&ObjectRef> = vec![];
    for f in findings {
        if !order.contains(&&f.object) {
            order.push(&f.object);
        }
    }
    let mut rows = vec![];
    for obj in order {
        for (i, f) in findings.iter().filter(|f| &f.object == obj).enumerate() {
            let object = if i == 0 { Safe::new(obj.display()) } else { Safe::default() };
            rows.push(vec![object, f.severity.as_str().into(), f.code.as_str().into(), detail(f)]);
        }
    }
    super::table(Some(&["OBJECT", "SEVERITY", "CHECK", "FINDING"]), rows)
}

/// The FINDING cell: the message, then evidence and fix, one per line.
/// Each part is escaped on its own: the line breaks between them are the
/// only raw ones.
fn detail(f: &Finding) -> Safe {
    let evidence = f.evidence.iter().map(|e| Safe::new(format!("- {e}")));
    let fix = f.fix.iter().map(|fix| Safe::new(format!("fix: {fix}")));
    Safe::lines(std::iter::once(Safe::new(&f.message)).chain(evidence).chain(fix))
}

/// What `diagnose --fix` says about a Runner stuck Terminating, before it
/// asks (stderr).
pub fn stuck(namespace: &str, name: &str, promise: &str) -> String {
    let (namespace, name, promise) = (Safe::new(namespace), Safe::new(name), Safe::new(promise));
    format!(
        "Runner {namespace}/{name} is stuck Terminating; its children are gone.\n  The promise: {promise}.\n"
    )
}

/// The question `diagnose --fix` asks before removing `finalizer`.
pub fn fix_question(finalizer: &str, namespace: &str, name: &str) -> String {
    format!("Remove {finalizer} from Runner {}/{}?", Safe::new(namespace), Safe::new(name))
}

/// What `diagnose --fix` says once it removed `finalizer`.
pub fn removed(finalizer: &str, namespace: &str, name: &str) -> String {
    format!("  removed {finalizer} from Runner {}/{}\n", Safe::new(namespace), Safe::new(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::finding::Code;
    use crate::diagnose::report::API_VERSION;
    use crate::diagnose::snapshot::Scope;

    fn scope() -> Scope {
        Scope { namespaces: vec!["app".into()], name: None }
    }

    fn sample() -> Vec<Finding> {
        let web = ObjectRef::new("Runner", "app", "web");
        vec![
            Finding::error(Code::ChildMissing, web.clone(), "Service app/web is missing")
                .evidence("manager absent")
                .fix("kubectl runner run-manager"),
            Finding::info(Code::ManagerLeader, ObjectRef::new("Lease", "runner-system", "l"), "leader is x"),
            Finding::warning(Code::RunnerNotReady, web, "not Ready for 2m0s"),
        ]
    }

    #[test]
    fn the_table_groups_by_object_and_names_it_once() {
        let out = table(&Report::new(&scope(), 1, vec![], sample()));
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("OBJECT") && lines[0].contains("SEVERITY   CHECK"), "{out}");
        assert_eq!(out.matches("Runner app/web").count(), 1, "{out}");
        let web_rows: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.contains("runner-not-ready") || l.contains("child-missing"))
            .map(|(i, _)| i)
            .collect();
        let lease_row = lines.iter().position(|l| l.contains("manager-leader")).unwrap();
        assert!(web_rows.iter().all(|r| *r < lease_row), "{out}");
        assert!(out.contains("- manager absent") && out.contains("fix: kubectl runner run-manager"), "{out}");
        assert!(lines.iter().all(|l| !l.ends_with(' ')), "{out}");
        assert_eq!(*lines.last().unwrap(), "1 error, 1 warning: 1 Runner in app (1 note).");
    }

    #[test]
    fn evidence_and_fix_continue_under_the_finding_column() {
        let out = table(&Report::new(&scope(), 1, vec![], sample()[..1].to_vec()));
        let lines: Vec<&str> = out.lines().collect();
        let column = lines[0].find("FINDING").unwrap();
        assert_eq!(lines[1].find("Service app/web is missing"), Some(column), "{out}");
        assert_eq!(lines[2].find("- manager absent"), Some(column), "{out}");
        assert_eq!(lines[3].find("fix: kubectl runner run-manager"), Some(column), "{out}");
    }

    #[test]
    fn cluster_text_in_a_finding_is_escaped_part_by_part() {
        let obj = ObjectRef::new("Pod", "app", "web-1");
        let f = Finding::error(Code::ChildMissing, obj, "pod says \u{1b}]0;x\u{7}")
            .evidence("line\nbreak\u{9b}")
            .fix("run \u{202e}this");
        let out = table(&Report::new(&scope(), 1, vec![], vec![f]));
        let column = out.lines().next().unwrap().find("FINDING").unwrap();
        let cells: Vec<&str> = out.lines().skip(1).take(3).map(|l| &l[column..]).collect();
        assert_eq!(cells, ["pod says \\x1b]0;x\\x07", "- line\\nbreak\\u{9b}", "fix: run \\u{202e}this"]);
    }

    #[test]
    fn what_the_apiserver_said_about_a_failed_conversion_is_escaped() {
        let mut s = crate::diagnose::checks::fixtures::healthy();
        s.runners.clear();
        s.conversion.failed_reads = vec![crate::diagnose::snapshot::Gap {
            what: "list Runners in app".into(),
            error: "conversion webhook for x failed: \u{1b}[31mred\u{1b}[0m\nnext".into(),
        }];
        let report = crate::diagnose::report_for(&s);
        assert_eq!(report.findings[0].code, Code::ConversionWebhookUnreachable);
        let out = table(&report);
        assert!(!out.contains('\u{1b}'), "{out}");
        assert!(out.contains("failed: \\x1b[31mred\\x1b[0m\\nnext"), "{out}");
    }

    #[test]
    fn a_clean_report_says_so_in_one_line() {
        let out = table(&Report::new(&Scope { namespaces: vec![], name: None }, 3, vec![], vec![]));
        assert_eq!(out, "No problems found: 3 Runners in all namespaces, the manager and its permissions.\n");
    }

    #[test]
    fn runners_that_could_not_be_read_are_not_counted_as_none() {
        let scope = Scope { namespaces: vec!["a".into(), "b".into()], name: None };
        let findings = sample()[..1].to_vec();
        let out = table(&Report::new(&scope, 1, vec!["in b".into()], findings.clone()));
        assert!(
            out.ends_with("1 error, 0 warnings: 1 Runner in a, b; the Runners in b could not be read.\n"),
            "{out}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&json(&Report::new(&scope, 1, vec!["in b".into()], findings))).unwrap();
        assert_eq!(v["summary"]["runnersNotRead"], serde_json::json!(["in b"]));
        let out = table(&Report::new(&scope, 0, vec!["in \u{1b}[31mb".into()], vec![]));
        assert!(!out.contains('\u{1b}'), "{out}");
    }

    #[test]
    fn json_uses_the_documented_field_names() {
        let v: serde_json::Value =
            serde_json::from_str(&json(&Report::new(&scope(), 1, vec![], sample()))).unwrap();
        assert_eq!(v["apiVersion"], API_VERSION);
        assert_eq!(v["summary"], serde_json::json!({ "errors": 1, "warnings": 1, "info": 1, "runners": 1 }));
        let f = &v["findings"][0];
        assert_eq!(f["code"], "child-missing");
        assert_eq!(f["severity"], "error");
        assert_eq!(f["object"], serde_json::json!({ "kind": "Runner", "namespace": "app", "name": "web" }));
        assert_eq!(f["evidence"][0], "manager absent");
        assert_eq!(f["fix"], "kubectl runner run-manager");
        assert!(v["findings"][1].get("fix").is_none());
    }
}
