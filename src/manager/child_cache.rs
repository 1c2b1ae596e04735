//! One child kind's cache and writes with the kind's types erased, so the
//! manager holds one list of them, built by [`crate::kinds::visit`]: the
//! watches fill them, the cache-sync wait and every pass iterate over them.

use futures::FutureExt;
use futures::future::BoxFuture;

pub use super::child_write::Cache;
use super::child_write::{self, Outcome, Writes};
use super::error::Result;
use crate::api::Runner;
use crate::kinds::{ChildKind, Facts};

/// A child kind's cache, as the manager iterates over it.
pub trait ChildCache: Send + Sync {
    /// The kind's name ([`crate::kinds::Kind::kind`]).
    fn kind(&self) -> &'static str;
    /// Resolves once the cache holds its first list.
    fn synced(&self) -> BoxFuture<'static, ()>;
    /// Brings the Runner's child of this kind to what the Runner wants
    /// (nothing, when `deleting`), adding what the status learns to `facts`.
    fn reconcile<'a>(
        &'a self,
        writes: &'a Writes,
        runner: &'a Runner,
        deleting: bool,
        facts: &'a mut Facts,
    ) -> BoxFuture<'a, Result<Outcome>>;
}

impl<K: ChildKind> ChildCache for Cache<K> {
    fn kind(&self) -> &'static str {
        <K::Object as k8s_openapi::Resource>::KIND
    }

    fn synced(&self) -> BoxFuture<'static, ()> {
        let store = self.store.clone();
        async move {
            let _ = store.wait_until_ready().await;
        }
        .boxed()
    }

    fn reconcile<'a>(
        &'a self,
        writes: &'a Writes,
        runner: &'a Runner,
        deleting: bool,
        facts: &'a mut Facts,
    ) -> BoxFuture<'a, Result<Outcome>> {
        let want = if deleting { None } else { K::desired(runner) };
        child_write::reconcile::<K>(writes, self, runner, want, facts).boxed()
    }
}

/// Caches of every kind holding `objects` (each JSON with its `kind`), as
/// a watch would have filled them; for tests of a pass.
#[cfg(test)]
pub fn seeded(objects: Vec<serde_json::Value>) -> std::sync::Arc<[Box<dyn ChildCache>]> {
    struct Seed(Vec<serde_json::Value>, Vec<Box<dyn ChildCache>>);
    impl crate::kinds::Visitor for Seed {
        fn visit<K: ChildKind>(&mut self) {
            let (store, mut writer) =
                kube::runtime::reflector::store::<crate::kinds::packed::Packed<K::View>>();
            let kind = <K::Object as k8s_openapi::Resource>::KIND;
            for obj in self.0.iter().filter(|o| o["kind"] == kind) {
                let view: K::View = serde_json::from_value(obj.clone()).expect("a seed object of its kind");
                let packed = crate::kinds::packed::Packed::pack(view).expect("a view packs");
                writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(packed));
            }
            self.1.push(Box::new(Cache::<K>::new(store, Default::default())));
        }
    }
    let mut seed = Seed(objects, Vec::new());
    crate::kinds::visit(&mut seed);
    seed.1.into()
}
