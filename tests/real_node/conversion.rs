//! The manager's image serves the CRD's conversion to the apiserver
//! through its Service, with the certificate it made itself.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kubectl_runner::api::{CRD_NAME, GROUP, Runner};
use kubectl_runner::manifests::MANAGER_NAMESPACE;
use kubectl_runner::webhook::{SECRET, secret};
use serde_json::json;

use crate::fixture::*;
use crate::support::{TestNs, client, wait_for};

#[tokio::test]
#[ignore = "needs the real node: tests/run.sh runs it when the cluster has one"]
async fn the_manager_image_converts_old_runners_for_the_apiserver_through_its_service() {
    let image = image(IMAGE_ENV);
    let client = client().await;
    let node = real_node(&client).await;
    let ns = TestNs::new("realconv").await;
    let _cleanup = InstalledManager { runners_ns: ns.name.clone() };
    let (_pod, to_ready) = install_manager(&client, &image, &node, &ns).await;
    let ready_at = Instant::now();

    // The manager filled the Secret install created empty, and the CRD
    // trusts its CA.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait_for("the CRD's caBundle to be the Secret's CA", Duration::from_secs(60), || {
        let (secrets, crds) = (secrets.clone(), crds.clone());
        async move {
            let m = secret::material(secrets.get(SECRET).await.ok()?.data.as_ref());
            let cc = crds.get(CRD_NAME).await.ok()?.spec.conversion?.webhook?.client_config?;
            let svc = cc.service?;
            let ok =
                svc.name == "runner-webhook" && svc.namespace == MANAGER_NAMESPACE && !m.ca_crt.is_empty();
            (ok && cc.ca_bundle?.0 == m.ca_crt.as_bytes()).then_some(())
        }
    })
    .await;

    // A v1alpha1 Runner goes in through the webhook and reads as v1beta1.
    let gvk = GroupVersionKind::gvk(GROUP, "v1alpha1", "Runner");
    let old: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns.name, &ApiResource::from_gvk_with_plural(&gvk, "runners"));
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Runner",
        "metadata": { "name": "old" },
        "spec": { "image": WEB_IMAGE, "port": WEB_PORT, "host": "old.example" },
    }))
    .unwrap();
    wait_for("a v1alpha1 Runner created through the Service", Duration::from_secs(60), || {
        let (old, obj) = (old.clone(), obj.clone());
        async move { old.create(&PostParams::default(), &obj).await.ok() }
    })
    .await;
    eprintln!(
        "manager Ready {:.1} s after install; first conversion through the Service {} ms after Ready",
        to_ready.as_secs_f64(),
        ready_at.elapsed().as_millis()
    );
    let new: Runner = ns.api::<Runner>().get("old").await.expect("read as v1beta1");
    assert_eq!(new.spec.expose.port, WEB_PORT);
    assert_eq!(new.spec.expose.hosts, ["old.example"]);
    let back = old.get("old").await.expect("read back as v1alpha1");
    assert_eq!(back.data["spec"]["port"], WEB_PORT);
    assert_eq!(back.data["spec"]["host"], "old.example");
    let listed = old.list(&Default::default()).await.expect("a list of v1alpha1 Runners, converted");
    assert_eq!(listed.items.len(), 1);
}
