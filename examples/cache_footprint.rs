//! Bytes of memory per cached object, as the manager's watches keep them:
//! decoded from the apiserver's JSON (benches/fixtures, a settled Runner's
//! objects as served) and held in an `Arc`. Prints figures, asserts none.
//!
//!   cargo run --release --example cache_footprint
//!
//! Measured as the growth of this process's RSS over many copies, so the
//! allocator's per-allocation overhead and any holes decoding leaves
//! behind count, as they do in the manager.
//!
//! Then bytes per Runner: what the manager's caches hold for one Runner as
//! the benches create them (replicas 1, no host: the Runner, its Deployment
//! and its Service; no Ingress, no PodDisruptionBudget, Pods not cached),
//! each decoded, trimmed and applied to a reflector store of its kind as
//! the watches do, keys and hash tables included, over 10,000 Runners with
//! names of their own.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::Resource;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::Event;
use kubectl_runner::api::Runner;
use kubectl_runner::kinds::deployment::{DeploymentView, Deployments};
use kubectl_runner::kinds::packed::{self, Dictionary, Packed};
use kubectl_runner::kinds::service::{ServiceView, Services};
use kubectl_runner::kinds::{ChildKind, trim};
use serde::Serialize;
use serde::de::DeserializeOwned;

const COPIES: usize = 20_000;
/// Runners in the per-Runner measurement.
const RUNNERS: usize = 10_000;

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
    per_kept(|| {
        let mut k: K = serde_json::from_slice(json).expect("fixture decodes");
        trim(&mut k);
        k
    })
}

/// RSS growth per object over [`COPIES`] objects that `make` makes.
fn per_kept<K>(make: impl Fn() -> K) -> i64 {
    let before = rss_bytes();
    let kept: Vec<Arc<K>> = (0..COPIES).map(|_| Arc::new(make())).collect();
    let per = (rss_bytes() - before) / COPIES as i64;
    // Kept, not freed: the next measurement starts on fresh pages.
    std::mem::forget(kept);
    per
}

/// Decodes `json`, names it `name`, trims it and applies it to `store` as
/// `pack` makes it, as a watch event would.
fn apply<K, S>(store: &mut Writer<S>, json: &[u8], name: &str, trim: fn(&mut K), pack: fn(K) -> S)
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
    S: Resource<DynamicType = ()> + Clone,
{
    let mut k: K = serde_json::from_slice(json).expect("fixture decodes");
    k.meta_mut().name = Some(name.to_string());
    trim(&mut k);
    store.apply_watcher_event(&Event::Apply(pack(k)));
}

fn child<K: ChildKind>(v: &mut K::View) {
    trim::child_meta(v.meta_mut());
    K::trim(v);
}

fn packed<V: Resource + Serialize + DeserializeOwned + Dictionary>(v: V) -> Packed<V> {
    Packed::pack(v).expect("a view packs")
}

/// Bytes per object of a view decoded from `json`, trimmed and packed, as
/// the watches keep it.
fn per_packed<K: ChildKind>(json: &[u8]) -> i64 {
    per_object::<Packed<K::View>>(json, |_| {})
}

/// Bytes per Runner as the Controller's store keeps it: trimmed, then packed.
fn per_packed_runner(json: &[u8]) -> i64 {
    per_kept(|| {
        let mut r: Runner = serde_json::from_slice(json).expect("fixture decodes");
        trim::runner(&mut r);
        packed(r)
    })
}

/// Bytes per Runner the manager's Runner, Deployment and Service stores hold.
fn per_runner(runner: &[u8], deployment: &[u8], service: &[u8]) -> i64 {
    let (runners, mut runners_w) = reflector::store::<Packed<Runner>>();
    let (deployments, mut deployments_w) = reflector::store::<Packed<DeploymentView>>();
    let (services, mut services_w) = reflector::store::<Packed<ServiceView>>();
    let before = rss_bytes();
    for i in 0..RUNNERS {
        // The fixtures' name is bench-0000: the same length.
        let name = format!("bench-{i:04}");
        apply(&mut runners_w, runner, &name, trim::runner, packed);
        apply(&mut deployments_w, deployment, &name, child::<Deployments>, packed);
        apply(&mut services_w, service, &name, child::<Services>, packed);
    }
    let per = (rss_bytes() - before) / RUNNERS as i64;
    assert_eq!((runners.len(), deployments.len(), services.len()), (RUNNERS, RUNNERS, RUNNERS));
    std::mem::forget((runners, runners_w, deployments, deployments_w, services, services_w));
    per
}

/// The packed body of a view decoded from `json` and trimmed by `trim`:
/// its JSON, LZ4 alone, and LZ4 against the type's dictionary (kept).
fn body_bytes<V>(json: &[u8], trim: fn(&mut V)) -> (usize, usize, usize)
where
    V: Resource + Serialize + DeserializeOwned + Dictionary,
{
    let mut v: V = serde_json::from_slice(json).expect("fixture decodes");
    trim(&mut v);
    let (_, body) = packed::body_of(v).expect("a view encodes");
    let alone = lz4_flex::compress_prepend_size(&body).len();
    let with = lz4_flex::block::compress_prepend_size_with_dict(&body, V::dictionary()).len();
    (body.len(), alone, with)
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/benches/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn main() {
    let (deployment, service, runner) = (fixture("deployment"), fixture("service"), fixture("runner"));
    let rows = [
        ("Deployment", "full k8s-openapi type", per_object::<Deployment>(&deployment, |_| {})),
        ("Deployment", "DeploymentView", per_object::<DeploymentView>(&deployment, |_| {})),
        ("Deployment", "packed view (cached)", per_packed::<Deployments>(&deployment)),
        ("Service", "full k8s-openapi type", per_object::<Service>(&service, |_| {})),
        ("Service", "ServiceView", per_object::<ServiceView>(&service, |_| {})),
        ("Service", "packed view (cached)", per_packed::<Services>(&service)),
        ("Runner", "trimmed Runner", per_object::<Runner>(&runner, trim::runner)),
        ("Runner", "packed trimmed (cached)", per_packed_runner(&runner)),
    ];
    println!("cache footprint: {COPIES} copies each, RSS growth per object");
    println!("  {:<11} {:<26} {:>8} {:>17}", "kind", "as", "bytes", "MiB per 10,000");
    for (kind, how, bytes) in rows {
        println!("  {kind:<11} {how:<26} {bytes:>8} {:>17.1}", bytes as f64 * 10_000.0 / 1_048_576.0);
    }
    println!("packed body bytes (identity typed beside it)");
    println!("  {:<11} {:>8} {:>10} {:>16}", "kind", "JSON", "LZ4 alone", "LZ4+dictionary");
    let bodies = [
        ("Deployment", body_bytes::<DeploymentView>(&deployment, child::<Deployments>)),
        ("Service", body_bytes::<ServiceView>(&service, child::<Services>)),
        ("Runner", body_bytes::<Runner>(&runner, trim::runner)),
    ];
    for (kind, (json, alone, with)) in bodies {
        println!("  {kind:<11} {json:>8} {alone:>10} {with:>16}");
    }
    let bytes = per_runner(&runner, &deployment, &service);
    println!("per Runner: {RUNNERS} Runners, each with a Deployment and a Service, in the watches' stores");
    println!("  {:<38} {:>8} {:>17}", "", "bytes", "MiB per 10,000");
    let mib = bytes as f64 * 10_000.0 / 1_048_576.0;
    println!("  {:<38} {bytes:>8} {mib:>17.1}", "packed Runner, Deployment and Service");
}
