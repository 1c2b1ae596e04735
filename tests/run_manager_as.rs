//! `kubectl runner run-manager --as-service-account NS/NAME` on the real
//! control plane: the local manager acts as a ServiceAccount whose
//! ClusterRole lacks `create deployments`, and must fail exactly as that
//! ServiceAccount's own token (what the in-cluster Pod holds) fails, naming
//! the verb; with the preflight skipped, each Runner meets the same denial.
//! Acting as a ServiceAccount needs `impersonate`, and its absence is said.
//!
//! Each test binds its own ServiceAccount in its own namespace to its own
//! ClusterRole (removed afterwards), never the installed manager's.

mod diagnose_util;
mod support;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use kubectl_runner::api::{Phase, Runner, RunnerSpec};
use kubectl_runner::service_account::{self, ServiceAccountRef};
use serde_json::json;

use diagnose_util::{ReleaseFinalizers, manager_rules, wait_rbac};
use support::{TestNs, ensure_crd, wait_for};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-runner");

/// Deletes the test's ClusterRole when dropped (namespaces clean up the rest).
struct ClusterRoleGuard(String);

impl Drop for ClusterRoleGuard {
    fn drop(&mut self) {
        let name = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let api: Api<ClusterRole> = Api::all(support::client().await);
                let _ = api.delete(&name, &DeleteParams::default()).await;
            });
        })
        .join();
    }
}

/// ServiceAccount `mgr` in the test namespace, bound there to a ClusterRole
/// holding every rule the manager needs except `create deployments`.
async fn without_create_deployments(ns: &TestNs) -> (ServiceAccountRef, ClusterRoleGuard) {
    let pp = PostParams::default();
    let sa: ServiceAccount = serde_json::from_value(json!({ "metadata": { "name": "mgr" } })).unwrap();
    ns.api::<ServiceAccount>().create(&pp, &sa).await.expect("create ServiceAccount");
    let mut rules = manager_rules();
    for r in rules.iter_mut().filter(|r| r.resources.as_deref() == Some(&["deployments".to_string()])) {
        r.verbs.retain(|v| v != "create");
    }
    let role_name = format!("{}-mgr", ns.name);
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta { name: Some(role_name.clone()), ..Default::default() },
        rules: Some(rules),
        ..Default::default()
    };
    Api::<ClusterRole>::all(ns.client.clone()).create(&pp, &role).await.expect("create ClusterRole");
    let guard = ClusterRoleGuard(role_name.clone());
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "mgr" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name },
        "subjects": [{ "kind": "ServiceAccount", "name": "mgr", "namespace": ns.name }],
    }))
    .unwrap();
    ns.api::<RoleBinding>().create(&pp, &binding).await.expect("create RoleBinding");
    wait_rbac(ns, "mgr", "list", "services").await;
    (format!("{}/mgr", ns.name).parse().unwrap(), guard)
}

/// A client holding a real token of the ServiceAccount: the identity the
/// in-cluster manager's Pod has.
async fn token_client(ns: &TestNs, sa: &ServiceAccountRef) -> kube::Client {
    let token = support::service_account_token(&ns.client, &ns.name, &sa.name).await;
    let mut cfg = kube::Config::infer().await.expect("kubeconfig");
    cfg.auth_info = serde_json::from_value(json!({ "token": token })).unwrap();
    kube::Client::try_from(cfg).expect("client with the token")
}

/// Runs the binary with `args`; `None` if it still runs after `limit`
/// (then it is stopped with TERM).
async fn run_for(args: &[String], limit: Duration) -> Option<Output> {
    let child = spawn(args);
    tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        let mut child = child;
        while start.elapsed() < limit {
            if child.try_wait().expect("wait for kubectl-runner").is_some() {
                return Some(child.wait_with_output().expect("collect output"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        stop(child);
        None
    })
    .await
    .unwrap()
}

fn spawn(args: &[String]) -> Child {
    Command::new(BIN)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kubectl-runner")
}

/// SIGTERM, as a Pod is stopped, then reap.
fn stop(mut child: Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn an_impersonated_manager_lacking_create_deployments_fails_exactly_as_its_service_account_does() {
    let ns = TestNs::new("as-sa").await;
    ensure_crd(&ns.client).await;
    let (sa, _role) = without_create_deployments(&ns).await;

    // The in-cluster manager's preflight, with the ServiceAccount's own token.
    let in_cluster = token_client(&ns, &sa).await;
    let expected = kubectl_runner::manager::preflight::check(
        &in_cluster,
        std::slice::from_ref(&ns.name),
        Some(&ns.name),
        false,
        None,
    )
    .await
    .expect_err("the ServiceAccount lacks create deployments")
    .to_string();
    let line = format!("can't create deployments.apps in namespace {}", ns.name);
    assert!(expected.contains(&line), "{expected}");
    assert!(
        expected.contains(&format!("(system:serviceaccount:{}:mgr) lacks 1 permission(s)", ns.name)),
        "{expected}"
    );

    let start = Instant::now();
    let args =
        strings(&["run-manager", "-n", &ns.name, "--as-service-account", &sa.to_string(), "--leader-elect"]);
    let out = run_for(&args, Duration::from_secs(60)).await.expect("the preflight stops the manager");
    eprintln!("run-manager --as-service-account failed its preflight in {:?}", start.elapsed());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&expected), "want the in-cluster refusal:\n{expected}\ngot:\n{stderr}");
}

#[tokio::test]
async fn with_the_preflight_skipped_each_runner_meets_the_service_accounts_denial() {
    let ns = TestNs::new("as-sa-run").await;
    let _release = ReleaseFinalizers(ns.name.clone());
    ensure_crd(&ns.client).await;
    let (sa, _role) = without_create_deployments(&ns).await;

    let args = strings(&[
        "run-manager",
        "-n",
        &ns.name,
        "--as-service-account",
        &sa.to_string(),
        "--skip-preflight",
    ]);
    let manager = spawn(&args);
    let spec = RunnerSpec::new("nginx:1.27");
    let runners = ns.api::<Runner>();
    runners.create(&PostParams::default(), &Runner::new("web", spec)).await.expect("create Runner");
    let message = wait_for("the Runner to report the denied create", Duration::from_secs(60), || {
        let runners = runners.clone();
        async move {
            let st = runners.get("web").await.ok()?.status?;
            (st.phase == Phase::Failed).then_some(st.message.unwrap_or_default())
        }
    })
    .await;
    stop(manager);
    let user = format!("\"system:serviceaccount:{}:mgr\"", ns.name);
    assert!(message.contains(&user), "{message}");
    assert!(message.contains("cannot create resource \"deployments\""), "{message}");
}

#[tokio::test]
async fn acting_as_a_service_account_needs_impersonate_and_says_so_before_starting() {
    let ns = TestNs::new("as-sa-imp").await;
    ensure_crd(&ns.client).await;
    let (sa, _role) = without_create_deployments(&ns).await;
    let other: ServiceAccountRef = format!("{}/other", ns.name).parse().unwrap();

    // The ServiceAccount's own token may not impersonate anyone.
    let refused = service_account::check_may_impersonate(&token_client(&ns, &sa).await, &other)
        .await
        .expect_err("mgr has no impersonate permission")
        .to_string();
    let who =
        format!("user \"system:serviceaccount:{}:mgr\" may not impersonate ServiceAccount {other}", ns.name);
    assert!(refused.contains(&who), "{refused}");
    assert!(
        refused.contains(&format!("verb impersonate on serviceaccounts in namespace {}", ns.name)),
        "{refused}"
    );

    // The test's admin may; acting as mgr, the apiserver sees mgr's user and
    // every group a token of it would carry.
    let mut cfg = kube::Config::infer().await.unwrap();
    let own = kube::Client::try_from(cfg.clone()).unwrap();
    service_account::act_as(&own, &mut cfg, &sa).await.expect("the admin may impersonate");
    let (user, groups) = service_account::whoami(&kube::Client::try_from(cfg).unwrap())
        .await
        .expect("SelfSubjectReview as the ServiceAccount");
    assert_eq!(user, sa.user());
    for g in sa.token_groups() {
        assert!(groups.contains(&g), "{g} missing from {groups:?}");
    }
}
