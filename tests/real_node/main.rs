//! The manager's own image, installed with `kubectl runner install
//! --with-manager`, running on the local cluster's real node and serving a
//! Runner whose Pods answer HTTP (tests/cluster/real-node.sh).
//!
//! Every test here is `#[ignore]`d, so `cargo test --all-targets` lists them
//! as ignored instead of passing them: they need a cluster started with
//! `RUNNER_CLUSTER_REAL_NODE=1`, the image from `scripts/image.sh` loaded
//! into that node, and this process inside the cluster's network namespace
//! (ClusterIPs route there only). tests/run.sh does all three and then runs
//! `cargo test --test real_node -- --ignored` when the cluster has the real
//! node. Run that way, a missing real node or image is a failure, never a
//! skip.
//!
//! The test owns the cluster-wide manager while it runs (it reconciles
//! Runners in every namespace), so it runs alone, after the other targets.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use kubectl_runner::api::{Runner, RunnerSpec};
use kubectl_runner::cli::create;
use kubectl_runner::manifests::{MANAGER_NAME, MANAGER_NAMESPACE, MANAGER_ROLE};
use support::{TestNs, cli, client, wait_for};

/// Label and NoSchedule taint key of the real node (tests/cluster/lib.sh).
const REAL_NODE_LABEL: &str = "kubectl-runner.test/real-node";
/// The busybox httpd image real-node.sh builds; it serves on 8080.
const WEB_IMAGE: &str = "localhost/kubectl-runner/busybox-httpd:2";
const WEB_PORT: i32 = 8080;
/// Set by tests/run.sh to the image scripts/image.sh built and loaded.
const IMAGE_ENV: &str = "RUNNER_TEST_MANAGER_IMAGE";
const FIELD_MANAGER: &str = "kubectl-runner-tests";

/// Pods in a namespace with these annotations get the real node's selector
/// and toleration from the apiserver (PodNodeSelector and
/// PodTolerationRestriction, on when the cluster has the real node), so no
/// manifest needs to know about the test cluster.
async fn send_pods_to_the_real_node(client: &Client, ns: &str) {
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": ns, "annotations": {
            "scheduler.alpha.kubernetes.io/node-selector": format!("{REAL_NODE_LABEL}=true"),
            "scheduler.alpha.kubernetes.io/defaultTolerations":
                format!(r#"[{{"key":"{REAL_NODE_LABEL}","operator":"Exists","effect":"NoSchedule"}}]"#),
        }},
    });
    Api::<Namespace>::all(client.clone())
        .patch(ns, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
        .await
        .unwrap_or_else(|e| panic!("annotate namespace {ns} for the real node: {e}"));
}

/// The real node, Ready; panics (the test fails) when the cluster has none.
async fn real_node(client: &Client) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels(&format!("{REAL_NODE_LABEL}=true")))
        .await
        .expect("list nodes");
    let node = list.items.into_iter().next().unwrap_or_else(|| {
        panic!(
            "the cluster has no node labelled {REAL_NODE_LABEL}=true: start it with \
             RUNNER_CLUSTER_REAL_NODE=1 bash tests/cluster/up.sh"
        )
    });
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    assert!(ready, "the real node {} is not Ready", node.name_any());
    node.name_any()
}

/// `GET http://ip:port/` over a plain TCP connection; the status code.
/// Blocking std I/O on a worker thread: the dependency set has no HTTP client.
async fn http_get_status(ip: &str, port: i32) -> Option<u16> {
    use std::io::{Read, Write};
    let addr: std::net::SocketAddr = format!("{ip}:{port}").parse().ok()?;
    tokio::task::spawn_blocking(move || {
        let t = Duration::from_secs(3);
        let mut s = std::net::TcpStream::connect_timeout(&addr, t).ok()?;
        s.set_read_timeout(Some(t)).ok()?;
        s.write_all(format!("GET / HTTP/1.0\r\nHost: {}\r\n\r\n", addr.ip()).as_bytes()).ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).ok()?;
        String::from_utf8_lossy(&buf).split_whitespace().nth(1)?.parse().ok()
    })
    .await
    .ok()?
}

/// The node's view of a Pod's memory (kubelet summary API, through the
/// apiserver's node proxy): working set and RSS in bytes.
async fn pod_memory(client: &Client, node: &str, ns: &str, pod: &str) -> Option<(u64, u64)> {
    let req =
        http::Request::get(format!("/api/v1/nodes/{node}/proxy/stats/summary")).body(Vec::new()).ok()?;
    let summary: serde_json::Value = client.request(req).await.ok()?;
    let p = summary["pods"]
        .as_array()?
        .iter()
        .find(|p| p["podRef"]["namespace"] == ns && p["podRef"]["name"] == pod)?;
    Some((p["memory"]["workingSetBytes"].as_u64()?, p["memory"]["rssBytes"].as_u64()?))
}

/// Removes what the test installed in the cluster, also when it panics: the
/// RBAC put back as install writes it (a test may have cut it), the test
/// namespace's Runners while the manager still runs (their finalizer), then
/// the manager's namespace. The CRD and RBAC stay.
struct InstalledManager {
    runners_ns: String,
}

impl Drop for InstalledManager {
    fn drop(&mut self) {
        let ns = self.runners_ns.clone();
        let _ = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-runner")).arg("install").output();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let client = client().await;
                let runners: Api<Runner> = Api::namespaced(client.clone(), &ns);
                let _ = runners.delete_collection(&DeleteParams::default(), &Default::default()).await;
                let deadline = Instant::now() + Duration::from_secs(60);
                while Instant::now() < deadline {
                    match runners.list(&Default::default()).await {
                        Ok(l) if l.items.is_empty() => break,
                        _ => tokio::time::sleep(Duration::from_millis(500)).await,
                    }
                }
                let _ = Api::<Namespace>::all(client)
                    .delete(MANAGER_NAMESPACE, &DeleteParams::background())
                    .await;
            });
        })
        .join();
    }
}

/// Installs CRD, RBAC and the manager Deployment with `image`, its Pods (and
/// those of `ns`) sent to the real node; waits until the Deployment has a
/// Ready replica, i.e. its readiness probe passed. The manager Pod and the
/// time from install to Ready.
async fn install_manager(client: &Client, image: &str, node: &str, ns: &TestNs) -> (Pod, Duration) {
    // The manager's namespace exists before install, annotated, so that the
    // Deployment's first Pod already goes to the real node.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if let Some(old) = namespaces.get_opt(MANAGER_NAMESPACE).await.expect("get namespace")
        && old.metadata.deletion_timestamp.is_some()
    {
        wait_for("the previous manager namespace to be gone", Duration::from_secs(120), || {
            let namespaces = namespaces.clone();
            async move { namespaces.get_opt(MANAGER_NAMESPACE).await.ok()?.is_none().then_some(()) }
        })
        .await;
    }
    send_pods_to_the_real_node(client, MANAGER_NAMESPACE).await;
    send_pods_to_the_real_node(client, &ns.name).await;

    let installed_at = Instant::now();
    let out = cli(&["install", "--with-manager", "--image", image]).await;
    assert!(
        out.status.success(),
        "install failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Ready through its own probes: /readyz answers only once the caches
    // are synced and the Lease is held.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    wait_for("the manager Deployment to have a Ready replica", Duration::from_secs(120), || {
        let deployments = deployments.clone();
        async move {
            let d = deployments.get(MANAGER_NAME).await.ok()?;
            (d.status?.ready_replicas? >= 1).then_some(())
        }
    })
    .await;
    let to_ready = installed_at.elapsed();
    let pods: Api<Pod> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let manager_pod = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=runner-controller-manager"))
        .await
        .expect("list manager pods")
        .items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .expect("a manager Pod");
    let spec = manager_pod.spec.as_ref().expect("pod spec");
    assert_eq!(spec.node_name.as_deref(), Some(node), "the manager runs on the real node");
    (manager_pod, to_ready)
}

#[tokio::test]
#[ignore = "needs the real node: tests/run.sh runs it when the cluster has one"]
async fn the_manager_image_runs_on_the_real_node_and_its_runner_answers_http_through_its_service() {
    let image = std::env::var(IMAGE_ENV)
        .unwrap_or_else(|_| panic!("{IMAGE_ENV} is not set: build and load the image as tests/run.sh does"));
    let client = client().await;
    let node = real_node(&client).await;
    let ns = TestNs::new("realnode").await;
    let _cleanup = InstalledManager { runners_ns: ns.name.clone() };

    let (manager_pod, to_ready) = install_manager(&client, &image, &node, &ns).await;
    eprintln!("manager Ready {:.1} s after install", to_ready.as_secs_f64());

    // A Runner whose Pods are real web servers.
    let spec = RunnerSpec { image: WEB_IMAGE.into(), replicas: 1, port: WEB_PORT, host: None };
    let runner = create::from_flags("web", &ns.name, spec).expect("valid Runner");
    let runners: Api<Runner> = ns.api();
    runners.create(&Default::default(), &runner).await.expect("create Runner");
    let status = wait_for("the Runner to have 1 ready replica", Duration::from_secs(120), || {
        let runners = runners.clone();
        async move {
            let s = runners.get("web").await.ok()?.status?;
            (s.ready_replicas == 1 && s.url.is_some()).then_some(s)
        }
    })
    .await;
    let runner_pods: Api<Pod> = ns.api();
    for p in runner_pods.list(&ListParams::default()).await.expect("list Runner pods").items {
        assert_eq!(
            p.spec.and_then(|s| s.node_name).as_deref(),
            Some(node.as_str()),
            "{}",
            p.metadata.name.unwrap_or_default()
        );
    }

    // Through kube-proxy: the Service's ClusterIP, from this network namespace.
    let svc: Service = ns.api().get("web").await.expect("the Runner's Service");
    let svc_spec = svc.spec.expect("service spec");
    let ip = svc_spec.cluster_ip.expect("a ClusterIP");
    let port = svc_spec.ports.expect("ports")[0].port;
    let code = wait_for("HTTP 200 from the Runner's Service", Duration::from_secs(30), || {
        let ip = ip.clone();
        async move { http_get_status(&ip, port).await.filter(|c| *c == 200) }
    })
    .await;
    assert_eq!(code, 200);

    // status.url names that Service and the port that answered.
    let url = status.url.expect("status.url");
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, url_port) = match rest.split_once(':') {
        Some((h, p)) => (h, p.parse::<i32>().expect("a numeric port")),
        None => (rest, 80),
    };
    assert_eq!(host, format!("web.{}.svc.cluster.local", ns.name));
    assert_eq!(url_port, port, "status.url {url} vs Service port {port}");

    // A figure, not an assertion. The kubelet's first stats of a new Pod
    // come after its housekeeping interval; on cgroup v1 "rss" is anonymous
    // memory only (the binary's mapped text counts in the working set).
    let name = manager_pod.name_any();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match pod_memory(&client, &node, MANAGER_NAMESPACE, &name).await {
            Some((ws, rss)) if ws > 0 => {
                eprintln!("manager Pod memory: working set {} KiB, rss {} KiB", ws / 1024, rss / 1024);
                break;
            }
            _ if Instant::now() > deadline => {
                eprintln!("manager Pod memory: not reported by the kubelet within 30 s");
                break;
            }
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// Whether the manager's ServiceAccount may `verb` Deployments in `ns`.
async fn manager_may(client: &Client, verb: &str, ns: &str) -> bool {
    let review: SubjectAccessReview = serde_json::from_value(serde_json::json!({
        "spec": {
            "user": format!("system:serviceaccount:{MANAGER_NAMESPACE}:{MANAGER_NAME}"),
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{MANAGER_NAMESPACE}"), "system:authenticated"],
            "resourceAttributes": { "group": "apps", "resource": "deployments", "verb": verb, "namespace": ns },
        }
    }))
    .expect("a SubjectAccessReview");
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let done = api.create(&Default::default(), &review).await.expect("create SubjectAccessReview");
    done.status.is_some_and(|s| s.allowed)
}

/// Restart count of the manager Pod's one container.
fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .map_or(0, |c| c.restart_count)
}

/// The source material's failure, for real: the manager runs in the cluster
/// with its ServiceAccount, the Deployment rules are cut from its
/// ClusterRole, a Runner gets no Deployment, `diagnose` names the missing
/// verbs, and putting the RBAC back heals it with the same Pod, no restart.
/// (Cut before the manager starts, the manager refuses to start instead: its
/// preflight lists the missing permissions and exits, CrashLoopBackOff.)
#[tokio::test]
#[ignore = "needs the real node: tests/run.sh runs it when the cluster has one"]
async fn without_its_deployment_rules_the_ready_manager_creates_no_children_diagnose_names_the_verbs_and_restoring_them_heals_it_without_a_restart()
 {
    let image = std::env::var(IMAGE_ENV)
        .unwrap_or_else(|_| panic!("{IMAGE_ENV} is not set: build and load the image as tests/run.sh does"));
    let client = client().await;
    let node = real_node(&client).await;
    let ns = TestNs::new("realrbac").await;
    let _cleanup = InstalledManager { runners_ns: ns.name.clone() };
    let (manager_pod, _) = install_manager(&client, &image, &node, &ns).await;

    // Cut every Deployment rule from the ClusterRole install made.
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let mut role = roles.get(MANAGER_ROLE).await.expect("the manager's ClusterRole");
    let rules = role.rules.take().unwrap_or_default();
    let kept: Vec<_> = rules
        .into_iter()
        .filter(|r| !r.resources.as_ref().is_some_and(|rs| rs.iter().any(|x| x == "deployments")))
        .collect();
    role.rules = Some(kept);
    role.metadata.managed_fields = None;
    roles.replace(MANAGER_ROLE, &Default::default(), &role).await.expect("replace the ClusterRole");
    wait_for("RBAC to deny the manager Deployments", Duration::from_secs(30), || {
        let client = client.clone();
        let ns = ns.name.clone();
        async move { (!manager_may(&client, "create", &ns).await).then_some(()) }
    })
    .await;

    let spec = RunnerSpec { image: WEB_IMAGE.into(), replicas: 1, port: WEB_PORT, host: None };
    let runner = create::from_flags("web", &ns.name, spec).expect("valid Runner");
    let runners: Api<Runner> = ns.api();
    runners.create(&Default::default(), &runner).await.expect("create Runner");
    let message = wait_for("the Runner's status to report the refusal", Duration::from_secs(60), || {
        let runners = runners.clone();
        async move {
            let m = runners.get("web").await.ok()?.status?.message?;
            m.contains("forbidden").then_some(m)
        }
    })
    .await;
    assert!(message.contains("deployments"), "{message}");
    let deployments: Api<Deployment> = ns.api();
    assert!(
        deployments.list(&Default::default()).await.expect("list").items.is_empty(),
        "no Deployment was created"
    );
    let manager: Api<Deployment> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let ready =
        manager.get(MANAGER_NAME).await.expect("manager Deployment").status.and_then(|s| s.ready_replicas);
    assert_eq!(ready, Some(1), "the manager stays Ready");

    let out = cli(&["diagnose", "-n", &ns.name]).await;
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "diagnose exits with findings:\n{report}");
    assert!(report.contains(&format!("ServiceAccount {MANAGER_NAMESPACE}/{MANAGER_NAME}")), "{report}");
    for verb in ["get", "list", "watch", "create", "patch", "delete"] {
        assert!(
            report.contains(&format!("can't {verb} deployments.apps")),
            "diagnose names {verb}:\n{report}"
        );
    }

    // Put the RBAC back the way users would, and watch the same Pod heal.
    let healed_from = Instant::now();
    let out = cli(&["install", "--with-manager", "--image", &image]).await;
    assert!(out.status.success(), "install: {}", String::from_utf8_lossy(&out.stderr));
    wait_for("the Runner to have 1 ready replica after the RBAC is back", Duration::from_secs(120), || {
        let runners = runners.clone();
        async move { (runners.get("web").await.ok()?.status?.ready_replicas == 1).then_some(()) }
    })
    .await;
    eprintln!("healed {:.1} s after the RBAC was restored", healed_from.elapsed().as_secs_f64());
    let pods: Api<Pod> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let now = pods.get(&manager_pod.name_any()).await.expect("the same manager Pod");
    assert_eq!(restarts(&now), restarts(&manager_pod), "the manager did not restart");
}
