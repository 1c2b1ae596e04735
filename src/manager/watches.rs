//! The manager's watches: a reflector store per child kind (label-filtered,
//! lean views or trimmed; one per kind of [`crate::kinds::visit`]), the
//! Runner stream with the events that need a pass, and the Pod problem
//! view. Each watch retries on its own ([`WatchBackoff`]); errors never
//! reach the passes. Given several namespaces, each kind has one watch per
//! namespace and still one store ([`Merge`]). What needs a pass comes out
//! as [`Work`]: a Runner, how urgent ([`Priority`]) and why ([`Trigger`]).

use futures::stream::BoxStream;
use std::sync::Arc;
use std::time::Instant;

use futures::future::ready;
use futures::{StreamExt, stream};
use kube::Client;
use kube::runtime::reflector::{self, Lookup, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use tracing::warn;

use super::child_cache::{Cache, ChildCache};
use super::context::{Stores, runner_key};
use super::debounce::{ChildEvent, Lane, debounced};
use super::own_writes::{Recent, Seen};
use super::pod_problems::PodProblems;
use super::pod_view::PodView;
use super::relist::{self, Merge};
use super::retry::WatchBackoff;
use super::status_write::Clocks;
use super::trigger::{Trigger, Work};
use super::wake_rules::{child_priority, runner_work, what_our_pass_saw};
use super::work_queue::Priority;
use crate::api::{RUNNER_UID_LABEL, Runner};
use crate::client::scoped;
use crate::kinds::packed::{Dictionary, Packed};
use crate::kinds::{self, ChildKind, Wake, trim};

/// A Runner as the manager caches it: trimmed ([`trim::runner`]) and
/// packed, about 2.0 KB typed against 1.6 KB packed; a pass unpacks the one
/// it reconciles.
pub type CachedRunner = Packed<Runner>;

/// Every watch, the stores they fill, and the work they find.
pub struct Watches {
    pub stores: Stores,
    pub runners: Store<CachedRunner>,
    /// The Runners that need a pass: their own changes, their children's
    /// (debounced, [`super::debounce``]), their Pods' problems. Polling it
    /// keeps every store filled.
    pub work: BoxStream<'static, Work>,
}

/// Objects per page of a watch's initial list: the largest transient
/// allocation at startup and on every relist.
const LIST_PAGE: u32 = 100;

/// A watch's errors, logged and dropped after its own backoff. Passed on,
/// they would reach kube's Controller's one backoff for all its triggers: each
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

/// Feeds a child kind's store, and names the Runners that need a pass
/// ([`runner_of_same_name`]): not for the echo of our own write or an event
/// older than it ([`Recent::observe`]), not for an update that changes
/// nothing the cache keeps (a pass reads only that), and not for the first
/// list (the Runners' own first list brings every pass). An update that is
/// progress only goes in the progress lane, and one that changes nothing a
/// pass reads wakes nothing ([`ChildKind::wake`]);
/// each event is as urgent as [`child_priority`] says.
fn reflect_and_wake<V>(
    what: &'static str,
    events: impl futures::Stream<Item = Result<watcher::Event<Packed<V>>, watcher::Error>> + Send + 'static,
    mut writer: Writer<Packed<V>>,
    store: Store<Packed<V>>,
    recent: Arc<Recent<Packed<V>>>,
    wake: fn(&Packed<V>, &Packed<V>) -> Wake,
) -> BoxStream<'static, ChildEvent>
where
    V: kube::Resource<DynamicType = ()>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    without_errors(what, events)
        .filter_map(move |event| {
            let wake = match &event {
                Ok(watcher::Event::Apply(obj)) => match recent.observe(obj) {
                    Seen::Echo | Seen::Older => None,
                    Seen::Unknown | Seen::Newer => match store.get(&ObjectRef::from_obj(obj)) {
                        Some(b) if b.same_reads(obj) => None,
                        b => match b.as_deref().map_or(Wake::Now, |b| wake(b, obj)) {
                            Wake::Nothing => None,
                            Wake::Progress => Some((obj.clone(), Lane::Progress, Priority::Low)),
                            Wake::Now => {
                                let before = b.as_deref().map(kube::Resource::meta);
                                Some((
                                    obj.clone(),
                                    Lane::Now,
                                    child_priority(before, kube::Resource::meta(obj)),
                                ))
                            }
                        },
                    },
                },
                Ok(watcher::Event::Delete(obj)) => {
                    recent.forget(obj);
                    Some((obj.clone(), Lane::Now, Priority::High))
                }
                _ => None,
            };
            if let Ok(event) = &event {
                writer.apply_watcher_event(event);
            }
            ready(wake.and_then(|(obj, lane, priority)| {
                Some(ChildEvent { runner: runner_of_same_name(obj)?, lane, priority, kind: what })
            }))
        })
        .boxed()
}

/// A trimmed view packed for the cache ([`Packed`]); a view that does not
/// serialize (none does) is logged and left out.
fn packed<V: kube::Resource + serde::Serialize + serde::de::DeserializeOwned + Dictionary>(
    view: V,
) -> Option<Packed<V>> {
    Packed::pack(view).map_err(|e| warn!(error = %e, "a watched object could not be packed; skipped")).ok()
}

/// A watch event carrying `S` made of the one carrying `K`; None when `f`
/// gives nothing for its object.
fn map_event<K, S>(event: watcher::Event<K>, f: fn(K) -> Option<S>) -> Option<watcher::Event<S>> {
    use watcher::Event::*;
    Some(match event {
        Apply(k) => Apply(f(k)?),
        Delete(k) => Delete(f(k)?),
        InitApply(k) => InitApply(f(k)?),
        Init => Init,
        InitDone => InitDone,
    })
}

/// Starts one child kind's watch into its cache ([`kinds::Visitor`]).
struct ChildWatches<'a> {
    client: &'a Client,
    namespaces: &'a [String],
    caches: Vec<Box<dyn ChildCache>>,
    triggers: Vec<BoxStream<'static, ChildEvent>>,
}

impl kinds::Visitor for ChildWatches<'_> {
    fn visit<K: ChildKind>(&mut self) {
        // Label-filtered: only objects that carry a Runner UID are cached.
        let config = watcher::Config::default().labels(RUNNER_UID_LABEL).page_size(LIST_PAGE);
        let (store, writer) = reflector::store::<Packed<K::View>>();
        let trimmed = |v: &mut K::View| {
            trim::child_meta(kube::Resource::meta_mut(v));
            K::trim(v);
        };
        let recent = Arc::new(Recent::default());
        let stream = merged_watches(self.client, self.namespaces, config, trimmed, packed, &store);
        let kind = <K::Object as k8s_openapi::Resource>::KIND;
        let wake = reflect_and_wake(kind, stream, writer, store.clone(), recent.clone(), K::wake);
        self.triggers.push(wake);
        self.caches.push(Box::new(Cache::<K>::new(store, recent)));
    }
}

/// Starts every watch (lazily: they run when the workers poll them), in
/// each of `namespaces` (none: all namespaces).
pub fn start(client: &Client, namespaces: &[String]) -> Watches {
    let mut children = ChildWatches { client, namespaces, caches: Vec::new(), triggers: Vec::new() };
    kinds::visit(&mut children);
    let (runners, runner_w) = reflector::store::<CachedRunner>();
    let config = watcher::Config::default().page_size(LIST_PAGE);
    let own_status = Arc::new(Recent::<Runner>::default());
    let clocks = Arc::new(Clocks::default());
    let gate = {
        let clocks = clocks.clone();
        move |r: &ObjectRef<Runner>| {
            clocks.gate(&runner_key(r.namespace.as_deref().unwrap_or_default(), &r.name), Instant::now())
        }
    };
    let seen = own_status.clone();
    let (store, mut writer) = (runners.clone(), runner_w);
    let runner_work =
        merged_watches(client, namespaces, config, trim::runner, packed, &runners).filter_map(move |event| {
            let work = match &event {
                Ok(watcher::Event::Apply(r) | watcher::Event::InitApply(r)) => {
                    let meta = kube::Resource::meta(r);
                    let ns = meta.namespace.as_deref().unwrap_or_default();
                    let ours = seen.fresher(None, ns, meta.name.as_deref().unwrap_or_default());
                    let cached = store.get(&ObjectRef::from_obj(r));
                    let before = match seen.observe(r) {
                        Seen::Echo | Seen::Older => ours.as_deref().map(what_our_pass_saw),
                        Seen::Unknown | Seen::Newer => cached.as_deref().map(kube::Resource::meta).cloned(),
                    };
                    let listed = matches!(event, Ok(watcher::Event::InitApply(_)));
                    runner_work(before.as_ref(), meta, listed).map(|(priority, trigger)| Work {
                        key: ObjectRef::from_obj(r),
                        priority,
                        trigger,
                    })
                }
                Ok(watcher::Event::Delete(r)) => {
                    seen.forget(r);
                    None
                }
                _ => None,
            };
            match &event {
                Ok(event) => writer.apply_watcher_event(event),
                Err(e) => log_watch_error("Runner", e),
            }
            ready(work)
        });
    // Pods are not cached: only stuck ones are remembered, and only a change
    // in what a Runner would report triggers its pass.
    let pods = PodProblems::default();
    let labelled = watcher::Config::default().labels(RUNNER_UID_LABEL).page_size(LIST_PAGE);
    let pod_triggers = stream::select_all(scopes(namespaces).into_iter().map(|ns| {
        let pods = pods.clone();
        watcher(scoped::<PodView>(client, ns.as_deref()), labelled.clone())
            .backoff(WatchBackoff::default())
            .flat_map(move |event| {
                let hits = match event {
                    Ok(ev) => pods.apply_in(ns.as_deref(), ev),
                    Err(e) => {
                        log_watch_error("Pod", &e);
                        vec![]
                    }
                };
                stream::iter(hits)
            })
            .boxed()
    }));
    let child_work = debounced(stream::select_all(children.triggers), gate).map(|woken| Work {
        key: cached(woken.runner),
        priority: woken.priority,
        trigger: match woken.lane {
            Lane::Now => Trigger::Child(woken.kind),
            Lane::Progress => Trigger::ChildProgress(woken.kind),
        },
    });
    let pod_work =
        pod_triggers.map(|r| Work { key: cached(r), priority: Priority::Low, trigger: Trigger::Pod });
    Watches {
        stores: Stores { children: children.caches.into(), pods, own_status, status_clocks: clocks },
        runners,
        work: stream::select_all([runner_work.boxed(), child_work.boxed(), pod_work.boxed()]).boxed(),
    }
}

/// The key of a Runner's pass.
fn cached(r: ObjectRef<Runner>) -> ObjectRef<CachedRunner> {
    r.into_kind_unchecked(())
}

/// A watch per entry of `namespaces` (none: all namespaces).
fn scopes(namespaces: &[String]) -> Vec<Option<String>> {
    if namespaces.is_empty() { vec![None] } else { namespaces.iter().cloned().map(Some).collect() }
}

/// The events of one store: a watch of `K` per namespace, each trimmed by
/// `trim`, stored as `pack` makes it, and retrying on its own, merged
/// ([`Merge`]), relists in place.
fn merged_watches<K, S>(
    client: &Client,
    namespaces: &[String],
    config: watcher::Config,
    trim: impl FnMut(&mut K) + Clone + Send + 'static,
    pack: fn(K) -> Option<S>,
    store: &Store<S>,
) -> impl futures::Stream<Item = Result<watcher::Event<S>, watcher::Error>> + Send + 'static
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    S: Lookup<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let namespaces = scopes(namespaces);
    let watches = namespaces.iter().enumerate().map(|(i, ns)| {
        watcher(scoped::<K>(client, ns.as_deref()), config.clone())
            .backoff(WatchBackoff::default())
            .modify(trim.clone())
            .filter_map(move |ev| {
                ready(match ev {
                    Ok(ev) => map_event(ev, pack).map(Ok),
                    Err(e) => Some(Err(e)),
                })
            })
            .map(move |ev| (i, ev))
            .boxed()
    });
    let watches: Vec<_> = watches.collect();
    let (store, mut merge) = (store.clone(), Merge::new(namespaces));
    stream::select_all(watches).flat_map(move |(i, ev)| {
        let steps = match ev {
            Ok(ev) => merge.rewrite(i, ev).into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        // Each step is resolved when reached: a sweep reads the store after
        // the steps before it were applied.
        let store = store.clone();
        stream::iter(steps).flat_map(move |step| {
            stream::iter(match step {
                Ok(step) => relist::resolve(step, &store).into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            })
        })
    })
}

fn log_watch_error(what: &str, e: &watcher::Error) {
    warn!(watch = what, error = %e, "watch error; retrying with backoff (a relist follows 410 Expired)");
}
