//! What a check reports: a [`Finding`] names a problem (a stable [`Code`]),
//! how bad it is ([`Severity`]), the object it is about, the evidence that
//! led to it, and the fix as a command where one exists.
//!
//! These types are also the `-o json` schema, so their serialized field names
//! and code strings are a stable interface: add, never rename.

use serde::Serialize;

/// How bad a finding is. Only errors change the exit code (to 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something is broken: Runners are not (or will not be) reconciled.
    Error,
    /// Probably wrong, or will break later (over-broad RBAC, drift, churn).
    Warning,
    /// Context worth knowing (who leads, what could not be seen).
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// Stable identifier of a rule; the JSON `code` field and the table's CHECK
/// column. Grouped by the check that reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    // installation
    ClusterUnreachable,
    CrdMissing,
    CrdVersionNotServed,
    CrdSchemaDrift,
    // manager
    ManagerLeader,
    ManagerLeaseStale,
    ManagerNotReady,
    ManagerPodWaiting,
    ManagerRestarts,
    ManagerAbsent,
    ManagerNotVisible,
    ManagerLocal,
    ManagerOverlap,
    // permissions
    ServiceAccountMissing,
    PermissionDenied,
    OverbroadGrant,
    // stuck finalizers
    FinalizerStuck,
    // children
    ChildMissing,
    ChildForeign,
    ChildStaleOwner,
    IngressWithoutHost,
    IngressHostMismatch,
    // workload
    ProgressDeadlineExceeded,
    PodWaiting,
    PodUnschedulable,
    // status
    GenerationBehind,
    RunnerNotReady,
    StatusChurn,
    WarningEvent,
    // diagnose itself
    GatherIncomplete,
}

impl Code {
    /// The kebab-case spelling used in JSON and the table.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::ClusterUnreachable => "cluster-unreachable",
            Code::CrdMissing => "crd-missing",
            Code::CrdVersionNotServed => "crd-version-not-served",
            Code::CrdSchemaDrift => "crd-schema-drift",
            Code::ManagerLeader => "manager-leader",
            Code::ManagerLeaseStale => "manager-lease-stale",
            Code::ManagerNotReady => "manager-not-ready",
            Code::ManagerPodWaiting => "manager-pod-waiting",
            Code::ManagerRestarts => "manager-restarts",
            Code::ManagerAbsent => "manager-absent",
            Code::ManagerNotVisible => "manager-not-visible",
            Code::ManagerLocal => "manager-local",
            Code::ManagerOverlap => "manager-overlap",
            Code::ServiceAccountMissing => "service-account-missing",
            Code::PermissionDenied => "permission-denied",
            Code::OverbroadGrant => "overbroad-grant",
            Code::FinalizerStuck => "finalizer-stuck",
            Code::ChildMissing => "child-missing",
            Code::ChildForeign => "child-foreign",
            Code::ChildStaleOwner => "child-stale-owner",
            Code::IngressWithoutHost => "ingress-without-host",
            Code::IngressHostMismatch => "ingress-host-mismatch",
            Code::ProgressDeadlineExceeded => "progress-deadline-exceeded",
            Code::PodWaiting => "pod-waiting",
            Code::PodUnschedulable => "pod-unschedulable",
            Code::GenerationBehind => "generation-behind",
            Code::RunnerNotReady => "runner-not-ready",
            Code::StatusChurn => "status-churn",
            Code::WarningEvent => "warning-event",
            Code::GatherIncomplete => "gather-incomplete",
        }
    }
}

/// The object a finding is about; findings are grouped by it in the table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectRef {
    /// `Runner`, `Deployment`, `ServiceAccount`, ..., or `Cluster` for the
    /// installation as a whole.
    pub kind: String,
    /// Empty for cluster-scoped objects.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn new(kind: &str, namespace: &str, name: &str) -> ObjectRef {
        ObjectRef { kind: kind.into(), namespace: namespace.into(), name: name.into() }
    }

    /// `Runner ns/web`, `CustomResourceDefinition runners.lab...`.
    pub fn display(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// One problem (or fact) found by a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub code: Code,
    pub severity: Severity,
    pub object: ObjectRef,
    /// One sentence: what is wrong.
    pub message: String,
    /// What was observed that supports the message, one fact per entry.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// A command (or YAML) that fixes it, where one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    pub fn new(code: Code, severity: Severity, object: ObjectRef, message: impl Into<String>) -> Finding {
        Finding { code, severity, object, message: message.into(), evidence: Vec::new(), fix: None }
    }

    pub fn error(code: Code, object: ObjectRef, message: impl Into<String>) -> Finding {
        Finding::new(code, Severity::Error, object, message)
    }

    pub fn warning(code: Code, object: ObjectRef, message: impl Into<String>) -> Finding {
        Finding::new(code, Severity::Warning, object, message)
    }

    pub fn info(code: Code, object: ObjectRef, message: impl Into<String>) -> Finding {
        Finding::new(code, Severity::Info, object, message)
    }

    /// Adds one line of evidence.
    pub fn evidence(mut self, line: impl Into<String>) -> Finding {
        self.evidence.push(line.into());
        self
    }

    /// Sets the fix.
    pub fn fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = Some(fix.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code, for the spelling test below.
    const ALL: &[Code] = &[
        Code::ClusterUnreachable,
        Code::CrdMissing,
        Code::CrdVersionNotServed,
        Code::CrdSchemaDrift,
        Code::ManagerLeader,
        Code::ManagerLeaseStale,
        Code::ManagerNotReady,
        Code::ManagerPodWaiting,
        Code::ManagerRestarts,
        Code::ManagerAbsent,
        Code::ManagerNotVisible,
        Code::ManagerLocal,
        Code::ManagerOverlap,
        Code::ServiceAccountMissing,
        Code::PermissionDenied,
        Code::OverbroadGrant,
        Code::FinalizerStuck,
        Code::ChildMissing,
        Code::ChildForeign,
        Code::ChildStaleOwner,
        Code::IngressWithoutHost,
        Code::IngressHostMismatch,
        Code::ProgressDeadlineExceeded,
        Code::PodWaiting,
        Code::PodUnschedulable,
        Code::GenerationBehind,
        Code::RunnerNotReady,
        Code::StatusChurn,
        Code::WarningEvent,
        Code::GatherIncomplete,
    ];

    #[test]
    fn every_code_is_spelled_as_its_json_and_spellings_are_unique() {
        // No wildcard: a new variant does not compile until it is named
        // here, which is the reminder to add it to ALL as well.
        fn listed(c: Code) -> bool {
            match c {
                Code::ClusterUnreachable
                | Code::CrdMissing
                | Code::CrdVersionNotServed
                | Code::CrdSchemaDrift
                | Code::ManagerLeader
                | Code::ManagerLeaseStale
                | Code::ManagerNotReady
                | Code::ManagerPodWaiting
                | Code::ManagerRestarts
                | Code::ManagerAbsent
                | Code::ManagerNotVisible
                | Code::ManagerLocal
                | Code::ManagerOverlap
                | Code::ServiceAccountMissing
                | Code::PermissionDenied
                | Code::OverbroadGrant
                | Code::FinalizerStuck
                | Code::ChildMissing
                | Code::ChildForeign
                | Code::ChildStaleOwner
                | Code::IngressWithoutHost
                | Code::IngressHostMismatch
                | Code::ProgressDeadlineExceeded
                | Code::PodWaiting
                | Code::PodUnschedulable
                | Code::GenerationBehind
                | Code::RunnerNotReady
                | Code::StatusChurn
                | Code::WarningEvent
                | Code::GatherIncomplete => ALL.contains(&c),
            }
        }
        let mut seen = std::collections::HashSet::new();
        for &code in ALL {
            assert!(listed(code));
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
            assert!(seen.insert(code.as_str()), "{} spelled twice", code.as_str());
        }
    }

    #[test]
    fn errors_sort_before_warnings_before_info() {
        let mut s = vec![Severity::Info, Severity::Error, Severity::Warning];
        s.sort();
        assert_eq!(s, [Severity::Error, Severity::Warning, Severity::Info]);
    }
}
