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
use std::fmt::Debug;

use k8s_openapi::api::admissionregistration::v1::{ValidatingWebhook, ValidatingWebhookConfiguration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use kube::Resource;
use kube::core::ClusterResourceScope;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Annotation on a registration a local manager points at itself.
pub const SAVED_ANNOTATION: &str = "lab.cloudlab.training/local-webhooks";
/// The Lease (manager's namespace) naming the local manager that holds
/// the registrations; renewed while it runs, deleted on exit.
pub const LEASE: &str = "runner-local-webhooks";

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

/// How long a local manager's Lease counts without renewal, and how often
/// it renews (three chances before it lapses).
pub const LEASE_DURATION_SECONDS: i32 = 15;
pub const LEASE_RENEW_SECONDS: u64 = 2;

/// Pure: whether a Lease's holder counts as alive at `now`: named, and
/// renewed within its duration by the wall clock. The holder and the
/// reader are the same developer's machine as a rule, so the clocks agree;
/// a reader whose clock runs ahead sees a live holder expire early, which
/// at worst lets `diagnose --fix` or another local manager restore a
/// registration the first one then finds gone (it stops).
pub fn lease_live(
    spec: Option<&k8s_openapi::api::coordination::v1::LeaseSpec>,
    now: k8s_openapi::jiff::Timestamp,
) -> bool {
    let Some(spec) = spec else { return false };
    let named = spec.holder_identity.as_deref().is_some_and(|h| !h.is_empty());
    let (Some(renewed), Some(secs)) = (spec.renew_time.as_ref(), spec.lease_duration_seconds) else {
        return false;
    };
    let until = renewed.0 + k8s_openapi::jiff::SignedDuration::from_secs(i64::from(secs));
    named && until > now
}

/// The target a local manager serving on `origin` registers (its
/// conversion path; the validating path is its sibling).
pub fn target(origin: &str) -> super::Target {
    super::Target::Url(format!("{origin}{}", super::PATH))
}

/// A registration a local manager points at itself: what differs between
/// the CRD and the webhook configuration. Saving what it held, pointing
/// and putting back are written once, over this ([`point`], [`restore`]).
pub trait Registration:
    Resource<DynamicType = (), Scope = ClusterResourceScope> + Clone + Debug + Serialize + DeserializeOwned
{
    /// What a local manager replaces on it, saved in the annotation.
    type Previous: Serialize + DeserializeOwned;
    /// What points it at a local manager.
    type Pointing;
    /// Its name: the project has one of each.
    const NAME: &'static str;
    /// `current` (None: not there yet) pointed by `pointing`, and what
    /// that replaced.
    fn pointed(current: Option<&Self>, pointing: Self::Pointing) -> (Self, Self::Previous);
    /// `self` with `previous` put back; None: delete it.
    fn put_back(self, previous: Self::Previous) -> Option<Self>;
}

/// `Kind/name`, for messages.
pub fn object_name<K: Registration>() -> String {
    format!("{}/{}", K::kind(&()), K::NAME)
}

/// The CRD: its conversion, and every version served while a local
/// manager holds it (it converts between them all). The CRD is always
/// there: the manager does not start without it.
impl Registration for CustomResourceDefinition {
    type Previous = CrdPrevious;
    type Pointing = CustomResourceConversion;
    const NAME: &'static str = crate::api::CRD_NAME;

    fn pointed(crd: Option<&Self>, conversion: CustomResourceConversion) -> (Self, CrdPrevious) {
        let mut out = crd.cloned().unwrap_or_default();
        let served = out.spec.versions.iter().map(|v| (v.name.clone(), v.served)).collect();
        let previous = CrdPrevious { conversion: out.spec.conversion.replace(conversion), served };
        out.spec.versions.iter_mut().for_each(|v| v.served = true);
        (out, previous)
    }

    /// Versions the saved state does not name (added meanwhile) keep their `served`.
    fn put_back(mut self, previous: CrdPrevious) -> Option<Self> {
        self.spec.conversion = previous.conversion;
        for v in &mut self.spec.versions {
            v.served = previous.served.get(&v.name).copied().unwrap_or(v.served);
        }
        Some(self)
    }
}

/// The webhook configuration: replaced whole (`manifests` makes the one
/// routing to the local URL), keeping the metadata of the one there.
impl Registration for ValidatingWebhookConfiguration {
    type Previous = ValidatingPrevious;
    type Pointing = ValidatingWebhookConfiguration;
    const NAME: &'static str = super::VALIDATING_CONFIG;

    fn pointed(current: Option<&Self>, mut desired: Self) -> (Self, ValidatingPrevious) {
        let webhooks = current.map(|c| c.webhooks.clone().unwrap_or_default());
        if let Some(c) = current {
            desired.metadata = c.metadata.clone();
        }
        (desired, ValidatingPrevious { webhooks })
    }

    fn put_back(mut self, previous: ValidatingPrevious) -> Option<Self> {
        self.webhooks = Some(previous.webhooks?);
        Some(self)
    }
}

/// Pure: the annotation of `annotations`, if any. Err when it is there but
/// does not parse (someone edited it: nothing is restored from it).
pub fn saved<P: DeserializeOwned>(
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<Option<Saved<P>>, String> {
    match annotations.and_then(|a| a.get(SAVED_ANNOTATION)) {
        None => Ok(None),
        Some(v) => serde_json::from_str(v).map(Some).map_err(|e| e.to_string()),
    }
}

/// Pure: `current` pointed by `pointing`, annotated with what it held
/// before any local manager (an earlier holder's saved state is kept: the
/// caller holds the Lease, so that holder is gone). Err when its annotation
/// is not one this tool wrote: it is neither taken nor restored.
pub fn point<K: Registration>(current: Option<&K>, by: &Holder, pointing: K::Pointing) -> Result<K, String> {
    let existing = match current {
        Some(c) => saved::<K::Previous>(c.meta().annotations.as_ref()).map_err(|why| {
            format!(
                "{}'s annotation {SAVED_ANNOTATION} is not one this tool wrote: {why}",
                object_name::<K>()
            )
        })?,
        None => None,
    };
    let (mut out, replaced) = K::pointed(current, pointing);
    let previous = existing.map_or(replaced, |s| s.previous);
    let meta = out.meta_mut();
    meta.managed_fields = None;
    let value =
        serde_json::to_string(&Saved { by: by.clone(), previous }).expect("the saved state serializes");
    meta.annotations.get_or_insert_with(Default::default).insert(SAVED_ANNOTATION.into(), value);
    Ok(out)
}

/// Pure: who holds `current` and how it goes back to what it was before
/// any local manager; None when no local manager (or, given `holder`, not
/// that one) holds it. Err (why) when the annotation does not parse.
pub fn restore<K: Registration>(
    current: &K,
    holder: Option<&str>,
) -> Result<Option<(Holder, Restore<K>)>, String> {
    let Some(s) = saved::<K::Previous>(current.meta().annotations.as_ref())? else { return Ok(None) };
    if holder.is_some_and(|h| h != s.by.holder) {
        return Ok(None);
    }
    let mut out = current.clone();
    let meta = out.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(SAVED_ANNOTATION);
    }
    if meta.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        meta.annotations = None;
    }
    Ok(Some((s.by, out.put_back(s.previous).map_or(Restore::Delete, Restore::Replace))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifests::{conversion, crd, crd_with_webhook, validating_webhook_configuration};
    use crate::webhook::Target;

    const ORIGIN: &str = "https://127.0.0.1:40001";

    fn by(holder: &str, url: &str) -> Holder {
        Holder { holder: holder.into(), lease_namespace: "runner-system".into(), url: url.into() }
    }

    fn conv(origin: &str, ca: &str) -> CustomResourceConversion {
        conversion(&target(origin), Some(ca))
    }

    fn vwc(origin: &str, ca: &str) -> ValidatingWebhookConfiguration {
        validating_webhook_configuration(&target(origin), Some(ca))
    }

    fn with_rv(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
        crd.metadata.resource_version = Some("7".into());
        crd
    }

    #[test]
    fn a_crd_pointed_at_a_local_manager_and_restored_is_what_it_was() {
        for original in [with_rv(crd()), with_rv(crd_with_webhook())] {
            let pointed = point(Some(&original), &by("laptop pid 1", ORIGIN), conv(ORIGIN, "CA")).unwrap();
            let cc =
                pointed.spec.conversion.as_ref().unwrap().webhook.as_ref().unwrap().client_config.clone();
            assert_eq!(cc.as_ref().unwrap().url.as_deref(), Some("https://127.0.0.1:40001/convert"));
            assert!(pointed.spec.versions.iter().all(|v| v.served), "every version served while local");
            assert_eq!(pointed.metadata.resource_version.as_deref(), Some("7"), "the write is guarded");
            let (held, back) = restore(&pointed, Some("laptop pid 1")).unwrap().unwrap();
            assert_eq!((held.holder.as_str(), back), ("laptop pid 1", Restore::Replace(original)));
        }
    }

    #[test]
    fn a_second_pointing_keeps_the_first_previous() {
        let original = crd_with_webhook();
        let first = point(Some(&original), &by("a pid 1", ORIGIN), conv(ORIGIN, "CA1")).unwrap();
        let again =
            point(Some(&first), &by("a pid 1", "https://127.0.0.1:2"), conv("https://127.0.0.1:2", "CA2"))
                .unwrap();
        let taken =
            point(Some(&again), &by("b pid 2", "https://127.0.0.1:3"), conv("https://127.0.0.1:3", "CA3"))
                .unwrap();
        let s = saved::<CrdPrevious>(taken.metadata.annotations.as_ref()).unwrap().unwrap();
        assert_eq!((s.by.holder.as_str(), s.by.url.as_str()), ("b pid 2", "https://127.0.0.1:3"));
        assert_eq!(s.previous.conversion, original.spec.conversion, "never the dead manager's URL");
        assert_eq!(restore(&taken, Some("a pid 1")).unwrap(), None, "only its holder restores on exit");
        let (_, back) = restore(&taken, None).unwrap().unwrap();
        assert_eq!(back, Restore::Replace(original), "diagnose --fix restores any");
    }

    #[test]
    fn a_user_annotation_that_is_not_ours_is_neither_taken_nor_restored() {
        let mut edited = crd();
        edited.metadata.annotations =
            Some([(SAVED_ANNOTATION.to_string(), "{\"holder\":1}".to_string())].into());
        assert!(point(Some(&edited), &by("a", ORIGIN), conv(ORIGIN, "CA")).is_err());
        assert!(restore(&edited, None).is_err());
        assert_eq!(restore(&crd(), None).unwrap(), None, "nothing to restore");
    }

    #[test]
    fn a_webhook_configuration_the_local_manager_created_is_deleted_on_restore() {
        let created: ValidatingWebhookConfiguration =
            point(None, &by("a", ORIGIN), vwc(ORIGIN, "CA")).unwrap();
        let url = created.webhooks.as_ref().unwrap()[0].client_config.url.clone();
        assert_eq!(url.as_deref(), Some("https://127.0.0.1:40001/validate"));
        assert_eq!(restore(&created, Some("a")).unwrap().map(|(_, r)| r), Some(Restore::Delete));
    }

    #[test]
    fn an_installed_webhook_configuration_gets_its_webhooks_back() {
        let mut installed = validating_webhook_configuration(
            &Target::Service { namespace: "runner-system".into() },
            Some("CA0"),
        );
        installed.metadata.resource_version = Some("9".into());
        installed.metadata.labels = Some([("app".to_string(), "x".to_string())].into());
        let pointed = point(Some(&installed), &by("a", ORIGIN), vwc(ORIGIN, "CA")).unwrap();
        assert_eq!(pointed.metadata.labels, installed.metadata.labels);
        assert_eq!(pointed.metadata.resource_version.as_deref(), Some("9"));
        assert!(pointed.webhooks.as_ref().unwrap()[0].client_config.service.is_none());
        let Some((_, Restore::Replace(back))) = restore(&pointed, None).unwrap() else { panic!("replace") };
        assert_eq!(back, installed);
    }

    #[test]
    fn a_lease_is_live_while_named_and_renewed_within_its_duration() {
        use k8s_openapi::api::coordination::v1::LeaseSpec;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        use k8s_openapi::jiff::{SignedDuration, Timestamp};
        let now: Timestamp = "2026-12-07T10:00:00Z".parse().unwrap();
        let spec = |holder: Option<&str>, ago: i64| LeaseSpec {
            holder_identity: holder.map(String::from),
            renew_time: Some(MicroTime(now - SignedDuration::from_secs(ago))),
            lease_duration_seconds: Some(15),
            ..Default::default()
        };
        assert!(lease_live(Some(&spec(Some("a"), 14)), now));
        assert!(!lease_live(Some(&spec(Some("a"), 16)), now), "lapsed");
        assert!(!lease_live(Some(&spec(None, 0)), now), "released");
        assert!(!lease_live(Some(&spec(Some(""), 0)), now), "released");
        assert!(!lease_live(None, now), "no Lease");
    }
}
