//! Shared fixtures for tests against the real local control plane
//! (`tests/cluster/up.sh`, then `export KUBECONFIG=...`).
//!
//! Each test gets its own temporary, labelled namespace, deleted when the
//! fixture drops, also when the test panics.
#![allow(dead_code)]

pub mod guard;

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};

/// Label on every namespace a test creates, so a leftover one is easy to find.
pub const TEST_LABEL: &str = "kubectl-runner.test";

/// A client for the cluster in $KUBECONFIG. Fails loudly: these tests are
/// meant to run, never to skip.
pub async fn client() -> Client {
    let config = kube::Config::infer()
        .await
        .expect("no cluster: run `tests/cluster/up.sh` and export the KUBECONFIG it prints");
    Client::try_from(config).expect("kube client")
}

/// Polls `check` every 200 ms until it returns Some, or panics after `timeout`
/// naming what it waited for.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A temporary namespace, deleted on drop.
pub struct TestNs {
    pub name: String,
    pub client: Client,
}

impl TestNs {
    /// Creates `rt-<prefix>-<random>` and waits for its `default`
    /// ServiceAccount (Pods are refused until it exists).
    pub async fn new(prefix: &str) -> TestNs {
        let client = client().await;
        let name = format!("rt-{prefix}-{:06x}", rand::random::<u32>() & 0xffffff);
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { TEST_LABEL: "true" } }
        }))
        .unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create test namespace");
        let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        wait_for("the default ServiceAccount", Duration::from_secs(30), || {
            let sa = sa.clone();
            async move { sa.get_opt("default").await.ok().flatten() }
        })
        .await;
        TestNs { name, client }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop cannot be async; a fresh runtime on its own thread works from
        // inside or outside the test's runtime, and on panic too.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let client = client().await;
                let _ = Api::<Namespace>::all(client).delete(&name, &DeleteParams::background()).await;
            });
        })
        .join();
    }
}

/// Installs (server-side apply) the Runner CRD generated from the code and
/// waits until it is Established. Safe to call from many tests at once.
pub async fn ensure_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = kubectl_runner::manifests::runner_crd();
    crds.patch(
        kubectl_runner::api::CRD_NAME,
        &PatchParams::apply("kubectl-runner-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("apply the Runner CRD");
    wait_for("the Runner CRD to be Established", Duration::from_secs(30), || {
        let crds = crds.clone();
        async move {
            let crd = crds.get(kubectl_runner::api::CRD_NAME).await.ok()?;
            let established =
                crd.status?.conditions?.iter().any(|c| c.type_ == "Established" && c.status == "True");
            established.then_some(())
        }
    })
    .await;
}

/// A manager running in-process, watching one namespace. Stopped on
/// [`ManagerHandle::stop`] or, failing that, when dropped.
pub struct ManagerHandle {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    join: Option<tokio::task::JoinHandle<kubectl_runner::manager::Result<()>>>,
}

impl ManagerHandle {
    /// Starts `run-manager -n ns` in this process.
    pub fn start(client: &Client, ns: &str) -> ManagerHandle {
        Self::start_with(client, kubectl_runner::manager::Config::namespaced(ns))
    }

    /// Starts a manager configured by `cfg` in this process.
    pub fn start_with(client: &Client, cfg: kubectl_runner::manager::Config) -> ManagerHandle {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let join = tokio::spawn(kubectl_runner::manager::run(client.clone(), cfg, async move {
            let _ = rx.await;
        }));
        ManagerHandle { stop: Some(tx), join: Some(join) }
    }

    /// Deletes every Runner left in `ns` and waits until the manager has
    /// cleaned them up, then stops it: a namespace deleted later holds no
    /// Runner whose finalizer nobody would ever remove.
    pub async fn stop_after_cleanup(self, ns: &TestNs) {
        let runners: Api<kubectl_runner::api::Runner> = ns.api();
        let _ = runners.delete_collection(&DeleteParams::default(), &Default::default()).await;
        wait_for("the test's Runners to be cleaned up", Duration::from_secs(60), || {
            let runners = runners.clone();
            async move { runners.list(&Default::default()).await.ok().filter(|l| l.items.is_empty()).map(|_| ()) }
        })
        .await;
        self.stop().await;
    }

    /// Graceful stop; panics if the manager failed, or did not stop
    /// within 30 s (a hang is a failure, not a CI timeout).
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(join) = self.join.take() {
            tokio::time::timeout(Duration::from_secs(30), join)
                .await
                .expect("the manager stopped within 30 s of the signal")
                .expect("manager task")
                .expect("manager ran without error");
        }
    }
}

impl Drop for ManagerHandle {
    fn drop(&mut self) {
        if let Some(join) = self.join.take() {
            join.abort();
        }
    }
}

/// Runs the binary under test with this process's KUBECONFIG, off the async
/// runtime so an in-process manager keeps reconciling meanwhile.
pub async fn cli(args: &[&str]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-runner"))
            .args(&args)
            .env("NO_COLOR", "1")
            .output()
            .expect("run kubectl-runner")
    })
    .await
    .unwrap()
}

/// A command's standard output, as text.
pub fn out(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A command's standard error, as text.
pub fn err(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Fails the test, with both streams, unless the command exited 0.
pub fn ok(o: &std::process::Output, what: &str) {
    assert_eq!(o.status.code(), Some(0), "{what} failed:\nstdout: {}\nstderr: {}", out(o), err(o));
}

/// Applies the generated cluster-wide RBAC (as `install` does).
pub async fn apply_generated_rbac(client: &Client) {
    use kubectl_runner::manifests::{self, RbacScope};
    for m in manifests::rbac(&RbacScope::Cluster) {
        let name = m.object.metadata.name.clone().unwrap();
        let api: Api<DynamicObject> = match &m.object.metadata.namespace {
            Some(ns) if m.namespaced => Api::namespaced_with(client.clone(), ns, &m.resource),
            _ => Api::all_with(client.clone(), &m.resource),
        };
        api.patch(&name, &PatchParams::apply("kubectl-runner-tests").force(), &Patch::Apply(&m.object))
            .await
            .unwrap_or_else(|e| panic!("apply {}: {e}", m.describe()));
    }
}

/// A client that acts as the installed manager's ServiceAccount.
pub async fn as_manager_service_account() -> Client {
    use kubectl_runner::manifests::{MANAGER_NAME, MANAGER_NAMESPACE};
    let mut cfg = kube::Config::infer().await.unwrap();
    cfg.auth_info.impersonate = Some(format!("system:serviceaccount:{MANAGER_NAMESPACE}:{MANAGER_NAME}"));
    cfg.auth_info.impersonate_groups =
        Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{MANAGER_NAMESPACE}")]);
    Client::try_from(cfg).unwrap()
}

/// A 10-minute token of ServiceAccount `name` in `ns` (TokenRequest).
pub async fn service_account_token(client: &Client, ns: &str, name: &str) -> String {
    let request = serde_json::json!({ "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                      "spec": { "expirationSeconds": 600 } });
    let token: TokenRequest = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_subresource("token", name, &PostParams::default(), &request)
        .await
        .expect("request a ServiceAccount token");
    token.status.and_then(|s| s.token).expect("a token in the TokenRequest status")
}

/// `GET path` on `addr` over plain HTTP/1.0, with an optional bearer token:
/// status code and body. Blocking std I/O on a worker thread: the
/// dependency set has no HTTP client.
pub async fn http_get(addr: std::net::SocketAddr, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!("GET {path} HTTP/1.0\r\nHost: {}\r\n{auth}\r\n", addr.ip());
    tokio::task::spawn_blocking(move || {
        let t = Duration::from_secs(3);
        let mut s = std::net::TcpStream::connect_timeout(&addr, t).ok()?;
        s.set_read_timeout(Some(t)).ok()?;
        s.write_all(request.as_bytes()).ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let code = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        Some((code, body))
    })
    .await
    .ok()?
}

/// A loopback address with a port free a moment ago.
pub fn free_loopback_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port")
}

/// Creates ServiceAccount `name` in `ns` and returns a token of it.
pub async fn new_service_account_token(client: &Client, ns: &str, name: &str) -> String {
    let sa: ServiceAccount =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": name } })).unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await
        .unwrap_or_else(|e| panic!("create ServiceAccount {ns}/{name}: {e}"));
    service_account_token(client, ns, name).await
}

/// Runs `cleanup` with a client of its own when dropped, also on a panic:
/// on a runtime of its own thread, since a test's client serves requests
/// from the test's runtime, which is blocked while this drops. For what a
/// test made outside its namespace.
pub struct OnDrop(Option<Box<dyn FnOnce(Client) -> futures::future::BoxFuture<'static, ()> + Send>>);

impl OnDrop {
    pub fn new<F, Fut>(cleanup: F) -> OnDrop
    where
        F: FnOnce(Client) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        OnDrop(Some(Box::new(move |c| Box::pin(cleanup(c)))))
    }
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        let Some(cleanup) = self.0.take() else { return };
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move { cleanup(client().await).await });
        })
        .join();
    }
}

/// A ClusterRoleBinding a test made, deleted when dropped (cluster-scoped:
/// the test namespace's deletion does not take it), also on panic. The
/// delete uses a client of its own: a test's client serves requests from
/// the test's runtime, which is blocked while this drops.
pub struct ClusterRoleBindingGuard(String);

impl Drop for ClusterRoleBindingGuard {
    fn drop(&mut self) {
        use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
        let name = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let _ = Api::<ClusterRoleBinding>::all(client().await)
                    .delete(&name, &DeleteParams::default())
                    .await;
            });
        })
        .join();
    }
}

/// Binds the generated metrics-reader ClusterRole to ServiceAccount
/// `ns/sa`, as a user lets a scraper in.
pub async fn bind_metrics_reader(client: &Client, ns: &str, sa: &str) -> ClusterRoleBindingGuard {
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    use kubectl_runner::manifests::METRICS_READER_ROLE;
    let name = format!("{ns}-metrics-reader");
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": METRICS_READER_ROLE },
        "subjects": [{ "kind": "ServiceAccount", "name": sa, "namespace": ns }],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("bind the metrics-reader role");
    ClusterRoleBindingGuard(name)
}

/// Puts the cluster-wide webhook registrations back as `ensure_crd` leaves
/// them when dropped, also on a panic: the Runner CRD without conversion or
/// a local manager's annotation, and no ValidatingWebhookConfiguration (one
/// left with failurePolicy Fail would refuse every Runner create in every
/// later test binary). Made only by [`PutBackRegistrations::guarded`]:
/// replacing the registrations is cluster-wide.
pub struct PutBackRegistrations(());

impl PutBackRegistrations {
    /// Refuses ([`guard::refuse_foreign`]) on a cluster holding others'
    /// Runners; otherwise puts the registrations back when dropped.
    pub async fn guarded(client: &Client) -> PutBackRegistrations {
        guard::refuse_foreign(client, "replace the Runner CRD's webhook registrations").await;
        PutBackRegistrations(())
    }
}

impl Drop for PutBackRegistrations {
    fn drop(&mut self) {
        let _ = std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
                let client = client().await;
                let vwcs = Api::<ValidatingWebhookConfiguration>::all(client.clone());
                let _ =
                    vwcs.delete(kubectl_runner::webhook::VALIDATING_CONFIG, &DeleteParams::default()).await;
                let none = serde_json::json!({
                    "metadata": { "annotations": { kubectl_runner::webhook::local::SAVED_ANNOTATION: null } },
                    "spec": { "conversion": { "strategy": "None", "webhook": null } },
                });
                let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
                let _ = crds
                    .patch(kubectl_runner::api::CRD_NAME, &PatchParams::default(), &Patch::Merge(&none))
                    .await;
                ensure_crd(&client).await;
            });
        })
        .join();
    }
}
