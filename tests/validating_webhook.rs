//! The Runner validating webhook against the real control plane: the
//! apiserver posts AdmissionReviews to a manager running in this process
//! on the loopback (a URL target: the keeper driven directly), through the
//! ValidatingWebhookConfiguration the test creates as install would.
//!
//! The configuration and the CRD are cluster-wide, and a configuration
//! left behind (failurePolicy Fail, nothing serving it) refuses every
//! Runner write of every later test binary: the tests here take turns (one
//! lock) and a guard deletes it and puts the CRD's conversion back, also
//! when a test fails.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use kubectl_runner::api::{CRD_NAME, GROUP, Runner, RunnerSpec};
use kubectl_runner::manager::Config;
use kubectl_runner::manager::webhook::WebhookConfig;
use kubectl_runner::manager::webhook::admission::{Admission, STARTING};
use kubectl_runner::manifests::validating_webhook_configuration;
use kubectl_runner::webhook::{Target, VALIDATING_CONFIG, VALIDATING_WEBHOOK};
use serde_json::json;
use support::{
    ManagerHandle, PutBackRegistrations, TestNs, client, ensure_crd, free_loopback_addr, wait_for,
};

const T: Duration = Duration::from_secs(60);
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A manager of `ns` serving both webhooks on the loopback, the
/// configuration routed to it with the caBundle it set, every version
/// served. Field order is drop order: the manager stops first.
struct Served {
    manager: Option<ManagerHandle>,
    ns: TestNs,
    _registrations: PutBackRegistrations,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

async fn served(prefix: &str) -> Served {
    let turn = LOCK.lock().await;
    let ns = TestNs::new(prefix).await;
    ensure_crd(&ns.client).await;
    let registrations = PutBackRegistrations::guarded(&ns.client).await;
    let listen: SocketAddr = free_loopback_addr();
    let target = Target::Url(format!("https://{listen}/convert"));
    // As install creates it, but to this process; the manager adds the CA.
    let vwc = validating_webhook_configuration(&target, None);
    let vwcs = Api::<ValidatingWebhookConfiguration>::all(ns.client.clone());
    let apply = PatchParams::apply("kubectl-runner-tests").force();
    vwcs.patch(VALIDATING_CONFIG, &apply, &Patch::Apply(&vwc)).await.expect("create the configuration");
    let mut cfg = Config::namespaced(&ns.name);
    cfg.lease_namespace = ns.name.clone();
    cfg.webhook = Some(WebhookConfig { listen, target, namespace: ns.name.clone() });
    let manager = ManagerHandle::start_with(&ns.client, cfg);
    let url = format!("https://{listen}/validate");
    wait_for("the manager to set the configuration's caBundle", T, || {
        let (vwcs, url) = (vwcs.clone(), url.clone());
        async move {
            let w = vwcs.get(VALIDATING_CONFIG).await.ok()?.webhooks?.into_iter().next()?;
            (w.client_config.url.as_deref() == Some(url.as_str()) && w.client_config.ca_bundle.is_some())
                .then_some(())
        }
    })
    .await;
    let mut crd = kubectl_runner::manifests::runner_crd();
    crd.spec.versions.iter_mut().for_each(|v| v.served = true);
    wait_for("the CRD to convert through the manager", T, || {
        let crds = Api::<CustomResourceDefinition>::all(ns.client.clone());
        async move { crds.get(CRD_NAME).await.ok()?.spec.conversion?.webhook?.client_config?.ca_bundle }
    })
    .await;
    Api::<CustomResourceDefinition>::all(ns.client.clone())
        .patch(CRD_NAME, &apply, &Patch::Apply(&crd))
        .await
        .expect("serve every version");
    Served { manager: Some(manager), ns, _registrations: registrations, _turn: turn }
}

fn runner(name: &str, image: &str, hosts: &[&str]) -> Runner {
    Runner::new(name, hosts.iter().fold(RunnerSpec::new(image), |s, h| s.host(*h)))
}

/// The apiserver's message refusing `result`, or a panic if it was admitted.
fn refusal<T: std::fmt::Debug>(result: kube::Result<T>) -> String {
    match result {
        Err(kube::Error::Api(s)) => s.message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn dry_run() -> PostParams {
    PostParams { dry_run: true, ..Default::default() }
}

#[tokio::test]
async fn a_host_held_in_another_namespace_is_refused_naming_the_holder_and_a_runner_keeps_its_own() {
    let mut s = served("vw-hosts").await;
    let (ns, other) = (&s.ns, TestNs::new("vw-other").await);
    let host = |h: &str| format!("{h}.{}.example", ns.name);
    let (shop, legacy, own) = (host("shop"), host("legacy"), host("own"));
    other
        .api::<Runner>()
        .create(&PostParams::default(), &runner("shop", "nginx:1.27", &[&shop]))
        .await
        .unwrap();
    let ingress: Ingress = serde_json::from_value(json!({
        "metadata": { "name": "legacy" },
        "spec": { "rules": [{ "host": legacy }] },
    }))
    .unwrap();
    other.api::<Ingress>().create(&PostParams::default(), &ingress).await.expect("a plain Ingress");

    // The index follows the writes within moments; a dry run asks without storing.
    let runners = ns.api::<Runner>();
    let taken = runner("web", "nginx:1.27", &[&own, &shop]);
    wait_for("the index to hold the other namespace's Runner", T, || {
        let (runners, taken) = (runners.clone(), taken.clone());
        async move { runners.create(&dry_run(), &taken).await.is_err().then_some(()) }
    })
    .await;
    let message = refusal(runners.create(&PostParams::default(), &taken).await);
    assert!(
        message.contains(&format!("admission webhook \"{VALIDATING_WEBHOOK}\" denied the request")),
        "{message}"
    );
    let named =
        format!("spec.expose.hosts[1]: host \"{shop}\" is already served by Runner {}/shop", other.name);
    assert!(message.contains(&named), "{message}");

    // The CLI shows the apiserver's refusal as it is, holder and field named.
    let o = support::cli(&["-n", &ns.name, "create", "web", "--image", "nginx:1.27", "--host", &shop]).await;
    assert_eq!(o.status.code(), Some(1), "{}", support::err(&o));
    let named =
        format!("spec.expose.hosts[0]: host \"{shop}\" is already served by Runner {}/shop", other.name);
    assert!(
        support::err(&o).contains(&named) && support::err(&o).contains("(Invalid, HTTP 422)"),
        "{}",
        support::err(&o)
    );
    eprintln!("kubectl runner create refused: {}", support::err(&o).trim());

    let by_ingress = runner("web", "nginx:1.27", &[&legacy]);
    let message = wait_for("the index to hold the plain Ingress", T, || {
        let (runners, r) = (runners.clone(), by_ingress.clone());
        async move { runners.create(&PostParams::default(), &r).await.err().map(|e| e.to_string()) }
    })
    .await;
    let named =
        format!("spec.expose.hosts[0]: host \"{legacy}\" is already served by Ingress {}/legacy", other.name);
    assert!(message.contains(&named), "{message}");

    // Its own hosts, and its own Ingress (a Runner's child), are no conflict.
    runners.create(&PostParams::default(), &runner("web", "nginx:1.27", &[&own])).await.expect("a free host");
    wait_for("the manager's Ingress for web", T, || {
        let ingresses = ns.api::<Ingress>();
        async move { ingresses.get_opt("web").await.ok().flatten() }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await; // the index sees the Ingress too
    let scale = json!({ "spec": { "replicas": 2 } });
    runners
        .patch("web", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .expect("its own update admitted");

    // A v1alpha1 write is converted first and judged as v1beta1.
    let gvk = GroupVersionKind::gvk(GROUP, "v1alpha1", "Runner");
    let old: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::from_gvk_with_plural(&gvk, "runners"),
    );
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Runner", "metadata": { "name": "old" },
        "spec": { "image": "nginx:1.27", "host": shop },
    }))
    .unwrap();
    let message = refusal(old.create(&PostParams::default(), &obj).await);
    assert!(message.contains(&format!("is already served by Runner {}/shop", other.name)), "{message}");
    assert!(
        message.contains(&format!("(the write was {GROUP}/v1alpha1, judged as {GROUP}/v1beta1")),
        "{message}"
    );

    // What a write pays for the webhook, round trip through the apiserver.
    let mut took: Vec<Duration> = Vec::new();
    for i in 0..30 {
        let r = runner(&format!("probe-{i}"), "nginx:1.27", &[&host(&format!("p{i}"))]);
        let start = Instant::now();
        runners.create(&dry_run(), &r).await.expect("a dry run admitted");
        took.push(start.elapsed());
    }
    took.sort();
    eprintln!("dry-run create through the validating webhook: p50 {:?}, max {:?} (30)", took[15], took[29]);
    s.manager.take().unwrap().stop_after_cleanup(&s.ns).await;
}

/// kubectl, built with the local control plane (the build is cached).
fn kubectl() -> std::path::PathBuf {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cluster/build.sh");
    let o = std::process::Command::new("bash")
        .arg(script)
        .env("RUNNER_CLUSTER_REAL_NODE", "0")
        .output()
        .expect("run build.sh");
    assert!(o.status.success(), "tests/cluster/build.sh failed: {}", support::err(&o));
    std::path::PathBuf::from(support::out(&o).lines().last().unwrap_or_default().trim()).join("kubectl")
}

/// `kubectl create -f -` of a Runner with `image`: (success, stderr).
async fn kubectl_create(ns: &str, name: &str, image: &str) -> (bool, String) {
    use std::io::Write;
    let manifest = json!({ "apiVersion": format!("{GROUP}/v1beta1"), "kind": "Runner",
                           "metadata": { "name": name }, "spec": { "image": image } });
    let (kubectl, ns) = (kubectl(), ns.to_string());
    tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new(kubectl)
            .args(["create", "-n", &ns, "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child.stdin.take().unwrap().write_all(manifest.to_string().as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        (o.status.success(), support::err(&o))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn an_image_without_a_fixed_version_is_admitted_with_a_warning_kubectl_shows() {
    let mut s = served("vw-image").await;
    let (created, stderr) = kubectl_create(&s.ns.name, "latest", "nginx:latest").await;
    assert!(created, "{stderr}");
    let warned = "Warning: spec.image \"nginx:latest\" uses the tag :latest, which moves: a rollout cannot tell \
                  versions apart and a restart may pull another image";
    assert!(stderr.contains(warned), "{stderr}");
    let (created, stderr) = kubectl_create(&s.ns.name, "untagged", "nginx").await;
    assert!(created && stderr.contains("Warning: spec.image \"nginx\" has no tag (so :latest)"), "{stderr}");
    let (created, stderr) = kubectl_create(&s.ns.name, "pinned", "nginx:1.27").await;
    assert!(created && !stderr.contains("Warning"), "{stderr}");
    s.manager.take().unwrap().stop_after_cleanup(&s.ns).await;
}

#[tokio::test]
async fn with_the_webhook_down_deletes_and_label_updates_go_through_and_spec_writes_are_refused() {
    let mut s = served("vw-down").await;
    let runners = s.ns.api::<Runner>();
    runners.create(&PostParams::default(), &runner("web", "nginx:1.27", &[])).await.unwrap();
    wait_for("the manager's finalizer on web", T, || {
        let runners = runners.clone();
        async move { runners.get("web").await.ok()?.metadata.finalizers.filter(|f| !f.is_empty()) }
    })
    .await;
    s.manager.take().unwrap().stop().await;

    let scale = json!({ "spec": { "replicas": 3 } });
    let message = refusal(runners.patch("web", &PatchParams::default(), &Patch::Merge(&scale)).await);
    assert!(message.contains(&format!("failed calling webhook \"{VALIDATING_WEBHOOK}\"")), "{message}");
    let label = json!({ "metadata": { "labels": { "team": "blue" } } });
    runners.patch("web", &PatchParams::default(), &Patch::Merge(&label)).await.expect("a label-only update");
    runners.delete("web", &DeleteParams::default()).await.expect("a delete with the webhook down");
    assert!(runners.get("web").await.unwrap().metadata.deletion_timestamp.is_some(), "held by the finalizer");

    // A manager without webhooks finishes the deletion: removing the
    // finalizer of a Runner being deleted never calls the webhook.
    let mut cfg = Config::namespaced(&s.ns.name);
    cfg.lease_namespace = s.ns.name.clone();
    let cleanup = ManagerHandle::start_with(&s.ns.client, cfg);
    wait_for("web to be gone", T, || {
        let runners = runners.clone();
        async move { runners.get_opt("web").await.ok()?.is_none().then_some(()) }
    })
    .await;
    cleanup.stop().await;
}

#[tokio::test]
async fn until_its_index_has_synced_the_webhook_refuses_saying_it_is_starting() {
    let unreachable = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    let admission = Admission::start(kube::Client::try_from(unreachable).unwrap());
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "1", "operation": "CREATE", "name": "web", "namespace": "team", "userInfo": {},
            "kind": { "group": GROUP, "version": "v1beta1", "kind": "Runner" },
            "resource": { "group": GROUP, "version": "v1beta1", "resource": "runners" },
            "object": serde_json::to_value(runner("web", "nginx:1.27", &["a.example"])).unwrap(),
        },
    }))
    .unwrap();
    let request: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
    // That it comes before the apiserver's timeout is SYNC_WAIT's unit test.
    let answer = admission.review(&request).await;
    assert!(!answer.allowed && answer.result.message == STARTING && answer.result.code == 503, "{answer:?}");
    assert_eq!(answer.uid, "1");
}

#[tokio::test]
async fn install_with_the_manager_applies_the_configuration_the_apiserver_accepts() {
    let _turn = LOCK.lock().await;
    ensure_crd(&client().await).await;
    let o = support::cli(&["install", "--with-manager", "--image", "kubectl-runner:dev", "--dry-run=server"])
        .await;
    support::ok(&o, "install --with-manager --dry-run=server");
    let applied = format!("ValidatingWebhookConfiguration/{VALIDATING_CONFIG} applied (server dry run)");
    assert!(support::out(&o).contains(&applied), "{}", support::out(&o));
    let vwcs = Api::<ValidatingWebhookConfiguration>::all(client().await);
    assert!(vwcs.get_opt(VALIDATING_CONFIG).await.unwrap().is_none(), "a dry run stores nothing");
}
