//! The apiserver is killed in the middle of a burst of creations and
//! started again: the manager's watches must relist and every Runner, those
//! created before, during and after the outage, must become Ready within a
//! minute of the apiserver's return. One test in its own binary: it stops
//! the shared apiserver, so nothing else may run beside it.

mod oracle;
mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use kube::api::PostParams;
use kubectl_runner::api::{Runner, RunnerSpec};
use support::{ManagerHandle, TestNs, ensure_crd};

/// The cluster's state dir holds the kubeconfig the tests use.
fn state_dir() -> PathBuf {
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG from tests/cluster/up.sh");
    PathBuf::from(kubeconfig).parent().expect("state dir").to_path_buf()
}

fn kill_apiserver() {
    let pid =
        std::fs::read_to_string(state_dir().join("pids/kube-apiserver.pid")).expect("apiserver pid file");
    let status = Command::new("kill").arg("-9").arg(pid.trim()).status().expect("kill");
    assert!(status.success(), "the apiserver was running");
}

/// `up.sh` restarts the components that stopped and waits until ready.
fn start_apiserver() {
    let up = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cluster/up.sh");
    let out =
        Command::new("bash").arg(up).env("RUNNER_CLUSTER_STATE", state_dir()).output().expect("run up.sh");
    assert!(out.status.success(), "up.sh failed: {}", String::from_utf8_lossy(&out.stderr));
}

async fn create(ns: &TestNs, i: usize) -> bool {
    let spec = RunnerSpec::new("nginx:1.27");
    ns.api::<Runner>().create(&PostParams::default(), &Runner::new(&format!("r{i}"), spec)).await.is_ok()
}

#[tokio::test]
async fn after_an_apiserver_restart_every_runner_converges_within_a_minute() {
    let ns = TestNs::new("restart").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    for i in 0..4 {
        assert!(create(&ns, i).await);
    }
    oracle::wait_converged(&ns, "r0", true, Duration::from_secs(60), "before the restart").await;
    // Creations go on while the apiserver dies; those refused are retried.
    let mut pending: Vec<usize> = Vec::new();
    for i in 4..8 {
        if i == 6 {
            kill_apiserver();
        }
        if !create(&ns, i).await {
            pending.push(i);
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    start_apiserver();
    let back = Instant::now();
    for i in pending {
        assert!(
            create(&ns, i).await || ns.api::<Runner>().get_opt(&format!("r{i}")).await.unwrap().is_some()
        );
    }
    for i in 8..12 {
        assert!(create(&ns, i).await, "create after the return");
    }
    for i in 0..12 {
        let left = Duration::from_secs(60).saturating_sub(back.elapsed());
        oracle::wait_converged(&ns, &format!("r{i}"), true, left, "after the apiserver's return").await;
    }
    eprintln!("all 12 Runners converged {:?} after the apiserver was back", back.elapsed());
    mgr.stop_after_cleanup(&ns).await;
}
