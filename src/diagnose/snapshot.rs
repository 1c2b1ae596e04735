//! Everything the checks look at, read once by `gather` and then only
//! inspected. Keeping the API reads here (and nowhere in `checks`) is what
//! lets every rule be a pure function with a table-driven unit test.
//!
//! A read that failed is not fatal: it becomes a [`Gap`], and the checks that
//! needed it stay silent while `gather-incomplete` says what could not be seen.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

use crate::api::Runner;
use crate::client::children::{Children, NotReadable};
use crate::diagnose::writes::Observed;
use crate::rbac::Permission;
/// Where the ServiceAccount identity lives (the manager uses it too).
pub use crate::service_account::ServiceAccountRef;

/// The gathered state of the installation and the Runners in scope.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When gathering started; every age is measured from here.
    pub now: Timestamp,
    pub scope: Scope,
    pub thresholds: Thresholds,
    /// The apiserver's version, or why it could not be reached.
    pub cluster: Result<String, String>,
    /// The live Runner CRD; `None` when it is not installed.
    pub crd: Option<CustomResourceDefinition>,
    /// The CRD this binary generates, to compare against.
    pub expected_crd: CustomResourceDefinition,
    pub manager: ManagerState,
    /// The ServiceAccount whose permissions are checked.
    pub service_account: ServiceAccountRef,
    /// `None` when the ServiceAccount could not be read; `Some(false)` when it
    /// does not exist.
    pub service_account_exists: Option<bool>,
    /// One answer per (namespace, permission, verb).
    pub access: Vec<AccessCheck>,
    /// The (Cluster)RoleBindings that grant something to the ServiceAccount,
    /// with the rules of the role they point at.
    pub grants: Vec<Grant>,
    pub runners: Vec<RunnerState>,
    /// Where the Runner list (or get) failed, as `in all namespaces` or
    /// `in NS`: why is in `gaps` or `conversion.failed_reads`.
    pub runners_not_read: Vec<String>,
    /// The conversion webhook, and Runner reads that failed for want of it.
    pub conversion: ConversionState,
    /// The validating webhook's registration and the Leases of the local
    /// managers that registrations name.
    pub registrations: RegistrationsState,
    /// Reads that failed.
    pub gaps: Vec<Gap>,
}

impl Snapshot {
    /// True when every read succeeded: nothing missing from the snapshot
    /// can be blamed on diagnose not seeing it.
    pub fn complete(&self) -> bool {
        self.cluster.is_ok()
            && self.crd.is_some()
            && self.gaps.is_empty()
            && self.conversion.failed_reads.is_empty()
    }
}

/// What the conversion checks read besides the CRD. The webhook's objects
/// are read only when the CRD converts by webhook or a Runner read failed
/// for want of conversion: a CRD without conversion needs none of them.
#[derive(Debug, Clone, Default)]
pub struct ConversionState {
    /// Runner reads the apiserver refused because it could not convert a
    /// stored Runner (HTTP 500 "conversion webhook for ... failed"): what was
    /// read and the answer. Not gaps: the conversion check reports them
    /// first, and names the per-Runner checks they skipped.
    pub failed_reads: Vec<Gap>,
    /// The webhook's Service: the one the CRD's clientConfig names, else
    /// the one the install creates.
    pub service: Readable<Option<Service>>,
    /// The EndpointSlices of that Service.
    pub endpoints: Readable<Vec<EndpointSlice>>,
    /// The certificates in the webhook's Secret.
    pub certs: Readable<Option<WebhookCerts>>,
}

/// What the registration checks read besides the CRD: the
/// ValidatingWebhookConfiguration [`crate::webhook::VALIDATING_CONFIG`],
/// and, for each namespace a saved annotation
/// ([`crate::webhook::local::SAVED_ANNOTATION`]) names, the Lease
/// [`crate::webhook::local::LEASE`] that says whether its local manager
/// is alive.
#[derive(Debug, Clone, Default)]
pub struct RegistrationsState {
    /// `Read(None)`: there is no such configuration.
    pub validating: Readable<Option<ValidatingWebhookConfiguration>>,
    /// By namespace; `Read(None)`: no Lease there.
    pub leases: BTreeMap<String, Readable<Option<Lease>>>,
    /// What the apiserver answered to a dry-run create of a Runner at each
    /// version ([`crate::client::webhook_probe`]): whether it can call the
    /// webhooks, which no reading of their Service can tell. Empty when
    /// not asked (no CRD).
    pub probes: Vec<crate::client::webhook_probe::Outcome>,
    /// The namespace the dry runs were made in.
    pub probe_namespace: String,
}

/// The public half of the webhook's Secret. Gather keeps only the
/// certificates, never the keys, so a snapshot (which is `Debug`) holds no
/// secret.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookCerts {
    /// `tls.crt` (PEM); `None` when the Secret has no such key.
    pub serving: Option<Vec<u8>>,
    /// `ca.crt` (PEM): the CA bundle the install injects as the caBundle.
    pub ca: Option<Vec<u8>>,
}

/// A read that the apiserver may have refused: tenants may not read the
/// manager's Secret, and that is "not readable", not a failure.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Readable<T> {
    /// Not read: not needed, or failed (a [`Gap`] says why).
    #[default]
    Unknown,
    Read(T),
    /// Refused (403).
    Refused(NotReadable),
}

impl<T> Readable<T> {
    /// The value, when it was read.
    pub fn get(&self) -> Option<&T> {
        match self {
            Readable::Read(v) => Some(v),
            _ => None,
        }
    }

    /// The refusal, when the read was refused.
    pub fn refused(&self) -> Option<&NotReadable> {
        match self {
            Readable::Refused(n) => Some(n),
            _ => None,
        }
    }
}

/// Which Runners were asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// Namespaces whose Runners were read; empty means all namespaces.
    pub namespaces: Vec<String>,
    /// A single Runner by name (then `namespaces` has exactly one entry).
    pub name: Option<String>,
}

impl Scope {
    pub fn all_namespaces(&self) -> bool {
        self.namespaces.is_empty()
    }
}

/// How long something may be mid-change before it counts as stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Deleting, catching up with a new generation, creating children, or
    /// becoming Ready may take this long before it is reported.
    pub grace: Duration,
    /// Events older than this are ignored.
    pub since: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { grace: Duration::from_secs(30), since: Duration::from_secs(3600) }
    }
}

/// The in-cluster manager, as far as it can be seen.
#[derive(Debug, Clone, Default)]
pub struct ManagerState {
    /// `runner-system/runner-controller-manager`, if it exists.
    pub deployment: Option<Deployment>,
    /// The Pods its selector matches.
    pub pods: Vec<Pod>,
    /// The leader-election Lease, if any manager ever ran with `--leader-elect`.
    pub lease: Option<Lease>,
    /// Every manager's presence Lease, leader-elected or not
    /// ([`crate::manifests::PRESENCE_LABEL`]; `manager::presence`).
    pub presences: Vec<Lease>,
}

/// One SubjectAccessReview's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct AccessCheck {
    /// "" means cluster-wide (all namespaces).
    pub namespace: String,
    pub permission: &'static Permission,
    pub verb: &'static str,
    pub allowed: bool,
    /// The authorizer's reason or evaluation error, when it gave one.
    pub reason: String,
}

/// A binding that applies to the ServiceAccount and what it grants.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    /// `RoleBinding` or `ClusterRoleBinding`.
    pub binding_kind: String,
    /// "" for a ClusterRoleBinding.
    pub binding_namespace: String,
    pub binding_name: String,
    /// `Role` or `ClusterRole`.
    pub role_kind: String,
    pub role_name: String,
    /// The role's rules; empty when the role does not exist.
    pub rules: Vec<PolicyRule>,
}

/// A Runner and what it should have made.
#[derive(Debug, Clone)]
pub struct RunnerState {
    pub runner: Runner,
    /// The same-name object of every child kind in the Runner's namespace,
    /// whoever owns it ([`crate::client::children`]).
    pub children: Children,
    /// Pods labelled with this Runner's UID.
    pub pods: Vec<Pod>,
    /// Events about this Runner (core/v1 view), newest last.
    pub events: Vec<Event>,
    /// A second look after the churn window; `None` when not sampled.
    pub resample: Option<Resample>,
    /// The writes seen while watching (`--observe`); `None` when not watched.
    pub observed: Option<Observed>,
}

/// The Runner and its children read twice, `elapsed` apart: a changed
/// resourceVersion with nothing else changed is a hot loop.
#[derive(Debug, Clone, PartialEq)]
pub struct Resample {
    pub elapsed: Duration,
    /// The Runner at the second look (`None`: gone by then).
    pub runner: Option<Runner>,
    /// The children's resourceVersions at the second look; the first look
    /// is in [`RunnerState`].
    pub children_after: Versions,
}

/// resourceVersions of a Runner's children by kind (a kind without an
/// object is absent).
pub type Versions = std::collections::BTreeMap<&'static str, String>;

impl RunnerState {
    /// The Runner's Deployment, whoever owns it, as its typed form.
    pub fn deployment(&self) -> Option<Deployment> {
        self.children.typed::<Deployment>()
    }

    /// The children's resourceVersions now, to compare with a [`Resample`].
    pub fn versions(&self) -> Versions {
        self.children
            .iter()
            .filter_map(|c| Some((c.kind.kind(), c.object.metadata.resource_version.clone()?)))
            .collect()
    }
}

/// A read that failed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// What could not be read: "list Runners in ns", "SubjectAccessReview".
    pub what: String,
    pub error: String,
}
