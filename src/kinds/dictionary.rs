//! What an object of each cached type usually says, to prime the
//! compressor of [`super::packed`].
//!
//! A cached object is small (a settled Deployment's view is 1.2 KB of
//! JSON) and most of it is not its own: the keys, our labels and owner
//! reference, the condition reasons the controllers write. LZ4 on its own
//! finds few repeats in so little; given a typical object of the type as a
//! dictionary it refers to that instead, and a packed Deployment, Service
//! or Runner keeps about a sixth of the bytes (`examples/cache_footprint.rs`
//! prints both). The samples in `dictionary/` are such objects as the
//! caches keep them (trimmed), with names, UIDs and an image of their own.
//!
//! Every type kept packed must have one (`Packed<V>` requires
//! [`Dictionary`], implemented here for each), so a new child kind without
//! a sample fails the build.
//! A sample that differs from the objects only costs compression, never
//! correctness: the same dictionary packs and unpacks, for the process's
//! lifetime.

use std::sync::LazyLock;

use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::deployment::DeploymentView;
use super::packed::{self, Dictionary};
use super::service::ServiceView;
use crate::api::Runner;

/// The body of `sample` (JSON of a `V`) as `Packed` keeps it: what the
/// dictionary must resemble.
fn build<V: kube::Resource + Serialize + DeserializeOwned>(sample: &str) -> Box<[u8]> {
    let view: V = serde_json::from_str(sample).expect("a dictionary sample decodes as its type");
    packed::body_of(view).expect("a dictionary sample encodes").1.into_boxed_slice()
}

macro_rules! dictionaries {
    ($($ty:ty => $file:literal),+ $(,)?) => {
        $(impl Dictionary for $ty {
            fn dictionary() -> &'static [u8] {
                static BYTES: LazyLock<Box<[u8]>> =
                    LazyLock::new(|| build::<$ty>(include_str!(concat!("dictionary/", $file))));
                &BYTES
            }
        })+

        /// Every sample: its file, its JSON, the JSON of its type decoded
        /// from it, and the dictionary built from it.
        #[cfg(test)]
        fn all() -> Vec<(&'static str, serde_json::Value, serde_json::Value, &'static [u8])> {
            vec![$({
                let sample = include_str!(concat!("dictionary/", $file));
                let decoded: $ty = serde_json::from_str(sample).unwrap();
                let as_is = serde_json::from_str(sample).unwrap();
                ($file, as_is, serde_json::to_value(decoded).unwrap(), <$ty as Dictionary>::dictionary())
            }),+]
        }
    };
}

dictionaries! {
    Runner => "runner.json",
    DeploymentView => "deployment.json",
    ServiceView => "service.json",
    Ingress => "ingress.json",
    PodDisruptionBudget => "pdb.json",
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each sample decodes as its type without losing a field: a sample
    /// that no longer matches its type (a view field renamed or dropped)
    /// would still build, as a dictionary of little use.
    #[test]
    fn every_sample_is_its_type_as_the_cache_keeps_it() {
        for (file, sample, decoded, bytes) in all() {
            assert_eq!(decoded, sample, "{file} is not what its type decodes and encodes");
            let body: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            assert!(body.get("spec").is_some(), "{file}: {body}");
            assert!(body["metadata"].get("name").is_none(), "{file}: identity is typed, not in the body");
        }
    }
}
