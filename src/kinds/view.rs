//! Pure: the pieces every cached view of a child is made of. A view is the
//! part of an object the manager reads, decoded straight from the watch
//! stream (the Deployment's and the Service's views).
//!
//! The full k8s-openapi types are mostly room for fields we never read: a
//! `Deployment` is 2.5 KB inline and its `Container` 2.3 KB more, before
//! any field is set. Decoding the full object and trimming it afterwards
//! also left the dropped fields' memory behind as holes. At 10,000 Runners
//! the cached children were most of the manager's memory
//! (`examples/cache_footprint.rs` prints the figures).
//!
//! The contract that keeps drift detection right: a view still holds every
//! field its kind's `desired` sets, and serializes them as the full type
//! does, so [`super::drift::plan`] answers on it as on the full object. The
//! kinds' tests check it.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// The view of a full object as the apiserver answered it (a view, or the
/// full type itself when the cache keeps that).
pub fn of<V: serde::de::DeserializeOwned>(full: &impl Serialize) -> serde_json::Result<V> {
    serde_json::from_value(serde_json::to_value(full)?)
}

/// A string map as a sorted list: a `BTreeMap` allocates a 540-byte node
/// for even one entry, and a child has several small maps. Serialized as
/// the JSON object it was decoded from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Labels(Vec<(String, String)>);

impl Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut pairs: Vec<(String, String)> =
            BTreeMap::<String, String>::deserialize(d)?.into_iter().collect();
        pairs.shrink_to_fit();
        Ok(Labels(pairs))
    }
}

/// `Resource` as the full type `$full` has it: the same URL, kind and scope.
#[macro_export]
macro_rules! resource_as {
    ($view:ty, $full:ty) => {
        impl kube::Resource for $view {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as kube::Resource>::kind(&())
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as kube::Resource>::group(&())
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as kube::Resource>::version(&())
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as kube::Resource>::plural(&())
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn labels_decode_sorted_and_serialize_as_the_map_they_came_from() {
        let map = json!({ "b": "2", "a": "1", "c": "3" });
        let l: Labels = serde_json::from_value(map.clone()).unwrap();
        assert_eq!(l.0.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(serde_json::to_value(&l).unwrap(), map);
        assert_eq!(
            serde_json::to_value(serde_json::from_value::<Labels>(json!({})).unwrap()).unwrap(),
            json!({})
        );
    }
}
