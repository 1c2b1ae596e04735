//! `diagnose --fix` for the registrations a local manager left pointing at
//! itself: puts back what its annotation saved, then deletes its expired
//! Lease. The candidates come from the snapshot (pure); each restore
//! re-reads the object and the holder's Lease right before writing, judges
//! the Lease again by the wall clock with the checks' rule
//! ([`view::holding`]), computes the object with
//! [`local::restore_crd`] / [`local::restore_validating`] and writes it
//! guarded by the resourceVersion just read (a replace, or a delete with a
//! precondition), by [`guarded::write`]: a holder that came back, or
//! anyone's write in between, makes the apiserver answer 409, and the
//! object and the Lease are read and judged again (the holder back is then
//! refused, as at the first read).
//!
//! Between the Lease read and the write a holder may come back without
//! touching the object yet; it then finds its registration restored and
//! points it at itself again, as on any start.

use std::fmt::Debug;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::core::ClusterResourceScope;
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::fix::{Error, Result};
use super::snapshot::Snapshot;
use super::view::registrations::{self as view, Holding, Object};
use crate::client::guarded::{self, Step};
use crate::error::{FromApi, is_conflict};
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
        Object::Crd => {
            let put_back = |crd: &_| Ok(local::restore_crd(crd, None)?.map(Restore::Replace));
            restore_object::<CustomResourceDefinition, CrdPrevious>(client, fix, "replace", put_back).await
        }
        Object::Validating => {
            let put_back = |vwc: &_| local::restore_validating(vwc, None);
            restore_object::<ValidatingWebhookConfiguration, ValidatingPrevious>(
                client, fix, "write", put_back,
            )
            .await
        }
    }
}

/// A restore's write: the object put back, or deleted guarded by the uid
/// and resourceVersion read (one the local manager created).
enum Write<K> {
    Replace(Box<K>),
    Delete(DeleteParams),
}

/// One registration of kind `K` whose annotation saves a `P`: read and
/// re-checked ([`recheck`]), put back as `put_back` says, written guarded.
async fn restore_object<K, P>(
    client: &Client,
    fix: &RestoreFix,
    op: &'static str,
    put_back: impl Fn(&K) -> std::result::Result<Option<Restore<K>>, String>,
) -> Result<Restored>
where
    K: Resource<Scope = ClusterResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug,
    P: DeserializeOwned,
{
    let api: Api<K> = Api::all(client.clone());
    let (api, name, put_back) = (&api, fix.object.name(), &put_back);
    let restored = guarded::write(
        || async move {
            let object =
                api.get_opt(name).await.map_err(|e| Error::api("get", fix.object.kind(), "", name, e))?;
            let Some(object) = object else { return Ok(None) };
            let lease = recheck::<P>(client, fix, object.meta()).await?;
            Ok(lease.map(|lease| (object, lease)))
        },
        |read| {
            let Some((object, lease)) = read else { return Ok(Step::Done(Restored::Already)) };
            Ok(match put_back(&object).map_err(|why| unreadable(fix, why))? {
                None => Step::Done(Restored::Already),
                Some(Restore::Replace(restored)) => Step::Write((Write::Replace(Box::new(restored)), lease)),
                Some(Restore::Delete) => Step::Write((
                    Write::Delete(guarded_delete(&object.meta().resource_version, &object.meta().uid)),
                    lease,
                )),
            })
        },
        |(write, lease)| async move {
            match write {
                Write::Replace(restored) => {
                    api.replace(name, &PostParams::default(), &restored).await.map(drop)?
                }
                Write::Delete(params) => api.delete(name, &params).await.map(drop)?,
            }
            Ok(Restored::Done { lease })
        },
    )
    .await;
    restored.map_err(|f| written(fix, op, f))
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
    match api.delete(LEASE, &guarded_delete(&lease.resource_version, &lease.uid)).await {
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
fn guarded_delete(resource_version: &Option<String>, uid: &Option<String>) -> DeleteParams {
    let preconditions = Preconditions { resource_version: resource_version.clone(), uid: uid.clone() };
    DeleteParams { preconditions: Some(preconditions), ..Default::default() }
}

/// The fix's error for a restore that did not write: the re-check's own,
/// the API failure, or, when others kept writing first, "changed".
fn written(fix: &RestoreFix, op: &'static str, failed: guarded::Failed<Error>) -> Error {
    match failed {
        guarded::Failed::Before(e) => e,
        guarded::Failed::Write(e) => Error::api(op, fix.object.kind(), "", fix.object.name(), e),
        guarded::Failed::KeptChanging => Error::FixChanged {
            object: fix.object.display(),
            why: format!(
                "it changed under each of {} writes guarded by the resourceVersion read",
                guarded::ATTEMPTS
            ),
        },
    }
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
