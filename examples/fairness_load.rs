//! Load generator for `benches/fairness.sh`: who waits, and how long, when
//! a manager has a backlog. It measures; it never asserts a timing. A
//! manager must be running on the namespace.
//!
//! ```text
//! fairness_load burst NAMESPACE N [PREFIX]              # stdout: key=value
//! fairness_load changes NAMESPACE PREFIX COUNT RATE SECONDS
//! ```
//!
//! `burst`: creates Runners PREFIX00000 .. in order, as fast as the
//! apiserver takes them (16 creates in flight, started in order), while a
//! watch on the namespace's Deployments notes when each Runner's
//! Deployment appears. Wait = the Runner's create answered -> its
//! Deployment's ADDED event (client clocks, one process). Prints the
//! median, p99 and max wait, the same for the first and the last 10%
//! created, the drain (last Deployment after the last create), the rank
//! correlation of creation order with service order (Spearman), and the
//! rank at which the first Runner created was served.
//!
//! `changes`: patches `spec.replicas` of the settled Runners PREFIX00000 ..
//! PREFIX(COUNT-1) round-robin at RATE per second for SECONDS (1 <-> 2), and
//! times each change from the PATCH sent to the watch first showing the
//! Deployment with that replica count after it: a person's change,
//! measured while the manager does something else (a relist, a burst of
//! creates).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use kubectl_runner::api::{Runner, RunnerSpec};
use serde_json::json;

/// Creates in flight at once during a burst.
const IN_FLIGHT: usize = 16;
/// The longest a run waits for the last Deployment.
const DEADLINE: Duration = Duration::from_secs(1800);

fn name(prefix: &str, i: usize) -> String {
    format!("{prefix}{i:05}")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// Spearman's rank correlation of `a` and `b` (no ties expected).
fn spearman(a: &[f64], b: &[f64]) -> f64 {
    let ranks = |v: &[f64]| {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|x, y| v[*x].total_cmp(&v[*y]));
        let mut r = vec![0.0; v.len()];
        for (rank, i) in idx.into_iter().enumerate() {
            r[i] = rank as f64;
        }
        r
    };
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let d2: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - y).powi(2)).sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

/// Deployment name -> when the watch first saw it, and each change of its
/// replicas with the time it was seen.
#[derive(Default)]
struct Seen {
    added: HashMap<String, Instant>,
    replicas: HashMap<String, Vec<(i32, Instant)>>,
}

fn watch_deployments(client: &Client, ns: &str) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let s = seen.clone();
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default()).applied_objects().boxed();
        while let Some(Ok(d)) = events.next().await {
            let now = Instant::now();
            let mut s = s.lock().unwrap();
            s.added.entry(d.name_any()).or_insert(now);
            let replicas = d.spec.replicas.unwrap_or(1);
            let history = s.replicas.entry(d.name_any()).or_default();
            if history.last().is_none_or(|(r, _)| *r != replicas) {
                history.push((replicas, now));
            }
        }
    });
    seen
}

async fn burst(client: Client, ns: &str, n: usize, prefix: &str) -> anyhow::Result<()> {
    let seen = watch_deployments(&client, ns);
    let api: Api<Runner> = Api::namespaced(client, ns);
    let start = Instant::now();
    let created: Vec<Instant> = futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let name = name(prefix, i);
            async move {
                let r = Runner::new(&name, RunnerSpec::new("nginx:1.27").replicas(1));
                loop {
                    match api.create(&PostParams::default(), &r).await {
                        Ok(_) => return Instant::now(),
                        Err(kube::Error::Api(e)) if e.code == 409 => return Instant::now(),
                        Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    }
                }
            }
        })
        .buffered(IN_FLIGHT)
        .collect()
        .await;
    let created_s = start.elapsed().as_secs_f64();
    let deadline = Instant::now() + DEADLINE;
    let names: Vec<String> = (0..n).map(|i| name(prefix, i)).collect();
    loop {
        let served = {
            let s = seen.lock().unwrap();
            names.iter().filter(|n| s.added.contains_key(*n)).count()
        };
        if served >= n || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let s = seen.lock().unwrap();
    let served: Vec<Option<Instant>> = (0..n).map(|i| s.added.get(&name(prefix, i)).copied()).collect();
    let missing = served.iter().filter(|t| t.is_none()).count();
    let wait = |i: usize| served[i].map(|t| t.saturating_duration_since(created[i]).as_secs_f64());
    let waits: Vec<f64> = (0..n).filter_map(wait).collect();
    let tenth = (n / 10).max(1);
    let first: Vec<f64> = (0..tenth).filter_map(wait).collect();
    let last: Vec<f64> = (n - tenth..n).filter_map(wait).collect();
    let at = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    let served_at: Vec<f64> = served.iter().map(|t| t.map_or(f64::INFINITY, at)).collect();
    let order: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let last_dep = served.iter().flatten().max().copied().map(at).unwrap_or(f64::NAN);
    let first_rank = served_at.iter().filter(|t| **t < served_at[0]).count();
    let w = sorted(waits);
    let (f, l) = (sorted(first), sorted(last));
    println!("n={n}");
    println!("created_s={created_s:.1}");
    println!("rate={:.1}", n as f64 / created_s);
    println!("missing={missing}");
    println!("wait_p50={:.2}", percentile(&w, 50.0));
    println!("wait_p99={:.2}", percentile(&w, 99.0));
    println!("wait_max={:.2}", w.last().copied().unwrap_or(f64::NAN));
    println!("first10_p50={:.2}", percentile(&f, 50.0));
    println!("first10_max={:.2}", f.last().copied().unwrap_or(f64::NAN));
    println!("last10_p50={:.2}", percentile(&l, 50.0));
    println!("last10_max={:.2}", l.last().copied().unwrap_or(f64::NAN));
    println!("drain_s={:.2}", last_dep - created_s);
    println!("spearman={:.4}", spearman(&order, &served_at));
    println!("first_created_rank_pct={:.1}", 100.0 * first_rank as f64 / n as f64);
    Ok(())
}

async fn changes(
    client: Client,
    ns: &str,
    prefix: &str,
    count: usize,
    rate: u32,
    secs: u64,
) -> anyhow::Result<()> {
    let seen = watch_deployments(&client, ns);
    tokio::time::sleep(Duration::from_secs(2)).await; // the watch's first list
    let api: Api<Runner> = Api::namespaced(client, ns);
    let total = (u64::from(rate) * secs) as usize;
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    let mut sent: Vec<(String, i32, Instant)> = Vec::with_capacity(total);
    let mut last: HashMap<String, i32> = HashMap::new();
    for i in 0..total {
        ticks.tick().await;
        let target = name(prefix, i % count);
        let current = match last.get(&target) {
            Some(r) => *r,
            None => seen.lock().unwrap().replicas.get(&target).and_then(|h| h.last()).map_or(1, |(r, _)| *r),
        };
        let want = if current == 1 { 2 } else { 1 };
        last.insert(target.clone(), want);
        let at = Instant::now();
        let api = api.clone();
        let patch = json!({ "spec": { "replicas": want } });
        let t = target.clone();
        tokio::spawn(async move { api.patch(&t, &PatchParams::default(), &Patch::Merge(&patch)).await });
        sent.push((target, want, at));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut lat = Vec::new();
    let mut missed = 0;
    // Each change is done when the watch shows its replicas at or after it
    // was sent (a later change to the same Runner also ends it).
    while Instant::now() < deadline {
        lat.clear();
        missed = 0;
        {
            let s = seen.lock().unwrap();
            for (name, want, at) in &sent {
                let shown = s.replicas.get(name).and_then(|h| h.iter().find(|(r, t)| r == want && t >= at));
                match shown {
                    Some((_, t)) => lat.push(t.duration_since(*at).as_secs_f64()),
                    None => missed += 1,
                }
            }
        }
        if missed == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let l = sorted(lat);
    println!("changes={total}");
    println!("unseen={missed}");
    println!("change_p50={:.3}", percentile(&l, 50.0));
    println!("change_p99={:.3}", percentile(&l, 99.0));
    println!("change_max={:.3}", l.last().copied().unwrap_or(f64::NAN));
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let client = Client::try_default().await?;
    let num = |s: &str| s.parse::<usize>();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["burst", ns, n] => burst(client, ns, num(n)?, "r").await,
        ["burst", ns, n, prefix] => burst(client, ns, num(n)?, prefix).await,
        ["changes", ns, prefix, count, rate, secs] => {
            changes(client, ns, prefix, num(count)?, rate.parse()?, secs.parse()?).await
        }
        _ => anyhow::bail!(
            "usage: fairness_load burst NAMESPACE N [PREFIX] | changes NAMESPACE PREFIX COUNT RATE SECONDS"
        ),
    }
}
