//! The manager image runs in the cluster and a Runner serves real traffic.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kubectl_runner::api::{Runner, RunnerSpec};
use kubectl_runner::cli::create;
use kubectl_runner::manifests::MANAGER_NAMESPACE;

use crate::fixture::*;
use crate::support::{TestNs, client, http_get, wait_for};

#[tokio::test]
#[ignore = "needs the real node: tests/run.sh runs it when the cluster has one"]
async fn the_manager_image_runs_on_the_real_node_and_its_runner_answers_http_through_its_service() {
    let image = image(IMAGE_ENV);
    let client = client().await;
    let node = real_node(&client).await;
    let ns = TestNs::new("realnode").await;
    let _cleanup = InstalledManager { runners_ns: ns.name.clone() };

    let (manager_pod, to_ready) = install_manager(&client, &image, &node, &ns).await;
    eprintln!("manager Ready {:.1} s after install", to_ready.as_secs_f64());

    // A Runner whose Pods are real web servers.
    let spec = RunnerSpec::new(WEB_IMAGE).port(WEB_PORT);
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
        async move {
            let addr = std::net::SocketAddr::new(ip.parse().ok()?, u16::try_from(port).ok()?);
            http_get(addr, "/", None).await.map(|r| r.0).filter(|c| *c == 200)
        }
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
