//! `kubectl runner e2e` against the in-cluster manager, its Runners' Pods
//! real containers on the real node.

use k8s_openapi::api::core::v1::{Event, Namespace};
use kube::api::{Api, DeleteParams, ListParams};
use kubectl_runner::e2e::E2E_LABEL;

use crate::fixture::*;
use crate::support::{TestNs, cli, client};

#[tokio::test]
#[ignore = "needs the real node: tests/run.sh runs it when the cluster has one"]
async fn e2e_passes_against_the_in_cluster_manager_with_real_pods() {
    let image = image(IMAGE_ENV);
    let client = client().await;
    let node = real_node(&client).await;
    let ns = TestNs::new("reale2e").await;
    let _cleanup = InstalledManager { runners_ns: ns.name.clone() };
    install_manager(&client, &image, &node, &ns).await;

    let mut args: Vec<String> =
        ["e2e", "--use-running-manager", "--keep", "-o", "json", "--image", WEB_IMAGE]
            .into_iter()
            .map(String::from)
            .collect();
    args.extend(["--image-update".into(), WEB_IMAGE_V2.into()]);
    for (k, v) in real_node_annotations() {
        args.extend(["--namespace-annotation".into(), format!("{k}={v}")]);
    }
    let out = cli(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("a JSON report ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr))
    });
    let e2e_ns = report["namespace"].as_str().expect("the report names its namespace").to_string();
    let _e2e_ns = KeptNamespace(e2e_ns.clone());
    assert_eq!(out.status.code(), Some(0), "e2e passed:\n{stdout}");
    let steps = report["steps"].as_array().expect("steps");
    assert!(steps.len() > 3 && steps.iter().all(|s| s["ok"] == true), "{stdout}");

    // Its Pods were real containers: the real node's kubelet started them.
    let events: Api<Event> = Api::namespaced(client.clone(), &e2e_ns);
    let started: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("list e2e events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Started"))
        .filter(|e| e.source.as_ref().and_then(|s| s.host.as_deref()) == Some(node.as_str()))
        .filter_map(|e| e.involved_object.name)
        .collect();
    assert!(started.len() >= 3, "containers started by the real node's kubelet: {started:?}");
}

/// The namespace e2e kept (`--keep`, to look at its Pods): its Runners are
/// deleted while the manager still runs, then the namespace.
struct KeptNamespace(String);

impl Drop for KeptNamespace {
    fn drop(&mut self) {
        let ns = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let client = client().await;
                delete_runners_and_wait(&client, &ns).await;
                let namespaces: Api<Namespace> = Api::all(client);
                if let Ok(n) = namespaces.get(&ns).await
                    && n.metadata.labels.is_some_and(|l| l.contains_key(E2E_LABEL))
                {
                    let _ = namespaces.delete(&ns, &DeleteParams::background()).await;
                }
            });
        })
        .join();
    }
}
