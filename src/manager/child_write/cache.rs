//! What a pass reads of one child kind.

use std::sync::Arc;

use k8s_openapi::Resource as _;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;

use crate::api::Runner;
use crate::kinds::ChildKind;
use crate::kinds::packed::Packed;
use crate::manager::error::{Error, Result};
use crate::manager::own_writes::Recent;

/// What a pass reads of kind `K`: the watch's cache, the answers of our
/// writes it has not delivered yet ([`Recent`]), and the universe of
/// fields we may set ([`crate::kinds::removal`]).
pub struct Cache<K: ChildKind> {
    pub store: Store<Packed<K::View>>,
    pub recent: Arc<Recent<Packed<K::View>>>,
    pub(in crate::manager) universe: Value,
}

impl<K: ChildKind> Cache<K> {
    pub fn new(store: Store<Packed<K::View>>, recent: Arc<Recent<Packed<K::View>>>) -> Self {
        let mut r = Runner::new("universe", crate::api::RunnerSpec::every_field());
        r.metadata.uid = Some("universe".into());
        let mut universe = K::desired(&r).and_then(|o| serde_json::to_value(o).ok()).unwrap_or_default();
        super::untyped(&mut universe);
        Cache { store, recent, universe }
    }

    /// The child as a pass should judge it: the newer of the cache's copy
    /// and our last write's answer.
    pub(in crate::manager) fn live(&self, namespace: &str, name: &str) -> Result<Option<K::View>> {
        let cached = self.store.get(&ObjectRef::new(name).within(namespace));
        let encode = |source| Error::Encode { what: K::Object::KIND, source };
        self.recent.fresher(cached, namespace, name).map(|c| c.unpack().map_err(encode)).transpose()
    }
}
