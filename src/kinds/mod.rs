//! Pure: the Runner's child kinds, as data.
//!
//! Everything about one kind lives in its module: its Kubernetes type, the
//! object the Runner wants (built from typed values), when it should exist,
//! how server-side apply merges the fields we own (drift), what the manager
//! caches of it, what the Runner's status learns from it, and how it is
//! shown. [`visit`] lists the kinds once; the manager's watches, cache sync,
//! writes and deletion, the CLI's reader, `describe`, `delete`, `diagnose`
//! (gather, checks, fix), e2e and the generated RBAC all iterate over it, so
//! a new kind is one module plus one line there (`docs/design.md` walks
//! through the PodDisruptionBudget as the example).
//!
//! ```text
//! visit ─► Visitor::visit::<K>()   typed: the manager's watches and writes
//!      └─► all() ─► &dyn Kind       erased: readers, summaries, RBAC, diagnose
//! ```

use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::LazyLock;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{ApiResource, DynamicObject};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::Runner;
use crate::rollout::Rollout;

pub mod deployment;
pub mod drift;
pub mod ingress;
pub mod lean_meta;
pub mod managed_fields;
pub mod meta;
pub mod packed;
pub mod pdb;
pub mod pod_fields;
pub mod removal;
pub mod service;
pub mod trim;
pub mod view;

#[cfg(test)]
pub(crate) mod served_fixture;

pub use drift::Merge;

/// The child kinds, in the order the manager writes them and the CLI shows
/// them. The one list: add a kind here and everything iterates over it.
pub fn visit(v: &mut impl Visitor) {
    v.visit::<deployment::Deployments>();
    v.visit::<service::Services>();
    v.visit::<ingress::Ingresses>();
    v.visit::<pdb::Budgets>();
}

/// Code that is generic over a kind and runs once per kind ([`visit`]).
pub trait Visitor {
    fn visit<K: ChildKind>(&mut self);
}

/// What a child type must be to be read, cached and written.
pub trait Object:
    kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}
impl<T> Object for T where
    T: kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// Everything about one child kind. Implemented by a unit type per kind.
pub trait ChildKind: 'static {
    /// The Kubernetes type the apiserver stores and the manager writes.
    type Object: Object + k8s_openapi::Resource;
    /// What the manager caches of it: a lean view decoded straight from the
    /// watch stream, or the object itself, trimmed ([`ChildKind::trim`]).
    /// It must hold every field [`ChildKind::desired`] sets (the kind's
    /// tests check it), or drift would be judged on missing fields. Its
    /// dictionary primes the compression of the cache.
    type View: Object + packed::Dictionary;
    /// Short name in `get -o wide` (`deploy`, `svc`, ...).
    const SHORT: &'static str;
    /// What breaks without write access to this kind, for RBAC and diagnose.
    const WHY: &'static str;
    /// Paths (field names, `[]` for a list entry) where server-side apply
    /// does not merge key by key; everything else is granular.
    const MERGE: &'static [(&'static [&'static str], Merge)];
    /// When a Runner has one, as the CRD's description says it before the
    /// kind (`with a host`); empty: every Runner has one. The prose of
    /// [`ChildKind::desired`] (a test holds them together).
    const WHEN: &'static str = "";

    /// The object the Runner wants, or None when it should have none.
    fn desired(runner: &Runner) -> Option<Self::Object>;

    /// Drops from a cached object what reconcile never reads (the generic
    /// metadata trim has already run).
    fn trim(_view: &mut Self::View) {}

    /// What the Runner's status learns from its own child of this kind.
    fn facts(_view: &Self::View, _runner: &Runner, _facts: &mut Facts) {}

    /// What a cached child that changed from `before` to `now` asks of its
    /// Runner ([`Wake`]). Every change of a kind that does not say
    /// otherwise wakes the Runner at once.
    fn wake(_before: &packed::Packed<Self::View>, _now: &packed::Packed<Self::View>) -> Wake {
        Wake::Now
    }

    /// Its state in a few words, for `describe`.
    fn state(obj: &Self::Object) -> String;

    /// A detail after [`ChildKind::SHORT`] in `get -o wide` (the
    /// Deployment's `2/3`); none by default.
    fn brief(_obj: &Self::Object) -> Option<String> {
        None
    }
}

/// What a change of a cached child asks of its Runner ([`ChildKind::wake`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A pass soon: the verdict, or a field of ours, may have changed.
    Now,
    /// Progress only: the status says it in its counts and message, written
    /// spaced, so the pass may wait a few seconds (the manager's progress
    /// lane).
    Progress,
    /// No pass: nothing a pass reads changed (the status reads a
    /// Deployment's rollout, not every field of its status).
    Nothing,
}

/// What the Runner's status reads from its children, filled by
/// [`ChildKind::facts`] of each child that is the Runner's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The workload's rollout (the Deployment's), once it exists.
    pub rollout: Option<Rollout>,
    /// The Runner is reachable through its host (an Ingress of ours exists).
    pub routed: bool,
}

impl Facts {
    /// Adds what another child taught: a pass brings its children to the
    /// spec concurrently, each filling its own [`Facts`]. Destructured, so a
    /// new fact that is not merged fails the build.
    pub fn merge(&mut self, other: Facts) {
        let Facts { rollout, routed } = other;
        if rollout.is_some() {
            self.rollout = rollout;
        }
        self.routed |= routed;
    }
}

/// A child kind with its types erased, for code that reads or shows
/// children of any kind (the CLI, diagnose, RBAC).
pub trait Kind: Send + Sync {
    /// The Kubernetes kind (`Deployment`).
    fn kind(&self) -> &'static str;
    fn short(&self) -> &'static str;
    /// API group ("" for core).
    fn group(&self) -> &'static str;
    /// Plural resource name, as RBAC and URLs spell it.
    fn plural(&self) -> &'static str;
    fn why(&self) -> &'static str;
    /// [`ChildKind::WHEN`].
    fn when(&self) -> &'static str;
    fn api_resource(&self) -> ApiResource;
    /// True when the Runner should have a child of this kind.
    fn wanted(&self, runner: &Runner) -> bool;
    /// [`ChildKind::state`] of an object read dynamically.
    fn state(&self, obj: &DynamicObject) -> String;
    /// [`ChildKind::brief`] of an object read dynamically.
    fn brief(&self, obj: &DynamicObject) -> Option<String>;
}

impl Debug for dyn Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind())
    }
}

impl PartialEq for dyn Kind {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind()
    }
}

struct Erased<K>(PhantomData<fn() -> K>);

impl<K: ChildKind> Kind for Erased<K> {
    fn kind(&self) -> &'static str {
        <K::Object as k8s_openapi::Resource>::KIND
    }
    fn short(&self) -> &'static str {
        K::SHORT
    }
    fn group(&self) -> &'static str {
        <K::Object as k8s_openapi::Resource>::GROUP
    }
    fn plural(&self) -> &'static str {
        <K::Object as k8s_openapi::Resource>::URL_PATH_SEGMENT
    }
    fn why(&self) -> &'static str {
        K::WHY
    }
    fn when(&self) -> &'static str {
        K::WHEN
    }
    fn api_resource(&self) -> ApiResource {
        ApiResource::erase::<K::Object>(&())
    }
    fn wanted(&self, runner: &Runner) -> bool {
        K::desired(runner).is_some()
    }
    fn state(&self, obj: &DynamicObject) -> String {
        typed::<K::Object>(obj).map_or_else(|e| format!("unreadable: {e}"), |o| K::state(&o))
    }
    fn brief(&self, obj: &DynamicObject) -> Option<String> {
        typed::<K::Object>(obj).ok().and_then(|o| K::brief(&o))
    }
}

/// A dynamically read object as its typed form.
pub fn typed<K: DeserializeOwned>(obj: &DynamicObject) -> serde_json::Result<K> {
    serde_json::from_value(serde_json::to_value(obj)?)
}

/// Every kind, erased, in [`visit`] order.
pub fn all() -> &'static [&'static dyn Kind] {
    static ALL: LazyLock<Vec<&'static dyn Kind>> = LazyLock::new(|| {
        struct Collect(Vec<&'static dyn Kind>);
        impl Visitor for Collect {
            fn visit<K: ChildKind>(&mut self) {
                self.0.push(Box::leak(Box::new(Erased::<K>(PhantomData))));
            }
        }
        let mut c = Collect(Vec::new());
        visit(&mut c);
        c.0
    });
    &ALL
}

/// The kind named `kind` (`Deployment`, ...).
pub fn by_name(kind: &str) -> Option<&'static dyn Kind> {
    all().iter().copied().find(|k| k.kind() == kind)
}

/// The CRD's description: what a Runner declares, and the children the
/// manager makes of it ([`all`], each with its [`ChildKind::WHEN`]).
pub fn crd_description() -> String {
    let made: Vec<String> = all()
        .iter()
        .map(|k| {
            let article = if k.kind().starts_with(['A', 'E', 'I', 'O', 'U']) { "an" } else { "a" };
            let when = if k.when().is_empty() { String::new() } else { format!("{} ", k.when()) };
            format!("{when}{article} {}", k.kind())
        })
        .collect();
    let made = match made.split_last() {
        Some((last, init)) if !init.is_empty() => format!("{}, and {last}", init.join(", ")),
        _ => made.concat(),
    };
    format!("A Runner declares an image and a replica count; the manager makes {made}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind names its own resource (kube's `Resource` and
    /// k8s-openapi's agree), and no name is taken twice.
    #[test]
    fn every_kind_is_listed_once_with_its_own_resource() {
        for &k in all() {
            let r = k.api_resource();
            assert_eq!(
                (r.kind.as_str(), r.group.as_str(), r.plural.as_str()),
                (k.kind(), k.group(), k.plural())
            );
            assert_eq!(by_name(k.kind()), Some(k));
        }
        for name in [|k: &dyn Kind| k.kind(), |k: &dyn Kind| k.plural(), |k: &dyn Kind| k.short()] {
            let mut names: Vec<_> = all().iter().map(|&k| name(k)).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), all().len(), "unique: {names:?}");
        }
    }

    /// A kind without a condition is made for the plainest Runner (one
    /// replica, no host); a kind with one is not, and a Runner with every
    /// option has them all. The description names them in [`visit`] order.
    #[test]
    fn when_agrees_with_desired_and_the_description_names_every_kind() {
        let mut plain = served_fixture::runner();
        plain.spec = crate::api::RunnerSpec::new("nginx:1.27").replicas(1);
        for &k in all() {
            assert_eq!(k.wanted(&plain), k.when().is_empty(), "{k:?}: {:?}", k.when());
            assert!(k.wanted(&served_fixture::runner()), "{k:?}");
        }
        let text = crd_description();
        let at: Vec<_> = all().iter().map(|k| text.find(&format!(" {}", k.kind())).unwrap()).collect();
        assert!(at.is_sorted(), "{text}");
    }
}
