//! The manager's watches: a reflector store per child kind (label-filtered,
//! lean views or trimmed; one per kind of [`crate::kinds::visit`]), the
//! Runner stream with its predicate, and the Pod problem view. Each watch retries on its own ([`WatchBackoff`]); errors never
//! reach the Controller.

use futures::stream::BoxStream;
use std::time::Duration;

use futures::future::ready;
use futures::{StreamExt, stream};
use kube::Client;
use kube::runtime::reflector::{self, Lookup, ObjectRef, Store};
use kube::runtime::scheduler::{ScheduleRequest, debounced_scheduler};
use kube::runtime::{WatchStreamExt, watcher};
use tracing::warn;

use super::child_cache::{Cache, ChildCache};
use super::context::Stores;
use super::pod_problems::PodProblems;
use super::pod_view::PodView;
use super::relist::InPlace;
use super::retry::WatchBackoff;
use crate::api::{RUNNER_UID_LABEL, Runner};
use crate::client::scoped;
use crate::kinds::{self, ChildKind, trim};

type Events<K> = BoxStream<'static, Result<K, watcher::Error>>;

/// Every watch the Controller is fed, and the stores they fill.
pub struct Watches {
    pub stores: Stores,
    pub runners: Store<Runner>,
    pub runner_events: Events<Runner>,
    /// Runners whose children changed, debounced
    /// ([`CHILD_DEBOUNCE`]). Polling it keeps the children's stores filled.
    pub child_triggers: BoxStream<'static, ObjectRef<Runner>>,
    /// Runners whose reported Pod problem changed.
    pub pod_triggers: BoxStream<'static, ObjectRef<Runner>>,
}

/// Objects per page of a watch's initial list: the largest transient
/// allocation at startup and on every relist.
const LIST_PAGE: u32 = 100;

/// How long a Runner's children must be quiet before their events bring a
/// pass. A rollout sends a burst of Deployment status events (the new
/// ReplicaSet, then each replica updated, ready, available), and one pass
/// reads them all. Changes to the Runner itself are not debounced: they
/// reach the children at once.
const CHILD_DEBOUNCE: Duration = Duration::from_millis(200);

/// What of a Runner, when it changes, needs a pass: its spec (generation),
/// a deletion, or its finalizers. Status-only updates (our own writes) do
/// not; the store still sees them, so the next pass compares against them.
fn runner_changed(r: &Runner) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (r.metadata.generation, r.metadata.deletion_timestamp.is_some(), &r.metadata.finalizers).hash(&mut h);
    Some(h.finish())
}

/// A watch's errors, logged and dropped after its own backoff. Passed on,
/// they would reach the Controller's one backoff for all its triggers: each
/// watch's `410 Expired` after an apiserver restart would pause every
/// trigger for up to 30 s, one after the other, and Runners created in the
/// meantime would wait minutes for their first pass.
fn without_errors<K: Send + 'static>(
    what: &'static str,
    stream: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static {
    stream.filter_map(move |item| {
        futures::future::ready(match item {
            Ok(obj) => Some(Ok(obj)),
            Err(e) => {
                log_watch_error(what, &e);
                None
            }
        })
    })
}

/// The Runner a child event concerns: the one with the child's name, not
/// the owner. A child of a deleted Runner going away must wake the Runner
/// created again under the same name, which waits for that name.
fn runner_of_same_name<K: kube::Resource>(child: K) -> Option<ObjectRef<Runner>> {
    Some(ObjectRef::new(child.meta().name.as_deref()?).within(child.meta().namespace.as_deref()?))
}

/// The Runners a child watch's events concern ([`runner_of_same_name`]).
fn runners_of<K: kube::Resource + Send + 'static>(
    what: &'static str,
    children: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
) -> BoxStream<'static, ObjectRef<Runner>> {
    without_errors(what, children).filter_map(|c| ready(c.ok().and_then(runner_of_same_name))).boxed()
}

/// Starts one child kind's watch into its cache ([`kinds::Visitor`]).
struct ChildWatches<'a> {
    client: &'a Client,
    ns: Option<&'a str>,
    caches: Vec<Box<dyn ChildCache>>,
    triggers: Vec<BoxStream<'static, ObjectRef<Runner>>>,
}

impl kinds::Visitor for ChildWatches<'_> {
    fn visit<K: ChildKind>(&mut self) {
        // Label-filtered: only objects that carry a Runner UID are cached.
        let config = watcher::Config::default().labels(RUNNER_UID_LABEL).page_size(LIST_PAGE);
        let (store, writer) = reflector::store::<K::View>();
        let stream = watcher(scoped::<K::View>(self.client, self.ns), config)
            .backoff(WatchBackoff::default())
            .modify(|v| {
                trim::child_meta(kube::Resource::meta_mut(v));
                K::trim(v);
            })
            .relist_in_place(&store)
            .reflect(writer)
            .touched_objects();
        self.triggers.push(runners_of(<K::Object as k8s_openapi::Resource>::KIND, stream));
        self.caches.push(Box::new(Cache::<K> { store }));
    }
}

/// Starts every watch (lazily: they run when the Controller polls them).
pub fn start(client: &Client, ns: Option<&str>) -> Watches {
    let mut children = ChildWatches { client, ns, caches: Vec::new(), triggers: Vec::new() };
    kinds::visit(&mut children);
    let (runners, runner_w) = reflector::store::<Runner>();
    let runner_stream =
        watcher(scoped::<Runner>(client, ns), watcher::Config::default().page_size(LIST_PAGE))
            .backoff(WatchBackoff::default())
            .modify(trim::runner)
            .relist_in_place(&runners)
            .reflect(runner_w)
            .applied_objects()
            .predicate_filter(runner_changed, Default::default());
    // Pods are not cached: only stuck ones are remembered, and only a change
    // in what a Runner would report triggers its pass.
    let pods = PodProblems::default();
    let labelled = watcher::Config::default().labels(RUNNER_UID_LABEL).page_size(LIST_PAGE);
    let pod_triggers =
        watcher(scoped::<PodView>(client, ns), labelled).backoff(WatchBackoff::default()).flat_map({
            let pods = pods.clone();
            move |event| {
                let hits = match event {
                    Ok(ev) => pods.apply(ev),
                    Err(e) => {
                        log_watch_error("Pod", &e);
                        vec![]
                    }
                };
                stream::iter(hits)
            }
        });
    Watches {
        stores: Stores { children: children.caches.into(), pods },
        runners,
        runner_events: without_errors("Runner", runner_stream).boxed(),
        child_triggers: debounced(stream::select_all(children.triggers)).boxed(),
        pod_triggers: pod_triggers.boxed(),
    }
}

/// [`InPlace`] on a watch's events, for the store they fill.
trait RelistInPlace<K: Lookup>:
    futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Sized
{
    fn relist_in_place(self, store: &Store<K>) -> impl futures::Stream<Item = Self::Item> + Send + 'static
    where
        Self: Send + 'static,
        K: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        let (store, mut in_place) = (store.clone(), InPlace::default());
        self.flat_map(move |ev| {
            stream::iter(match ev {
                Ok(ev) => in_place.rewrite(ev, || store.state()).into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            })
        })
    }
}

impl<K: Lookup, S> RelistInPlace<K> for S where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>
{
}

/// Each Runner once its triggers have been quiet for [`CHILD_DEBOUNCE`].
fn debounced(
    triggers: impl futures::Stream<Item = ObjectRef<Runner>> + Send + 'static,
) -> impl futures::Stream<Item = ObjectRef<Runner>> + Send + 'static {
    let now = |message| ScheduleRequest { message, run_at: tokio::time::Instant::now() };
    debounced_scheduler(triggers.map(now), CHILD_DEBOUNCE)
}

fn log_watch_error(what: &str, e: &watcher::Error) {
    warn!(watch = what, error = %e, "watch error; retrying with backoff (a relist follows 410 Expired)");
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[tokio::test]
    async fn child_events_closer_than_the_debounce_bring_one_pass_per_runner() {
        let runner = |name: &str| ObjectRef::<Runner>::new(name).within("ns");
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut passes = debounced(rx).boxed();
        let start = Instant::now();
        for _ in 0..4 {
            tx.unbounded_send(runner("web")).unwrap();
            tokio::time::sleep(CHILD_DEBOUNCE / 4).await;
        }
        tx.unbounded_send(runner("api")).unwrap();
        let mut got = Vec::new();
        while let Ok(Some(r)) = tokio::time::timeout(CHILD_DEBOUNCE * 3, passes.next()).await {
            got.push((r.name.clone(), start.elapsed()));
        }
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["web", "api"], "one pass per Runner, in the order they went quiet");
        assert!(got[0].1 >= CHILD_DEBOUNCE, "the first pass waits out the debounce: {got:?}");
    }
}
