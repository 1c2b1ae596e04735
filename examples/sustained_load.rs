//! Load generator for `benches/sustained.sh`: patches the specs of the
//! Runners in one namespace at a fixed rate for a fixed time, and measures
//! how long each change takes to show as `status.observedGeneration`. It
//! measures; it never asserts a timing. A manager must be running.
//!
//! ```text
//! sustained_load NAMESPACE RATE SECONDS [MANAGER_PID]   # stdout: key=value figures
//! ```
//!
//! Data flow: a watch on the namespace's Runners is synced first; then a
//! ticker sends change `i` (one JSON merge patch, a task of its own so a slow
//! reply does not slow the rate) to Runner `i mod n`, turning one field in
//! turn: replicas 1 <-> 2, image `X` <-> `X-alt`, port 80 <-> 8080. Round-robin
//! keeps changes to one Runner `n / RATE` seconds apart, so each change has
//! its own generation. The generation in the PATCH reply is pending until
//! the watch shows an `observedGeneration` at least as new; the latency is
//! that event's arrival - the moment the PATCH was sent. After the load
//! phase it waits (up to `RUNNER_LOAD_DRAIN` seconds, default 60) for the
//! stragglers. With MANAGER_PID it reads that process's CPU time (from
//! /proc/PID/stat) over the load phase and samples its RSS every 250 ms.
//! The User-Agent is `runner-load/rate-RATE`, so the apiserver audit log
//! tells each rate's changes apart.

use std::collections::{HashMap, VecDeque};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use http::HeaderValue;
use http::header::USER_AGENT;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Config, ResourceExt};
use kubectl_runner::api::Runner;
use serde_json::json;
use tokio::time::MissedTickBehavior;

/// Clock ticks per second of /proc/PID/stat times (USER_HZ: 100 on Linux).
const USER_HZ: f64 = 100.0;

/// The spec fields the generator turns, in turn, and their current values.
#[derive(Clone)]
struct Current {
    replicas: i32,
    image: String,
    base_image: String,
    port: i32,
}

impl Current {
    /// The merge patch that flips field `which` (0 replicas, 1 image, 2 port),
    /// applied to `self` at once so the next change to this Runner flips back.
    fn flip(&mut self, which: usize) -> serde_json::Value {
        match which {
            0 => {
                self.replicas = if self.replicas == 1 { 2 } else { 1 };
                json!({ "spec": { "replicas": self.replicas } })
            }
            1 => {
                let alt = format!("{}-alt", self.base_image);
                self.image = if self.image == alt { self.base_image.clone() } else { alt };
                json!({ "spec": { "image": self.image } })
            }
            _ => {
                self.port = if self.port == 80 { 8080 } else { 80 };
                json!({ "spec": { "port": self.port } })
            }
        }
    }
}

/// Changes sent and not yet observed, per Runner: (generation, sent at).
type Pending = Arc<Mutex<HashMap<String, VecDeque<(i64, Instant)>>>>;

fn cpu_ticks(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count from its ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some(fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?)
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Nearest-rank percentile of sorted milliseconds.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn epoch_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

async fn run(ns: &str, rate: u32, secs: u64, pid: Option<u32>) -> anyhow::Result<bool> {
    let mut config = Config::infer().await?;
    config.headers.retain(|(name, _)| name != USER_AGENT);
    config.headers.push((USER_AGENT, HeaderValue::from_str(&format!("runner-load/rate-{rate}"))?));
    let client = Client::try_from(config)?;
    let api = Api::<Runner>::namespaced(client, ns);

    let mut runners: Vec<(String, Current)> = api
        .list(&ListParams::default())
        .await?
        .into_iter()
        .map(|r| {
            let s = &r.spec;
            let base_image = s.image.strip_suffix("-alt").unwrap_or(&s.image).to_string();
            let cur = Current { replicas: s.replicas, image: s.image.clone(), base_image, port: s.port };
            (r.name_any(), cur)
        })
        .collect();
    runners.sort_by(|a, b| a.0.cmp(&b.0));
    anyhow::ensure!(!runners.is_empty(), "no Runners in namespace {ns}");

    // Watch first, so no observedGeneration is missed.
    let pending: Pending = Arc::default();
    let latencies = Arc::new(Mutex::new(Vec::<f64>::new()));
    let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
    let watch = {
        let (pending, latencies) = (pending.clone(), latencies.clone());
        let mut synced_tx = Some(synced_tx);
        let mut events = watcher(api.clone(), watcher::Config::default()).default_backoff().boxed();
        tokio::spawn(async move {
            while let Some(ev) = events.next().await {
                let now = Instant::now();
                let r = match ev {
                    Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r)) => r,
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = synced_tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(_) => continue,
                    Err(e) => {
                        eprintln!("load: watch Runners: {e} (retrying)");
                        continue;
                    }
                };
                let Some(observed) = r.status.as_ref().and_then(|s| s.observed_generation) else { continue };
                let mut pending = pending.lock().unwrap_or_else(|e| e.into_inner());
                let Some(queue) = pending.get_mut(&r.name_any()) else { continue };
                while queue.front().is_some_and(|(generation, _)| *generation <= observed) {
                    if let Some((_, sent)) = queue.pop_front() {
                        let ms = now.saturating_duration_since(sent).as_secs_f64() * 1e3;
                        latencies.lock().unwrap_or_else(|e| e.into_inner()).push(ms);
                    }
                }
            }
        })
    };
    synced_rx.await?;

    let changes = rate as u64 * secs;
    eprintln!("load: {} Runners in {ns}; {changes} changes at {rate}/s for {secs} s", runners.len());
    let failed = Arc::new(Mutex::new(0u64));
    let (cpu0, rss_peak) = (pid.and_then(cpu_ticks), Arc::new(Mutex::new(0u64)));
    let sampler = pid.map(|pid| {
        let peak = rss_peak.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                let rss = rss_kib(pid).unwrap_or(0);
                let mut peak = peak.lock().unwrap_or_else(|e| e.into_inner());
                *peak = (*peak).max(rss);
            }
        })
    });
    let (start, start_epoch) = (Instant::now(), epoch_s());
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    // A late tick is sent at once: the rate is what was asked over the phase.
    tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut sends = Vec::with_capacity(changes as usize);
    for i in 0..changes as usize {
        tick.tick().await;
        let n = runners.len();
        let (name, cur) = &mut runners[i % n];
        let patch = cur.flip((i / n + i % n) % 3);
        let (api, name, pending, failed) = (api.clone(), name.clone(), pending.clone(), failed.clone());
        sends.push(tokio::spawn(async move {
            let sent = Instant::now();
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(r) => {
                    let generation = r.metadata.generation.unwrap_or_default();
                    let mut pending = pending.lock().unwrap_or_else(|e| e.into_inner());
                    pending.entry(name).or_default().push_back((generation, sent));
                }
                Err(e) => {
                    eprintln!("load: patch {name}: {e}");
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                }
            }
        }));
    }
    futures::future::join_all(sends).await;
    let load = start.elapsed();
    let cpu1 = pid.and_then(cpu_ticks);
    let rss_end = pid.and_then(rss_kib);
    if let Some(s) = sampler {
        s.abort();
    }

    let drain = Duration::from_secs(
        std::env::var("RUNNER_LOAD_DRAIN").ok().and_then(|s| s.parse().ok()).unwrap_or(60),
    );
    let left =
        || pending.lock().unwrap_or_else(|e| e.into_inner()).values().map(VecDeque::len).sum::<usize>();
    let drain_start = Instant::now();
    while left() > 0 && drain_start.elapsed() < drain {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    watch.abort();

    let mut ms = latencies.lock().unwrap_or_else(|e| e.into_inner()).clone();
    ms.sort_by(f64::total_cmp);
    let failed = *failed.lock().unwrap_or_else(|e| e.into_inner());
    let missing = left();
    println!("rate={rate}");
    println!("changes={changes}");
    println!("patch_failed={failed}");
    println!("achieved_rate={:.1}", changes as f64 / load.as_secs_f64());
    println!("window_start={start_epoch:.3}");
    println!("window_end={:.3}", epoch_s());
    println!("observed_count={}", ms.len());
    println!("observed_missing={missing}");
    println!("observed_p50_ms={:.0}", percentile(&ms, 50.0));
    println!("observed_p99_ms={:.0}", percentile(&ms, 99.0));
    println!("observed_max_ms={:.0}", ms.last().copied().unwrap_or(f64::NAN));
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        println!("cpu_cores={:.3}", (c1 - c0) / USER_HZ / load.as_secs_f64());
    }
    if let Some(rss) = rss_end {
        println!("rss_mib={:.1}", rss as f64 / 1024.0);
        let peak = *rss_peak.lock().unwrap_or_else(|e| e.into_inner());
        println!("rss_peak_mib={:.1}", peak.max(rss) as f64 / 1024.0);
    }
    if missing > 0 {
        eprintln!("load: {missing} changes not observed after a {drain:?} drain");
    }
    Ok(failed == 0 && missing == 0)
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: sustained_load NAMESPACE RATE SECONDS [MANAGER_PID]";
    let [ns, rate, secs, rest @ ..] = args.as_slice() else { anyhow::bail!("{usage}") };
    anyhow::ensure!(rest.len() <= 1, "{usage}");
    let rate: u32 = rate.parse().map_err(|e| anyhow::anyhow!("RATE={rate:?}: {e}\n{usage}"))?;
    anyhow::ensure!(rate > 0, "RATE must be at least 1\n{usage}");
    let secs: u64 = secs.parse().map_err(|e| anyhow::anyhow!("SECONDS={secs:?}: {e}\n{usage}"))?;
    let pid = match rest.first() {
        Some(p) => Some(p.parse().map_err(|e| anyhow::anyhow!("MANAGER_PID={p:?}: {e}\n{usage}"))?),
        None => None,
    };
    let ok = run(ns, rate, secs, pid).await?;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
