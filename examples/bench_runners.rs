//! Load generator for `benches/manager-bench.sh`: creates N Runners at once
//! and times them, or deletes them all and times that. It measures; it never
//! asserts a timing. A manager must be running against the same cluster.
//!
//! ```text
//! bench_runners create NAMESPACE N [IMAGE]   # stdout: key=value figures
//! bench_runners delete NAMESPACE
//! ```
//!
//! Data flow: watchers on Runners, Deployments, Services (and Pods when
//! deleting) are synced first, so no event is missed; then the requests go
//! out and every watch event is stamped with a local monotonic clock. Latency
//! of one Runner = first event that shows the state - the moment its create
//! request was sent. "Children" = its Deployment and its Service both exist;
//! "Ready" = `status.phase == Available`, condition `Ready` True, and
//! `observedGeneration` current. Progress goes to stderr.

use std::collections::{HashMap, HashSet};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use kubectl_runner::api::{Phase, Runner, RunnerSpec, condition};
use serde::de::DeserializeOwned;

/// Gives up waiting after this long (a stuck manager should not hang the
/// script): `RUNNER_BENCH_TIMEOUT` seconds, default 600 (thousands of Runners
/// at once need more on two cores).
fn timeout() -> Duration {
    let secs = std::env::var("RUNNER_BENCH_TIMEOUT").ok().and_then(|s| s.parse().ok());
    Duration::from_secs(secs.unwrap_or(600))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Runner,
    Deployment,
    Service,
    Pod,
}

/// One watch event, reduced to what the benchmark needs.
enum Seen {
    /// The object exists; `ready` only means something for Runners.
    Present {
        kind: Kind,
        name: String,
        ready: bool,
    },
    Gone {
        kind: Kind,
        name: String,
    },
    /// The initial list of this watcher is complete.
    Synced(Kind),
}

fn runner_ready(r: &Runner) -> bool {
    let Some(st) = &r.status else { return false };
    let cond_true = st.conditions.iter().any(|c| c.type_ == condition::READY && c.status == "True");
    st.phase == Phase::Available && cond_true && st.observed_generation == r.metadata.generation
}

fn watch<K>(api: Api<K>, kind: Kind, ready: fn(&K) -> bool) -> BoxStream<'static, Seen>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .flat_map(move |ev| {
            let out = match ev {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                    vec![Seen::Present { kind, name: o.name_any(), ready: ready(&o) }]
                }
                Ok(watcher::Event::Delete(o)) => vec![Seen::Gone { kind, name: o.name_any() }],
                Ok(watcher::Event::InitDone) => vec![Seen::Synced(kind)],
                Ok(watcher::Event::Init) => vec![],
                Err(e) => {
                    eprintln!("bench: watch {kind:?}: {e} (retrying)");
                    vec![]
                }
            };
            stream::iter(out)
        })
        .boxed()
}

/// Merged watch of `kinds` in `ns`, returned once every watcher has synced,
/// with the objects that exist at that point.
async fn synced_watch(
    client: &Client,
    ns: &str,
    kinds: &[Kind],
) -> (BoxStream<'static, Seen>, HashMap<Kind, HashSet<String>>) {
    let streams: Vec<_> = kinds
        .iter()
        .map(|k| match k {
            Kind::Runner => watch(Api::<Runner>::namespaced(client.clone(), ns), *k, runner_ready),
            Kind::Deployment => watch(Api::<Deployment>::namespaced(client.clone(), ns), *k, never),
            Kind::Service => watch(Api::<Service>::namespaced(client.clone(), ns), *k, never),
            Kind::Pod => watch(Api::<Pod>::namespaced(client.clone(), ns), *k, never),
        })
        .collect();
    let mut merged = stream::select_all(streams).boxed();
    let mut existing: HashMap<Kind, HashSet<String>> = HashMap::new();
    let mut synced = HashSet::new();
    while synced.len() < kinds.len() {
        match merged.next().await {
            Some(Seen::Present { kind, name, .. }) => {
                existing.entry(kind).or_default().insert(name);
            }
            Some(Seen::Gone { kind, name }) => {
                existing.entry(kind).or_default().remove(&name);
            }
            Some(Seen::Synced(kind)) => {
                synced.insert(kind);
            }
            None => break,
        }
    }
    (merged, existing)
}

/// Readiness of kinds whose readiness the benchmark does not track.
fn never<K>(_: &K) -> bool {
    false
}

/// Nearest-rank percentile of sorted milliseconds.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn report(key: &str, sent: &HashMap<String, Instant>, at: &HashMap<String, Instant>) {
    let mut ms: Vec<f64> = at
        .iter()
        .filter_map(|(name, t)| Some(t.saturating_duration_since(*sent.get(name)?).as_secs_f64() * 1e3))
        .collect();
    ms.sort_by(f64::total_cmp);
    println!("{key}_count={}", ms.len());
    println!("{key}_p50_ms={:.0}", percentile(&ms, 50.0));
    println!("{key}_p99_ms={:.0}", percentile(&ms, 99.0));
    println!("{key}_max_ms={:.0}", ms.last().copied().unwrap_or(f64::NAN));
}

async fn create(client: Client, ns: &str, n: usize, image: &str) -> anyhow::Result<bool> {
    let (mut events, _) = synced_watch(&client, ns, &[Kind::Runner, Kind::Deployment, Kind::Service]).await;
    eprintln!("bench: watches synced; creating {n} Runners in {ns}");
    let api = Api::<Runner>::namespaced(client, ns);
    let start = Instant::now();
    let names: Vec<String> = (0..n).map(|i| format!("bench-{i:04}")).collect();
    // All at once: one task per Runner, each stamping its own send time.
    let creates: Vec<_> = names
        .iter()
        .map(|name| {
            let (api, name) = (api.clone(), name.clone());
            let spec = RunnerSpec::new(image);
            tokio::spawn(async move {
                let sent = Instant::now();
                let res = api.create(&PostParams::default(), &Runner::new(&name, spec)).await;
                (name, sent, res)
            })
        })
        .collect();
    let creates = tokio::spawn(futures::future::join_all(creates));

    let (mut deps, mut svcs) = (HashMap::new(), HashMap::new());
    let (mut children, mut ready) = (HashMap::new(), HashMap::new());
    let wanted: HashSet<&String> = names.iter().collect();
    let done = tokio::time::timeout(timeout(), async {
        while ready.len() < n || children.len() < n {
            let Some(seen) = events.next().await else { break };
            let now = Instant::now();
            let Seen::Present { kind, name, ready: is_ready } = seen else { continue };
            if !wanted.contains(&name) {
                continue;
            }
            match kind {
                Kind::Deployment => {
                    deps.entry(name.clone()).or_insert(now);
                }
                Kind::Service => {
                    svcs.entry(name.clone()).or_insert(now);
                }
                Kind::Runner if is_ready => {
                    ready.entry(name.clone()).or_insert(now);
                }
                _ => {}
            }
            if deps.contains_key(&name) && svcs.contains_key(&name) {
                children.entry(name).or_insert(now);
            }
        }
    })
    .await
    .is_ok();
    let all_ready = start.elapsed();

    let mut sent = HashMap::new();
    let mut failed = 0;
    for r in creates.await? {
        let (name, at, res) = r?;
        if let Err(e) = res {
            eprintln!("bench: create {name}: {e}");
            failed += 1;
        }
        sent.insert(name, at);
    }
    let send_spread = sent.values().max().zip(sent.values().min()).map(|(a, b)| *a - *b);
    println!("runners={n}");
    println!("create_failed={failed}");
    println!("create_spread_ms={:.0}", send_spread.unwrap_or_default().as_secs_f64() * 1e3);
    report("children", &sent, &children);
    report("ready", &sent, &ready);
    println!("all_ready_s={:.2}", all_ready.as_secs_f64());
    if !done {
        eprintln!(
            "bench: timed out after {:?}: {}/{n} children, {}/{n} Ready",
            timeout(),
            children.len(),
            ready.len()
        );
    }
    Ok(done && failed == 0)
}

async fn delete(client: Client, ns: &str) -> anyhow::Result<bool> {
    let kinds = [Kind::Runner, Kind::Deployment, Kind::Service, Kind::Pod];
    let (mut events, mut left) = synced_watch(&client, ns, &kinds).await;
    let count = |left: &HashMap<Kind, HashSet<String>>, k| left.get(&k).map_or(0, HashSet::len);
    eprintln!(
        "bench: deleting {} Runners in {ns} ({} Deployments, {} Services, {} Pods)",
        count(&left, Kind::Runner),
        count(&left, Kind::Deployment),
        count(&left, Kind::Service),
        count(&left, Kind::Pod),
    );
    let start = Instant::now();
    Api::<Runner>::namespaced(client, ns)
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    let owned_gone = |left: &HashMap<Kind, HashSet<String>>| {
        [Kind::Runner, Kind::Deployment, Kind::Service].iter().all(|k| count(left, *k) == 0)
    };
    let mut runners_gone = owned_gone(&left).then(|| start.elapsed());
    let done = tokio::time::timeout(timeout(), async {
        while runners_gone.is_none() || count(&left, Kind::Pod) > 0 {
            let Some(seen) = events.next().await else { break };
            match seen {
                Seen::Present { kind, name, .. } => {
                    left.entry(kind).or_default().insert(name);
                }
                Seen::Gone { kind, name } => {
                    left.entry(kind).or_default().remove(&name);
                }
                Seen::Synced(_) => {}
            }
            if runners_gone.is_none() && owned_gone(&left) {
                runners_gone = Some(start.elapsed());
            }
        }
    })
    .await
    .is_ok();
    let secs = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64());
    println!("delete_s={:.2}", secs(runners_gone));
    println!("pods_gone_s={:.2}", secs(done.then(|| start.elapsed())));
    if !done {
        eprintln!("bench: timed out after {:?} deleting; left: {left:?}", timeout());
    }
    Ok(done)
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: bench_runners create NAMESPACE N [IMAGE] | delete NAMESPACE";
    let client = Client::try_default().await?;
    let ok = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["create", ns, n, rest @ ..] if rest.len() <= 1 => {
            let n: usize = n.parse().map_err(|e| anyhow::anyhow!("N={n:?}: {e}\n{usage}"))?;
            let image = rest.first().copied().unwrap_or("bench:1");
            create(client, ns, n, image).await?
        }
        ["delete", ns] => delete(client, ns).await?,
        _ => anyhow::bail!("{usage}"),
    };
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
