//! Bytes of memory per cached object, as the manager's watches keep them:
//! decoded from the apiserver's JSON (benches/fixtures, a settled Runner's
//! objects as served) and held in an `Arc`. Prints figures, asserts none.
//!
//!   cargo run --release --example cache_footprint
//!
//! Measured as the growth of this process's RSS over many copies, so the
//! allocator's per-allocation overhead and any holes decoding leaves
//! behind count, as they do in the manager.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kubectl_runner::api::Runner;
use kubectl_runner::kinds::deployment::DeploymentView;
use kubectl_runner::kinds::service::ServiceView;
use kubectl_runner::kinds::trim;
use serde::de::DeserializeOwned;

const COPIES: usize = 20_000;

fn rss_bytes() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: i64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// Bytes per object of `K` decoded from `json` and then `trim`med.
fn per_object<K: DeserializeOwned>(json: &[u8], trim: fn(&mut K)) -> i64 {
    let before = rss_bytes();
    let kept: Vec<Arc<K>> = (0..COPIES)
        .map(|_| {
            let mut k: K = serde_json::from_slice(json).expect("fixture decodes");
            trim(&mut k);
            Arc::new(k)
        })
        .collect();
    let per = (rss_bytes() - before) / COPIES as i64;
    // Kept, not freed: the next measurement starts on fresh pages.
    std::mem::forget(kept);
    per
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/benches/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn main() {
    let (deployment, service, runner) = (fixture("deployment"), fixture("service"), fixture("runner"));
    let rows = [
        ("Deployment", "full k8s-openapi type", per_object::<Deployment>(&deployment, |_| {})),
        ("Deployment", "DeploymentView (cached)", per_object::<DeploymentView>(&deployment, |_| {})),
        ("Service", "full k8s-openapi type", per_object::<Service>(&service, |_| {})),
        ("Service", "ServiceView (cached)", per_object::<ServiceView>(&service, |_| {})),
        ("Runner", "trimmed Runner (cached)", per_object::<Runner>(&runner, trim::runner)),
    ];
    println!("cache footprint: {COPIES} copies each, RSS growth per object");
    println!("  {:<11} {:<26} {:>8} {:>17}", "kind", "as", "bytes", "MiB per 10,000");
    for (kind, how, bytes) in rows {
        println!("  {kind:<11} {how:<26} {bytes:>8} {:>17.1}", bytes as f64 * 10_000.0 / 1_048_576.0);
    }
}
