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

/// Defines [`Code`] and [`Group`] from one table: each code's name, its
/// JSON spelling and its group are written once, and `Code::ALL`,
/// `as_str` and `group` are generated from it.
macro_rules! codes {
    ($( $(#[$gdoc:meta])* $group:ident { $( $code:ident = $text:literal ),* $(,)? } )*) => {
        /// Stable identifier of a rule; the JSON `code` field and the table's
        /// CHECK column.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code { $( $( $code, )* )* }

        /// The check that reports a code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Group { $( $(#[$gdoc])* $group, )* }

        impl Code {
            /// Every code, in table order.
            pub const ALL: &'static [Code] = &[ $( $( Code::$code, )* )* ];

            /// The kebab-case spelling used in JSON and the table.
            pub fn as_str(self) -> &'static str {
                match self { $( $( Code::$code => $text, )* )* }
            }

            pub fn group(self) -> Group {
                match self { $( $( Code::$code => Group::$group, )* )* }
            }
        }
    };
}

codes! {
    /// The CRD and the apiserver.
    Installation {
        ClusterUnreachable = "cluster-unreachable",
        CrdMissing = "crd-missing",
        CrdVersionNotServed = "crd-version-not-served",
        CrdSchemaDrift = "crd-schema-drift",
        ValidatingWebhookDrift = "validating-webhook-drift",
    }
    /// Conversion between the Runner's versions: the webhook, its
    /// certificates, and the versions objects are stored at.
    Conversion {
        ConversionWebhookUnreachable = "conversion-webhook-unreachable",
        ConversionCaMismatch = "conversion-ca-mismatch",
        ConversionCertExpiring = "conversion-cert-expiring",
        StoredVersionNotServed = "stored-version-not-served",
    }
    /// The webhook registrations: the CRD's conversion and the validating
    /// webhook a local manager pointed at itself (left behind, or still
    /// served), and a validating webhook whose Service serves nothing.
    Registrations {
        LocalWebhooksAbandoned = "local-webhooks-abandoned",
        LocalWebhooksAnnotationInvalid = "local-webhooks-annotation-invalid",
        LocalWebhooksServed = "local-webhooks-served",
        AdmissionWebhookUnreachable = "admission-webhook-unreachable",
    }
    /// The in-cluster manager and its Lease.
    Manager {
        ManagerLeader = "manager-leader",
        ManagerLeaseStale = "manager-lease-stale",
        ManagerNotReady = "manager-not-ready",
        ManagerPodWaiting = "manager-pod-waiting",
        ManagerRestarts = "manager-restarts",
        ManagerAbsent = "manager-absent",
        ManagerNotVisible = "manager-not-visible",
        ManagerLocal = "manager-local",
        ManagerOverlap = "manager-overlap",
    }
    /// What the manager's ServiceAccount may do.
    Permissions {
        ServiceAccountMissing = "service-account-missing",
        PermissionDenied = "permission-denied",
        OverbroadGrant = "overbroad-grant",
    }
    /// Runners stuck deleting.
    Finalizers {
        FinalizerStuck = "finalizer-stuck",
    }
    /// Each child kind: missing, foreign, stale, drifted.
    Children {
        ChildMissing = "child-missing",
        ChildForeign = "child-foreign",
        ChildStaleOwner = "child-stale-owner",
        IngressWithoutHost = "ingress-without-host",
        IngressHostMismatch = "ingress-host-mismatch",
    }
    /// The Deployment's rollout and the Pods.
    Workload {
        ProgressDeadlineExceeded = "progress-deadline-exceeded",
        PodWaiting = "pod-waiting",
        PodUnschedulable = "pod-unschedulable",
        PodsRefused = "pods-refused",
    }
    /// The Runner's status and Events.
    Status {
        GenerationBehind = "generation-behind",
        RunnerNotReady = "runner-not-ready",
        StatusChurn = "status-churn",
        WarningEvent = "warning-event",
    }
    /// Writes seen while watching (`--observe`).
    Writes {
        WriteFight = "write-fight",
        WriteStorm = "write-storm",
    }
    /// diagnose itself.
    Diagnose {
        GatherIncomplete = "gather-incomplete",
        NotReadable = "not-readable",
    }
}

impl Group {
    /// Codes about the in-cluster installation (the manager Deployment and
    /// its ServiceAccount's RBAC) rather than the Runners.
    pub fn is_installation(self) -> bool {
        matches!(self, Group::Manager | Group::Permissions)
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
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
    /// The counts behind a `write-fight` or `write-storm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<WriteCounts>,
}

/// What `--observe` counted for one object (`-o json`'s `writes`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteCounts {
    /// `Deployment`, `Pod`, ... (the finding's object is the Runner).
    pub kind: String,
    pub name: String,
    /// How long diagnose watched.
    pub window_seconds: f64,
    /// A storm: the unexplained writes; a fight: every write to the object.
    pub writes: usize,
    pub per_minute: f64,
    /// A fight: how often the fields changed hands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handovers: Option<usize>,
    /// The fields fought over, or those the storm's writes changed.
    pub fields: Vec<FieldCount>,
    /// The writers, most writes first.
    pub managers: Vec<ManagerCount>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldCount {
    pub field: String,
    /// Writes that changed it (absent for a fight's fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManagerCount {
    /// The field manager; empty when `managedFields` did not say.
    pub manager: String,
    pub operation: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    pub writes: usize,
}

impl Finding {
    pub fn new(code: Code, severity: Severity, object: ObjectRef, message: impl Into<String>) -> Finding {
        Finding {
            code,
            severity,
            object,
            message: message.into(),
            evidence: Vec::new(),
            fix: None,
            writes: None,
        }
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

    /// Sets the write counts.
    pub fn writes(mut self, counts: WriteCounts) -> Finding {
        self.writes = Some(counts);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_spelled_once_in_kebab_case_and_serialized_so() {
        let mut seen = std::collections::HashSet::new();
        for &code in Code::ALL {
            let s = code.as_str();
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{s}");
            assert_eq!(serde_json::to_value(code).unwrap(), s);
            assert!(seen.insert(s), "{s} spelled twice");
        }
        assert!(
            Code::ChildMissing.group() == Group::Children && Code::PermissionDenied.group().is_installation()
        );
    }

    #[test]
    fn errors_sort_before_warnings_before_info() {
        let mut s = vec![Severity::Info, Severity::Error, Severity::Warning];
        s.sort();
        assert_eq!(s, [Severity::Error, Severity::Warning, Severity::Info]);
    }
}
