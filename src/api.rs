//! The `Runner` custom resource: the one source of truth for the CRD schema,
//! the bounds the CLI validates against, and the names every other module
//! (manager, CLI, diagnose, manifests) agrees on.
//!
//! Data flow: these types -> `Runner::crd()` -> `manifests/crd.yaml`; the
//! bounds and CEL rules come from [`rules`], whose checks also back
//! `RunnerSpec::validate()` on the client side, so a value the CLI accepts is
//! a value the apiserver accepts.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

pub mod conversion;
pub mod pod;
pub mod rules;
mod status;
pub mod v1alpha1;
pub use pod::{Amounts, PodSecurity, Resources};
pub use rules::{HOST_PATTERN, MAX_HOST_LEN, MAX_HOSTS, MAX_IMAGE_LEN, MAX_NAME_LEN};
pub use status::{Phase, RunnerStatus, condition};

/// API group of the Runner.
pub const GROUP: &str = "lab.cloudlab.training";
/// The storage version, the one this tool reads and writes (the hub of
/// [`conversion`]).
pub const VERSION: &str = "v1beta1";
/// `<group>/<VERSION>`.
pub const API_VERSION: &str = "lab.cloudlab.training/v1beta1";
/// Every version the CRD serves, oldest first.
pub const VERSIONS: [&str; 2] = [v1alpha1::VERSION, VERSION];
/// `<plural>.<group>`: the CRD's name.
pub const CRD_NAME: &str = "runners.lab.cloudlab.training";
/// Finalizer that holds a deleted Runner until its children are gone.
pub const FINALIZER: &str = "lab.cloudlab.training/cleanup";
/// Label on every child: the owning Runner's UID. Also the Pod selector, so a
/// Runner re-created under the same name never selects the old Pods.
pub const RUNNER_UID_LABEL: &str = "cloudlab.training/runner";
/// Server-side apply field manager used for children.
pub const FIELD_MANAGER: &str = "kubectl-runner";
/// Value of `app.kubernetes.io/managed-by` on children.
pub const MANAGED_BY: &str = "kubectl-runner";

/// Replica bounds, shared by the schema and the CLI.
pub const MIN_REPLICAS: i32 = 1;
pub const MAX_REPLICAS: i32 = 3;
pub const DEFAULT_REPLICAS: i32 = 1;
/// Port bounds, shared by the schema and the CLI.
pub const MIN_PORT: i32 = 1;
pub const MAX_PORT: i32 = 65535;
pub const DEFAULT_PORT: i32 = 80;

/// What the user declares: an image, how many replicas, and how it is
/// exposed (a port, and host names that make an Ingress).
//
// Admission refuses what could never work (see `rules`): a name that cannot
// name a Service (the root rule below), a host that is an IP address, an
// image that is no image reference or longer than `MAX_IMAGE_LEN`. Doc comments here
// become the CRD's descriptions, which `kubectl explain` shows.
//
// Each printcolumn repeats `type_`; clippy reads the derive's input as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, KubeSchema)]
#[kube(
    group = "lab.cloudlab.training",
    version = "v1beta1",
    kind = "Runner",
    plural = "runners",
    namespaced,
    shortname = "rn",
    status = "RunnerStatus",
    derive = "PartialEq",
    doc = "A Runner declares an image and a replica count; the manager makes its children of them (the CRD's description, `manifests::runner_crd`, names each).",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Image", type_ = "string", json_path = ".spec.image"),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "URL", type_ = "string", json_path = ".status.url"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = rules::name_cel()
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunnerSpec {
    /// Container image to run, e.g. `nginx:1.27` or `registry.example.com:5000/team/web@sha256:...`:
    /// an image reference of at most 512 characters.
    #[schemars(length(min = 1, max = MAX_IMAGE_LEN))]
    #[x_kube(validation = rules::image_cel())]
    pub image: String,
    /// Number of Pods, 1 to 3.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = MIN_REPLICAS, max = MAX_REPLICAS))]
    pub replicas: i32,
    /// How the Pods are reached: the port, and the host names an Ingress routes.
    #[serde(default)]
    pub expose: Expose,
    /// Optional requests and limits for cpu and memory of the container; a
    /// ResourceQuota on cpu or memory refuses Pods without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Optional Pod Security profile: `restricted` makes the Pods satisfy the
    /// restricted standard (the image must run as a non-root user). Unset,
    /// the Pods run as the image says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security: Option<PodSecurity>,
}

/// Networking, grouped in v1beta1 (v1alpha1 had `spec.port` and one
/// `spec.host`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expose {
    /// Container port the Service forwards to, 1 to 65535.
    #[serde(default = "default_port")]
    #[schemars(range(min = MIN_PORT, max = MAX_PORT))]
    pub port: i32,
    /// Optional DNS-1123 host names (not IP addresses, at most 253
    /// characters each, 1 to 16 of them, no repeats); when set, an Ingress
    /// routes each to the Service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = MAX_HOSTS))]
    #[schemars(inner(length(min = 1, max = MAX_HOST_LEN), pattern(HOST_PATTERN)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[x_kube(validation = rules::hosts_cel())]
    pub hosts: Vec<String>,
}

impl Default for Expose {
    fn default() -> Expose {
        Expose { port: DEFAULT_PORT, hosts: Vec::new() }
    }
}

fn default_replicas() -> i32 {
    DEFAULT_REPLICAS
}

fn default_port() -> i32 {
    DEFAULT_PORT
}

impl RunnerSpec {
    /// A spec for `image` with every other field at its default (the
    /// defaults the schema applies): build on it with the setters below, so
    /// a new optional field changes this one place, not every caller.
    pub fn new(image: impl Into<String>) -> RunnerSpec {
        RunnerSpec {
            image: image.into(),
            replicas: DEFAULT_REPLICAS,
            expose: Expose::default(),
            resources: None,
            pod_security: None,
        }
    }

    pub fn replicas(mut self, replicas: i32) -> RunnerSpec {
        self.replicas = replicas;
        self
    }

    pub fn port(mut self, port: i32) -> RunnerSpec {
        self.expose.port = port;
        self
    }

    /// Adds a host name (one more Ingress rule).
    pub fn host(mut self, host: impl Into<String>) -> RunnerSpec {
        self.expose.hosts.push(host.into());
        self
    }

    /// The first host name: the one `status.url` names.
    pub fn first_host(&self) -> Option<&str> {
        self.expose.hosts.first().map(String::as_str)
    }

    pub fn resources(mut self, resources: Resources) -> RunnerSpec {
        self.resources = Some(resources);
        self
    }

    pub fn pod_security(mut self, profile: PodSecurity) -> RunnerSpec {
        self.pod_security = Some(profile);
        self
    }

    /// A valid spec with every optional field set and every child kind
    /// wanted, for tests: a view or drift rule that forgets a new field
    /// then fails a test instead of writing on every pass. Add a new field
    /// here first.
    #[doc(hidden)]
    pub fn every_field() -> RunnerSpec {
        RunnerSpec {
            image: "nginx:1.27".into(),
            replicas: 2,
            expose: Expose { port: 8080, hosts: vec!["web.example.com".into(), "www.example.com".into()] },
            resources: Some(Resources {
                requests: Some(Amounts { cpu: Some("0.1".into()), memory: Some("64Mi".into()) }),
                limits: Some(Amounts { cpu: Some("500m".into()), memory: Some("128Mi".into()) }),
            }),
            pod_security: Some(PodSecurity::Restricted),
        }
    }

    /// Checks the spec against the same bounds and rules as the CRD schema
    /// ([`rules`]), so bad input fails before any request. The error names
    /// the field and the allowed range or rule.
    pub fn validate(&self) -> Result<(), String> {
        rules::check_image(&self.image)?;
        if !(MIN_REPLICAS..=MAX_REPLICAS).contains(&self.replicas) {
            return Err(format!(
                "spec.replicas: {} is out of range; allowed {MIN_REPLICAS}..={MAX_REPLICAS}",
                self.replicas
            ));
        }
        let port = self.expose.port;
        if !(MIN_PORT..=MAX_PORT).contains(&port) {
            return Err(format!("spec.expose.port: {port} is out of range; allowed {MIN_PORT}..={MAX_PORT}"));
        }
        rules::check_hosts(&self.expose.hosts)?;
        if let Some(resources) = &self.resources {
            pod::check_resources(resources)?;
        }
        Ok(())
    }
}

/// The JSON patch that removes [`FINALIZER`] and nothing else, or `None`
/// when the Runner does not carry it. It `test`s the entry at its index
/// first: when the list changed since `runner` was read, the apiserver
/// refuses the patch (422) instead of removing another controller's
/// finalizer, and the caller reads again.
pub fn remove_finalizer_patch(runner: &Runner) -> Option<json_patch::Patch> {
    use json_patch::{PatchOperation, RemoveOperation, TestOperation, jsonptr::PointerBuf};
    use kube::ResourceExt;
    let index = runner.finalizers().iter().position(|f| f == FINALIZER)?.to_string();
    let path = PointerBuf::from_tokens(["metadata", "finalizers", index.as_str()]);
    Some(json_patch::Patch(vec![
        PatchOperation::Test(TestOperation { path: path.clone(), value: FINALIZER.into() }),
        PatchOperation::Remove(RemoveOperation { path }),
    ]))
}

/// True when the status describes the current spec and says Available.
pub fn is_ready(r: &Runner) -> bool {
    let Some(st) = &r.status else { return false };
    let current = st.observed_generation >= r.metadata.generation && r.metadata.generation.is_some();
    let ready = st.conditions.iter().any(|c| c.type_ == condition::READY && c.status == "True");
    current && ready && st.phase == Phase::Available && st.ready_replicas >= r.spec.replicas
}

#[cfg(test)]
mod tests;
