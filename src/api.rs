//! The `Runner` custom resource: the one source of truth for the CRD schema,
//! the bounds the CLI validates against, and the names every other module
//! (manager, CLI, diagnose, manifests) agrees on.
//!
//! Data flow: these types -> `Runner::crd()` -> `manifests/crd.yaml`; the same
//! constants bound `RunnerSpec::validate()` on the client side, so a value the
//! CLI accepts is a value the apiserver accepts.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of the Runner.
pub const GROUP: &str = "lab.cloudlab.training";
/// Served and stored version.
pub const VERSION: &str = "v1alpha1";
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
/// Longest DNS-1123 subdomain.
pub const MAX_HOST_LEN: usize = 253;
/// DNS-1123 subdomain, as Kubernetes' own validation spells it.
pub const HOST_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// What the user declares: an image, how many replicas, which port, and an
/// optional host that makes an Ingress.
// Each printcolumn repeats `type_`; clippy reads the derive's input as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[kube(
    group = "lab.cloudlab.training",
    version = "v1alpha1",
    kind = "Runner",
    plural = "runners",
    namespaced,
    shortname = "rn",
    status = "RunnerStatus",
    derive = "PartialEq",
    doc = "A Runner declares an image and a replica count; the manager makes a Deployment, a Service and, with a host, an Ingress.",
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
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunnerSpec {
    /// Container image to run, e.g. `nginx:1.27`.
    #[schemars(length(min = 1))]
    pub image: String,
    /// Number of Pods, 1 to 3.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = MIN_REPLICAS, max = MAX_REPLICAS))]
    pub replicas: i32,
    /// Container port the Service forwards to, 1 to 65535.
    #[serde(default = "default_port")]
    #[schemars(range(min = MIN_PORT, max = MAX_PORT))]
    pub port: i32,
    /// Optional DNS-1123 host name; when set, an Ingress routes it to the Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_HOST_LEN))]
    #[schemars(pattern(HOST_PATTERN))]
    pub host: Option<String>,
}

fn default_replicas() -> i32 {
    DEFAULT_REPLICAS
}

fn default_port() -> i32 {
    DEFAULT_PORT
}

/// Coarse lifecycle of a Runner, as the `Phase` column shows it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default, JsonSchema)]
pub enum Phase {
    #[default]
    Pending,
    Progressing,
    Available,
    Failed,
    Terminating,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Phase::Pending => "Pending",
            Phase::Progressing => "Progressing",
            Phase::Available => "Available",
            Phase::Failed => "Failed",
            Phase::Terminating => "Terminating",
        };
        f.write_str(s)
    }
}

/// What the manager observed. Written only through the status subresource.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerStatus {
    /// The generation this status describes; behind `metadata.generation`
    /// means the manager has not caught up with the latest spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods the Deployment has (for the scale subresource).
    #[serde(default)]
    pub replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default)]
    pub updated_replicas: i32,
    #[serde(default)]
    pub available_replicas: i32,
    #[serde(default)]
    pub phase: Phase,
    /// `http://<host>` with an Ingress, else the in-cluster Service URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A sentence for humans: "2/3 replicas ready", or a Pod's waiting reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Label selector of the Pods, as a string (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// `Ready`, and `ChildrenOwned` (reason `AdoptionRefused` when a same-name
    /// object belongs to someone else). Keyed by `type`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Condition types the manager writes.
pub mod condition {
    /// True when every desired replica of the current revision is available.
    pub const READY: &str = "Ready";
    /// False with reason `AdoptionRefused` when a child's name is taken.
    pub const CHILDREN_OWNED: &str = "ChildrenOwned";
    pub const REASON_ADOPTION_REFUSED: &str = "AdoptionRefused";
    /// Ready is False with this reason when the apiserver refuses a child.
    pub const REASON_CHILD_REJECTED: &str = "ChildRejected";
}

impl RunnerSpec {
    /// Checks the spec against the same bounds as the CRD schema, so bad
    /// input fails before any request. The error names the field and range.
    pub fn validate(&self) -> Result<(), String> {
        if self.image.trim().is_empty() {
            return Err("spec.image: must not be empty".into());
        }
        if !(MIN_REPLICAS..=MAX_REPLICAS).contains(&self.replicas) {
            return Err(format!(
                "spec.replicas: {} is out of range; allowed {MIN_REPLICAS}..={MAX_REPLICAS}",
                self.replicas
            ));
        }
        if !(MIN_PORT..=MAX_PORT).contains(&self.port) {
            return Err(format!("spec.port: {} is out of range; allowed {MIN_PORT}..={MAX_PORT}", self.port));
        }
        if let Some(host) = &self.host {
            validate_host(host)?;
        }
        Ok(())
    }
}

/// DNS-1123 subdomain check without a regex engine: lowercase alphanumerics
/// and '-', dot-separated labels that start and end alphanumeric.
pub fn validate_host(host: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "spec.host: {host:?} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', \
             each label starting and ending with a letter or digit, at most {MAX_HOST_LEN} characters)"
        )
    };
    if host.is_empty() || host.len() > MAX_HOST_LEN {
        return Err(bad());
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    if host.split('.').all(label_ok) { Ok(()) } else { Err(bad()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    fn spec() -> RunnerSpec {
        RunnerSpec { image: "nginx".into(), replicas: 1, port: 80, host: None }
    }

    #[test]
    fn a_valid_spec_passes() {
        assert_eq!(spec().validate(), Ok(()));
    }

    #[test]
    fn replicas_outside_one_to_three_names_the_field_and_range() {
        for r in [0, 4, -1] {
            let err = RunnerSpec { replicas: r, ..spec() }.validate().unwrap_err();
            assert!(err.contains("spec.replicas") && err.contains("1..=3"), "{err}");
        }
    }

    #[test]
    fn port_outside_range_is_rejected() {
        let err = RunnerSpec { port: 70000, ..spec() }.validate().unwrap_err();
        assert!(err.contains("spec.port") && err.contains("65535"), "{err}");
    }

    #[test]
    fn host_must_be_a_dns_subdomain() {
        for ok in ["a.example.com", "x", "a-b.c1"] {
            assert!(validate_host(ok).is_ok(), "{ok}");
        }
        for bad in ["", "A.com", "-a.com", "a..b", "a_b", "a.", &"a".repeat(254)] {
            assert!(validate_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn host_pattern_in_the_schema_is_the_shared_constant() {
        let crd = serde_json::to_string(&Runner::crd()).unwrap();
        let escaped = serde_json::to_string(HOST_PATTERN).unwrap();
        assert!(crd.contains(escaped.trim_matches('"')));
    }

    #[test]
    fn schema_bounds_match_the_shared_constants() {
        let crd = serde_json::to_value(Runner::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let props = &spec["properties"];
        let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
        assert_eq!(num(&props["replicas"]["minimum"]), f64::from(MIN_REPLICAS));
        assert_eq!(num(&props["replicas"]["maximum"]), f64::from(MAX_REPLICAS));
        assert_eq!(num(&props["replicas"]["default"]), f64::from(DEFAULT_REPLICAS));
        assert_eq!(num(&props["port"]["minimum"]), f64::from(MIN_PORT));
        assert_eq!(num(&props["port"]["maximum"]), f64::from(MAX_PORT));
        assert_eq!(num(&props["port"]["default"]), f64::from(DEFAULT_PORT));
        assert_eq!(num(&props["image"]["minLength"]), 1.0);
        assert_eq!(spec["required"], serde_json::json!(["image"]));
    }

    #[test]
    fn conditions_are_a_list_map_keyed_by_type() {
        let crd = serde_json::to_value(Runner::crd()).unwrap();
        let c = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
            ["conditions"];
        assert_eq!(c["x-kubernetes-list-type"], "map");
        assert_eq!(c["x-kubernetes-list-map-keys"], serde_json::json!(["type"]));
    }
}
