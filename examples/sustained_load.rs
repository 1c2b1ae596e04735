//! Load generator for `benches/sustained.sh`: patches the specs of the
//! Runners in one namespace at a fixed rate for a fixed time, and measures
//! how long each change takes to show as `status.observedGeneration`. It
//! measures; it never asserts a timing. A manager must be running.
//!
//! ```text
//! sustained_load NAMESPACE RATE SECONDS [MANAGER_PID [METRICS_ADDR PASSES_METRIC]]   # stdout: key=value
//! ```
//! METRICS_ADDR: the manager's plain-HTTP /metrics (`127.0.0.1:PORT`);
//! PASSES_METRIC: its counter of reconcile passes (summed over labels).
//! Ours also says what the passes were for (`runner_passes_total` by
//! trigger and child kind), which of them wrote nothing
//! (`runner_idle_passes_total`, the same labels) and why the status was
//! written (`runner_status_writes_total` by reason): printed as
//! `passes_by_*`, `idle_passes_by_*` and `status_writes_by_*`, each
//! counter's growth over the window.
//!
//! Data flow: a watch on the namespace's Runners is synced first; then a
//! ticker sends change `i` (one JSON merge patch, a task of its own so a slow
//! reply does not slow the rate) to Runner `i mod n`, turning one field in
//! turn: replicas 1 <-> 2, image `X` <-> `X-alt`, port 80 <-> 8080. Round-robin
//! keeps changes to one Runner `n / RATE` seconds apart, so each change has
//! its own generation. The generation in the PATCH reply is pending until
//! the watch shows an `observedGeneration` at least as new; the latency is
//! that event's arrival - the moment the PATCH was sent.
//!
//! The counting window (`window_start`, `window_end`, Unix seconds; `passes`
//! is the counter's growth over it) runs from the first change to the end of
//! the drain: every change observed, every Deployment in the namespace
//! rolled out (observedGeneration caught up; replicas, updated and available
//! all at spec.replicas), no Runner, Deployment, Service or Ingress event for
//! [`QUIET`] and the counter (resync passes aside) still as long; or `RUNNER_LOAD_DRAIN` seconds
//! (default 120). So rollouts that finish after the last change count too.
//! With MANAGER_PID: its CPU time (/proc/PID/stat) over the load phase and
//! its RSS sampled every 250 ms. User-Agent `runner-load/rate-RATE`, so the
//! apiserver audit log tells each rate's changes apart.

use std::collections::{HashMap, HashSet, VecDeque};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use http::HeaderValue;
use http::header::USER_AGENT;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Config, ResourceExt};
use kubectl_runner::api::Runner;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// Clock ticks per second of /proc/PID/stat times (USER_HZ: 100 on Linux).
const USER_HZ: f64 = 100.0;

/// How long the namespace and the pass counter must be still before the
/// drain ends.
const QUIET: Duration = Duration::from_secs(2);

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
                json!({ "spec": { "expose": { "port": self.port } } })
            }
        }
    }
}

/// Changes sent and not yet observed, per Runner: (generation, sent at).
type Pending = Arc<Mutex<HashMap<String, VecDeque<(i64, Instant)>>>>;

/// Deployments not rolled out, and when a watched object last changed.
#[derive(Default)]
struct Settling {
    unrolled: HashSet<String>,
    last_event: Option<Instant>,
}
type Shared = Arc<Mutex<Settling>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Its spec seen by the Deployment controller; every replica updated and available.
fn rolled_out(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    let Some(st) = d.status.as_ref() else { return false };
    st.observed_generation >= d.metadata.generation
        && [st.replicas, st.updated_replicas, st.available_replicas].iter().all(|n| n.unwrap_or(0) == want)
}

/// Watches one kind of child: every event after the initial list marks the
/// namespace busy; objects not `done` stay in `unrolled` until they are.
fn watch_kind<K>(api: Api<K>, settling: &Shared, done: fn(&K) -> bool) -> JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let settling = settling.clone();
    let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
    tokio::spawn(async move {
        while let Some(ev) = events.next().await {
            let key = |o: &K| format!("{}/{}", K::plural(&()), o.name_any());
            let mut s = lock(&settling);
            match &ev {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) if !done(o) => {
                    s.unrolled.insert(key(o))
                }
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o)) => {
                    s.unrolled.remove(&key(o))
                }
                Ok(_) => continue,
                Err(e) => {
                    eprintln!("load: watch {}: {e} (retrying)", K::plural(&()));
                    continue;
                }
            };
            if let Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) = ev {
                s.last_event = Some(Instant::now());
            }
        }
    })
}

/// The counters that say what passes and status writes were for (ours
/// only; the twin has none): each series, by its labels.
const BREAKDOWNS: [(&str, &str); 3] = [
    ("runner_passes_total", "passes_by"),
    ("runner_idle_passes_total", "idle_passes_by"),
    ("runner_status_writes_total", "status_writes_by"),
];

/// What one read of /metrics gives: the pass counter (summed over its
/// labels) and each breakdown series.
#[derive(Clone, Default)]
struct Counters {
    passes: f64,
    /// Resync passes: they come whatever the load, and never go quiet.
    resyncs: f64,
    series: HashMap<String, f64>,
}

/// Reads `metric` and the [`BREAKDOWNS`] on the plain-HTTP /metrics at `addr`.
fn read_counters(addr: &str, metric: &str) -> std::io::Result<Counters> {
    use std::io::{Read, Write};
    let sock = addr.parse().map_err(std::io::Error::other)?;
    let mut conn = std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(5))?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    conn.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut text = String::new();
    conn.read_to_string(&mut text)?;
    let value = |l: &str| l.split_whitespace().last()?.parse::<f64>().ok();
    let of = |m: &str| -> Vec<&str> {
        text.lines().filter(|l| l.strip_prefix(m).is_some_and(|r| r.starts_with(['{', ' ']))).collect()
    };
    let mut c = Counters { passes: of(metric).into_iter().filter_map(value).sum(), ..Default::default() };
    for (m, name) in BREAKDOWNS {
        for line in of(m) {
            // `m{trigger="child_event",kind="Deployment"} 12`: the label values.
            let labels = line.split_once('{').and_then(|(_, r)| r.split_once('}')).map_or("", |(l, _)| l);
            let what: Vec<&str> = labels
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(_, v)| v.trim_matches('"'))
                .filter(|v| !v.is_empty())
                .collect();
            let v = value(line).unwrap_or(0.0);
            if m == "runner_passes_total" && what.first() == Some(&"resync") {
                c.resyncs += v;
            }
            c.series.insert(format!("{name}_{}", what.join("_")), v);
        }
    }
    Ok(c)
}

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

/// The manager's /metrics address and its pass counter.
type Passes = Option<(String, String)>;

async fn run(ns: &str, rate: u32, secs: u64, pid: Option<u32>, metrics: Passes) -> anyhow::Result<bool> {
    let mut config = Config::infer().await?;
    config.headers.retain(|(name, _)| name != USER_AGENT);
    config.headers.push((USER_AGENT, HeaderValue::from_str(&format!("runner-load/rate-{rate}"))?));
    let client = Client::try_from(config)?;
    let api = Api::<Runner>::namespaced(client.clone(), ns);

    let mut runners: Vec<(String, Current)> = api
        .list(&ListParams::default())
        .await?
        .into_iter()
        .map(|r| {
            let s = &r.spec;
            let base_image = s.image.strip_suffix("-alt").unwrap_or(&s.image).to_string();
            let cur =
                Current { replicas: s.replicas, image: s.image.clone(), base_image, port: s.expose.port };
            (r.name_any(), cur)
        })
        .collect();
    runners.sort_by(|a, b| a.0.cmp(&b.0));
    anyhow::ensure!(!runners.is_empty(), "no Runners in namespace {ns}");

    // Watch first, so no observedGeneration is missed.
    let pending: Pending = Arc::default();
    let latencies = Arc::new(Mutex::new(Vec::<f64>::new()));
    let settling: Shared = Arc::default();
    let children = [
        watch_kind(Api::<Deployment>::namespaced(client.clone(), ns), &settling, rolled_out),
        watch_kind(Api::<PartialObjectMeta<Service>>::namespaced(client.clone(), ns), &settling, |_| true),
        watch_kind(Api::<PartialObjectMeta<Ingress>>::namespaced(client.clone(), ns), &settling, |_| true),
    ];
    let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
    let watch = {
        let (pending, latencies, settling) = (pending.clone(), latencies.clone(), settling.clone());
        let mut synced_tx = Some(synced_tx);
        let mut events = watcher(api.clone(), watcher::Config::default()).default_backoff().boxed();
        tokio::spawn(async move {
            while let Some(ev) = events.next().await {
                let now = Instant::now();
                let r = match ev {
                    Ok(watcher::Event::Apply(r)) => {
                        lock(&settling).last_event = Some(now);
                        r
                    }
                    Ok(watcher::Event::InitApply(r)) => r,
                    Ok(watcher::Event::InitDone) => {
                        let _ = synced_tx.take().map(|tx| tx.send(()));
                        continue;
                    }
                    Ok(_) => continue,
                    Err(e) => {
                        eprintln!("load: watch Runners: {e} (retrying)");
                        continue;
                    }
                };
                let Some(observed) = r.status.as_ref().and_then(|s| s.observed_generation) else { continue };
                let mut pending = lock(&pending);
                let Some(queue) = pending.get_mut(&r.name_any()) else { continue };
                while queue.front().is_some_and(|(generation, _)| *generation <= observed) {
                    if let Some((_, sent)) = queue.pop_front() {
                        let ms = now.saturating_duration_since(sent).as_secs_f64() * 1e3;
                        lock(&latencies).push(ms);
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
                let mut peak = lock(&peak);
                *peak = (*peak).max(rss);
            }
        })
    });
    let counter = async |m: &Passes| {
        let (addr, metric) = m.clone()?;
        let read = tokio::task::spawn_blocking(move || read_counters(&addr, &metric).map_err(|e| (addr, e)));
        read.await.ok()?.map_err(|(addr, e)| eprintln!("load: {addr}/metrics: {e}")).ok()
    };
    // The drain waits for the passes to stop, resyncs aside.
    let moving = |c: &Option<Counters>| c.as_ref().map(|c| c.passes - c.resyncs);
    let passes0 = counter(&metrics).await;
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
                    let mut pending = lock(&pending);
                    pending.entry(name).or_default().push_back((generation, sent));
                }
                Err(e) => {
                    eprintln!("load: patch {name}: {e}");
                    *lock(&failed) += 1;
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
        std::env::var("RUNNER_LOAD_DRAIN").ok().and_then(|s| s.parse().ok()).unwrap_or(120),
    );
    let left = || lock(&pending).values().map(VecDeque::len).sum::<usize>();
    let drain_start = Instant::now();
    let (mut passes1, mut passes_moved) = (counter(&metrics).await, Instant::now());
    let quiet = loop {
        let settled = {
            let s = lock(&settling);
            s.unrolled.is_empty() && s.last_event.is_none_or(|t| t.elapsed() >= QUIET)
        };
        if left() == 0 && settled && passes_moved.elapsed() >= QUIET {
            break true;
        }
        if drain_start.elapsed() >= drain {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = counter(&metrics).await;
        if moving(&now) != moving(&passes1) {
            passes_moved = Instant::now();
        }
        passes1 = now;
    };
    let (end_epoch, drained) = (epoch_s(), drain_start.elapsed());
    watch.abort();
    let rollouts_pending = lock(&settling).unrolled.len();
    children.iter().for_each(JoinHandle::abort);

    let mut ms = lock(&latencies).clone();
    ms.sort_by(f64::total_cmp);
    let failed = *lock(&failed);
    let missing = left();
    println!("rate={rate}\nchanges={changes}\npatch_failed={failed}");
    println!("achieved_rate={:.1}", changes as f64 / load.as_secs_f64());
    println!("window_start={start_epoch:.3}\nwindow_end={end_epoch:.3}");
    println!(
        "drain_s={:.1}\nquiet={}\nrollouts_pending={rollouts_pending}",
        drained.as_secs_f64(),
        u8::from(quiet)
    );
    if let (Some(p0), Some(p1)) = (passes0, passes1) {
        println!("passes={:.0}", p1.passes - p0.passes);
        println!("passes_resync={:.0}", p1.resyncs - p0.resyncs);
        let mut names: Vec<&String> = p1.series.keys().collect();
        names.sort();
        for name in names {
            let grew = p1.series[name] - p0.series.get(name).copied().unwrap_or(0.0);
            if grew > 0.0 {
                println!("{name}={grew:.0}");
            }
        }
    }
    println!("observed_count={}\nobserved_missing={missing}", ms.len());
    println!("observed_p50_ms={:.0}", percentile(&ms, 50.0));
    println!("observed_p99_ms={:.0}", percentile(&ms, 99.0));
    println!("observed_max_ms={:.0}", ms.last().copied().unwrap_or(f64::NAN));
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        println!("cpu_cores={:.3}", (c1 - c0) / USER_HZ / load.as_secs_f64());
    }
    if let Some(rss) = rss_end {
        println!("rss_mib={:.1}", rss as f64 / 1024.0);
        let peak = *lock(&rss_peak);
        println!("rss_peak_mib={:.1}", peak.max(rss) as f64 / 1024.0);
    }
    if missing > 0 {
        eprintln!("load: {missing} changes not observed after a {drain:?} drain");
    }
    if !quiet {
        eprintln!("load: not quiet after a {drain:?} drain ({rollouts_pending} Deployments not rolled out)");
    }
    Ok(failed == 0 && missing == 0)
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: sustained_load NAMESPACE RATE SECONDS [MANAGER_PID [METRICS_ADDR PASSES_METRIC]]";
    let [ns, rate, secs, rest @ ..] = args.as_slice() else { anyhow::bail!("{usage}") };
    anyhow::ensure!(matches!(rest.len(), 0 | 1 | 3), "{usage}");
    let rate: u32 = rate.parse().map_err(|e| anyhow::anyhow!("RATE={rate:?}: {e}\n{usage}"))?;
    anyhow::ensure!(rate > 0, "RATE must be at least 1\n{usage}");
    let secs: u64 = secs.parse().map_err(|e| anyhow::anyhow!("SECONDS={secs:?}: {e}\n{usage}"))?;
    let pid = match rest.first() {
        Some(p) => Some(p.parse().map_err(|e| anyhow::anyhow!("MANAGER_PID={p:?}: {e}\n{usage}"))?),
        None => None,
    };
    let metrics = match rest {
        [_, addr, metric] => Some((addr.clone(), metric.clone())),
        _ => None,
    };
    let ok = run(ns, rate, secs, pid, metrics).await?;
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
