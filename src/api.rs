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

pub mod pod;
pub mod rules;
mod status;
pub use pod::{Amounts, PodSecurity, Resources};
pub use rules::{HOST_PATTERN, MAX_HOST_LEN, MAX_IMAGE_LEN, MAX_NAME_LEN};
pub use status::{Phase, RunnerStatus, condition};

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

/// What the user declares: an image, how many replicas, which port, and an
/// optional host that makes an Ingress.
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
    version = "v1alpha1",
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
    /// Container port the Service forwards to, 1 to 65535.
    #[serde(default = "default_port")]
    #[schemars(range(min = MIN_PORT, max = MAX_PORT))]
    pub port: i32,
    /// Optional DNS-1123 host name (not an IP address, at most 253 characters);
    /// when set, an Ingress routes it to the Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_HOST_LEN))]
    #[schemars(pattern(HOST_PATTERN))]
    #[x_kube(validation = rules::host_cel())]
    pub host: Option<String>,
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
            port: DEFAULT_PORT,
            host: None,
            resources: None,
            pod_security: None,
        }
    }

    pub fn replicas(mut self, replicas: i32) -> RunnerSpec {
        self.replicas = replicas;
        self
    }

    pub fn port(mut self, port: i32) -> RunnerSpec {
        self.port = port;
        self
    }

    pub fn host(mut self, host: impl Into<String>) -> RunnerSpec {
        self.host = Some(host.into());
        self
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
            port: 8080,
            host: Some("web.example.com".into()),
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
        if !(MIN_PORT..=MAX_PORT).contains(&self.port) {
            return Err(format!("spec.port: {} is out of range; allowed {MIN_PORT}..={MAX_PORT}", self.port));
        }
        if let Some(host) = &self.host {
            rules::check_host(host)?;
        }
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
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    fn spec() -> RunnerSpec {
        RunnerSpec::new("nginx")
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
        assert_eq!(num(&props["image"]["maxLength"]), MAX_IMAGE_LEN as f64);
        assert_eq!(num(&props["host"]["maxLength"]), MAX_HOST_LEN as f64);
        assert_eq!(props["host"]["pattern"], HOST_PATTERN);
        // What `kubectl explain` shows states the same bounds.
        let says =
            |field: &str, bound: usize| props[field]["description"].to_string().contains(&bound.to_string());
        assert!(says("image", MAX_IMAGE_LEN) && says("host", MAX_HOST_LEN));
        assert_eq!(spec["required"], serde_json::json!(["image"]));
    }

    #[test]
    fn the_finalizer_patch_tests_and_removes_only_our_entry() {
        let mut r = Runner::new("web", spec());
        r.metadata.finalizers = Some(vec!["a.io/keep".into(), FINALIZER.into(), "b.io/keep".into()]);
        let patch = serde_json::to_value(remove_finalizer_patch(&r).unwrap()).unwrap();
        let path = "/metadata/finalizers/1";
        assert_eq!(
            patch,
            serde_json::json!([{ "op": "test", "path": path, "value": FINALIZER }, { "op": "remove", "path": path }])
        );
        let mut doc = serde_json::to_value(&r).unwrap();
        json_patch::patch(&mut doc, &remove_finalizer_patch(&r).unwrap()).unwrap();
        assert_eq!(doc["metadata"]["finalizers"], serde_json::json!(["a.io/keep", "b.io/keep"]));
        r.metadata.finalizers = Some(vec!["a.io/keep".into()]);
        assert!(remove_finalizer_patch(&r).is_none());
    }

    #[test]
    fn the_finalizer_patch_fails_when_the_list_moved() {
        let mut r = Runner::new("web", spec());
        r.metadata.finalizers = Some(vec!["a.io/keep".into(), FINALIZER.into()]);
        let patch = remove_finalizer_patch(&r).unwrap();
        let mut moved = serde_json::to_value(&r).unwrap();
        moved["metadata"]["finalizers"] = serde_json::json!([FINALIZER, "a.io/keep"]);
        assert!(json_patch::patch(&mut moved, &patch).is_err());
        assert_eq!(moved["metadata"]["finalizers"], serde_json::json!([FINALIZER, "a.io/keep"]));
    }

    /// The rules as the apiserver will read them, from the generated CRD.
    fn cel_rules(crd: &serde_json::Value, at: &[&str]) -> Vec<serde_json::Value> {
        let mut node = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        for key in at {
            node = &node["properties"][*key];
        }
        node["x-kubernetes-validations"].as_array().cloned().unwrap_or_default()
    }

    #[test]
    fn the_crd_checks_the_name_at_the_root_on_create_only() {
        let crd = serde_json::to_value(Runner::crd()).unwrap();
        let root = cel_rules(&crd, &[]);
        assert_eq!(root.len(), 1, "{root:?}");
        let rule = root[0]["rule"].as_str().unwrap();
        assert!(rule.contains("self.metadata.name") && rule.contains(rules::NAME_PATTERN), "{rule}");
        assert!(rule.contains(&format!("size(self.metadata.name) <= {MAX_NAME_LEN}")), "{rule}");
        assert_eq!(root[0]["optionalOldSelf"], true);
        let msg = root[0]["message"].as_str().unwrap();
        assert!(msg.starts_with("metadata.name must be a DNS-1035 label of at most 63 characters"), "{msg}");
    }

    #[test]
    fn the_crd_refuses_ip_hosts_and_images_that_are_not_references() {
        let crd = serde_json::to_value(Runner::crd()).unwrap();
        let host = cel_rules(&crd, &["spec", "host"]);
        assert_eq!(host.len(), 1, "{host:?}");
        assert_eq!(host[0]["rule"], format!("!self.matches(r'{}')", rules::IPV4_PATTERN));
        assert_eq!(host[0]["message"], rules::HOST_NOT_IP);
        let image = cel_rules(&crd, &["spec", "image"]);
        assert_eq!(image.len(), 1, "{image:?}");
        let rule = image[0]["rule"].as_str().unwrap();
        assert!(rule.ends_with(&format!("self.matches(r'{}')", rules::IMAGE_PATTERN)), "{rule}");
        assert_eq!(image[0]["optionalOldSelf"], true);
        assert_eq!(image[0]["message"], rules::IMAGE_NOT_A_REFERENCE);
        assert!(cel_rules(&crd, &["spec"]).is_empty() && cel_rules(&crd, &["spec", "port"]).is_empty());
    }

    #[test]
    fn spec_validate_gives_the_schema_refusals_with_the_field() {
        let cases = [
            (RunnerSpec { image: "a".repeat(MAX_IMAGE_LEN + 1), ..spec() }, "spec.image: 513 characters"),
            (
                RunnerSpec { image: "nginx 1.27".into(), ..spec() },
                "spec.image: \"nginx 1.27\" must be an image reference",
            ),
            (
                RunnerSpec { host: Some("10.0.0.1".into()), ..spec() },
                "spec.host: \"10.0.0.1\" must be a DNS name",
            ),
        ];
        for (s, want) in cases {
            let err = s.validate().unwrap_err();
            assert!(err.starts_with(want), "{err}");
        }
        assert_eq!(RunnerSpec { image: "a".repeat(MAX_IMAGE_LEN), ..spec() }.validate(), Ok(()));
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
