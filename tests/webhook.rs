//! The conversion webhook against the real control plane: the apiserver
//! posts ConversionReviews to a manager running in this process on the
//! loopback (a URL target: the keeper driven directly), the certificates live in the test
//! namespace's Secret, and the CRD's caBundle follows them.
//!
//! The CRD is cluster-wide: the tests here take turns (one lock) and put
//! its conversion back as `ensure_crd` left it, also when they fail.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kubectl_runner::api::{CRD_NAME, GROUP, Runner};
use kubectl_runner::manager::Config;
use kubectl_runner::manager::webhook::WebhookConfig;
use kubectl_runner::webhook::certs::{self, LIFETIMES, Material};
use kubectl_runner::webhook::{SECRET, Target, secret};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::json;
use support::{ManagerHandle, PutBackRegistrations, TestNs, ensure_crd, free_loopback_addr, wait_for};

const T: Duration = Duration::from_secs(60);
static CRD_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Serves every version, as `install --with-manager` does: only once the
/// CRD converts through the webhook. Before, an old object would be taken
/// in with no conversion and lose the fields that moved.
async fn serve_all_versions(client: &kube::Client) {
    let mut crd = kubectl_runner::manifests::runner_crd();
    crd.spec.versions.iter_mut().for_each(|v| v.served = true);
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(CRD_NAME, &PatchParams::apply("kubectl-runner-tests").force(), &Patch::Apply(&crd))
        .await
        .expect("serve every version");
}

fn webhook_config(ns: &str, listen: SocketAddr, target: Target) -> Config {
    let mut cfg = Config::namespaced(ns);
    cfg.lease_namespace = ns.into();
    cfg.webhook = Some(WebhookConfig { listen, target, namespace: ns.into() });
    cfg
}

async fn material(ns: &TestNs) -> Option<Material> {
    let s = ns.api::<Secret>().get_opt(SECRET).await.ok()??;
    let m = secret::material(s.data.as_ref());
    (!m.tls_crt.is_empty()).then_some(m)
}

async fn crd_bundle(client: &kube::Client) -> Option<String> {
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(CRD_NAME).await.ok()?;
    let b = crd.spec.conversion?.webhook?.client_config?.ca_bundle?;
    String::from_utf8(b.0).ok()
}

/// The certificate served on `addr`, verified against `ca_pem` for `name`.
async fn served_cert(addr: SocketAddr, name: &str, ca_pem: &str) -> Option<Vec<u8>> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.ok()?).ok()?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let name = ServerName::try_from(name.to_string()).ok()?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg)).connect(name, tcp).await.ok()?;
    Some(tls.get_ref().1.peer_certificates()?.first()?.to_vec())
}

fn first_der(pem: &str) -> Vec<u8> {
    certs::parse_pem_certs(pem).remove(0).der
}

fn v1alpha1(ns: &TestNs) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, "v1alpha1", "Runner");
    Api::namespaced_with(ns.client.clone(), &ns.name, &ApiResource::from_gvk_with_plural(&gvk, "runners"))
}

#[tokio::test]
async fn the_apiserver_converts_through_the_managers_webhook_and_follows_a_renewal() {
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("webhook").await;
    ensure_crd(&ns.client).await;
    let _restore = PutBackRegistrations::guarded(&ns.client).await;
    let listen = free_loopback_addr();
    let url = format!("https://{listen}/convert");
    let started = Instant::now();
    let manager =
        ManagerHandle::start_with(&ns.client, webhook_config(&ns.name, listen, Target::Url(url.clone())));
    wait_for("the manager to point the CRD at its URL", T, || {
        let crds = Api::<CustomResourceDefinition>::all(ns.client.clone());
        let url = url.clone();
        async move {
            let cc = crds.get(CRD_NAME).await.ok()?.spec.conversion?.webhook?.client_config?;
            (cc.url.as_deref() == Some(url.as_str()) && cc.ca_bundle.is_some()).then_some(())
        }
    })
    .await;
    serve_all_versions(&ns.client).await;

    // A v1alpha1 Runner is stored as v1beta1: the apiserver converts it.
    let old = v1alpha1(&ns);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Runner",
        "metadata": { "name": "old" },
        "spec": { "image": "nginx:1.27", "port": 8081, "host": "old.example" },
    }))
    .unwrap();
    wait_for("a v1alpha1 Runner created through the webhook", T, || {
        let (old, obj) = (old.clone(), obj.clone());
        async move { old.create(&PostParams::default(), &obj).await.ok() }
    })
    .await;
    eprintln!(
        "first conversion through the apiserver {} ms after the manager started",
        started.elapsed().as_millis()
    );

    let new: Runner = ns.api::<Runner>().get("old").await.expect("read as v1beta1");
    assert_eq!(new.spec.expose.port, 8081);
    assert_eq!(new.spec.expose.hosts, ["old.example"]);
    let back = old.get("old").await.expect("read back as v1alpha1");
    assert_eq!(back.data["spec"]["port"], 8081);
    assert_eq!(back.data["spec"]["host"], "old.example");

    // The Secret holds what the CRD trusts, and what is served.
    let m = material(&ns).await.expect("the Secret filled");
    assert_eq!(crd_bundle(&ns.client).await.as_deref(), Some(m.ca_crt.as_str()));
    let crd = Api::<CustomResourceDefinition>::all(ns.client.clone()).get(CRD_NAME).await.unwrap();
    let cc = crd.spec.conversion.unwrap().webhook.unwrap().client_config.unwrap();
    assert_eq!(cc.url.as_deref(), Some(url.as_str()));
    let served = served_cert(listen, "127.0.0.1", &m.ca_crt).await.expect("a certificate the CA vouches for");
    assert_eq!(served, first_der(&m.tls_crt));

    // Another replica renews (a fresh CA and certificate): this one serves
    // them, and the CRD trusts the new CA, without a restart.
    let mut names = kubectl_runner::webhook::service_dns_names(&ns.name);
    names.push("127.0.0.1".into());
    let fresh = certs::plan(k8s_openapi::jiff::Timestamp::now(), &Material::default(), &names, &LIFETIMES);
    let renewed = certs::carry_out(
        &fresh,
        k8s_openapi::jiff::Timestamp::now(),
        &Material::default(),
        &names,
        &LIFETIMES,
    )
    .unwrap();
    let mut s = ns.api::<Secret>().get(SECRET).await.unwrap();
    s.data = Some(secret::data(&renewed));
    ns.api::<Secret>().replace(SECRET, &PostParams::default(), &s).await.expect("renew as another replica");
    let renewed_at = Instant::now();
    let now_served = wait_for("the renewed CA served and trusted", T, || {
        let (client, ca) = (ns.client.clone(), renewed.ca_crt.clone());
        async move {
            (crd_bundle(&client).await.as_deref() == Some(ca.as_str())).then_some(())?;
            served_cert(listen, "127.0.0.1", &ca).await
        }
    })
    .await;
    eprintln!("renewal by another replica served and trusted after {} ms", renewed_at.elapsed().as_millis());
    assert_eq!(now_served, first_der(&renewed.tls_crt), "the renewal, as written");
    assert_ne!(now_served, served);
    wait_for("a conversion with the renewed certificate", T, || {
        let old = old.clone();
        async move { old.get("old").await.ok() }
    })
    .await;

    manager.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn two_managers_starting_at_once_end_with_one_secret_and_a_ca_bundle_that_matches_it() {
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("webhook2").await;
    ensure_crd(&ns.client).await;
    let _restore = PutBackRegistrations::guarded(&ns.client).await;
    // As install --with-manager: converted through the Service, no caBundle.
    let service = Target::Service { namespace: ns.name.clone() };
    let stanza = json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": CRD_NAME },
        "spec": { "conversion": kubectl_runner::manifests::conversion(&service, None) } });
    Api::<CustomResourceDefinition>::all(ns.client.clone())
        // A field manager of its own: under ensure_crd's, this partial apply
        // would drop every other field that manager set.
        .patch(
            CRD_NAME,
            &PatchParams::apply("kubectl-runner-tests-conversion").force(),
            &Patch::Apply(&stanza),
        )
        .await
        .expect("point the CRD at the Service");
    serve_all_versions(&ns.client).await;

    let (a, b) = (free_loopback_addr(), free_loopback_addr());
    let first = ManagerHandle::start_with(&ns.client, webhook_config(&ns.name, a, service.clone()));
    let second = ManagerHandle::start_with(&ns.client, webhook_config(&ns.name, b, service.clone()));
    let name = format!("runner-webhook.{}.svc", ns.name);
    let m = wait_for("both managers serving what the Secret holds, the CRD trusting it", T, || {
        let (ns, name) = (&ns, name.clone());
        async move {
            let m = material(ns).await?;
            (crd_bundle(&ns.client).await.as_deref() == Some(m.ca_crt.as_str())).then_some(())?;
            let want = first_der(&m.tls_crt);
            (served_cert(a, &name, &m.ca_crt).await? == want).then_some(())?;
            (served_cert(b, &name, &m.ca_crt).await? == want).then_some(m)
        }
    })
    .await;
    // One CA, one certificate: the loser of the first write kept the winner's.
    assert_eq!(certs::parse_pem_certs(&m.ca_crt).len(), 1);
    let rv = ns.api::<Secret>().get(SECRET).await.unwrap().metadata.resource_version;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = ns.api::<Secret>().get(SECRET).await.unwrap().metadata.resource_version;
    assert_eq!(rv, again, "nobody rewrites a Secret that needs nothing");

    first.stop().await;
    second.stop().await;
}

#[tokio::test]
async fn the_installed_managers_rbac_is_all_the_webhook_needs() {
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("webhook3").await;
    ensure_crd(&ns.client).await;
    let _restore = PutBackRegistrations::guarded(&ns.client).await;
    support::apply_generated_rbac(&ns.client).await;
    // The Secret as install creates it (empty; the manager may not create one),
    // deleted again at the end: a Secret left in runner-system would be taken
    // for an installed manager's by later tests (and by diagnose).
    let _secret = support::OnDrop::new(|c| async move {
        let secrets: Api<Secret> = Api::namespaced(c, kubectl_runner::manifests::MANAGER_NAMESPACE);
        let _ = secrets.delete(SECRET, &Default::default()).await;
    });
    let manifests = kubectl_runner::manifests::manager("img", &kubectl_runner::manifests::RbacScope::Cluster);
    let empty = manifests.iter().find(|m| m.resource.kind == "Secret").expect("install's Secret");
    Api::<Secret>::namespaced(ns.client.clone(), kubectl_runner::manifests::MANAGER_NAMESPACE)
        .patch(SECRET, &PatchParams::apply("kubectl-runner-tests").force(), &Patch::Apply(&empty.object))
        .await
        .expect("create the empty Secret");

    // As the installed ServiceAccount, preflight included: get/update/watch
    // that Secret and get/patch the CRD, nothing more.
    let as_sa = support::as_manager_service_account().await;
    let listen = free_loopback_addr();
    let url = format!("https://{listen}/convert");
    let mut cfg = webhook_config(&ns.name, listen, Target::Url(url.clone()));
    cfg.lease_namespace = kubectl_runner::manifests::MANAGER_NAMESPACE.into();
    cfg.webhook.as_mut().unwrap().namespace = cfg.lease_namespace.clone();
    let manager = ManagerHandle::start_with(&as_sa, cfg);
    let secrets: Api<Secret> =
        Api::namespaced(ns.client.clone(), kubectl_runner::manifests::MANAGER_NAMESPACE);
    wait_for("the CRD to trust what the Secret holds", T, || {
        let (secrets, client) = (secrets.clone(), ns.client.clone());
        async move {
            let m = secret::material(secrets.get(SECRET).await.ok()?.data.as_ref());
            (!m.ca_crt.is_empty() && crd_bundle(&client).await? == m.ca_crt).then_some(())
        }
    })
    .await;
    serve_all_versions(&ns.client).await;
    let old = v1alpha1(&ns);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Runner",
        "metadata": { "name": "old" }, "spec": { "image": "nginx:1.27", "port": 8082 },
    }))
    .unwrap();
    wait_for("a v1alpha1 Runner created through the webhook", T, || {
        let (old, obj) = (old.clone(), obj.clone());
        async move { old.create(&PostParams::default(), &obj).await.ok() }
    })
    .await;
    assert_eq!(ns.api::<Runner>().get("old").await.expect("read as v1beta1").spec.expose.port, 8082);
    manager.stop_after_cleanup(&ns).await;
}

/// While a local manager (`run-manager --local-webhooks`) holds the CRD's
/// conversion, saying so in its annotation, a manager behind the Service
/// leaves it alone: its keeper writing its own CA into a conversion pointed
/// at the local URL would break every conversion the local one serves.
#[tokio::test]
async fn the_keeper_behind_the_service_leaves_a_conversion_a_local_manager_holds_alone() {
    use kubectl_runner::manager::webhook::keep::Keeper;
    let _turn = CRD_LOCK.lock().await;
    let ns = TestNs::new("webhook4").await;
    ensure_crd(&ns.client).await;
    let _restore = PutBackRegistrations::guarded(&ns.client).await;
    let crds = Api::<CustomResourceDefinition>::all(ns.client.clone());
    // As a local manager leaves it: its URL, its own CA, the annotation.
    let names = vec!["127.0.0.1".to_string()];
    let now = k8s_openapi::jiff::Timestamp::now();
    let plan = certs::plan(now, &Material::default(), &names, &LIFETIMES);
    let local = certs::carry_out(&plan, now, &Material::default(), &names, &LIFETIMES).expect("a local CA");
    let url = Target::Url("https://127.0.0.1:1/convert".into());
    let held = json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": CRD_NAME,
                      "annotations": { kubectl_runner::webhook::local::SAVED_ANNOTATION: "{}" } },
        "spec": { "conversion": kubectl_runner::manifests::conversion(&url, Some(&local.ca_crt)) } });
    let params = PatchParams::apply("kubectl-runner-tests-conversion").force();
    crds.patch(CRD_NAME, &params, &Patch::Apply(&held)).await.expect("hold the CRD as a local manager");

    let service = Target::Service { namespace: ns.name.clone() };
    let keeper = || Keeper {
        secrets: ns.api::<Secret>(),
        client: ns.client.clone(),
        namespace: ns.name.clone(),
        names: kubectl_runner::webhook::service_dns_names(&ns.name),
        target: service.clone(),
        slot: Arc::default(),
    };
    keeper().round().await.expect("a round of the in-cluster keeper");
    let crd = crds.get(CRD_NAME).await.unwrap();
    let config = crd.spec.conversion.and_then(|c| c.webhook).and_then(|w| w.client_config).unwrap();
    assert_eq!(config.url.as_deref(), Some("https://127.0.0.1:1/convert"));
    assert_eq!(config.ca_bundle.map(|b| b.0), Some(local.ca_crt.clone().into_bytes()), "the local CA stays");

    // The annotation is what held it: without it the keeper writes its CA.
    let released = json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": CRD_NAME },
        "spec": { "conversion": kubectl_runner::manifests::conversion(&url, Some(&local.ca_crt)) } });
    crds.patch(CRD_NAME, &params, &Patch::Apply(&released)).await.expect("drop the annotation");
    keeper().round().await.expect("a second round");
    let ours = material(&ns).await.expect("the keeper's Secret").ca_crt;
    assert_eq!(crd_bundle(&ns.client).await, Some(ours), "without the annotation the keeper sets its CA");
}
