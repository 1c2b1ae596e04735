//! `bash scripts/run.sh`, the README's main job, run the way CI and a pipe
//! run it (stdin not a terminal) on the test cluster: it must succeed, its
//! `diagnose` step must see the manager it started (no "no manager" note),
//! and when it ends no `kubectl-runner run-manager` process it started may
//! still be running. Its demo Runner goes into the test's own namespace.

mod diagnose_util;
mod nested_cargo;
mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use diagnose_util::ReleaseFinalizers;
use support::TestNs;

/// Cold cargo build of the binary excluded (the test harness built it).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);

/// The cluster state directory and name behind $KUBECONFIG: up.sh writes
/// `<state>/kubeconfig`, and the state directory is named after the cluster.
fn cluster_of_kubeconfig() -> (PathBuf, String) {
    let kubeconfig = std::env::var("KUBECONFIG")
        .expect("KUBECONFIG must point at a cluster from tests/cluster/up.sh (run: bash tests/run.sh)");
    let path = PathBuf::from(&kubeconfig);
    let state = path.parent().map(Path::to_path_buf).unwrap_or_default();
    assert!(
        path.file_name().is_some_and(|f| f == "kubeconfig") && state.join("pids").is_dir(),
        "KUBECONFIG={kubeconfig} is not a tests/cluster/up.sh cluster (no pids/ next to it); \
         scripts/run.sh only runs on such a cluster: start one with tests/cluster/up.sh"
    );
    let name = state.file_name().unwrap().to_string_lossy().into_owned();
    (state, name)
}

/// Pids of `kubectl-runner run-manager` processes talking to `kubeconfig`
/// (their environment names it), so managers of other clusters on this
/// machine do not count.
fn managers_for(kubeconfig: &str) -> BTreeSet<u32> {
    let want_env = format!("KUBECONFIG={kubeconfig}");
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_manager = args.first().is_some_and(|a| a.ends_with(b"kubectl-runner"))
            && args.iter().any(|a| *a == b"run-manager");
        if !is_manager {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        if environ.split(|b| *b == 0).any(|v| v == want_env.as_bytes()) {
            out.insert(pid);
        }
    }
    out
}

#[tokio::test]
async fn the_main_job_run_without_a_terminal_leaves_no_manager_running_and_diagnose_sees_it() {
    let (state, cluster) = cluster_of_kubeconfig();
    let kubeconfig = std::env::var("KUBECONFIG").unwrap();
    let ns = TestNs::new("run-sh").await;
    let _release = ReleaseFinalizers(ns.name.clone());
    let before = managers_for(&kubeconfig);
    let log_path = state.join("logs/run-manager.log");

    // Files, not pipes: a pipe nobody reads while waiting could fill up.
    let out_path = std::env::temp_dir().join(format!("{}.stdout", ns.name));
    let err_path = std::env::temp_dir().join(format!("{}.stderr", ns.name));
    let out_file = std::fs::File::create(&out_path).expect("create the stdout file");
    let err_file = std::fs::File::create(&err_path).expect("create the stderr file");
    let start = Instant::now();
    let repo = env!("CARGO_MANIFEST_DIR");
    let mut child = nested_cargo::without_crate_env(&mut Command::new("bash"))
        .arg(format!("{repo}/scripts/run.sh"))
        .env("RUNNER_CLUSTER_STATE", &state)
        .env("RUNNER_CLUSTER_NAME", &cluster)
        .env("RUNNER_DEMO_NAMESPACE", &ns.name)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(out_file.try_clone().expect("stdout file"))
        .stderr(err_file.try_clone().expect("stderr file"))
        .spawn()
        .expect("spawn bash scripts/run.sh");
    let pid = child.id();
    let kc = kubeconfig.clone();
    // Also samples the manager processes while the script runs, so the
    // "none left" check below is known to see a manager when there is one.
    let (waited, seen) = tokio::task::spawn_blocking(move || {
        let mut seen = BTreeSet::new();
        while start.elapsed() < SCRIPT_TIMEOUT {
            if child.try_wait().expect("wait for scripts/run.sh").is_some() {
                return (Some(child.wait().expect("wait for scripts/run.sh")), seen);
            }
            seen.extend(managers_for(&kc));
            std::thread::sleep(Duration::from_millis(200));
        }
        // Its EXIT trap stops the manager on TERM as well.
        let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        let _ = child.wait();
        (None, seen)
    })
    .await
    .unwrap();
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = (std::fs::remove_file(&out_path), std::fs::remove_file(&err_path));
    let status = waited.unwrap_or_else(|| {
        panic!("scripts/run.sh did not finish in {SCRIPT_TIMEOUT:?}:\n{stdout}\n{stderr}")
    });
    eprintln!("scripts/run.sh took {:?}", start.elapsed());
    assert!(status.success(), "scripts/run.sh failed: {status}\n{stdout}\n{stderr}");

    let started: Vec<u32> = seen.difference(&before).copied().collect();
    assert!(!started.is_empty(), "no run-manager process was seen while scripts/run.sh ran:\n{stderr}");
    let left = managers_for(&kubeconfig).difference(&before).copied().collect::<Vec<_>>();
    assert!(left.is_empty(), "scripts/run.sh left manager processes running: {left:?}\n{stderr}");

    // The manager really ran, led, and was stopped by its own signal handler.
    let log = std::fs::read_to_string(&log_path).expect("the manager's log");
    assert!(log.contains("acquired leadership"), "{log}");

    // The demo's last step: diagnose saw the manager and found nothing.
    assert!(
        stdout.contains(&format!("No problems found: Runner {}/demo", ns.name)),
        "diagnose found problems:\n{stdout}"
    );
    for absent in ["manager-not-visible", "manager-absent", "manager absent"] {
        assert!(!stdout.contains(absent), "diagnose reported {absent:?}:\n{stdout}");
    }
    assert!(stdout.contains("manager-leader"), "diagnose names the leader:\n{stdout}");

    // It leaves a Runner with a finalizer and no manager: its last lines say
    // how to delete it and how to stop the cluster.
    let tail: String = stderr.lines().rev().take(10).collect::<Vec<_>>().join("\n");
    for said in [
        format!("kubectl runner delete demo -n {} --wait", ns.name),
        "kubectl runner run-manager".into(),
        "bash tests/cluster/down.sh".into(),
    ] {
        assert!(tail.contains(&said), "the last lines say {said:?}:\n{tail}");
    }
}
