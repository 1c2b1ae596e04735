//! kubectl's standard connection flags and the error lines a kubectl user
//! can act on, with the real binary against the local control plane:
//! `--as` a tenant ServiceAccount meets exactly its denials; `--token` and
//! `--server` need no kubeconfig; `--as-uid` reaches the apiserver; a
//! server that never answers, a closed port, an unknown CA and a bad token
//! each end in one line naming the server and what to check, with no
//! library log line and no colour on a stderr that is not a terminal.
//!
//! The dead servers are loopback sockets this test opens itself, so the
//! shared cluster is never stopped.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::json;

use support::{TestNs, ensure_crd, wait_for};

const NO_KUBECONFIG: &str = "/nonexistent/kubeconfig";

/// Runs the binary; `kubeconfig` replaces `$KUBECONFIG` when given.
/// `NO_COLOR` is unset: stderr is a pipe, which alone must turn colour off.
fn run(args: &[&str], kubeconfig: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kubectl-runner"));
    cmd.args(args).env_remove("NO_COLOR").env_remove("RUST_LOG");
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    cmd.output().expect("run kubectl-runner")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A failed command: exit 1 and exactly one `error:` line, no library log
/// line, no escape sequence.
fn one_error_line(o: &Output) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("kube_client") && !err.contains('\x1b'), "no library log, no colour: {err:?}");
    err
}

/// ServiceAccount `dev` in `ns`, allowed only to get and list Runners there.
async fn tenant(ns: &TestNs) -> String {
    let pp = PostParams::default();
    let sa: ServiceAccount = serde_json::from_value(json!({ "metadata": { "name": "dev" } })).unwrap();
    ns.api::<ServiceAccount>().create(&pp, &sa).await.expect("create ServiceAccount");
    let role: Role = serde_json::from_value(json!({ "metadata": { "name": "runner-reader" },
        "rules": [{ "apiGroups": ["lab.cloudlab.training"], "resources": ["runners"], "verbs": ["get", "list"] }] }))
    .unwrap();
    ns.api::<Role>().create(&pp, &role).await.expect("create Role");
    let binding: RoleBinding = serde_json::from_value(json!({ "metadata": { "name": "dev" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "runner-reader" },
        "subjects": [{ "kind": "ServiceAccount", "name": "dev", "namespace": ns.name }] }))
    .unwrap();
    ns.api::<RoleBinding>().create(&pp, &binding).await.expect("create RoleBinding");
    let user = format!("system:serviceaccount:{}:dev", ns.name);
    // RBAC is cached by the apiserver's authorizer: wait until it answers yes.
    let mut client_cfg = kube::Config::infer().await.unwrap();
    client_cfg.auth_info.impersonate = Some(user.clone());
    let as_dev = kube::Client::try_from(client_cfg).unwrap();
    let review: SelfSubjectAccessReview = serde_json::from_value(json!({ "spec": { "resourceAttributes": {
        "namespace": ns.name, "verb": "list", "group": "lab.cloudlab.training", "resource": "runners" } } }))
    .unwrap();
    wait_for("the Role to take effect", Duration::from_secs(30), || {
        let (api, review) = (Api::<SelfSubjectAccessReview>::all(as_dev.clone()), review.clone());
        async move {
            api.create(&PostParams::default(), &review).await.ok()?.status.filter(|s| s.allowed).map(|_| ())
        }
    })
    .await;
    user
}

/// The cluster's CA, as every namespace's `kube-root-ca.crt` holds it,
/// written to a file of its own (removed by the caller).
async fn cluster_ca(ns: &TestNs) -> PathBuf {
    let pem = wait_for("kube-root-ca.crt", Duration::from_secs(30), || {
        let api = ns.api::<ConfigMap>();
        async move { api.get_opt("kube-root-ca.crt").await.ok().flatten()?.data?.get("ca.crt").cloned() }
    })
    .await;
    let path = std::env::temp_dir().join(format!("{}-ca.crt", ns.name));
    std::fs::write(&path, pem).expect("write the CA");
    path
}

async fn server_url() -> String {
    kube::Config::infer().await.expect("kubeconfig").cluster_url.to_string()
}

#[tokio::test]
async fn acting_as_a_tenant_service_account_meets_exactly_its_denials() {
    let ns = TestNs::new("flags-as").await;
    ensure_crd(&ns.client).await;
    let user = tenant(&ns).await;
    let list = run(&["get", "-n", &ns.name, "--as", &user], None);
    assert_eq!(list.status.code(), Some(0), "list in its own namespace: {}", stderr(&list));

    let elsewhere = one_error_line(&run(&["get", "-n", "default", "--as", &user], None));
    assert!(elsewhere.contains("Error from server (Forbidden)"), "{elsewhere}");
    assert!(elsewhere.contains(&format!("User \"{user}\" cannot list resource \"runners\"")), "{elsewhere}");
    assert!(elsewhere.contains("in the namespace \"default\""), "{elsewhere}");
    assert!(elsewhere.contains("- ask for that permission"), "{elsewhere}");

    let create = run(&["create", "web", "--image", "nginx:1.27", "-n", &ns.name, "--as", &user], None);
    let create = one_error_line(&create);
    assert!(create.contains(&format!("User \"{user}\" cannot create resource \"runners\"")), "{create}");
}

#[tokio::test]
async fn a_token_and_a_server_reach_the_cluster_without_any_kubeconfig() {
    let ns = TestNs::new("flags-token").await;
    ensure_crd(&ns.client).await;
    tenant(&ns).await;
    let token = support::service_account_token(&ns.client, &ns.name, "dev").await;
    let (server, ca) = (server_url().await, cluster_ca(&ns).await);
    let ca_flag = format!("--certificate-authority={}", ca.display());
    let with_ca =
        run(&["get", "-n", &ns.name, "--token", &token, "-s", &server, &ca_flag], Some(NO_KUBECONFIG));
    let insecure = run(
        &["get", "-n", &ns.name, "--token", &token, "--server", &server, "--insecure-skip-tls-verify"],
        Some(NO_KUBECONFIG),
    );
    let _ = std::fs::remove_file(&ca);
    assert_eq!(with_ca.status.code(), Some(0), "with the CA: {}", stderr(&with_ca));
    assert_eq!(insecure.status.code(), Some(0), "insecure: {}", stderr(&insecure));
    for o in [&with_ca, &insecure] {
        assert!(stderr(o).contains(&format!("No Runners found in {} namespace.", ns.name)), "{}", stderr(o));
    }
}

#[tokio::test]
async fn an_unknown_host_an_unknown_ca_and_a_bad_token_each_say_what_to_check() {
    let dns = run(&["get", "--server", "https://runner-flags-test.invalid:6443"], Some(NO_KUBECONFIG));
    let dns = one_error_line(&dns);
    assert!(dns.contains("Unable to connect to the server runner-flags-test.invalid:6443"), "{dns}");
    assert!(dns.contains("cannot resolve the host name runner-flags-test.invalid"), "{dns}");

    let server = server_url().await;
    let authority = server.trim_start_matches("https://").trim_end_matches('/').to_string();
    let tls = one_error_line(&run(&["get", "--server", &server, "--token", "x"], Some(NO_KUBECONFIG)));
    assert!(
        tls.contains(&format!("Unable to connect to the server {authority}: TLS handshake failed")),
        "{tls}"
    );
    assert!(tls.contains("--certificate-authority"), "{tls}");

    let bad =
        run(&["get", "--server", &server, "--insecure-skip-tls-verify", "--token", "x"], Some(NO_KUBECONFIG));
    let bad = one_error_line(&bad);
    assert!(
        bad.contains(&format!("You must be logged in to the server {authority} (Unauthorized)")),
        "{bad}"
    );
    assert!(bad.contains("--token"), "{bad}");
}

#[tokio::test]
async fn impersonating_a_uid_and_groups_reaches_the_apiserver() {
    let args =
        ["kubectl-runner", "--as", "flags-test-user", "--as-uid", "u-4242", "--as-group", "team-a", "get"];
    let cli = kubectl_runner::cli::Cli::try_parse_from(args).expect("flags parse");
    let ctx = cli.globals.connect().await.expect("connect");
    let review = Api::<SelfSubjectReview>::all(ctx.client)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("SelfSubjectReview as the impersonated user");
    let user = review.status.and_then(|s| s.user_info).expect("user info");
    assert_eq!(user.username.as_deref(), Some("flags-test-user"));
    assert_eq!(user.uid.as_deref(), Some("u-4242"));
    assert!(user.groups.unwrap_or_default().contains(&"team-a".to_string()));
}

#[test]
fn a_server_that_never_answers_fails_within_the_request_timeout_naming_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let addr = listener.local_addr().unwrap();
    // Accept and hold every connection, never writing a byte.
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().collect();
        drop(held);
    });
    let server = format!("https://{addr}");
    let start = Instant::now();
    let o = run(
        &["get", "-s", &server, "--insecure-skip-tls-verify", "--request-timeout=2s"],
        Some(NO_KUBECONFIG),
    );
    let took = start.elapsed();
    println!("--request-timeout=2s against a silent server: failed after {took:?}");
    let err = one_error_line(&o);
    assert!(err.contains(&format!("Unable to connect to the server {addr}: no answer within 2s")), "{err}");
    assert!(err.contains("(--request-timeout)"), "{err}");
    assert!(took < Duration::from_secs(20), "bounded by the flag, not by a default: {took:?}");
}

#[test]
fn a_closed_port_gets_kubectls_refused_line_and_nothing_else() {
    let addr = support::free_loopback_addr();
    let o = run(&["get", "--server", &format!("https://{addr}"), "--token", "x"], Some(NO_KUBECONFIG));
    let err = one_error_line(&o);
    assert_eq!(
        err,
        format!(
            "error: The connection to the server {addr} was refused - did you specify the right host or port?\n"
        )
    );
}

#[test]
fn library_log_lines_wait_for_verbose_and_have_no_colour_on_a_pipe() {
    let server = format!("https://{}", support::free_loopback_addr());
    let quiet = run(&["get", "-s", &server], Some(NO_KUBECONFIG));
    assert!(!stderr(&quiet).contains("kube_client"), "{}", stderr(&quiet));
    let verbose = run(&["get", "-s", &server, "-v"], Some(NO_KUBECONFIG));
    let err = stderr(&verbose);
    assert!(err.contains("kube_client") && err.contains("error: The connection to the server"), "{err}");
    assert!(!err.contains('\x1b'), "stderr is a pipe: no colour: {err:?}");
}

#[test]
fn completion_offers_the_connection_flags() {
    let o = run(&["__complete", "describe", "--request-t"], Some(NO_KUBECONFIG));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).lines().next().map(|l| l.split('\t').next()),
        Some(Some("--request-timeout"))
    );
    let o = run(&["__complete", "get", "--as"], Some(NO_KUBECONFIG));
    let offered: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    assert_eq!(offered, ["--as", "--as-group", "--as-uid", ":4"]);
}

#[test]
fn as_service_account_and_as_together_are_a_usage_error() {
    let o = run(&["run-manager", "--as-service-account", "a/b", "--as", "me"], Some(NO_KUBECONFIG));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be combined with --as"), "{}", stderr(&o));
    let o = run(&["get", "--as-group", "g"], Some(NO_KUBECONFIG));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--as-group and --as-uid need --as"), "{}", stderr(&o));
}
