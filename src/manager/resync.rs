//! The resync: every Runner gets a pass once per [`RESYNC`], so a change
//! the watches missed (a delete during a relist) still converges. Each
//! Runner has a slot, one second of the period picked by its UID, and a
//! one-second tick walks the Runner store for the slot's Runners: passes
//! are spread evenly, never a herd, and the manager keeps no timer per
//! Runner. A pass that ended with `requeue(resync)` instead kept an entry
//! in the work queue's delays for every settled Runner, about half a
//! kilobyte each (two copies of its reference with name, namespace, UID
//! and resourceVersion), 5 MiB at 10,000 Runners.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use futures::{Stream, StreamExt, stream};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

/// How often a settled Runner gets a pass.
pub const RESYNC: Duration = Duration::from_secs(300);

/// How often the store is walked; one slot per tick.
const TICK: Duration = Duration::from_secs(1);

/// The slot of the Runner with `uid` among `slots`. Pure and stable within
/// a build, so a Runner's resync comes every period at the same offset.
pub fn slot(uid: &str, slots: u64) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    uid.hash(&mut h);
    h.finish() % slots.max(1)
}

/// Each Runner in `store` once per [`RESYNC`], in the tick of its slot,
/// from one period after the start on (the start brings every Runner's
/// first pass; a walk from the first second would add a second pass for
/// each within minutes).
pub fn resyncs<K>(store: Store<K>) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let slots = RESYNC.as_secs() / TICK.as_secs();
    // Every Runner has its first pass at start: the walk begins a period later.
    let ticks = tokio::time::interval_at(tokio::time::Instant::now() + RESYNC, TICK);
    stream::unfold((ticks, 0u64), move |(mut ticks, tick)| {
        let store = store.clone();
        async move {
            ticks.tick().await;
            let due: Vec<ObjectRef<K>> = store
                .state()
                .iter()
                .filter(|r| slot(r.meta().uid.as_deref().unwrap_or_default(), slots) == tick % slots)
                .map(|r| ObjectRef::from_obj(r.as_ref()))
                .collect();
            Some((stream::iter(due), (ticks, tick + 1)))
        }
    })
    .flatten()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;
    use crate::api::{Runner, RunnerSpec};

    #[test]
    fn slots_spread_runners_over_the_period() {
        let slots = 300;
        let mut per_slot = vec![0u32; slots as usize];
        for i in 0..30_000 {
            per_slot[slot(&format!("uid-{i}"), slots) as usize] += 1;
        }
        // 100 per slot on average; a herd would put hundreds in one.
        let (min, max) = (per_slot.iter().min().unwrap(), per_slot.iter().max().unwrap());
        assert!(*min >= 50 && *max <= 160, "slots hold {min}..{max} Runners");
        assert_eq!(slot("a", 300), slot("a", 300), "stable");
    }

    #[tokio::test(start_paused = true)]
    async fn every_runner_comes_once_per_period() {
        let (store, mut writer) = reflector::store::<Runner>();
        for i in 0..20 {
            let mut r = Runner::new(&format!("r{i}"), RunnerSpec::new("nginx:1"));
            r.metadata.namespace = Some("ns".into());
            r.metadata.uid = Some(format!("uid-{i}"));
            writer.apply_watcher_event(&Event::Apply(r));
        }
        let mut resyncs = resyncs(store).boxed();
        let start = tokio::time::Instant::now();
        let first = tokio::time::timeout_at(start + RESYNC, resyncs.next()).await;
        assert!(first.is_err(), "no resync in the first period: {first:?}");
        let mut seen: HashMap<String, u32> = HashMap::new();
        let end = start + RESYNC * 2;
        while let Ok(Some(r)) = tokio::time::timeout_at(end, resyncs.next()).await {
            *seen.entry(r.name).or_default() += 1;
        }
        assert_eq!(seen.len(), 20, "every Runner once: {seen:?}");
        assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    }
}
