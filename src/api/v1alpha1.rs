//! `lab.cloudlab.training/v1alpha1`: the Runner's first version, still
//! served so manifests written for it apply and converge. Nothing in the
//! tool reads or writes it any more: the apiserver converts it to and from
//! the storage version through the manager's webhook
//! (`api::conversion`). Only its schema is used, to build the CRD; it
//! must keep admitting what it admitted (a stored v1alpha1 manifest that
//! stops applying is a broken upgrade), so change it only to loosen.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::{
    DEFAULT_PORT, DEFAULT_REPLICAS, HOST_PATTERN, MAX_HOST_LEN, MAX_IMAGE_LEN, MAX_PORT, MAX_REPLICAS,
};
use super::{MIN_PORT, MIN_REPLICAS, PodSecurity, Resources, RunnerStatus, rules};

/// This version's name.
pub const VERSION: &str = "v1alpha1";

/// What a user declared in the first version: networking is one `port` and
/// an optional `host`.
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
    doc = "A Runner declares an image and a replica count; the manager makes its children of them.",
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
    /// Container image to run, e.g. `nginx:1.27`: an image reference of at
    /// most 512 characters.
    #[schemars(length(min = 1, max = MAX_IMAGE_LEN))]
    #[x_kube(validation = rules::image_cel())]
    pub image: String,
    /// Number of Pods, 1 to 3.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = MIN_REPLICAS, max = MAX_REPLICAS))]
    pub replicas: i32,
    /// Container port the Service forwards to, 1 to 65535
    /// (`spec.expose.port` in v1beta1).
    #[serde(default = "default_port")]
    #[schemars(range(min = MIN_PORT, max = MAX_PORT))]
    pub port: i32,
    /// Optional DNS-1123 host name (not an IP address, at most 253
    /// characters); when set, an Ingress routes it to the Service. v1beta1
    /// holds several (`spec.expose.hosts`); read as v1alpha1, this is the
    /// first and the annotation `lab.cloudlab.training/more-hosts` keeps the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_HOST_LEN))]
    #[schemars(pattern(HOST_PATTERN))]
    #[x_kube(validation = rules::host_cel())]
    pub host: Option<String>,
    /// Optional requests and limits for cpu and memory of the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Optional Pod Security profile (`restricted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security: Option<PodSecurity>,
}

fn default_replicas() -> i32 {
    DEFAULT_REPLICAS
}

fn default_port() -> i32 {
    DEFAULT_PORT
}
