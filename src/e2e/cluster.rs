//! Which cluster e2e runs on, for the report, and the one way a kind
//! cluster commonly fails it: the test image is not on the node (kind's
//! nodes pull from registries, and an image built locally is only there
//! after `kind load docker-image`). A Pod that cannot get its image fails
//! the step at once, naming the fix, instead of waiting out the timeout.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams};
use serde::Serialize;

/// The cluster as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cluster {
    /// The kubeconfig context e2e used.
    pub context: String,
    /// The kind cluster's name, when its nodes say kind made them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

impl Cluster {
    /// Reads one Node's providerID; a refused or failed read leaves only
    /// the context (the report still says where it ran).
    pub async fn detect(client: &Client, context: &str) -> Cluster {
        let nodes: Api<Node> = Api::all(client.clone());
        let kind = nodes
            .list(&ListParams::default().limit(1))
            .await
            .ok()
            .and_then(|l| l.items.into_iter().next())
            .and_then(|n| n.spec?.provider_id)
            .and_then(|id| kind_cluster(&id));
        Cluster { context: context.to_string(), kind }
    }
}

/// The cluster name in a kind node's providerID,
/// `kind://<provider>/<cluster>/<node>`.
pub fn kind_cluster(provider_id: &str) -> Option<String> {
    let mut parts = provider_id.strip_prefix("kind://")?.split('/');
    let (_provider, cluster) = (parts.next()?, parts.next()?);
    (!cluster.is_empty()).then(|| cluster.to_string())
}

/// Why a container waits when its image cannot be had, after the first
/// attempt (a single ErrImagePull may be a registry's hiccup).
const NO_IMAGE: [&str; 3] = ["ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"];

/// A failure for the first Pod in `ns` whose container cannot get its
/// image; None while every image is there or still coming. A refused read
/// is None too: the step's own wait then decides.
pub async fn missing_image(client: &Client, ns: &str, cluster: &Cluster) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = pods.list(&ListParams::default()).await.ok()?;
    list.items.iter().find_map(|p| {
        let statuses = p.status.as_ref()?.container_statuses.as_ref()?;
        statuses.iter().find_map(|s| {
            let waiting = s.state.as_ref()?.waiting.as_ref()?;
            let reason = waiting.reason.as_deref().filter(|r| NO_IMAGE.contains(r))?;
            Some(no_image_message(
                p.metadata.name.as_deref().unwrap_or_default(),
                &s.image,
                reason,
                cluster.kind.as_deref(),
            ))
        })
    })
}

/// One line: what failed, and on kind, the command that puts the image
/// there. Cluster data, raw: the CLI escapes step details when it prints them.
pub fn no_image_message(pod: &str, image: &str, reason: &str, kind: Option<&str>) -> String {
    let mut m = format!("Pod {pod} cannot get image {image} ({reason})");
    match kind {
        Some(name) => m.push_str(&format!(
            "; the kind node does not have it: `kind load docker-image {image} --name {name}`, or pass a pullable --image"
        )),
        None => m.push_str("; make it pullable by the nodes, or pass another --image"),
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_cluster_is_read_from_a_kind_provider_id_only() {
        assert_eq!(
            kind_cluster("kind://docker/handbook-lab/handbook-lab-control-plane"),
            Some("handbook-lab".into())
        );
        assert_eq!(kind_cluster("kind://podman/x/x-worker"), Some("x".into()));
        assert_eq!(kind_cluster("kind://docker//n"), None);
        assert_eq!(kind_cluster("aws:///eu-west-1a/i-0abc"), None);
        assert_eq!(kind_cluster(""), None);
    }

    #[test]
    fn a_missing_image_on_kind_names_kind_load_with_the_cluster() {
        let m = no_image_message("web-1", "localhost/app:2", "ErrImageNeverPull", Some("lab"));
        assert_eq!(
            m,
            "Pod web-1 cannot get image localhost/app:2 (ErrImageNeverPull); the kind node does not have it: \
             `kind load docker-image localhost/app:2 --name lab`, or pass a pullable --image"
        );
        let other = no_image_message("web-1", "app:2", "ImagePullBackOff", None);
        assert!(!other.contains("kind load"), "{other}");
    }
}
