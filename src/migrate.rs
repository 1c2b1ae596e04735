//! Moving every stored Runner to the CRD's storage version, then pruning
//! the CRD's `status.storedVersions` to that version alone.
//!
//! ```text
//!   crd::read ─► Plan (pure: storage version, storedVersions, resourceVersion)
//!      │
//!      ├─► preflight: list at each old version ─► preflight::check (pure round trip)
//!      │                                         refuses naming the Runner and field
//!      ├─► svm::run  (the apiserver serves storagemigration.k8s.io)
//!      │   or rewrite::run: paged list at the storage version, one PUT per Runner,
//!      │                    guarded by its resourceVersion ─► Tally (pure counts)
//!      └─► crd::prune: the CRD as at the start? then write, guarded ─► Summary
//! ```
//!
//! Why storedVersions matters: the apiserver refuses to drop a version
//! from `spec.versions` while `status.storedVersions` lists it, and nothing
//! but a migration may shorten that list, because it promises that no
//! object is stored at a version it leaves out. Pruning is only honest after
//! every object was rewritten, and only if the CRD did not change meanwhile
//! (a new storage version chosen during the run would make the promise
//! false), hence the comparison with the start and the resourceVersion
//! guard on the prune.
//!
//! Resuming after Ctrl-C is running the command again: a PUT of an object
//! already stored at the storage version is a no-op the apiserver does not
//! even write to etcd, so a rerun costs one read and one request per Runner
//! and never a second change. No progress file is kept: there is no way to
//! ask the apiserver at which version an object is stored, so a file could
//! only repeat what the rerun finds out for itself, and could go stale.
//!
//! This module and [`preflight`] are pure; [`crd`], [`rewrite`], [`svm`]
//! and [`access`] do the I/O, and the CLI (`cli::migrate`) draws the
//! progress and renders the [`Summary`].

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Serialize;

use crate::api::GROUP;
use crate::error::ApiError;

pub mod access;
pub mod crd;
pub mod preflight;
pub mod rewrite;
pub mod svm;

pub use preflight::Refusal;

/// What migrate fails with. Facts only: the CLI adds the advice.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A failed API call or a missing CRD: the shared client layer's error.
    #[error(transparent)]
    Cluster(#[from] crate::error::Error),

    #[error("the Runner CRD ({}) has no version with storage: true", crate::api::CRD_NAME)]
    NoStorageVersion,

    /// The preflight found a Runner a round trip would change (boxed: it
    /// is the largest variant, and errors travel by value).
    #[error(transparent)]
    Refused(#[from] Box<Refusal>),

    /// A Runner was rewritten into a conflict this many times in a row.
    #[error("Runner {namespace}/{name} changed under each of {attempts} attempts to rewrite it")]
    TooManyConflicts { namespace: String, name: String, attempts: u32 },

    /// The apiserver's StorageVersionMigration ended Failed.
    #[error("StorageVersionMigration {name} failed: {message}")]
    MigrationFailed { name: String, message: String },

    /// The user lacks permissions migrate needs (from SelfSubjectAccessReviews).
    #[error("missing permission(s): {}", .0.join("; "))]
    Forbidden(Vec<String>),
}

/// So `Error::api(..)` ([`crate::error::FromApi`]) builds one.
impl From<ApiError> for Error {
    fn from(e: ApiError) -> Self {
        Error::Cluster(e.into())
    }
}

/// What the CRD says, read once at the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The version with `storage: true`.
    pub storage: String,
    /// The versions the apiserver serves.
    pub served: Vec<String>,
    /// `status.storedVersions` at the start.
    pub stored_before: Vec<String>,
    /// The CRD's resourceVersion at the start, named when it changed.
    pub crd_resource_version: String,
}

impl Plan {
    /// The plan for `crd`, or [`Error::NoStorageVersion`].
    pub fn from_crd(crd: &CustomResourceDefinition) -> Result<Plan, Error> {
        let versions = &crd.spec.versions;
        let storage = versions.iter().find(|v| v.storage).ok_or(Error::NoStorageVersion)?.name.clone();
        let served = versions.iter().filter(|v| v.served).map(|v| v.name.clone()).collect();
        let stored_before = crd.status.as_ref().and_then(|s| s.stored_versions.clone()).unwrap_or_default();
        let crd_resource_version = crd.metadata.resource_version.clone().unwrap_or_default();
        Ok(Plan { storage, served, stored_before, crd_resource_version })
    }

    /// The versions objects may still be stored at, other than the storage one.
    pub fn old_versions(&self) -> Vec<&str> {
        self.stored_before.iter().map(String::as_str).filter(|v| *v != self.storage).collect()
    }

    /// False when storedVersions is already the storage version alone:
    /// the apiserver then promises every object is stored at it.
    pub fn needed(&self) -> bool {
        !self.old_versions().is_empty()
    }

    /// The old versions the preflight can read Runners at (served ones),
    /// and those it cannot.
    pub fn checkable(&self) -> (Vec<&str>, Vec<&str>) {
        self.old_versions().into_iter().partition(|v| self.served.iter().any(|s| s == v))
    }

    /// storedVersions after a complete migration.
    pub fn stored_after(&self) -> Vec<String> {
        vec![self.storage.clone()]
    }
}

/// True when `now` is `at_start` but for what the apiserver and a storage
/// migrator write on their own: the resourceVersion, managedFields and the
/// status conditions. Any change to the spec, labels, annotations or
/// storedVersions counts.
pub fn unchanged_but_conditions(at_start: &CustomResourceDefinition, now: &CustomResourceDefinition) -> bool {
    let strip = |crd: &CustomResourceDefinition| {
        let mut crd = crd.clone();
        crd.metadata.resource_version = None;
        crd.metadata.managed_fields = None;
        if let Some(status) = crd.status.as_mut() {
            status.conditions = None;
        }
        crd
    };
    strip(at_start) == strip(now)
}

/// `lab.cloudlab.training/<version>`.
pub fn api_version(version: &str) -> String {
    format!("{GROUP}/{version}")
}

/// Counts of the per-Runner rewrite, kept as it goes so an interrupted run
/// can say how far it got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Runners written back at the storage version.
    pub rewritten: usize,
    /// Runners deleted between the list and their write (404).
    pub skipped: usize,
    /// Writes repeated after a conflict (409): someone else wrote first.
    pub retried: usize,
}

impl Tally {
    /// Adds one Runner's outcome.
    pub fn add(&mut self, outcome: rewrite::Outcome) {
        use rewrite::Outcome::{Deleted, Rewritten};
        let (Rewritten { retries } | Deleted { retries }) = outcome;
        self.retried += retries as usize;
        match outcome {
            Rewritten { .. } => self.rewritten += 1,
            Deleted { .. } => self.skipped += 1,
        }
    }

    /// Runners done either way.
    pub fn done(&self) -> usize {
        self.rewritten + self.skipped
    }
}

/// How the Runners were rewritten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Method {
    /// One guarded PUT per Runner, from this process.
    Update,
    /// The apiserver's StorageVersionMigration of this name did it; it
    /// reports no per-object counts.
    StorageVersionMigration { name: String },
}

/// What became of storedVersions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "result")]
pub enum Prune {
    /// Pruned to the storage version.
    Pruned,
    /// The StorageVersionMigration pruned it on success; nothing else changed.
    PrunedByMigration,
    /// storedVersions was already the storage version alone.
    NothingToDo,
    /// The CRD's resourceVersion moved since the start: not pruned.
    CrdChanged { at_start: String },
    /// Ctrl-C before every Runner was rewritten: not pruned.
    Interrupted,
}

/// What `migrate` did, for the renderer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub storage_version: String,
    pub method: Method,
    /// Runners the preflight round-tripped.
    pub checked: usize,
    /// Old versions the preflight could not read at (not served).
    pub unchecked_versions: Vec<String>,
    #[serde(flatten)]
    pub tally: Tally,
    pub seconds: f64,
    pub stored_versions_before: Vec<String>,
    pub stored_versions_after: Vec<String>,
    pub prune: Prune,
}

impl Summary {
    /// The summary of a run of `plan` that ended with `prune`.
    pub fn new(
        plan: &Plan,
        method: Method,
        checked: usize,
        tally: Tally,
        took: Duration,
        prune: Prune,
    ) -> Self {
        let stored_versions_after = match prune {
            Prune::Pruned | Prune::PrunedByMigration | Prune::NothingToDo => plan.stored_after(),
            _ => plan.stored_before.clone(),
        };
        let (_, unchecked) = plan.checkable();
        Summary {
            storage_version: plan.storage.clone(),
            method,
            checked,
            unchecked_versions: unchecked.into_iter().map(String::from).collect(),
            tally,
            seconds: took.as_secs_f64(),
            stored_versions_before: plan.stored_before.clone(),
            stored_versions_after,
            prune,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(versions: &[(&str, bool, bool)], stored: &[&str]) -> CustomResourceDefinition {
        let versions: Vec<_> = versions
            .iter()
            .map(|(name, served, storage)| serde_json::json!({ "name": name, "served": served, "storage": storage }))
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": crate::api::CRD_NAME, "resourceVersion": "42" },
            "spec": { "group": GROUP, "scope": "Namespaced", "versions": versions,
                      "names": { "plural": "runners", "kind": "Runner" } },
            "status": { "storedVersions": stored },
        }))
        .unwrap()
    }

    #[test]
    fn the_plan_reads_the_storage_version_and_what_may_still_be_stored_at_others() {
        let plan = Plan::from_crd(&crd(
            &[("v1alpha1", true, false), ("v1beta1", true, true)],
            &["v1alpha1", "v1beta1"],
        ))
        .unwrap();
        assert_eq!(plan.storage, "v1beta1");
        assert_eq!(plan.crd_resource_version, "42");
        assert_eq!(plan.old_versions(), vec!["v1alpha1"]);
        assert!(plan.needed());
        assert_eq!(plan.stored_after(), vec!["v1beta1".to_string()]);
        assert_eq!(plan.checkable(), (vec!["v1alpha1"], vec![]));
    }

    #[test]
    fn an_old_version_no_longer_served_cannot_be_checked_and_says_so() {
        let plan = Plan::from_crd(&crd(
            &[("v1alpha1", false, false), ("v1beta1", true, true)],
            &["v1alpha1", "v1beta1"],
        ))
        .unwrap();
        assert_eq!(plan.checkable(), (vec![], vec!["v1alpha1"]));
        let s = Summary::new(&plan, Method::Update, 0, Tally::default(), Duration::ZERO, Prune::Pruned);
        assert_eq!(s.unchecked_versions, vec!["v1alpha1".to_string()]);
    }

    #[test]
    fn nothing_is_needed_when_stored_versions_is_the_storage_version_alone() {
        let plan = Plan::from_crd(&crd(&[("v1alpha1", true, false), ("v1beta1", true, true)], &["v1beta1"]))
            .unwrap();
        assert!(!plan.needed());
    }

    #[test]
    fn a_crd_changed_only_in_its_conditions_is_unchanged_and_any_other_change_counts() {
        let start = crd(&[("v1alpha1", true, false), ("v1beta1", true, true)], &["v1alpha1", "v1beta1"]);
        let mut migrating = start.clone();
        migrating.metadata.resource_version = Some("43".into());
        migrating.status.as_mut().unwrap().conditions = Some(vec![
            serde_json::from_value(serde_json::json!({
                "type": "StorageMigrating", "status": "True", "lastTransitionTime": "2026-12-07T07:30:47Z"
            }))
            .unwrap(),
        ]);
        assert!(unchanged_but_conditions(&start, &migrating));
        let mut labelled = migrating.clone();
        labelled.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
        let mut new_storage = migrating.clone();
        new_storage.spec.versions[0].storage = true;
        new_storage.spec.versions[1].storage = false;
        let mut stored = migrating;
        stored.status.as_mut().unwrap().stored_versions = Some(vec!["v1beta1".into()]);
        for changed in [labelled, new_storage, stored] {
            assert!(!unchanged_but_conditions(&start, &changed));
        }
    }

    #[test]
    fn a_crd_without_a_storage_version_is_refused() {
        let err = Plan::from_crd(&crd(&[("v1alpha1", true, false)], &[])).unwrap_err();
        assert!(matches!(err, Error::NoStorageVersion), "{err}");
    }

    #[test]
    fn the_tally_counts_retries_of_rewritten_and_deleted_runners() {
        let mut t = Tally::default();
        t.add(rewrite::Outcome::Rewritten { retries: 0 });
        t.add(rewrite::Outcome::Rewritten { retries: 2 });
        t.add(rewrite::Outcome::Deleted { retries: 1 });
        assert_eq!(t, Tally { rewritten: 2, skipped: 1, retried: 3 });
        assert_eq!(t.done(), 3);
    }

    #[test]
    fn stored_versions_after_are_pruned_only_when_the_prune_happened() {
        let plan = Plan::from_crd(&crd(
            &[("v1alpha1", true, false), ("v1beta1", true, true)],
            &["v1alpha1", "v1beta1"],
        ))
        .unwrap();
        let took = Duration::from_millis(1500);
        let pruned = Summary::new(&plan, Method::Update, 3, Tally::default(), took, Prune::Pruned);
        assert_eq!(pruned.stored_versions_after, vec!["v1beta1".to_string()]);
        assert_eq!(pruned.seconds, 1.5);
        for prune in [Prune::CrdChanged { at_start: "42".into() }, Prune::Interrupted] {
            let s = Summary::new(&plan, Method::Update, 3, Tally::default(), took, prune);
            assert_eq!(s.stored_versions_after, s.stored_versions_before);
        }
    }
}
