//! `diagnose --fix` for the registrations a local manager left pointing at
//! itself: puts back what its annotation saved ([`put_back`], the restore
//! the local manager runs on exit), then deletes its expired Lease. The
//! candidates come from the snapshot (pure). After each read of the object
//! the holder's Lease is read too and judged by the wall clock with the
//! checks' rule ([`view::holding`]): a holder back is refused. A holder
//! that comes back between that read and the write finds its registration
//! restored and points it at itself again, as on any start.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, Preconditions};

use super::fix::{Error, Result};
use super::snapshot::Snapshot;
use super::view::registrations::{self as view, Holding, Object};
use crate::client::registrations::put_back;
use crate::error::{FromApi, is_conflict, is_not_found};
use crate::webhook::local::{Holder, LEASE};

/// A registration whose holder is gone, as the snapshot saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoreFix {
    pub object: Object,
    pub by: Holder,
    /// Where it sends reviews now, described.
    pub targets: Vec<String>,
    /// What the holder's Lease said.
    pub holding: String,
    /// What restoring puts back, in words.
    pub restores: String,
}

/// The abandoned registrations whose annotation parses (one that does not
/// is never restored from).
pub fn candidates(s: &Snapshot) -> Vec<RestoreFix> {
    view::read(s)
        .into_iter()
        .filter_map(|r| {
            let held = r.saved.ok().filter(|h| h.holding.abandoned())?;
            Some(RestoreFix {
                object: r.object,
                targets: r.targets.iter().map(|t| t.describe()).collect(),
                holding: held.holding.describe(&held.by, s.now),
                restores: held.restores,
                by: held.by,
            })
        })
        .collect()
}

/// The holder's Lease, expired, to delete once its registrations are back.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpiredLease {
    pub namespace: String,
    pub holder: String,
    /// Delete only the Lease read: same uid, same resourceVersion.
    guard: Preconditions,
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq)]
pub enum Restored {
    /// Put back; the holder's Lease, when it is there, names it and expired.
    Done { lease: Option<ExpiredLease> },
    /// The object or its annotation was gone when re-read: restored by
    /// someone else (its holder on a clean exit), nothing written.
    Already,
}

/// Re-checks and restores one registration (see the module docs).
pub async fn restore(client: &Client, fix: &RestoreFix) -> Result<Restored> {
    let unreadable = |why| Error::FixUnreadable { object: fix.object.display(), why };
    let check = |by| recheck(client, fix, by);
    let put = match fix.object {
        Object::Crd => put_back::<CustomResourceDefinition, _, _, _>(client, None, unreadable, check).await,
        Object::Validating => {
            put_back::<ValidatingWebhookConfiguration, _, _, _>(client, None, unreadable, check).await
        }
    };
    let (kind, name) = (fix.object.kind(), fix.object.name());
    let changed = |object, why| Error::FixChanged { object, why };
    Ok(match put.map_err(|f| f.into_error("restore", kind, "", name, changed))? {
        Some(lease) => Restored::Done { lease },
        None => Restored::Already,
    })
}

/// Checks the re-read object still names the holder the snapshot saw and
/// that its Lease is not live now; the Lease to delete afterwards, when
/// it is the holder's own and expired.
async fn recheck(client: &Client, fix: &RestoreFix, by: Holder) -> Result<Option<ExpiredLease>> {
    if by != fix.by {
        let why = format!("it now names the local manager {:?} at {}", by.holder, by.url);
        return Err(Error::FixChanged { object: fix.object.display(), why });
    }
    let ns = by.lease_namespace.as_str();
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let lease = leases.get_opt(LEASE).await.map_err(|e| Error::api("get", "Lease", ns, LEASE, e))?;
    let holding = view::holding(&by, lease.as_ref(), Timestamp::now());
    // Only the holder's own Lease is deleted: one naming another holder
    // is not ours to remove.
    Ok(match (lease, &holding) {
        (_, Holding::Live { .. }) => {
            let lease = holding.describe(&by, Timestamp::now());
            return Err(Error::FixHeld { object: fix.object.display(), holder: by.holder, lease });
        }
        (Some(l), Holding::Expired { .. }) => Some(ExpiredLease {
            namespace: ns.to_string(),
            holder: by.holder.clone(),
            guard: Preconditions { resource_version: l.metadata.resource_version, uid: l.metadata.uid },
        }),
        _ => None,
    })
}

/// Deletes an expired Lease, guarded: renewed or replaced since it was
/// read, the apiserver answers 409 and it stays. Gone already is fine.
pub async fn delete_lease(client: &Client, lease: &ExpiredLease) -> Result<()> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    let params = DeleteParams { preconditions: Some(lease.guard.clone()), ..Default::default() };
    match api.delete(LEASE, &params).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) if is_conflict(&e) => Err(Error::FixChanged {
            object: format!("Lease {}/{LEASE}", lease.namespace),
            why: "it was renewed or replaced since it was read".into(),
        }),
        Err(e) => Err(Error::api("delete", "Lease", &lease.namespace, LEASE, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::checks::fixtures;
    use crate::diagnose::checks::fixtures::abandoned;

    #[test]
    fn only_abandoned_registrations_whose_annotation_parses_are_candidates() {
        assert!(candidates(&fixtures::healthy()).is_empty());
        let s = abandoned();
        let c = candidates(&s);
        assert_eq!(c.iter().map(|c| c.object).collect::<Vec<_>>(), [Object::Crd, Object::Validating]);
        assert!(c[0].holding.contains("expired"), "{c:?}");
        assert!(c[0].restores.contains("strategy None"), "{c:?}");
    }
}
