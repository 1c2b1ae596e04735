//! Findings -> what the user reads: a borderless, kubectl-like table grouped
//! by object with a one-line summary, or JSON; and the exit code, which only
//! the severity decides (0 no errors, 3 errors).
//!
//! JSON (`-o json`) is a stable interface; fields are only ever added:
//!
//! ```text
//! {
//!   "apiVersion": "diagnose.kubectl-runner/v1",
//!   "scope":    { "namespaces": ["app"] | [] (all), "name": "web" | absent },
//!   "summary":  { "errors": 1, "warnings": 0, "info": 2, "runners": 1 },
//!   "findings": [ { "code": "child-missing",          // kebab-case, see finding::Code
//!                   "severity": "error" | "warning" | "info",
//!                   "object": { "kind": "Runner", "namespace": "app", "name": "web" },
//!                   "message": "Service app/web is missing",
//!                   "evidence": ["..."],              // absent when empty
//!                   "fix": "kubectl ..." } ]          // absent when there is none
//! }
//! ```

use comfy_table::{Cell, ContentArrangement, Table, presets};
use serde::Serialize;

use super::finding::{Finding, ObjectRef, Severity};
use super::snapshot::Scope;
use crate::exit;

/// Schema identifier of the JSON output.
pub const API_VERSION: &str = "diagnose.kubectl-runner/v1";

/// What `diagnose` found, ready to render.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub api_version: &'static str,
    pub scope: ReportScope,
    pub summary: Summary,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReportScope {
    /// Empty: all namespaces.
    pub namespaces: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub info: usize,
    /// Runners examined.
    pub runners: usize,
}

impl Report {
    pub fn new(scope: &Scope, runners: usize, findings: Vec<Finding>) -> Report {
        let count = |sev| findings.iter().filter(|f| f.severity == sev).count();
        let summary = Summary {
            errors: count(Severity::Error),
            warnings: count(Severity::Warning),
            info: count(Severity::Info),
            runners,
        };
        Report {
            api_version: API_VERSION,
            scope: ReportScope { namespaces: scope.namespaces.clone(), name: scope.name.clone() },
            summary,
            findings,
        }
    }

    /// 3 when any finding is an error, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.summary.errors > 0 { exit::FINDINGS } else { exit::OK }
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// The table (when there is anything to show) and the summary line.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        if !self.findings.is_empty() {
            out.push_str(&table(&self.findings));
            out.push('\n');
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        out
    }

    /// `2 errors, 1 warning in 1 Runner in app` / `No problems found ...`.
    pub fn summary_line(&self) -> String {
        let s = &self.summary;
        let where_ = match (&self.scope.name, self.scope.namespaces.as_slice()) {
            (Some(n), [ns]) => format!("Runner {ns}/{n}"),
            (_, []) => format!("{} in all namespaces", plural(s.runners, "Runner")),
            (_, nss) => format!("{} in {}", plural(s.runners, "Runner"), nss.join(", ")),
        };
        let notes = if s.info > 0 { format!(" ({})", plural(s.info, "note")) } else { String::new() };
        if s.errors == 0 && s.warnings == 0 {
            format!("No problems found: {where_}, the manager and its permissions{notes}.")
        } else {
            format!("{}, {}: {where_}{notes}.", plural(s.errors, "error"), plural(s.warnings, "warning"))
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

/// Rows grouped by object (in order of each object's most severe finding);
/// the object is named on the first row of its group only.
fn table(findings: &[Finding]) -> String {
    let mut order: Vec<&ObjectRef> = vec![];
    for f in findings {
        if !order.contains(&&f.object) {
            order.push(&f.object);
        }
    }
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(vec!["OBJECT", "SEVERITY", "CHECK", "FINDING"]);
    for obj in order {
        let mut first = true;
        for f in findings.iter().filter(|f| &f.object == obj) {
            let object = if first { obj.display() } else { String::new() };
            first = false;
            t.add_row(vec![
                Cell::new(object),
                Cell::new(f.severity.as_str()),
                Cell::new(f.code.as_str()),
                Cell::new(detail(f)),
            ]);
        }
    }
    for c in t.column_iter_mut() {
        c.set_padding((0, 3));
    }
    t.lines().map(|l| l.trim_end().to_string()).collect::<Vec<_>>().join("\n")
}

/// The FINDING cell: the message, then evidence and fix, one per line.
fn detail(f: &Finding) -> String {
    let mut s = f.message.clone();
    for e in &f.evidence {
        s.push_str("\n- ");
        s.push_str(e);
    }
    if let Some(fix) = &f.fix {
        s.push_str("\nfix: ");
        s.push_str(fix);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::finding::Code;

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
    fn errors_exit_3_and_anything_less_exits_0() {
        let cases: &[(Vec<Finding>, u8)] = &[(sample(), 3), (sample()[1..].to_vec(), 0), (vec![], 0)];
        for (findings, want) in cases {
            assert_eq!(Report::new(&scope(), 1, findings.clone()).exit_code(), *want);
        }
    }

    #[test]
    fn the_table_groups_by_object_and_names_it_once() {
        let out = Report::new(&scope(), 1, sample()).to_table();
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
    fn a_clean_report_says_so_in_one_line() {
        let out = Report::new(&Scope { namespaces: vec![], name: None }, 3, vec![]).to_table();
        assert_eq!(out, "No problems found: 3 Runners in all namespaces, the manager and its permissions.\n");
    }

    #[test]
    fn json_uses_the_documented_field_names() {
        let v: serde_json::Value =
            serde_json::from_str(&Report::new(&scope(), 1, sample()).to_json()).unwrap();
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
