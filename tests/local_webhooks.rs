//! `run-manager --local-webhooks` against the real control plane: the
//! binary runs as a process on this machine, the apiserver calls its
//! conversion and validating webhooks on the loopback, and every way out
//! (Ctrl-C, SIGTERM, an unreachable address, a refusal) leaves the
//! registrations as they were; kill -9 leaves them pointing at a dead
//! address for the next local manager (or `diagnose --fix`) to put back.
//!
//! The CRD and the ValidatingWebhookConfiguration are cluster-wide: the
//! tests take turns (one lock) and a guard puts both back, also on panic.

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kubectl_runner::api::{CRD_NAME, GROUP, Runner};
use kubectl_runner::webhook::VALIDATING_CONFIG;
use kubectl_runner::webhook::local::{LEASE, SAVED_ANNOTATION};
use serde_json::json;
use support::{PutBackRegistrations, TestNs, ensure_crd, wait_for};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-runner");
const T: Duration = Duration::from_secs(60);
static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What the tests compare before and after: the CRD's conversion, which
/// versions it serves, its annotations, and the webhook configuration.
#[derive(Debug, PartialEq)]
struct Registrations {
    conversion: serde_json::Value,
    served: Vec<(String, bool)>,
    annotated: bool,
    validating: Option<serde_json::Value>,
}

async fn registrations(client: &kube::Client) -> Registrations {
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(CRD_NAME).await.expect("get CRD");
    let vwc =
        Api::<ValidatingWebhookConfiguration>::all(client.clone()).get_opt(VALIDATING_CONFIG).await.unwrap();
    Registrations {
        conversion: serde_json::to_value(&crd.spec.conversion).unwrap(),
        served: crd.spec.versions.iter().map(|v| (v.name.clone(), v.served)).collect(),
        annotated: crd.metadata.annotations.unwrap_or_default().contains_key(SAVED_ANNOTATION),
        validating: vwc.map(|v| serde_json::to_value(&v.webhooks).unwrap()),
    }
}

/// A `run-manager --local-webhooks` process; its log goes to a file.
struct Local {
    child: Child,
    log: PathBuf,
}

impl Local {
    fn start(ns: &TestNs, extra: &[&str]) -> Local {
        let log =
            std::env::temp_dir().join(format!("local-webhooks-{}-{}.log", ns.name, rand::random::<u32>()));
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(BIN)
            .args(["run-manager", "-n", &ns.name, "--lease-namespace", &ns.name, "--local-webhooks"])
            .args(extra)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start run-manager");
        Local { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log holds `line`; panics with the log if the process
    /// exits first or the time runs out.
    async fn wait_log(&mut self, line: &str) {
        let start = Instant::now();
        while !self.log().contains(line) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("run-manager exited ({status}) before {line:?}:\n{}", self.log());
            }
            assert!(start.elapsed() < T, "no {line:?} after {T:?}:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap().success();
        assert!(ok, "kill {sig}");
    }

    /// Waits for the process to exit; its exit code.
    async fn exit(&mut self) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(start.elapsed() < T, "run-manager still running after {T:?}:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

const SERVING: &str = "the apiserver called the local webhooks";
const HANDED_BACK: &str = "handed the webhook registrations back";

fn v1alpha1(ns: &TestNs) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(GROUP, "v1alpha1", "Runner");
    Api::namespaced_with(ns.client.clone(), &ns.name, &ApiResource::from_gvk_with_plural(&gvk, "runners"))
}

/// Where the apiserver of this control plane is reached from this machine:
/// its advertised address (the real node's address when it runs one),
/// else the loopback it listens on.
async fn apiserver_address(client: &kube::Client) -> String {
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let lp = kube::api::ListParams::default().labels("kubernetes.io/service-name=kubernetes");
    let list = slices.list(&lp).await.unwrap();
    let address =
        list.items.iter().flat_map(|s| s.endpoints.iter().flatten()).flat_map(|e| e.addresses.first()).next();
    address.cloned().unwrap_or_else(|| "127.0.0.1".into())
}

async fn crd_url(client: &kube::Client) -> Option<String> {
    let crd = Api::<CustomResourceDefinition>::all(client.clone()).get(CRD_NAME).await.ok()?;
    crd.spec.conversion?.webhook?.client_config?.url
}

#[tokio::test]
async fn the_apiserver_calls_the_local_manager_and_ctrl_c_puts_everything_back() {
    let _turn = LOCK.lock().await;
    let ns = TestNs::new("localwh").await;
    ensure_crd(&ns.client).await;
    let _put_back = PutBackRegistrations::guarded(&ns.client).await;
    let before = registrations(&ns.client).await;
    assert!(before.validating.is_none() && !before.annotated, "{before:?}");

    let mut local = Local::start(&ns, &[]);
    local.wait_log(SERVING).await;
    let url = crd_url(&ns.client).await.expect("the CRD converts through a URL");
    let host = apiserver_address(&ns.client).await;
    assert!(url.starts_with(&format!("https://{host}:")) && url.ends_with("/convert"), "{url}, want {host}");
    let during = registrations(&ns.client).await;
    assert!(during.annotated && during.served.iter().all(|(_, s)| *s), "{during:?}");
    let webhooks = during.validating.expect("the webhook configuration exists");
    assert_eq!(webhooks[0]["clientConfig"]["url"], url.replace("/convert", "/validate"));

    // An old client's write goes through the local conversion.
    let old: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Runner",
        "metadata": { "name": "old" },
        "spec": { "image": "nginx:1.27", "replicas": 1, "port": 80, "host": "old.local-webhooks.test" },
    }))
    .unwrap();
    v1alpha1(&ns).create(&PostParams::default(), &old).await.expect("create through v1alpha1");
    let stored = ns.api::<Runner>().get("old").await.unwrap();
    assert_eq!(stored.spec.expose.hosts, ["old.local-webhooks.test"]);
    // Deleted while the manager runs, which removes its finalizer.
    ns.api::<Runner>().delete("old", &DeleteParams::default()).await.unwrap();
    wait_for("the Runner to be gone", T, || async {
        ns.api::<Runner>().get_opt("old").await.unwrap().is_none().then_some(())
    })
    .await;

    local.signal("-INT");
    assert_eq!(local.exit().await, Some(0), "{}", local.log());
    assert!(local.log().contains(HANDED_BACK), "{}", local.log());
    assert_eq!(registrations(&ns.client).await, before, "exactly as before");
    assert!(ns.api::<Lease>().get_opt(LEASE).await.unwrap().is_none(), "the local Lease is gone");
}

#[tokio::test]
async fn a_second_local_manager_is_refused_and_after_kill_9_takes_over_and_puts_back_the_first_state() {
    let _turn = LOCK.lock().await;
    let ns = TestNs::new("localwh2").await;
    ensure_crd(&ns.client).await;
    let _put_back = PutBackRegistrations::guarded(&ns.client).await;
    let before = registrations(&ns.client).await;

    let mut first = Local::start(&ns, &[]);
    first.wait_log(SERVING).await;
    let first_url = crd_url(&ns.client).await.unwrap();

    let mut second = Local::start(&ns, &[]);
    assert_ne!(second.exit().await, Some(0), "refused while the first lives");
    let refusal = second.log();
    assert!(refusal.contains("serves the webhooks") && refusal.contains("pid"), "{refusal}");
    assert_eq!(
        crd_url(&ns.client).await.as_deref(),
        Some(first_url.as_str()),
        "the first's registrations stay"
    );

    first.signal("-KILL");
    first.exit().await;
    assert_eq!(crd_url(&ns.client).await.as_deref(), Some(first_url.as_str()), "kill -9 restores nothing");
    // A delete goes through with nothing serving the webhooks.
    v1alpha1(&ns).delete("absent", &DeleteParams::default()).await.expect_err("404, not a webhook error");

    // Once the dead one's Lease lapses, a new local manager takes over.
    let mut third = wait_for("a local manager to take over the lapsed Lease", T, || {
        let ns = &ns;
        async move {
            let mut l = Local::start(ns, &[]);
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if l.log().contains(SERVING) {
                    return Some(l);
                }
                if l.child.try_wait().unwrap().is_some() {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            None
        }
    })
    .await;
    assert_ne!(crd_url(&ns.client).await.as_deref(), Some(first_url.as_str()));
    third.signal("-TERM");
    assert_eq!(third.exit().await, Some(0), "{}", third.log());
    assert_eq!(registrations(&ns.client).await, before, "the state before the first, not the dead URL");
}

#[tokio::test]
async fn an_in_cluster_leader_is_taken_over_only_when_asked_and_gets_its_registrations_back() {
    let _turn = LOCK.lock().await;
    let ns = TestNs::new("localwh3").await;
    ensure_crd(&ns.client).await;
    let _put_back = PutBackRegistrations::guarded(&ns.client).await;
    let before = registrations(&ns.client).await;
    let now = k8s_openapi::jiff::Timestamp::now();
    let leader: Lease = serde_json::from_value(json!({
        "metadata": { "name": kubectl_runner::manifests::LEADER_LEASE },
        "spec": { "holderIdentity": "runner-controller-manager-7d9f-abcde", "leaseDurationSeconds": 600,
                  "renewTime": now.to_string(), "acquireTime": now.to_string() },
    }))
    .unwrap();
    ns.api::<Lease>().create(&PostParams::default(), &leader).await.unwrap();

    let mut refused = Local::start(&ns, &[]);
    assert_ne!(refused.exit().await, Some(0));
    let log = refused.log();
    assert!(log.contains("runner-controller-manager-7d9f-abcde") && log.contains("--take-over"), "{log}");
    assert_eq!(registrations(&ns.client).await, before, "nothing touched");

    let mut taking = Local::start(&ns, &["--take-over"]);
    taking.wait_log(SERVING).await;
    taking.signal("-INT");
    assert_eq!(taking.exit().await, Some(0), "{}", taking.log());
    assert_eq!(registrations(&ns.client).await, before, "handed back");
}

#[tokio::test]
async fn an_address_the_apiserver_cannot_reach_fails_fast_and_leaves_nothing_behind() {
    let _turn = LOCK.lock().await;
    let ns = TestNs::new("localwh4").await;
    ensure_crd(&ns.client).await;
    let _put_back = PutBackRegistrations::guarded(&ns.client).await;
    let before = registrations(&ns.client).await;
    // Listening on 127.0.0.2 while the apiserver is told 127.0.0.1: refused.
    let mut local = Local::start(&ns, &["--webhook-host", "127.0.0.1", "--webhook-listen", "127.0.0.2:0"]);
    assert_ne!(local.exit().await, Some(0));
    let log = local.log();
    assert!(log.contains("cannot call") && log.contains("--webhook-host"), "{log}");
    assert_eq!(registrations(&ns.client).await, before);
}

#[tokio::test]
async fn after_kill_9_diagnose_names_the_dead_registrations_and_fix_puts_them_back() {
    let _turn = LOCK.lock().await;
    let ns = TestNs::new("localwh5").await;
    ensure_crd(&ns.client).await;
    let _put_back = PutBackRegistrations::guarded(&ns.client).await;
    let before = registrations(&ns.client).await;
    let mut local = Local::start(&ns, &[]);
    local.wait_log(SERVING).await;
    local.signal("-KILL");
    local.exit().await;

    let diagnose = |fix: bool| {
        let mut args = vec!["diagnose", "-n", &ns.name, "-o", "json", "--churn-window", "0", "--grace", "0s"];
        if fix {
            args.extend(["--fix", "--yes"]);
        }
        let args: Vec<String> = args.into_iter().map(String::from).collect();
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = support::cli(&refs).await;
            serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_default()
        }
    };
    let codes = |report: &serde_json::Value| -> Vec<String> {
        let findings = report["findings"].as_array().cloned().unwrap_or_default();
        findings.iter().filter_map(|f| f["code"].as_str().map(String::from)).collect()
    };
    // Served while its Lease lasts; abandoned once it lapses (15 s).
    let report = wait_for("diagnose to call the registrations abandoned", T, || async {
        let report = diagnose(false).await;
        codes(&report).first().is_some_and(|c| c == "local-webhooks-abandoned").then_some(report)
    })
    .await;
    let text = report.to_string();
    assert!(text.contains(&format!("pid {}", local.child.id())), "names the dead manager: {text}");
    diagnose(true).await;
    assert_eq!(registrations(&ns.client).await, before, "put back exactly");
    assert!(!codes(&diagnose(false).await).iter().any(|c| c.starts_with("local-webhooks")));
}
