//! Findings -> the report, as data: the scope, the counts by severity and
//! the findings. The CLI renders it (`cli::output::diagnose`: a table or
//! this JSON) and maps it to an exit code (`exit::diagnose`: only the
//! severity decides).
//!
//! JSON (`-o json`) is a stable interface; fields are only ever added:
//!
//! ```text
//! {
//!   "apiVersion": "diagnose.kubectl-runner/v1",
//!   "scope":    { "namespaces": ["app"] | [] (all), "name": "web" | absent },
//!   "summary":  { "errors": 1, "warnings": 0, "info": 2, "runners": 1,
//!                 "runnersNotRead": ["in team-b"] },      // absent when every read worked
//!   "findings": [ { "code": "child-missing",          // kebab-case, see finding::Code
//!                   "severity": "error" | "warning" | "info",
//!                   "object": { "kind": "Runner", "namespace": "app", "name": "web" },
//!                   "message": "Service app/web is missing",
//!                   "evidence": ["..."],              // absent when empty
//!                   "fix": "kubectl ..." } ]          // absent when there is none
//! }
//! ```

use serde::Serialize;

use super::finding::{Finding, Severity};
use super::snapshot::Scope;

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub errors: usize,
    pub warnings: usize,
    pub info: usize,
    /// Runners examined.
    pub runners: usize,
    /// Where the Runners could not be read (`in all namespaces`, `in team-b`):
    /// `runners` does not count those, so "0 Runners" there is not "none".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runners_not_read: Vec<String>,
}

impl Report {
    pub fn new(
        scope: &Scope,
        runners: usize,
        runners_not_read: Vec<String>,
        findings: Vec<Finding>,
    ) -> Report {
        let count = |sev| findings.iter().filter(|f| f.severity == sev).count();
        let summary = Summary {
            errors: count(Severity::Error),
            warnings: count(Severity::Warning),
            info: count(Severity::Info),
            runners,
            runners_not_read,
        };
        Report {
            api_version: API_VERSION,
            scope: ReportScope { namespaces: scope.namespaces.clone(), name: scope.name.clone() },
            summary,
            findings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::finding::{Code, ObjectRef};

    #[test]
    fn the_summary_counts_findings_by_severity() {
        let web = ObjectRef::new("Runner", "app", "web");
        let findings = vec![
            Finding::error(Code::ChildMissing, web.clone(), "Service app/web is missing"),
            Finding::warning(Code::RunnerNotReady, web.clone(), "not Ready"),
            Finding::warning(Code::RunnerNotReady, web.clone(), "not Ready"),
            Finding::info(Code::ManagerLeader, web, "leader is x"),
        ];
        let r = Report::new(&Scope { namespaces: vec!["app".into()], name: None }, 4, vec![], findings);
        assert_eq!(
            r.summary,
            Summary { errors: 1, warnings: 2, info: 1, runners: 4, runners_not_read: vec![] }
        );
    }
}
