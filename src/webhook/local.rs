//! Registrations a local manager (`run-manager --local-webhooks`) points at
//! itself, and how they are put back. Pure: the manager, `diagnose` and
//! `diagnose --fix` read and write the objects; this module decides what
//! they become.
//!
//! A local manager changes two cluster-scoped objects: the Runner CRD's
//! conversion (and which versions it serves) and the
//! ValidatingWebhookConfiguration [`super::VALIDATING_CONFIG`]. On each it
//! writes the annotation [`SAVED_ANNOTATION`]: who holds it, the URL, and
//! what the object held before ([`Saved`]). Exit puts that back; after a
//! crash the annotation is what `diagnose --fix` restores from. A manager
//! taking over from a crashed one keeps the first `previous`, never the
//! dead one's URL.
//!
//! While the annotation is there, the in-cluster manager leaves the
//! object alone; the Lease [`LEASE`] in the manager's namespace says
//! whether its holder is alive.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{ValidatingWebhook, ValidatingWebhookConfiguration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use serde::{Deserialize, Serialize};

use super::Target;

/// Annotation on a registration a local manager points at itself.
pub const SAVED_ANNOTATION: &str = "lab.cloudlab.training/local-webhooks";
/// The Lease (manager's namespace) naming the local manager that holds
/// the registrations; renewed while it runs, deleted on exit.
pub const LEASE: &str = "runner-local-webhooks";
/// Field manager of a local manager's writes to the registrations.
pub const FIELD_MANAGER: &str = "kubectl-runner-local-webhooks";

/// The local manager pointing registrations at itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// Its identity, as its Lease's holderIdentity names it ("HOST pid N").
    pub holder: String,
    /// The namespace of its Lease [`LEASE`].
    pub lease_namespace: String,
    /// The origin it serves on (`https://host:port`).
    pub url: String,
}

/// The annotation's value: who holds the object, and what it held before
/// the first local manager changed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Saved<P> {
    #[serde(flatten)]
    pub by: Holder,
    pub previous: P,
}

/// What a local manager replaces on the CRD.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CrdPrevious {
    pub conversion: Option<CustomResourceConversion>,
    /// Each version's `served`, by name.
    pub served: BTreeMap<String, bool>,
}

/// What a local manager replaces on the webhook configuration: its
/// webhooks, or None when the local manager created it (restore deletes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidatingPrevious {
    pub webhooks: Option<Vec<ValidatingWebhook>>,
}

/// What putting an object back takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Restore<T> {
    /// Write this (it carries the resourceVersion read: a guarded update).
    Replace(T),
    /// The local manager created it: delete it (guarded by resourceVersion).
    Delete,
}

/// Why a registration may not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "{object} is held by the local manager {holder:?} (serving {url}); stop it, or wait for its Lease to expire"
    )]
    Held { object: String, holder: String, url: String },
    #[error("{object}'s annotation {SAVED_ANNOTATION} is not one this tool wrote: {why}")]
    Unreadable { object: String, why: String },
}

/// Pure: the annotation of `annotations`, if any. Err when it is there but
/// does not parse (someone edited it: nothing is restored from it).
pub fn saved<P: for<'de> Deserialize<'de>>(
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<Option<Saved<P>>, String> {
    match annotations.and_then(|a| a.get(SAVED_ANNOTATION)) {
        None => Ok(None),
        Some(v) => serde_json::from_str(v).map(Some).map_err(|e| e.to_string()),
    }
}

fn annotate<P: Serialize>(annotations: &mut Option<BTreeMap<String, String>>, saved: &Saved<P>) {
    let value = serde_json::to_string(saved).expect("the saved registration serializes");
    annotations.get_or_insert_with(Default::default).insert(SAVED_ANNOTATION.into(), value);
}

fn unannotate(annotations: &mut Option<BTreeMap<String, String>>) {
    if let Some(a) = annotations.as_mut() {
        a.remove(SAVED_ANNOTATION);
    }
    if annotations.as_ref().is_some_and(|a| a.is_empty()) {
        *annotations = None;
    }
}

/// Pure: whether a registration annotated `saved` may be taken by
/// `holder`: it is its own, or `live` (its Lease is fresh) is false.
fn may_take<P>(object: &str, saved: &Saved<P>, holder: &str, live: bool) -> Result<(), Refusal> {
    if saved.by.holder == holder || !live {
        return Ok(());
    }
    Err(Refusal::Held { object: object.into(), holder: saved.by.holder.clone(), url: saved.by.url.clone() })
}

/// Pure: `crd` converting through `by.url` (every version served, the
/// caBundle `ca`), annotated with what it held before. `live`: whether a
/// holder named in an existing annotation is alive (its Lease is fresh).
pub fn point_crd(
    crd: &CustomResourceDefinition,
    by: &Holder,
    ca: &str,
    live: bool,
) -> Result<CustomResourceDefinition, Refusal> {
    let object = format!("CustomResourceDefinition/{}", crd.metadata.name.as_deref().unwrap_or_default());
    let existing = saved::<CrdPrevious>(crd.metadata.annotations.as_ref())
        .map_err(|why| Refusal::Unreadable { object: object.clone(), why })?;
    let previous = match existing {
        Some(s) => {
            may_take(&object, &s, &by.holder, live)?;
            s.previous
        }
        None => CrdPrevious {
            conversion: crd.spec.conversion.clone(),
            served: crd.spec.versions.iter().map(|v| (v.name.clone(), v.served)).collect(),
        },
    };
    let mut out = crd.clone();
    let target = Target::Url(format!("{}{}", by.url, super::PATH));
    out.spec.conversion = Some(crate::manifests::conversion(&target, Some(ca)));
    out.spec.versions.iter_mut().for_each(|v| v.served = true);
    annotate(&mut out.metadata.annotations, &Saved { by: by.clone(), previous });
    out.metadata.managed_fields = None;
    Ok(out)
}

/// Pure: `crd` as it was before any local manager, when it is annotated
/// (and, given `holder`, held by it). Versions the saved state does not
/// name (added meanwhile) keep their `served`.
pub fn restore_crd(
    crd: &CustomResourceDefinition,
    holder: Option<&str>,
) -> Result<Option<CustomResourceDefinition>, String> {
    let Some(s) = saved::<CrdPrevious>(crd.metadata.annotations.as_ref())? else { return Ok(None) };
    if holder.is_some_and(|h| h != s.by.holder) {
        return Ok(None);
    }
    let mut out = crd.clone();
    out.spec.conversion = s.previous.conversion;
    for v in &mut out.spec.versions {
        if let Some(&served) = s.previous.served.get(&v.name) {
            v.served = served;
        }
    }
    unannotate(&mut out.metadata.annotations);
    out.metadata.managed_fields = None;
    Ok(Some(out))
}

/// Pure: the webhook configuration routing to `by.url` with `ca`, made from
/// `current` (None: it does not exist yet) and annotated likewise.
pub fn point_validating(
    current: Option<&ValidatingWebhookConfiguration>,
    by: &Holder,
    ca: &str,
    live: bool,
) -> Result<ValidatingWebhookConfiguration, Refusal> {
    let object = format!("ValidatingWebhookConfiguration/{}", super::VALIDATING_CONFIG);
    let existing = match current {
        Some(c) => saved::<ValidatingPrevious>(c.metadata.annotations.as_ref())
            .map_err(|why| Refusal::Unreadable { object: object.clone(), why })?,
        None => None,
    };
    let previous = match existing {
        Some(s) => {
            may_take(&object, &s, &by.holder, live)?;
            s.previous
        }
        None => ValidatingPrevious { webhooks: current.map(|c| c.webhooks.clone().unwrap_or_default()) },
    };
    let target = Target::Url(format!("{}{}", by.url, super::PATH));
    let mut out = crate::manifests::validating_webhook_configuration(&target, Some(ca));
    if let Some(c) = current {
        out.metadata = c.metadata.clone();
        out.metadata.managed_fields = None;
    }
    annotate(&mut out.metadata.annotations, &Saved { by: by.clone(), previous });
    Ok(out)
}

/// Pure: the webhook configuration as it was before any local manager
/// (delete it when one created it), when annotated (and held by `holder`).
pub fn restore_validating(
    current: &ValidatingWebhookConfiguration,
    holder: Option<&str>,
) -> Result<Option<Restore<ValidatingWebhookConfiguration>>, String> {
    let Some(s) = saved::<ValidatingPrevious>(current.metadata.annotations.as_ref())? else {
        return Ok(None);
    };
    if holder.is_some_and(|h| h != s.by.holder) {
        return Ok(None);
    }
    let Some(webhooks) = s.previous.webhooks else { return Ok(Some(Restore::Delete)) };
    let mut out = current.clone();
    out.webhooks = Some(webhooks);
    unannotate(&mut out.metadata.annotations);
    out.metadata.managed_fields = None;
    Ok(Some(Restore::Replace(out)))
}

#[cfg(test)]
mod tests;
