//! `diagnose --fix`: removes our finalizer from a Runner stuck Terminating,
//! and only when the promise it stands for is already kept (the children are
//! gone); `diagnose::restore` puts back the registrations a local manager
//! left behind, and shares this module's [`Error`]. The candidates come
//! from the snapshot (pure); the removal re-reads the Runner and its
//! children right before patching, and the patch carries the
//! resourceVersion of that read, so a Runner re-created or changed in
//! between is never touched (a change reads and checks again).

use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};

use super::checks::finalizer;
use super::snapshot::Snapshot;
use crate::api::{FINALIZER, Runner};
use crate::client::guarded::{self, Step};
use crate::error::{ApiError, FromApi};

/// Result with the fix's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why `--fix` left a finalizer in place (the Runner is not the one the
/// snapshot saw, or a child came back: the promise not yet kept) or a
/// registration as it was (it changed, or its holder is back). Nothing is
/// removed or written; the CLI reports it and exits non-zero.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] ApiError),

    /// Reading the children failed for a reason of the shared client layer.
    #[error(transparent)]
    Read(crate::error::Error),

    #[error("Runner {namespace}/{name} was re-created meanwhile; not touching it")]
    FixRecreated { namespace: String, name: String },

    #[error("Runner {namespace}/{name} still has children ({}); not removing {}", .children.join(", "), FINALIZER)]
    FixChildrenRemain { namespace: String, name: String, children: Vec<String> },

    /// A registration (or the Lease) changed between diagnose's read and
    /// the guarded write: nothing more is written.
    #[error(
        "{object} changed since it was read ({why}); nothing more was restored: run kubectl runner diagnose again"
    )]
    FixChanged { object: String, why: String },

    /// The local manager holding a registration renewed its Lease again.
    #[error("{object} is held by the local manager {holder:?} again ({lease}); not restoring it")]
    FixHeld { object: String, holder: String, lease: String },

    /// The saved annotation no longer parses: nothing is restored from it.
    #[error(
        "{object}'s annotation {} does not parse ({why}); not restoring from it",
        crate::webhook::local::SAVED_ANNOTATION
    )]
    FixUnreadable { object: String, why: String },
}

/// An API failure stays an [`Error::Api`], whichever layer made it.
impl From<crate::error::Error> for Error {
    fn from(e: crate::error::Error) -> Self {
        match e {
            crate::error::Error::Api(e) => Error::Api(e),
            other => Error::Read(other),
        }
    }
}

/// A Runner whose finalizer may be removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizerFix {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// What the finalizer promised, to show before asking.
    pub promise: String,
}

/// Stuck Runners whose children are all gone.
pub fn candidates(s: &Snapshot) -> Vec<FinalizerFix> {
    s.runners
        .iter()
        .filter(|rs| finalizer::stuck_for(s, rs).is_some() && finalizer::children_gone(rs))
        .map(|rs| FinalizerFix {
            namespace: rs.runner.namespace().unwrap_or_default(),
            name: rs.runner.name_any(),
            uid: rs.runner.metadata.uid.clone().unwrap_or_default(),
            promise: finalizer::promise(rs),
        })
        .collect()
}

/// Re-checks that no child labelled with the Runner's UID remains, then
/// removes exactly our finalizer: a [`guarded::write`], so a Runner changed
/// since the read (a 409) is read and checked again, never patched blind.
pub async fn remove_finalizer(client: &Client, fix: &FinalizerFix) -> Result<()> {
    let (ns, name) = (fix.namespace.as_str(), fix.name.as_str());
    let runners: Api<Runner> = Api::namespaced(client.clone(), ns);
    let runners = &runners;
    let recreated = || Error::FixRecreated { namespace: ns.to_string(), name: name.to_string() };
    guarded::write(
        || async move {
            let r = runners.get(name).await.map_err(|e| Error::api("get", "Runner", ns, name, e))?;
            if r.metadata.uid.as_deref() != Some(fix.uid.as_str()) {
                return Err(recreated());
            }
            let ours = r.finalizers().iter().any(|f| f == FINALIZER);
            let remaining = if ours { crate::client::children::labelled(client, ns, &fix.uid).await? } else { vec![] };
            Ok((r, ours, remaining))
        },
        |(r, ours, children)| {
            if !ours {
                return Ok(Step::Done(()));
            }
            if !children.is_empty() {
                return Err(Error::FixChildrenRemain { namespace: ns.to_string(), name: name.to_string(), children });
            }
            // The resourceVersion makes the patch conditional.
            let keep: Vec<&String> = r.finalizers().iter().filter(|f| *f != FINALIZER).collect();
            let rv = &r.metadata.resource_version;
            Ok(Step::Write(serde_json::json!({ "metadata": { "resourceVersion": rv, "finalizers": keep } })))
        },
        |patch| async move { runners.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop) },
    )
    .await
    .map_err(|f| f.into_error("remove the finalizer from", "Runner", ns, name, |object, why| Error::FixChanged { object, why }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::checks::fixtures;

    #[test]
    fn only_stuck_runners_without_children_are_candidates() {
        let mut s = fixtures::healthy();
        assert!(candidates(&s).is_empty());
        s.runners[0].runner.metadata.deletion_timestamp = Some(fixtures::from(fixtures::ago(600).into()));
        assert!(candidates(&s).is_empty(), "children still there");
        s.runners[0].children = Default::default();
        let c = candidates(&s);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].namespace.as_str(), c[0].name.as_str(), c[0].uid.as_str()), ("app", "web", "uid-1"));
        assert!(c[0].promise.contains("removing it by hand skips that cleanup"));
    }
}
