//! `diagnose --fix` for the registrations a local manager left pointing at
//! itself: puts back what its annotation saved, then deletes its expired
//! Lease. The candidates come from the snapshot (pure); each restore
//! re-reads the object and the holder's Lease right before writing, judges
//! the Lease again by the wall clock with the checks' rule
//! ([`view::holding`]), computes the object with
//! [`local::restore_crd`] / [`local::restore_validating`] and writes it
//! guarded by the resourceVersion just read (a replace, or a delete with a
//! precondition). A holder that came back, or anyone's write in between,
//! makes the apiserver answer 409, and then nothing more is written.
//!
//! Between the Lease read and the write a holder may come back without
//! touching the object yet; it then finds its registration restored and
//! points it at itself again, as on any start.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use serde::de::DeserializeOwned;

use super::fix::{Error, Result};
use super::snapshot::Snapshot;
use super::view::registrations::{self as view, Holding, Object};
use crate::error::FromApi;
use crate::webhook::local::{self, CrdPrevious, Holder, LEASE, Restore, ValidatingPrevious};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredLease {
    pub namespace: String,
    pub holder: String,
    resource_version: Option<String>,
    uid: Option<String>,
}

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// Put back; the holder's Lease, when it is there, names it and expired.
    Done { lease: Option<ExpiredLease> },
    /// The object or its annotation was gone when re-read: restored by
    /// someone else (its holder on a clean exit), nothing written.
    Already,
}

/// Re-checks and restores one registration (see the module docs).
pub async fn restore(client: &Client, fix: &RestoreFix) -> Result<Restored> {
    match fix.object {
        Object::Crd => restore_crd(client, fix).await,
        Object::Validating => restore_validating(client, fix).await,
    }
}

async fn restore_crd(client: &Client, fix: &RestoreFix) -> Result<Restored> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = fix.object.name();
    let crd = api.get_opt(name).await.map_err(|e| Error::api("get", fix.object.kind(), "", name, e))?;
    let Some(crd) = crd else { return Ok(Restored::Already) };
    let Some(lease) = recheck::<CrdPrevious>(client, fix, &crd.metadata).await? else {
        return Ok(Restored::Already);
    };
    let restored = local::restore_crd(&crd, None).map_err(|why| unreadable(fix, why))?;
    let Some(restored) = restored else { return Ok(Restored::Already) };
    let put = api.replace(name, &PostParams::default(), &restored).await;
    put.map_err(|e| write_error(fix, "replace", e))?;
    Ok(Restored::Done { lease })
}

async fn restore_validating(client: &Client, fix: &RestoreFix) -> Result<Restored> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let name = fix.object.name();
    let vwc = api.get_opt(name).await.map_err(|e| Error::api("get", fix.object.kind(), "", name, e))?;
    let Some(vwc) = vwc else { return Ok(Restored::Already) };
    let Some(lease) = recheck::<ValidatingPrevious>(client, fix, &vwc.metadata).await? else {
        return Ok(Restored::Already);
    };
    match local::restore_validating(&vwc, None).map_err(|why| unreadable(fix, why))? {
        None => return Ok(Restored::Already),
        Some(Restore::Replace(restored)) => {
            let put = api.replace(name, &PostParams::default(), &restored).await;
            put.map_err(|e| write_error(fix, "replace", e))?;
        }
        Some(Restore::Delete) => {
            let deleted = api.delete(name, &guarded(&vwc.metadata)).await;
            deleted.map_err(|e| write_error(fix, "delete", e))?;
        }
    }
    Ok(Restored::Done { lease })
}

/// Checks the re-read object still names the holder the snapshot saw and
/// that its Lease is not live now. `Ok(None)`: the annotation is gone.
/// `Ok(Some(lease))`: restore; delete `lease` afterwards, when given.
async fn recheck<P: DeserializeOwned>(
    client: &Client,
    fix: &RestoreFix,
    meta: &ObjectMeta,
) -> Result<Option<Option<ExpiredLease>>> {
    let saved = local::saved::<P>(meta.annotations.as_ref()).map_err(|why| unreadable(fix, why))?;
    let Some(saved) = saved else { return Ok(None) };
    if saved.by != fix.by {
        let why = format!("it now names the local manager {:?} at {}", saved.by.holder, saved.by.url);
        return Err(Error::FixChanged { object: fix.object.display(), why });
    }
    let ns = saved.by.lease_namespace.as_str();
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let lease = leases.get_opt(LEASE).await.map_err(|e| Error::api("get", "Lease", ns, LEASE, e))?;
    let holding = view::holding(&saved.by, lease.as_ref(), Timestamp::now());
    if let Holding::Live { .. } = holding {
        return Err(Error::FixHeld {
            object: fix.object.display(),
            holder: saved.by.holder.clone(),
            lease: holding.describe(&saved.by, Timestamp::now()),
        });
    }
    // Only the holder's own Lease is deleted: one naming another holder
    // is not ours to remove.
    let expired = match (lease, holding) {
        (Some(l), Holding::Expired { .. }) => Some(ExpiredLease {
            namespace: ns.to_string(),
            holder: saved.by.holder.clone(),
            resource_version: l.metadata.resource_version,
            uid: l.metadata.uid,
        }),
        _ => None,
    };
    Ok(Some(expired))
}

/// Deletes an expired Lease, guarded: renewed or replaced since it was
/// read, the apiserver answers 409 and it stays. Gone already is fine.
pub async fn delete_lease(client: &Client, lease: &ExpiredLease) -> Result<()> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: lease.resource_version.clone(),
            uid: lease.uid.clone(),
        }),
        ..Default::default()
    };
    match api.delete(LEASE, &params).await {
        Ok(_) => Ok(()),
        Err(e) if crate::error::is_not_found(&e) => Ok(()),
        Err(e) if is_conflict(&e) => Err(Error::FixChanged {
            object: format!("Lease {}/{LEASE}", lease.namespace),
            why: "it was renewed or replaced since it was read".into(),
        }),
        Err(e) => Err(Error::api("delete", "Lease", &lease.namespace, LEASE, e)),
    }
}

/// Delete only the object that was read: same uid, same resourceVersion.
fn guarded(meta: &ObjectMeta) -> DeleteParams {
    let preconditions =
        Preconditions { resource_version: meta.resource_version.clone(), uid: meta.uid.clone() };
    DeleteParams { preconditions: Some(preconditions), ..Default::default() }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// A 409 is "changed since read"; anything else is the API failure.
fn write_error(fix: &RestoreFix, op: &'static str, e: kube::Error) -> Error {
    if is_conflict(&e) {
        let why = "the apiserver refused the write guarded by the resourceVersion read".into();
        return Error::FixChanged { object: fix.object.display(), why };
    }
    Error::api(op, fix.object.kind(), "", fix.object.name(), e)
}

fn unreadable(fix: &RestoreFix, why: String) -> Error {
    Error::FixUnreadable { object: fix.object.display(), why }
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
