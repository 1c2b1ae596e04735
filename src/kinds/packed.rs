//! Pure: a cached child kept as the JSON bytes of its view, decoded when a
//! pass reads it.
//!
//! A typed view is mostly room: every `Option` of a k8s-openapi struct
//! takes its bytes whether set or not, and each small map and list is an
//! allocation of its own. A settled Deployment's view held 4.4 KB typed
//! (6.8 KB as decoded from the stream, with the holes decoding leaves)
//! against 1.4 KB as its JSON. A pass reads a Runner's few children once;
//! decoding them then costs microseconds, and the cache of 10,000 Runners
//! shrinks by tens of MiB (`examples/cache_footprint.rs`).
//!
//! The metadata kube's store and the manager's `own_writes` read (name,
//! namespace, UID, resourceVersion), and what decides whether a Runner
//! needs a pass (generation, deletion, finalizers), stays typed. The
//! resourceVersion is not in the bytes, so two versions that differ only in
//! it read the same: [`Packed::same_reads`] compares the bytes and the
//! typed fields but that one.
//!
//! Most of a cached object is not its own: the keys, our labels and owner
//! reference, the condition reasons the controllers write. LZ4 on its own
//! finds few repeats in so little; given a typical object of the type as a
//! dictionary it refers to that instead, and a packed Deployment keeps
//! about a sixth of the bytes (`examples/cache_footprint.rs` prints every
//! cached type). Each kind's module holds its sample beside it
//! (`<kind>.sample.json`, [`dictionary!`]); the Runner's is
//! `packed/runner.sample.json`, here. A sample that differs from the
//! objects only costs compression, never correctness: the same dictionary
//! packs and unpacks, for the process's lifetime.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::api::Runner;

/// A type the caches keep packed, with the dictionary its bytes are
/// compressed against: a typical object of the type, so the bytes hold
/// mostly what is the object's own. [`Packed`] requires it, so a child
/// kind whose view has no sample fails the build.
pub trait Dictionary {
    /// JSON of a typical object of the type as the cache keeps it
    /// (trimmed), with names, UIDs and an image of its own.
    const SAMPLE: &'static str;
    /// [`Dictionary::SAMPLE`] as [`Packed`] compresses it (see [`dictionary!`]).
    fn dictionary() -> &'static [u8];
}

/// Implements [`Dictionary`] for a type from its sample, the
/// `include_str!` of a JSON file beside the module that invokes it; the
/// dictionary is built once, on first use.
macro_rules! dictionary {
    ($ty:ty, $sample:expr) => {
        impl $crate::kinds::packed::Dictionary for $ty {
            const SAMPLE: &'static str = $sample;
            fn dictionary() -> &'static [u8] {
                static BYTES: ::std::sync::LazyLock<Box<[u8]>> =
                    ::std::sync::LazyLock::new($crate::kinds::packed::dictionary_of::<$ty>);
                &BYTES
            }
        }
    };
}
pub(crate) use dictionary;

dictionary!(Runner, include_str!("packed/runner.sample.json"));

/// The body of `V`'s sample as [`Packed`] keeps it: what the dictionary
/// must resemble.
pub fn dictionary_of<V: kube::Resource + Serialize + DeserializeOwned + Dictionary>() -> Box<[u8]> {
    let view: V = serde_json::from_str(V::SAMPLE).expect("a dictionary sample decodes as its type");
    body_of(view).expect("a dictionary sample encodes").1.into_boxed_slice()
}

/// A view `V` as bytes, with the metadata that identifies it.
pub struct Packed<V> {
    metadata: ObjectMeta,
    body: Box<[u8]>,
    view: PhantomData<fn() -> V>,
}

impl<V> Clone for Packed<V> {
    fn clone(&self) -> Self {
        Packed { metadata: self.metadata.clone(), body: self.body.clone(), view: PhantomData }
    }
}

impl<V> fmt::Debug for Packed<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packed").field("metadata", &self.metadata).field("bytes", &self.body.len()).finish()
    }
}

/// The typed metadata of `view` and the JSON of the rest: what a
/// [`Packed`] keeps, before compression.
pub fn body_of<V: kube::Resource + Serialize>(mut view: V) -> serde_json::Result<(ObjectMeta, Vec<u8>)> {
    let m = view.meta_mut();
    let metadata = ObjectMeta {
        name: m.name.take(),
        namespace: m.namespace.take(),
        uid: m.uid.take(),
        resource_version: m.resource_version.take(),
        generation: m.generation.take(),
        deletion_timestamp: m.deletion_timestamp.take(),
        finalizers: m.finalizers.take(),
        ..Default::default()
    };
    Ok((metadata, serde_json::to_vec(&view)?))
}

impl<V: kube::Resource + Serialize + DeserializeOwned + Dictionary> Packed<V> {
    /// Packs a view (already trimmed as the cache keeps it).
    pub fn pack(view: V) -> serde_json::Result<Self> {
        let (metadata, json) = body_of(view)?;
        let body =
            lz4_flex::block::compress_prepend_size_with_dict(&json, V::dictionary()).into_boxed_slice();
        Ok(Packed { metadata, body, view: PhantomData })
    }

    /// The view as it was packed.
    pub fn unpack(&self) -> serde_json::Result<V> {
        let json = lz4_flex::block::decompress_size_prepended_with_dict(&self.body, V::dictionary())
            .map_err(serde::de::Error::custom)?;
        let mut view: V = serde_json::from_slice(&json)?;
        let (m, id) = (view.meta_mut(), &self.metadata);
        m.name = id.name.clone();
        m.namespace = id.namespace.clone();
        m.uid = id.uid.clone();
        m.resource_version = id.resource_version.clone();
        m.generation = id.generation;
        m.deletion_timestamp = id.deletion_timestamp.clone();
        m.finalizers = id.finalizers.clone();
        Ok(view)
    }
}

impl<V> Packed<V> {
    /// True when the two hold the same view but for the resourceVersion (a
    /// write that changed only what the cache trims away).
    pub fn same_reads(&self, other: &Self) -> bool {
        let (a, b) = (&self.metadata, &other.metadata);
        self.body == other.body
            && (a.generation, &a.deletion_timestamp, &a.finalizers)
                == (b.generation, &b.deletion_timestamp, &b.finalizers)
    }

    /// Bytes held besides the typed metadata.
    pub fn len(&self) -> usize {
        self.body.len()
    }

    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }
}

impl<V> kube::Resource for Packed<V>
where
    V: kube::Resource<DynamicType = ()>,
{
    type DynamicType = ();
    type Scope = V::Scope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        V::kind(&())
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        V::group(&())
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        V::version(&())
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        V::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// As the view it holds, so generic code that serializes a cached object
/// sees the same JSON as before.
impl<V: kube::Resource + Serialize + DeserializeOwned + Dictionary> Serialize for Packed<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.unpack().map_err(serde::ser::Error::custom)?.serialize(s)
    }
}

impl<'de, V: kube::Resource + Serialize + DeserializeOwned + Dictionary> Deserialize<'de> for Packed<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Packed::pack(V::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use kube::Resource;
    use serde_json::json;

    use super::*;
    use crate::kinds::deployment::DeploymentView;
    use crate::kinds::service::ServiceView;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/benches/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Every view the watches pack comes back as it went in.
    fn round_trip<V: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Dictionary>(json: &[u8]) {
        let view: V = serde_json::from_slice(json).unwrap();
        let packed = Packed::pack(serde_json::from_slice::<V>(json).unwrap()).unwrap();
        assert_eq!(
            serde_json::to_value(packed.unpack().unwrap()).unwrap(),
            serde_json::to_value(&view).unwrap()
        );
        assert_eq!(packed.meta().resource_version, view.meta().resource_version);
        assert_eq!(packed.meta().name, view.meta().name);
        assert_eq!(packed.meta().generation, view.meta().generation);
        assert!(packed.meta().labels.is_none(), "only identity stays typed");
    }

    /// `V`'s sample decodes as `V` without losing a field: a sample that no
    /// longer matches its type (a view field renamed or dropped) would still
    /// build, as a dictionary of little use.
    fn sample_is_its_type<V: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Dictionary>() {
        let name = V::kind(&());
        let sample: serde_json::Value = serde_json::from_str(V::SAMPLE).unwrap();
        let decoded: V = serde_json::from_str(V::SAMPLE).unwrap();
        assert_eq!(
            serde_json::to_value(decoded).unwrap(),
            sample,
            "{name}'s sample is not what its type keeps"
        );
        let body: serde_json::Value = serde_json::from_slice(V::dictionary()).unwrap();
        assert!(body.get("spec").is_some(), "{name}: {body}");
        assert!(body["metadata"].get("name").is_none(), "{name}: identity is typed, not in the body");
    }

    #[test]
    fn every_sample_is_its_type_as_the_cache_keeps_it() {
        struct Check(usize);
        impl crate::kinds::Visitor for Check {
            fn visit<K: crate::kinds::ChildKind>(&mut self) {
                sample_is_its_type::<K::View>();
                self.0 += 1;
            }
        }
        let mut c = Check(0);
        crate::kinds::visit(&mut c);
        assert_eq!(c.0, crate::kinds::all().len());
        sample_is_its_type::<Runner>();
    }

    #[test]
    fn a_packed_view_unpacks_to_the_same_view() {
        round_trip::<DeploymentView>(&fixture("deployment"));
        round_trip::<ServiceView>(&fixture("service"));
    }

    #[test]
    fn versions_that_differ_only_in_resource_version_read_the_same() {
        let mut v: serde_json::Value = serde_json::from_slice(&fixture("deployment")).unwrap();
        let a: Packed<DeploymentView> = serde_json::from_value(v.clone()).unwrap();
        v["metadata"]["resourceVersion"] = json!("99999");
        v["metadata"]["annotations"] = json!({ "trimmed": "away" });
        let b: Packed<DeploymentView> = serde_json::from_value(v.clone()).unwrap();
        assert!(a.same_reads(&b));
        v["spec"]["replicas"] = json!(7);
        let c: Packed<DeploymentView> = serde_json::from_value(v).unwrap();
        assert!(!a.same_reads(&c));
        let mut v: serde_json::Value = serde_json::from_slice(&fixture("deployment")).unwrap();
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let d: Packed<DeploymentView> = serde_json::from_value(v).unwrap();
        assert!(!a.same_reads(&d), "a deletion is read even when nothing else changed");
    }
}
