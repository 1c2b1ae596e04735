//! kind-image-test.sh's cluster-agnostic steps (scripts/in-cluster-check.sh:
//! install from manifests/, `auth can-i` as the ServiceAccount, a sample
//! Runner to Ready, cleanup) on the real node, with the image under test.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kubectl_runner::api::{CRD_NAME, Runner};
use kubectl_runner::manifests::MANAGER_NAMESPACE;

use crate::fixture::*;
use crate::support::{TestNs, client, wait_for};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

#[tokio::test]
#[ignore = "needs the real node: tests/run.sh runs it when the cluster has one"]
async fn the_kind_image_test_steps_pass_on_the_real_node_and_leave_nothing_behind() {
    let image = image(IMAGE_ENV);
    let client = client().await;
    real_node(&client).await;
    let ns = TestNs::new("realcheck").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    wait_for("no manager namespace from an earlier test", Duration::from_secs(120), || {
        let namespaces = namespaces.clone();
        async move { namespaces.get_opt(MANAGER_NAMESPACE).await.ok()?.is_none().then_some(()) }
    })
    .await;
    send_pods_to_the_real_node(&client, MANAGER_NAMESPACE).await;
    send_pods_to_the_real_node(&client, &ns.name).await;

    let bin = std::process::Command::new("bash")
        .arg(format!("{REPO}/tests/cluster/build.sh"))
        .output()
        .expect("tests/cluster/build.sh prints the binary cache");
    let bin = String::from_utf8_lossy(&bin.stdout).lines().last().unwrap_or_default().trim().to_string();
    let (ns_name, image) = (ns.name.clone(), image.clone());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("bash")
            .arg(format!("{REPO}/scripts/in-cluster-check.sh"))
            .env("IMG", image)
            .env("KUBECTL", format!("{bin}/kubectl"))
            .env("SAMPLE_IMAGE", WEB_IMAGE)
            .env("SAMPLE_PORT", WEB_PORT.to_string())
            .env("SAMPLE_NAMESPACE", ns_name)
            .env("TIMEOUT", "120")
            .output()
            .expect("run scripts/in-cluster-check.sh")
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "in-cluster-check.sh failed:\n{stderr}");
    assert!(stderr.contains("in-cluster check passed"), "{stderr}");

    // Cleaned up: the sample Runner is gone, and the CRD only when no other
    // Runner was left.
    let runners: Api<Runner> = ns.api();
    let left = match runners.list(&Default::default()).await {
        Ok(l) => l.items.len(),
        Err(_) => 0, // the CRD is gone, and with it every Runner
    };
    assert_eq!(left, 0, "the sample Runner was deleted");
    let others = Api::<Runner>::all(client.clone()).list(&Default::default()).await.map(|l| l.items.len());
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get_opt(CRD_NAME).await.expect("get CRD");
    match others {
        Ok(n) if n > 0 => assert!(crd.is_some(), "the CRD stays while {n} other Runner(s) exist"),
        _ => {
            assert!(crd.is_none() || crd.is_some_and(|c| c.metadata.deletion_timestamp.is_some()), "{stderr}")
        }
    }
}
