//! Relists applied to a store in place, and one store fed by a watch per
//! namespace.
//!
//! kube's reflector builds a second map from a relist's objects and swaps
//! it in at the end, so after an apiserver restart (every watch answers 410
//! Expired and lists again) the manager briefly holds every cached object
//! twice: its memory peak. After the first list, [`InPlace`] turns a relist
//! into updates of the store as it goes, and at its end sweeps away what
//! the relist did not bring back; the store holds one copy throughout. A
//! reader meanwhile sees each object at its old or its newer version, as it
//! would between two watch events.
//!
//! A manager given several namespaces runs one watch per namespace and
//! kind into one store ([`Merge`]). The reflector's swap would replace the
//! whole store with one namespace's list, so only the first lists go
//! through it, as one list: the first `Init`, every namespace's objects,
//! and one `InitDone` when the last namespace has listed (the store becomes
//! ready then). Events of a namespace that listed early wait until then;
//! every later relist is in place and sweeps only its own namespace.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

use kube::runtime::reflector::{Lookup, ObjectRef};
use kube::runtime::watcher::Event;

/// What to do to the store for one watch event.
pub enum Step<K: Lookup> {
    /// Give the store this event.
    Event(Event<K>),
    /// A list of `namespace` (all of them: `None`) ended: delete what the
    /// store holds there and the list did not bring back. Resolved against
    /// the store when reached, after the steps before it were applied
    /// ([`sweep`]).
    Sweep { namespace: Option<String>, seen: HashSet<ObjectRef<K>> },
}

/// Pure: the deletions a [`Step::Sweep`] stands for, given what the store holds.
pub fn sweep<K>(namespace: Option<&str>, seen: &HashSet<ObjectRef<K>>, cached: Vec<Arc<K>>) -> Vec<Event<K>>
where
    K: Lookup<DynamicType = ()> + Clone,
    ObjectRef<K>: Hash + Eq,
{
    cached
        .into_iter()
        .filter(|o| namespace.is_none_or(|ns| o.namespace().as_deref() == Some(ns)))
        .filter(|o| !seen.contains(&without_extra(o.to_object_ref(()))))
        .map(|o| Event::Delete(o.as_ref().clone()))
        .collect()
}

/// A key as a sweep compares it: the extra fields are not compared, and
/// dropping them spares their strings.
fn without_extra<K: Lookup>(mut key: ObjectRef<K>) -> ObjectRef<K> {
    key.extra = Default::default();
    key
}

/// One watch's relists rewritten in place (see the module doc); the first
/// list passes through unchanged, so the store becomes ready at its end.
pub struct InPlace<K: Lookup> {
    /// The namespace this watch covers; `None`: all.
    namespace: Option<String>,
    listed: bool,
    /// The keys a relist in progress has brought back so far.
    relisting: Option<HashSet<ObjectRef<K>>>,
}

impl<K: Lookup> Default for InPlace<K> {
    fn default() -> Self {
        InPlace { namespace: None, listed: false, relisting: None }
    }
}

impl<K> InPlace<K>
where
    K: Lookup<DynamicType = ()> + Clone,
    ObjectRef<K>: Hash + Eq,
{
    /// For a watch of `namespace` (`None`: all namespaces).
    pub fn within(namespace: Option<String>) -> Self {
        InPlace { namespace, listed: false, relisting: None }
    }

    /// The steps for `event`.
    pub fn rewrite(&mut self, event: Event<K>) -> Vec<Step<K>> {
        match (event, self.relisting.as_mut()) {
            (Event::Init, _) if self.listed => {
                self.relisting = Some(HashSet::new());
                vec![]
            }
            (Event::InitApply(obj), Some(seen)) => {
                seen.insert(without_extra(obj.to_object_ref(())));
                vec![Step::Event(Event::Apply(obj))]
            }
            (Event::InitDone, Some(_)) => {
                let seen = self.relisting.take().unwrap_or_default();
                vec![Step::Sweep { namespace: self.namespace.clone(), seen }]
            }
            (Event::InitDone, None) => {
                self.listed = true;
                vec![Step::Event(Event::InitDone)]
            }
            (event, _) => vec![Step::Event(event)],
        }
    }
}

/// The watches of one store, one per namespace (see the module doc).
pub struct Merge<K: Lookup> {
    streams: Vec<InPlace<K>>,
    /// Watches whose first list has not ended.
    unlisted: usize,
    /// Whether the one `Init` of the first lists went out.
    started: bool,
    /// Per watch, the keys of a first list that started over (an error
    /// mid-list): swept once every first list has ended.
    restarted: Vec<Option<HashSet<ObjectRef<K>>>>,
    /// Events of watches that listed early, held until all have.
    held: Vec<(usize, Event<K>)>,
}

impl<K> Merge<K>
where
    K: Lookup<DynamicType = ()> + Clone,
    ObjectRef<K>: Hash + Eq,
{
    /// One watch per entry of `namespaces` (`None`: all namespaces).
    pub fn new(namespaces: Vec<Option<String>>) -> Self {
        let n = namespaces.len();
        Merge {
            streams: namespaces.into_iter().map(InPlace::within).collect(),
            unlisted: n,
            started: false,
            restarted: (0..n).map(|_| None).collect(),
            held: Vec::new(),
        }
    }

    /// The steps for `event` of watch `i`.
    pub fn rewrite(&mut self, i: usize, event: Event<K>) -> Vec<Step<K>> {
        if self.unlisted == 0 {
            return self.streams[i].rewrite(event);
        }
        if self.streams[i].listed {
            self.held.push((i, event));
            return vec![];
        }
        match event {
            Event::Init if !self.started => {
                self.started = true;
                vec![Step::Event(Event::Init)]
            }
            Event::Init => {
                self.restarted[i] = Some(HashSet::new());
                vec![]
            }
            Event::InitApply(obj) => {
                if let Some(seen) = self.restarted[i].as_mut() {
                    seen.insert(without_extra(obj.to_object_ref(())));
                }
                vec![Step::Event(Event::InitApply(obj))]
            }
            Event::InitDone => self.listed(i),
            other => vec![Step::Event(other)],
        }
    }

    /// Watch `i`'s first list ended; after the last, the store's one
    /// `InitDone`, the sweeps of restarted lists and the held events.
    fn listed(&mut self, i: usize) -> Vec<Step<K>> {
        self.streams[i].listed = true;
        self.unlisted -= 1;
        if self.unlisted > 0 {
            return vec![];
        }
        let mut out = vec![Step::Event(Event::InitDone)];
        for (j, seen) in self.restarted.iter_mut().enumerate() {
            if let Some(seen) = seen.take() {
                out.push(Step::Sweep { namespace: self.streams[j].namespace.clone(), seen });
            }
        }
        for (j, event) in std::mem::take(&mut self.held) {
            out.extend(self.streams[j].rewrite(event));
        }
        out
    }
}

/// The events a step stands for, read against `store` now.
pub fn resolve<K>(step: Step<K>, store: &kube::runtime::reflector::Store<K>) -> Vec<Event<K>>
where
    K: Lookup<DynamicType = ()> + Clone + 'static,
    ObjectRef<K>: Hash + Eq,
{
    match step {
        Step::Event(event) => vec![event],
        Step::Sweep { namespace, seen } => sweep(namespace.as_deref(), &seen, store.state()),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector::{self, Store, store::Writer};

    use super::*;

    fn cm_in(ns: &str, name: &str, rv: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some(ns.into());
        c.metadata.resource_version = Some(rv.into());
        c
    }

    fn cm(name: &str, rv: &str) -> ConfigMap {
        cm_in("ns", name, rv)
    }

    fn rv_in(store: &Store<ConfigMap>, ns: &str, name: &str) -> Option<String> {
        store.get(&ObjectRef::new(name).within(ns)).and_then(|c| c.metadata.resource_version.clone())
    }

    fn rv(store: &Store<ConfigMap>, name: &str) -> Option<String> {
        rv_in(store, "ns", name)
    }

    /// Applies steps as the manager's watch does: each resolved when reached.
    fn apply(steps: Vec<Step<ConfigMap>>, store: &Store<ConfigMap>, writer: &mut Writer<ConfigMap>) {
        for step in steps {
            for e in resolve(step, store) {
                writer.apply_watcher_event(&e);
            }
        }
    }

    #[test]
    fn a_relist_updates_the_store_in_place_and_drops_what_it_did_not_bring_back() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let mut in_place = InPlace::default();
        let mut feed = |ev, writer: &mut Writer<ConfigMap>| apply(in_place.rewrite(ev), &store, writer);
        for ev in
            [Event::Init, Event::InitApply(cm("a", "1")), Event::InitApply(cm("b", "1")), Event::InitDone]
        {
            feed(ev, &mut writer);
        }
        assert_eq!((rv(&store, "a"), rv(&store, "b")), (Some("1".into()), Some("1".into())));

        feed(Event::Init, &mut writer);
        assert_eq!(store.len(), 2, "a relist starting keeps what the store holds");
        feed(Event::InitApply(cm("a", "5")), &mut writer);
        assert_eq!(
            rv(&store, "a"),
            Some("5".into()),
            "each relisted object replaces its old version at once"
        );
        assert_eq!(rv(&store, "b"), Some("1".into()), "not yet relisted: still there");
        feed(Event::InitApply(cm("c", "6")), &mut writer);
        feed(Event::InitDone, &mut writer);
        assert_eq!(rv(&store, "b"), None, "gone during the outage: dropped at the end");
        assert_eq!((rv(&store, "a"), rv(&store, "c")), (Some("5".into()), Some("6".into())));

        feed(Event::Apply(cm("a", "7")), &mut writer);
        feed(Event::Delete(cm("c", "6")), &mut writer);
        assert_eq!((rv(&store, "a"), rv(&store, "c")), (Some("7".into()), None));
    }

    #[test]
    fn the_first_list_passes_through_so_the_store_becomes_ready_at_its_end() {
        let mut in_place = InPlace::<ConfigMap>::default();
        assert!(matches!(in_place.rewrite(Event::Init).as_slice(), [Step::Event(Event::Init)]));
        assert!(matches!(
            in_place.rewrite(Event::InitApply(cm("a", "1"))).as_slice(),
            [Step::Event(Event::InitApply(_))]
        ));
        assert!(matches!(in_place.rewrite(Event::InitDone).as_slice(), [Step::Event(Event::InitDone)]));
    }

    #[test]
    fn one_store_is_ready_only_when_every_namespace_has_listed_and_keeps_them_all() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let mut merge = Merge::new(vec![Some("a".into()), Some("b".into())]);
        let mut feed = |i, ev, writer: &mut Writer<ConfigMap>| apply(merge.rewrite(i, ev), &store, writer);
        feed(0, Event::Init, &mut writer);
        feed(1, Event::Init, &mut writer);
        feed(0, Event::InitApply(cm_in("a", "x", "1")), &mut writer);
        feed(0, Event::InitDone, &mut writer);
        feed(0, Event::Apply(cm_in("a", "y", "2")), &mut writer);
        feed(1, Event::InitApply(cm_in("b", "x", "1")), &mut writer);
        assert!(store.is_empty(), "nothing is visible before the last namespace has listed");
        feed(1, Event::InitDone, &mut writer);
        assert_eq!(store.len(), 3, "both namespaces' lists and the event held meanwhile");
        assert_eq!(rv_in(&store, "a", "y"), Some("2".into()));

        feed(1, Event::Init, &mut writer);
        feed(1, Event::InitDone, &mut writer);
        assert_eq!(rv_in(&store, "b", "x"), None, "a relist of b that brings nothing back empties b");
        assert_eq!(
            (rv_in(&store, "a", "x"), rv_in(&store, "a", "y")),
            (Some("1".into()), Some("2".into())),
            "and leaves a alone"
        );
    }

    #[test]
    fn a_first_list_that_starts_over_drops_what_its_second_attempt_did_not_bring() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let mut merge = Merge::new(vec![Some("a".into()), Some("b".into())]);
        let mut feed = |i, ev, writer: &mut Writer<ConfigMap>| apply(merge.rewrite(i, ev), &store, writer);
        feed(1, Event::Init, &mut writer);
        feed(1, Event::InitApply(cm_in("b", "x", "1")), &mut writer);
        feed(0, Event::Init, &mut writer);
        feed(0, Event::InitApply(cm_in("a", "gone", "1")), &mut writer);
        feed(0, Event::Init, &mut writer);
        feed(0, Event::InitApply(cm_in("a", "kept", "2")), &mut writer);
        feed(0, Event::InitDone, &mut writer);
        feed(1, Event::InitDone, &mut writer);
        assert_eq!(rv_in(&store, "a", "gone"), None);
        assert_eq!(
            (rv_in(&store, "a", "kept"), rv_in(&store, "b", "x")),
            (Some("2".into()), Some("1".into()))
        );
    }
}
