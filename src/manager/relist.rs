//! Relists applied to a store in place. kube's reflector builds a second
//! map from a relist's objects and swaps it in at the end, so after an
//! apiserver restart (every watch answers 410 Expired and lists again) the
//! manager briefly holds every cached object twice: its memory peak.
//! After the first list, [`InPlace`] turns a relist into updates of the
//! store as it goes, and at its end deletes what the relist did not bring
//! back; the store holds one copy throughout. A reader meanwhile sees each
//! object at its old or its newer version, as it would between two watch
//! events.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

use kube::runtime::reflector::{Lookup, ObjectRef};
use kube::runtime::watcher::Event;

/// Rewrites one watch's events (see the module doc); the first list passes
/// through unchanged, so the store becomes ready at its end as before.
pub struct InPlace<K: Lookup> {
    listed: bool,
    /// The keys a relist in progress has brought back so far.
    relisting: Option<HashSet<ObjectRef<K>>>,
}

impl<K: Lookup> Default for InPlace<K> {
    fn default() -> Self {
        InPlace { listed: false, relisting: None }
    }
}

impl<K> InPlace<K>
where
    K: Lookup<DynamicType = ()> + Clone,
    ObjectRef<K>: Hash + Eq,
{
    /// The events to give the store for `event`; `cached` lists what the
    /// store holds (read only when a relist ends).
    pub fn rewrite(&mut self, event: Event<K>, cached: impl FnOnce() -> Vec<Arc<K>>) -> Vec<Event<K>> {
        match (event, self.relisting.as_mut()) {
            (Event::Init, _) if self.listed => {
                self.relisting = Some(HashSet::new());
                vec![]
            }
            (Event::InitApply(obj), Some(seen)) => {
                let mut key = obj.to_object_ref(());
                key.extra = Default::default(); // not compared; spares its strings
                seen.insert(key);
                vec![Event::Apply(obj)]
            }
            (Event::InitDone, Some(_)) => {
                let seen = self.relisting.take().unwrap_or_default();
                cached()
                    .into_iter()
                    .filter(|o| !seen.contains(&o.to_object_ref(())))
                    .map(|o| Event::Delete(o.as_ref().clone()))
                    .collect()
            }
            (Event::InitDone, None) => {
                self.listed = true;
                vec![Event::InitDone]
            }
            (event, _) => vec![event],
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;

    use super::*;

    fn cm(name: &str, rv: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some("ns".into());
        c.metadata.resource_version = Some(rv.into());
        c
    }

    fn rv(store: &reflector::Store<ConfigMap>, name: &str) -> Option<String> {
        store.get(&ObjectRef::new(name).within("ns")).and_then(|c| c.metadata.resource_version.clone())
    }

    #[test]
    fn a_relist_updates_the_store_in_place_and_drops_what_it_did_not_bring_back() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let mut in_place = InPlace::default();
        let mut feed = |ev: Event<ConfigMap>, writer: &mut reflector::store::Writer<ConfigMap>| {
            for e in in_place.rewrite(ev, || store.state()) {
                writer.apply_watcher_event(&e);
            }
        };
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
        assert!(matches!(in_place.rewrite(Event::Init, Vec::new).as_slice(), [Event::Init]));
        assert!(matches!(
            in_place.rewrite(Event::InitApply(cm("a", "1")), Vec::new).as_slice(),
            [Event::InitApply(_)]
        ));
        assert!(matches!(in_place.rewrite(Event::InitDone, Vec::new).as_slice(), [Event::InitDone]));
    }
}
