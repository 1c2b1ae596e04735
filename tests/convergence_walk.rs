//! A seeded random walk over Runner specs on the real control plane: image,
//! replicas, port and host change by each way kubectl writes (merge patch,
//! JSON patch, server-side apply, replace), some while the manager is
//! stopped. After each step the children must equal what `desired` computes
//! for the Runner's current spec and the status must catch up.
//!
//! `RUNNER_WALK_SEED=N` replays a walk; every failure names its seed.

mod oracle;
mod support;

use std::time::Duration;

use kube::api::{Patch, PatchParams, PostParams};
use kubectl_runner::api::{Runner, RunnerSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::{ManagerHandle, TestNs, ensure_crd};

const STEPS: usize = 44;
const T: Duration = Duration::from_secs(60);
const IMAGES: &[&str] = &["nginx:1.27", "nginx:1.28", "httpd:2.4", "example/web:v3"];
const PORTS: &[i32] = &[80, 8080, 9090, 3000];
const HOSTS: &[&[&str]] = &[&[], &["a.example.com"], &["b.example.com", "a.example.com"]];

#[derive(Debug, Clone, Copy)]
enum Writer {
    Merge,
    Json,
    Apply,
    Replace,
}

/// A new spec differing from `from` in one or two fields.
fn next_spec(rng: &mut StdRng, from: &RunnerSpec) -> RunnerSpec {
    let mut s = from.clone();
    for _ in 0..rng.random_range(1..=2) {
        match rng.random_range(0..4) {
            0 => s.image = IMAGES[rng.random_range(0..IMAGES.len())].into(),
            1 => s.replicas = rng.random_range(1..=3),
            2 => s.expose.port = PORTS[rng.random_range(0..PORTS.len())],
            _ => {
                s.expose.hosts =
                    HOSTS[rng.random_range(0..HOSTS.len())].iter().map(|h| h.to_string()).collect()
            }
        }
    }
    s
}

/// Writes `to` the way `writer` does; `from` is what the writer last saw.
async fn write(ns: &TestNs, writer: Writer, from: &RunnerSpec, to: &RunnerSpec) {
    let api = ns.api::<Runner>();
    let spec = serde_json::to_value(to).unwrap();
    match writer {
        Writer::Merge => {
            // `kubectl patch --type=merge`: null removes the hosts.
            let mut p = spec.clone();
            p["expose"]["hosts"] =
                if to.expose.hosts.is_empty() { Value::Null } else { json!(to.expose.hosts) };
            api.patch("web", &PatchParams::default(), &Patch::Merge(json!({ "spec": p }))).await.unwrap();
        }
        Writer::Json => {
            let mut ops = vec![
                json!({ "op": "replace", "path": "/spec/image", "value": to.image }),
                json!({ "op": "replace", "path": "/spec/replicas", "value": to.replicas }),
                json!({ "op": "replace", "path": "/spec/expose/port", "value": to.expose.port }),
            ];
            match (from.expose.hosts.is_empty(), to.expose.hosts.is_empty()) {
                (_, false) => {
                    ops.push(json!({ "op": "add", "path": "/spec/expose/hosts", "value": to.expose.hosts }))
                }
                (false, true) => ops.push(json!({ "op": "remove", "path": "/spec/expose/hosts" })),
                (true, true) => {}
            }
            let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops)).unwrap();
            api.patch("web", &PatchParams::default(), &Patch::<()>::Json(patch)).await.unwrap();
        }
        Writer::Apply => {
            // `kubectl apply --server-side`: the whole spec as one manager's intent.
            let body = json!({ "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner",
                               "metadata": { "name": "web" }, "spec": spec });
            api.patch("web", &PatchParams::apply("walk-apply").force(), &Patch::Apply(&body)).await.unwrap();
        }
        Writer::Replace => {
            // `kubectl replace` / `kubectl edit`: read, change, PUT.
            let mut r = api.get("web").await.unwrap();
            r.spec = to.clone();
            api.replace("web", &PostParams::default(), &r).await.unwrap();
        }
    }
}

#[tokio::test]
async fn a_random_walk_of_spec_changes_by_every_writer_converges_after_each_step() {
    let seed = std::env::var("RUNNER_WALK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("random walk seed {seed} (RUNNER_WALK_SEED={seed} replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let ns = TestNs::new("walk").await;
    ensure_crd(&ns.client).await;
    let api = ns.api::<Runner>();
    let mut spec = RunnerSpec::new(IMAGES[0]);
    let mut mgr = Some(ManagerHandle::start(&ns.client, &ns.name));
    api.create(&PostParams::default(), &Runner::new("web", spec.clone())).await.unwrap();
    oracle::wait_converged(&ns, "web", true, T, &format!("seed {seed}, initial")).await;

    let mut writes_while_stopped = 0;
    for step in 1..=STEPS {
        let writer = [Writer::Merge, Writer::Json, Writer::Apply, Writer::Replace][rng.random_range(0..4)];
        // Now and then the manager stops for a few changes.
        if mgr.is_some() && rng.random_bool(0.15) {
            mgr.take().unwrap().stop().await;
        }
        let live = api.get("web").await.unwrap().spec;
        let to = next_spec(&mut rng, &live);
        write(&ns, writer, &live, &to).await;
        spec = api.get("web").await.unwrap().spec;
        let ctx = format!("seed {seed}, step {step} ({writer:?} to {spec:?})");
        if mgr.is_none() {
            writes_while_stopped += 1;
            if rng.random_bool(0.5) {
                continue; // stays stopped for another change
            }
            mgr = Some(ManagerHandle::start(&ns.client, &ns.name));
        }
        oracle::wait_converged(&ns, "web", true, T, &ctx).await;
    }
    let mgr = match mgr {
        Some(m) => m,
        None => ManagerHandle::start(&ns.client, &ns.name),
    };
    oracle::wait_converged(&ns, "web", true, T, &format!("seed {seed}, final")).await;
    eprintln!(
        "seed {seed}: {STEPS} steps, {writes_while_stopped} while the manager was stopped; last spec {spec:?}"
    );
    mgr.stop_after_cleanup(&ns).await;
}
