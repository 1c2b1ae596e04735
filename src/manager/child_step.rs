//! Pure: what one pass does to one child, decided from what the cache holds
//! and what the Runner wants. The write path (`child_write`) performs the
//! step; the table test below covers every branch.
//!
//! ```text
//! wanted?  live?   ours?  deleting?  drift?  take-over?              step
//!   yes    no                                                       Create
//!   yes    yes     no                                               Refuse
//!   yes    yes     yes    yes                                       Wait
//!   yes    yes     yes    no         no                             Nothing
//!   yes    yes     yes    no         yes     needed                 Apply(First)
//!   yes    yes     yes    no         yes     if the apply is refused Apply(IfRefused)
//!   yes    yes     yes    no         yes     no                     Apply(Not)
//!   no     no / not ours / delete answered "gone"                   Nothing
//!   no     ours, delete sent and still finalizing, or deleting      Wait
//!   no     ours                                                     Delete
//! ```
//!
//! Drift is a field we want with another value, or, while the Runner's
//! spec is new (not yet in its status), a field we may have set and no
//! longer want ([`removal::removes`]: limits dropped, the restricted
//! profile turned off). Only then: once the spec is observed, such a field
//! may be someone else's, and applying at every pass would not remove it.
//!
//! The take-over ([`TakeOver`]) is the one write besides the apply, and
//! only two children need it. A child an earlier version created with POST
//! still has fields under our Update entry, which an apply cannot remove:
//! it is migrated (the entry folded into our Apply entry) the first time an
//! apply must remove one of them ([`removal::removes`]); a scalar change
//! applies directly. And an entry of ours that someone else gave another
//! key under our entry's name (our port's name on port 81) must be put back
//! before an apply can converge. While the spec is new such an entry is
//! most likely the user's own port change, so the apply goes first and the
//! take-over follows only if the apiserver refuses it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::kinds::drift::{self, Rules};
use crate::kinds::{managed_fields, removal};
use crate::ownership::{Ownership, ownership};

/// What to do to a child this pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Wanted and absent from the cache: create it, by an apply that fails
    /// if the name is taken (it never merges into a same-name object
    /// someone else made).
    Create,
    /// Wanted, and the name is taken by an object the Runner does not
    /// control: leave it alone and say so.
    Refuse(Ownership),
    /// Ours and on its way out: its delete event brings the next pass.
    Wait,
    /// Ours and drifted: apply our fields, taking them over first or on
    /// refusal where an apply alone cannot converge.
    Apply(TakeOver),
    /// As wanted (or absent, or someone else's, and not wanted).
    Nothing,
    /// Ours and no longer wanted: delete it, once.
    Delete,
}

/// When an apply needs our fields taken over ([`crate::kinds::managed_fields`]):
/// one JSON patch, guarded by the resourceVersion, that folds our Update
/// entry into our Apply entry and puts our entry back where someone else
/// renamed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakeOver {
    /// The apply converges by itself.
    Not,
    /// Take over, then apply.
    First,
    /// Apply; if the apiserver refuses it, take over and apply again.
    IfRefused,
}

/// A child as the cache holds it: its metadata and its JSON (without
/// apiVersion and kind, as drift compares it).
#[derive(Debug, Clone, Copy)]
pub struct Live<'a> {
    pub meta: &'a ObjectMeta,
    pub body: &'a Value,
}

/// The step for one child. `want` is the body we would apply (None: the
/// Runner should not have this child, or is being deleted); `universe` is
/// what we would apply with every optional spec field on; `delete_sent`
/// is what the apiserver answered to our DELETE of this very child, if we
/// sent one (true: gone); `spec_new` is true while the Runner's status
/// has not observed its generation.
pub fn decide(
    rules: &Rules,
    universe: &Value,
    want: Option<&Value>,
    live: Option<Live<'_>>,
    runner_uid: &str,
    delete_sent: Option<bool>,
    spec_new: bool,
) -> Step {
    let Some(live) = live else {
        return if want.is_some() { Step::Create } else { Step::Nothing };
    };
    let owner = ownership(live.meta, runner_uid);
    let Some(want) = want else {
        return match (owner, delete_sent) {
            (Ownership::Ours, Some(true)) => Step::Nothing, // gone; the cache has not seen it yet
            (Ownership::Ours, Some(false)) => Step::Wait,
            (Ownership::Ours, None) if live.meta.deletion_timestamp.is_some() => Step::Wait,
            (Ownership::Ours, None) => Step::Delete,
            _ => Step::Nothing,
        };
    };
    if owner != Ownership::Ours {
        return Step::Refuse(owner);
    }
    if live.meta.deletion_timestamp.is_some() {
        return Step::Wait;
    }
    let plan = drift::plan(rules, want, live.body);
    // A walk of the body: only when its answer can matter.
    let removes = || removal::removes(rules, universe, want, live.body);
    let drifted = plan.apply || (spec_new && removes());
    let renamed = !plan.renamed.is_empty();
    if !drifted {
        Step::Nothing
    } else if (renamed && !spec_new) || (managed_fields::needs_upgrade(live.meta) && removes()) {
        Step::Apply(TakeOver::First)
    } else if renamed {
        Step::Apply(TakeOver::IfRefused)
    } else {
        Step::Apply(TakeOver::Not)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference, Time};
    use serde_json::json;

    use super::*;
    use crate::api::FIELD_MANAGER;
    use crate::kinds::{ChildKind, service::Services};

    fn meta(owner_uid: Option<&str>, deleting: bool, update_entry: bool) -> ObjectMeta {
        ObjectMeta {
            owner_references: owner_uid.map(|uid| {
                vec![OwnerReference {
                    api_version: "lab.cloudlab.training/v1beta1".into(),
                    kind: "Runner".into(),
                    name: "web".into(),
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            deletion_timestamp: deleting.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            managed_fields: update_entry.then(|| {
                vec![ManagedFieldsEntry {
                    manager: Some(FIELD_MANAGER.into()),
                    operation: Some("Update".into()),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }
    }

    fn label(value: &str) -> Value {
        json!({ "metadata": { "labels": { "app": value } } })
    }

    /// What the rows below may set: the `app` and `tier` labels.
    fn universe() -> Value {
        json!({ "metadata": { "labels": { "app": "x", "tier": "x" } } })
    }

    #[test]
    fn every_branch_of_the_decision() {
        let want = label("web");
        let (same, moved) = (label("web"), label("other"));
        let mut with_tier = label("other");
        with_tier["metadata"]["labels"]["tier"] = json!("front");
        let ours = meta(Some("u1"), false, false);
        let ours_deleting = meta(Some("u1"), true, false);
        let ours_posted = meta(Some("u1"), false, true);
        let earlier = meta(Some("u0"), false, false);
        let foreign = meta(None, false, false);
        let live = |meta, body| Some(Live { meta, body });
        type Row<'a> = (&'a str, Option<&'a Value>, Option<Live<'a>>, Option<bool>, Step);
        let rows: Vec<Row> = vec![
            ("wanted and absent", Some(&want), None, None, Step::Create),
            (
                "an earlier Runner's",
                Some(&want),
                live(&earlier, &same),
                None,
                Step::Refuse(Ownership::StaleOwner),
            ),
            ("someone else's", Some(&want), live(&foreign, &same), None, Step::Refuse(Ownership::Foreign)),
            ("ours, being deleted", Some(&want), live(&ours_deleting, &moved), None, Step::Wait),
            ("ours and as wanted", Some(&want), live(&ours, &same), None, Step::Nothing),
            ("ours, drifted", Some(&want), live(&ours, &moved), None, Step::Apply(TakeOver::Not)),
            (
                "ours, posted, a scalar drifted",
                Some(&want),
                live(&ours_posted, &moved),
                None,
                Step::Apply(TakeOver::Not),
            ),
            (
                "ours, posted, a key of ours to remove",
                Some(&want),
                live(&ours_posted, &with_tier),
                None,
                Step::Apply(TakeOver::First),
            ),
            (
                "ours, a key to remove, applied before",
                Some(&want),
                live(&ours, &with_tier),
                None,
                Step::Apply(TakeOver::Not),
            ),
            ("ours, posted, as wanted", Some(&want), live(&ours_posted, &same), None, Step::Nothing),
            ("unwanted and absent", None, None, None, Step::Nothing),
            ("unwanted, someone else's", None, live(&foreign, &same), None, Step::Nothing),
            ("unwanted, an earlier Runner's", None, live(&earlier, &same), None, Step::Nothing),
            ("unwanted, ours", None, live(&ours, &same), None, Step::Delete),
            ("unwanted, ours, deleting", None, live(&ours_deleting, &same), None, Step::Wait),
            ("unwanted, delete answered gone", None, live(&ours, &same), Some(true), Step::Nothing),
            ("unwanted, delete still finalizing", None, live(&ours, &same), Some(false), Step::Wait),
        ];
        for (what, want, live, sent, step) in rows {
            assert_eq!(decide(Services::MERGE, &universe(), want, live, "u1", sent, false), step, "{what}");
        }
        // Only a key we no longer want is left (the spec dropped `tier`):
        // removed while the spec is new, then left to whoever holds it.
        let mut only_tier = label("web");
        only_tier["metadata"]["labels"]["tier"] = json!("front");
        let removal_rows = [
            ("applied before, spec new", live(&ours, &only_tier), true, Step::Apply(TakeOver::Not)),
            ("posted, spec new", live(&ours_posted, &only_tier), true, Step::Apply(TakeOver::First)),
            ("spec observed", live(&ours, &only_tier), false, Step::Nothing),
            ("nothing to remove, spec new", live(&ours, &same), true, Step::Nothing),
        ];
        for (what, live, spec_new, step) in removal_rows {
            assert_eq!(
                decide(Services::MERGE, &universe(), Some(&want), live, "u1", None, spec_new),
                step,
                "{what}"
            );
        }
        // Someone moved our port to another number under our port's name: a
        // take-over, since an apply would add a second port named http.
        let port =
            |n: i32| json!({ "spec": { "ports": [{ "name": "http", "port": n, "protocol": "TCP" }] } });
        let (want, renamed) = (port(80), port(81));
        assert_eq!(
            decide(Services::MERGE, &universe(), Some(&want), live(&ours, &renamed), "u1", None, false),
            Step::Apply(TakeOver::First)
        );
        // The user changed the port (the spec is new): most likely ours,
        // applied directly, taken over only if the apiserver refuses that.
        assert_eq!(
            decide(Services::MERGE, &universe(), Some(&want), live(&ours, &renamed), "u1", None, true),
            Step::Apply(TakeOver::IfRefused)
        );
    }
}
