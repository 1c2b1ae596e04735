//! The rules: pure functions from a [`Snapshot`] to [`Finding`]s, one module
//! per group of the issue's checks. Nothing here calls the API or reads the
//! clock (`Snapshot::now` is the clock), so every rule has a unit test built
//! from fixtures.
//!
//! ```text
//! Snapshot ─┬─ install     CRD present, served, equal to what we generate
//!           ├─ registrations  left behind by a local manager, validating webhook reachable
//!           ├─ conversion  webhook reachable, caBundle, certificate dates, storedVersions
//!           ├─ manager     Lease, Deployment, Pods, absent, watch scope
//!           ├─ permissions SubjectAccessReview denials, over-broad grants
//!           └─ per Runner: finalizer, child_ownership, workload, status, observed
//! ```

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use super::finding::{Finding, ObjectRef, Severity};
use super::snapshot::{RunnerState, Snapshot};
pub(crate) use super::view::{age, human};
use crate::client::children::NotReadable;

pub mod certs;
pub mod child_ownership;
pub mod conversion;
pub mod finalizer;
pub mod install;
pub mod manager;
pub mod observed;
pub mod permissions;
pub mod registrations;
pub mod reverted;
pub mod status;
pub mod workload;

#[cfg(test)]
mod agreement_tests;
#[cfg(test)]
mod conversion_tests;
#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod registrations_tests;

/// Every finding for the snapshot, most severe first, grouped by object.
pub fn run(s: &Snapshot) -> Vec<Finding> {
    let mut out = install::check(s);
    if s.cluster.is_ok() {
        out.extend(registrations::check(s));
        out.extend(conversion::check(s));
        out.extend(manager::check(s));
        out.extend(permissions::check(s));
        for rs in &s.runners {
            out.extend(finalizer::check(s, rs));
            out.extend(child_ownership::check(s, rs));
            out.extend(workload::check(s, rs));
            out.extend(status::check(s, rs));
            out.extend(observed::check(rs));
            out.extend(reverted::check(s, rs));
        }
    }
    out.extend(not_readable(s));
    out.extend(s.gaps.iter().map(|g| {
        Finding::warning(
            super::finding::Code::GatherIncomplete,
            ObjectRef::new("Diagnose", "", "gather"),
            format!("could not {}; the checks that need it were skipped", g.what),
        )
        .evidence(g.error.clone())
    }));
    // A conversion webhook that fails hides every Runner: said first, before
    // anything it may explain; a local manager that left the registrations
    // pointing at itself explains even that, so it comes before.
    let leads = |f: &Finding| match f.code {
        super::finding::Code::LocalWebhooksAbandoned => 0,
        super::finding::Code::ConversionWebhookUnreachable if f.severity == Severity::Error => 1,
        _ => 2,
    };
    out.sort_by(|a, b| {
        (leads(a), a.severity).cmp(&(leads(b), b.severity)).then_with(|| a.object.cmp(&b.object))
    });
    out
}

/// One finding naming every child kind that could not be read, where, and
/// the permission that would show it; the per-Runner checks skipped those
/// kinds. Info: a narrower permission changes what is seen, not the verdict.
fn not_readable(s: &Snapshot) -> Option<Finding> {
    let mut refused: std::collections::BTreeMap<&NotReadable, Vec<String>> = Default::default();
    for rs in &s.runners {
        for n in rs.children.unreadable() {
            let namespaces = refused.entry(n).or_default();
            let ns = rs.runner.namespace().unwrap_or_default();
            if !namespaces.contains(&ns) {
                namespaces.push(ns);
            }
        }
    }
    if refused.is_empty() {
        return None;
    }
    let mut kinds: Vec<&str> = refused.keys().map(|n| n.kind).collect();
    kinds.dedup();
    let mut f = Finding::info(
        super::finding::Code::NotReadable,
        ObjectRef::new("Diagnose", "", "gather"),
        format!("not readable with these permissions: {}; their checks were skipped", kinds.join(", ")),
    );
    for (n, namespaces) in &refused {
        f = f.evidence(format!("{} {} in namespace {}", n.verb, n.resource, namespaces.join(", ")));
    }
    Some(f.fix("ask for those permissions; the built-in view role has them"))
}

/// The controller ownerReference of an object, if any.
pub(crate) fn controller(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.as_deref().unwrap_or_default().iter().find(|o| o.controller == Some(true))
}

/// True when `meta` is this Runner's ([`crate::ownership::ownership`]: the
/// manager's rule, so diagnose and the status agree).
pub(crate) fn controlled_by(meta: &ObjectMeta, rs: &RunnerState) -> bool {
    let uid = rs.runner.metadata.uid.as_deref().unwrap_or_default();
    crate::ownership::ownership(meta, uid) == crate::ownership::Ownership::Ours
}

/// The `Runner ns/name` a per-Runner finding is about.
pub(crate) fn runner_ref(rs: &RunnerState) -> ObjectRef {
    ObjectRef::new("Runner", &rs.runner.namespace().unwrap_or_default(), &rs.runner.name_any())
}

/// How long ago the Runner was created (zero when unknown).
pub(crate) fn runner_age(s: &Snapshot, rs: &RunnerState) -> Duration {
    rs.runner.metadata.creation_timestamp.as_ref().map(|t| age(s.now, t.0)).unwrap_or_default()
}

/// `-n NS` for commands about the Runner.
pub(crate) fn ns_flag(rs: &RunnerState) -> String {
    format!("-n {}", rs.runner.namespace().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::finding::{Code, Severity};
    use crate::diagnose::snapshot::Gap;

    #[test]
    fn a_failed_read_is_reported_as_an_incomplete_gather() {
        let mut s = fixtures::healthy();
        s.gaps.push(Gap { what: "list Pods in ns".into(), error: "forbidden".into() });
        let f = run(&s);
        let gap = f.iter().find(|f| f.code == Code::GatherIncomplete).unwrap();
        assert_eq!(gap.severity, Severity::Warning);
        assert!(gap.message.contains("list Pods in ns"), "{}", gap.message);
    }

    #[test]
    fn kinds_not_readable_are_named_once_as_info_with_the_permission_and_nothing_is_missing() {
        for &kind in crate::kinds::all() {
            let mut s = fixtures::healthy();
            let mut second = s.runners[0].clone();
            second.runner.metadata.name = Some("api".into());
            s.runners.push(second);
            for rs in &mut s.runners {
                rs.children.remove(kind.kind());
                rs.children.mark_unreadable(NotReadable::of(kind, "get"));
            }
            let f = run(&s);
            let refused: Vec<&Finding> = f.iter().filter(|f| f.code == Code::NotReadable).collect();
            assert_eq!(refused.len(), 1, "{}: {f:#?}", kind.kind());
            assert_eq!(refused[0].severity, Severity::Info);
            assert!(refused[0].message.contains(kind.kind()), "{}", refused[0].message);
            let why = NotReadable::of(kind, "get").resource;
            assert_eq!(refused[0].evidence, [format!("get {why} in namespace {}", fixtures::NS)]);
            assert!(f.iter().all(|f| f.severity == Severity::Info), "{}: {f:#?}", kind.kind());
        }
    }

    #[test]
    fn a_healthy_snapshot_has_no_errors_or_warnings() {
        let f = run(&fixtures::healthy());
        assert!(f.iter().all(|f| f.severity == Severity::Info), "{f:#?}");
    }

    #[test]
    fn findings_come_most_severe_first() {
        let mut s = fixtures::healthy();
        s.crd = None;
        s.gaps.push(Gap { what: "x".into(), error: "y".into() });
        let f = run(&s);
        let sev: Vec<Severity> = f.iter().map(|f| f.severity).collect();
        let mut sorted = sev.clone();
        sorted.sort();
        assert_eq!(sev, sorted);
    }
}
