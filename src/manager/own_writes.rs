//! Read your own writes. A watch delivers our write a moment after the
//! apiserver answered it; a pass in that moment would judge drift and
//! status against the object as it was before, and:
//! - a spec that goes A -> B -> A faster than the watch is judged "no
//!   drift" against the stale A, and the child stays at B;
//! - a status computed from the stale, complete rollout says Available for
//!   a generation whose rollout has not started;
//! - a status patch is compared with the Runner before it: the same status
//!   is written again, with a second Warning Event.
//!
//! So each write's answer is kept here until the watch delivers that
//! resourceVersion or a newer one, and a pass reads the newer of the two
//! ([`Recent::fresher`]). The watch asks [`Recent::observe`] about each
//! event: the echo of our own write brings no pass.
//!
//! resourceVersions are compared as numbers: the apiserver documents them
//! as opaque, but etcd's revisions are what it serves, and a value that is
//! not a number is never kept (the cache is then read as before).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::Resource;

/// What a watch event is, next to the write we remember for its object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Seen {
    /// No write of ours is waiting for it.
    Unknown,
    /// Our own write coming back: nothing a pass has not seen.
    Echo,
    /// Older than our write: our write's answer already carried it.
    Older,
    /// Newer than our write: someone wrote after us.
    Newer,
}

/// Pure: the event's resourceVersion against the one our write returned.
pub fn compare(event_rv: Option<u64>, ours: u64) -> Seen {
    match event_rv {
        Some(rv) if rv == ours => Seen::Echo,
        Some(rv) if rv < ours => Seen::Older,
        _ => Seen::Newer,
    }
}

/// The resourceVersion as a number, if it is one.
pub fn version<V: Resource>(obj: &V) -> Option<u64> {
    obj.meta().resource_version.as_deref()?.parse().ok()
}

type Key = (String, String);

fn key<V: Resource>(obj: &V) -> Key {
    (obj.meta().namespace.clone().unwrap_or_default(), obj.meta().name.clone().unwrap_or_default())
}

/// The answers of our latest writes of one kind (trimmed as the cache
/// holds them), by namespace and name. An entry lives from the write to
/// its echo: milliseconds.
pub struct Recent<V> {
    entries: Mutex<HashMap<Key, (u64, Arc<V>)>>,
}

impl<V> Default for Recent<V> {
    fn default() -> Self {
        Recent { entries: Mutex::default() }
    }
}

impl<V: Resource + Clone> Recent<V> {
    fn entries(&self) -> MutexGuard<'_, HashMap<Key, (u64, Arc<V>)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps what a write of ours returned, unless a newer answer is kept.
    pub fn wrote(&self, obj: V) {
        let Some(rv) = version(&obj) else { return };
        let mut entries = self.entries();
        match entries.get(&key(&obj)) {
            Some((kept, _)) if *kept >= rv => {}
            _ => {
                entries.insert(key(&obj), (rv, Arc::new(obj)));
            }
        }
    }

    /// The newer of the cache's copy and our last write's answer.
    pub fn fresher(&self, cached: Option<Arc<V>>, namespace: &str, name: &str) -> Option<Arc<V>> {
        let entries = self.entries();
        let Some((ours, obj)) = entries.get(&(namespace.to_string(), name.to_string())) else {
            return cached;
        };
        match cached {
            Some(c) if version(c.as_ref()).is_some_and(|rv| rv >= *ours) => Some(c),
            _ => Some(obj.clone()),
        }
    }

    /// A watch event for `obj`: forgets our write once the watch has
    /// caught up with it, and says what the event is.
    pub fn observe(&self, obj: &impl Resource) -> Seen {
        let mut entries = self.entries();
        let k = key(obj);
        let Some((ours, _)) = entries.get(&k) else { return Seen::Unknown };
        let seen = compare(version(obj), *ours);
        if seen != Seen::Older {
            entries.remove(&k);
        }
        seen
    }

    /// The object is gone: whatever we wrote to it is moot.
    pub fn forget(&self, obj: &impl Resource) {
        self.entries().remove(&key(obj));
    }

    /// Writes not yet delivered by the watch.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.entries().len()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn cm(rv: &str, value: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some("web".into());
        c.metadata.namespace = Some("team".into());
        c.metadata.resource_version = Some(rv.into());
        c.data = Some([("v".to_string(), value.to_string())].into());
        c
    }

    fn value(c: Option<Arc<ConfigMap>>) -> Option<String> {
        c?.data.as_ref()?.get("v").cloned()
    }

    #[test]
    fn an_event_is_compared_with_our_write_by_resource_version() {
        assert_eq!(compare(Some(7), 7), Seen::Echo);
        assert_eq!(compare(Some(6), 7), Seen::Older);
        assert_eq!(compare(Some(8), 7), Seen::Newer);
        assert_eq!(compare(None, 7), Seen::Newer, "an unreadable version is not taken for ours");
    }

    #[test]
    fn a_pass_reads_our_write_until_the_watch_delivers_it() {
        let recent = Recent::default();
        recent.wrote(cm("10", "B"));
        let stale = Some(Arc::new(cm("9", "A")));
        assert_eq!(value(recent.fresher(stale.clone(), "team", "web")).as_deref(), Some("B"));
        assert_eq!(
            value(recent.fresher(None, "team", "web")).as_deref(),
            Some("B"),
            "created, not cached yet"
        );
        // An event from before our write changes nothing.
        assert_eq!(recent.observe(&cm("9", "A")), Seen::Older);
        assert_eq!(recent.pending(), 1);
        assert_eq!(recent.observe(&cm("10", "B")), Seen::Echo);
        assert_eq!(recent.pending(), 0, "forgotten once the watch caught up");
        assert_eq!(value(recent.fresher(stale, "team", "web")).as_deref(), Some("A"));
    }

    #[test]
    fn a_newer_cached_object_wins_over_our_write() {
        let recent = Recent::default();
        recent.wrote(cm("10", "B"));
        let newer = Some(Arc::new(cm("12", "C")));
        assert_eq!(value(recent.fresher(newer, "team", "web")).as_deref(), Some("C"));
        assert_eq!(recent.observe(&cm("12", "C")), Seen::Newer);
        assert_eq!(recent.pending(), 0);
    }

    #[test]
    fn an_older_answer_never_replaces_a_newer_one() {
        let recent = Recent::default();
        recent.wrote(cm("12", "C"));
        recent.wrote(cm("10", "B"));
        assert_eq!(value(recent.fresher(None, "team", "web")).as_deref(), Some("C"));
        recent.forget(&cm("13", "gone"));
        assert_eq!(recent.pending(), 0);
    }
}
