//! Pure: the registrations a local manager (`run-manager --local-webhooks`)
//! points at itself, as diagnose sees them: which object, where it sends
//! reviews now, who holds it ([`local::Saved`]), what `--fix` would put
//! back, and whether the holder's Lease says it is alive. The checks report
//! from it, gather reads the Leases it names, and `--fix` judges the Lease
//! it re-reads by the same rule ([`holding`]).

use crate::client::webhook_probe as probe;
use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{ValidatingWebhookConfiguration, WebhookClientConfig};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::super::snapshot::{Readable, Snapshot};
use super::conversion::{Target, conversion_target};
use super::lease::{Renewal, SLACK};
use super::{age, human};
use crate::client::children::NotReadable;
use crate::webhook::local::{self, CrdPrevious, Holder, LEASE, ValidatingPrevious};

/// One of the two objects a local manager changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Object {
    /// The Runner CRD's conversion (and the versions it serves).
    Crd,
    /// The ValidatingWebhookConfiguration [`crate::webhook::VALIDATING_CONFIG`].
    Validating,
}

impl Object {
    pub fn kind(self) -> &'static str {
        match self {
            Object::Crd => "CustomResourceDefinition",
            Object::Validating => "ValidatingWebhookConfiguration",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Object::Crd => crate::api::CRD_NAME,
            Object::Validating => crate::webhook::VALIDATING_CONFIG,
        }
    }

    /// `CustomResourceDefinition runners.lab.cloudlab.training`.
    pub fn display(self) -> String {
        format!("{} {}", self.kind(), self.name())
    }
}

/// A registration carrying [`local::SAVED_ANNOTATION`].
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    pub object: Object,
    /// Where it sends reviews now (one per webhook).
    pub targets: Vec<Target>,
    /// What fails while nobody answers there.
    pub consequence: String,
    /// The annotation read, or why it does not parse (then nothing is
    /// ever restored from it).
    pub saved: Result<Held, String>,
}

/// A registration whose annotation parses.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub by: Holder,
    /// What `diagnose --fix` puts back, in words.
    pub restores: String,
    pub holding: Holding,
}

/// What the holder's Lease ([`LEASE`] in its `leaseNamespace`) says.
#[derive(Debug, Clone, PartialEq)]
pub enum Holding {
    /// It names the holder and was renewed in time: the holder is alive.
    Live { renewed: Timestamp },
    /// It names the holder, who stopped renewing it; `expired` is when
    /// (None: never renewed).
    Expired { expired: Option<Timestamp> },
    /// There is none: deleted, or never written.
    NoLease,
    /// It names someone else (or nobody): the holder let it go.
    OtherHolder { holder: Option<String> },
    /// The Lease could not be read with these permissions.
    NotReadable(NotReadable),
    /// The read failed (a gap says why).
    Unknown,
}

impl Holding {
    /// True when nothing serves the registration any more: `--fix` may
    /// restore it.
    pub fn abandoned(&self) -> bool {
        matches!(self, Holding::Expired { .. } | Holding::NoLease | Holding::OtherHolder { .. })
    }

    /// One line of evidence about the holder's Lease at `now`.
    pub fn describe(&self, by: &Holder, now: Timestamp) -> String {
        let lease = format!("Lease {}/{LEASE}", by.lease_namespace);
        match self {
            Holding::Live { renewed } => format!("its {lease} was renewed {} ago", human(age(now, *renewed))),
            Holding::Expired { expired: Some(t) } => {
                format!("its {lease} expired {} ago, at {t}", human(age(now, *t)))
            }
            Holding::Expired { expired: None } => format!("its {lease} was never renewed"),
            Holding::NoLease => format!("there is no {lease}: its holder is gone"),
            Holding::OtherHolder { holder: Some(h) } => format!("{lease} names another holder, {h:?}"),
            Holding::OtherHolder { holder: None } => format!("{lease} names no holder"),
            Holding::NotReadable(n) => format!("{lease} is not readable ({} {})", n.verb, n.resource),
            Holding::Unknown => format!("{lease} could not be read"),
        }
    }
}

/// Pure: what `lease` (None: there is none) says about `by` at `now`.
pub fn holding(by: &Holder, lease: Option<&Lease>, now: Timestamp) -> Holding {
    let Some(lease) = lease else { return Holding::NoLease };
    let r = Renewal::of(lease);
    if r.holder.as_deref() != Some(by.holder.as_str()) {
        return Holding::OtherHolder { holder: r.holder };
    }
    // The local managers' own rule ([`local::lease_live`]), [`SLACK`]
    // later: `--fix` writes to a registration it does not hold, so a
    // renewal a moment late (or a clock a moment ahead) must not count as
    // a dead holder.
    let earlier = SignedDuration::try_from(SLACK).ok().and_then(|d| now.checked_sub(d).ok()).unwrap_or(now);
    match r.renewed {
        Some(renewed) if local::lease_live(lease.spec.as_ref(), earlier) => Holding::Live { renewed },
        _ => Holding::Expired { expired: r.expires() },
    }
}

/// The annotated registrations of the snapshot, CRD first.
pub fn read(s: &Snapshot) -> Vec<Registration> {
    let lease = |by: &Holder| match s.registrations.leases.get(&by.lease_namespace) {
        Some(Readable::Read(l)) => holding(by, l.as_ref(), s.now),
        Some(Readable::Refused(n)) => Holding::NotReadable(n.clone()),
        Some(Readable::Unknown) | None => Holding::Unknown,
    };
    let crd = s.crd.as_ref().and_then(of_crd);
    let vwc = s.registrations.validating.get().and_then(|v| of_validating(v.as_ref()?));
    let with_holding = |mut r: Registration| {
        if let Ok(held) = r.saved.as_mut() {
            held.holding = lease(&held.by);
        }
        r
    };
    crd.into_iter().chain(vwc).map(with_holding).collect()
}

/// True when the CRD's conversion points at a local manager that is gone:
/// the conversion check then leaves the failure to the registration
/// check, which names the cause.
pub fn crd_abandoned(s: &Snapshot) -> bool {
    abandoned(s, Object::Crd)
}

/// True when `object` points at a local manager that is gone.
pub fn abandoned(s: &Snapshot, object: Object) -> bool {
    read(s).iter().any(|r| r.object == object && r.saved.as_ref().is_ok_and(|h| h.holding.abandoned()))
}

/// The first failure the apiserver answered, in diagnose's dry runs, for
/// `registration`: the one verdict on whether it can be called.
pub fn call_failure(s: &Snapshot, registration: probe::Registration) -> Option<&probe::Failure> {
    s.registrations.probes.iter().find_map(|o| match o {
        probe::Outcome::Failed(f) if f.registration == registration => Some(f),
        _ => None,
    })
}

/// The dry run that failed and the apiserver's words, for evidence.
pub fn call_evidence(s: &Snapshot, f: &probe::Failure) -> String {
    format!(
        "a dry-run create of a Runner at {} in namespace {}: {}",
        f.version, s.registrations.probe_namespace, f.message
    )
}

/// The namespaces of the Leases the registrations' annotations name:
/// what gather reads.
pub fn lease_namespaces(
    crd: Option<&CustomResourceDefinition>,
    vwc: Option<&ValidatingWebhookConfiguration>,
) -> BTreeSet<String> {
    let registrations = crd.and_then(of_crd).into_iter().chain(vwc.and_then(of_validating));
    registrations.filter_map(|r| Some(r.saved.ok()?.by.lease_namespace)).collect()
}

/// The CRD as a registration, when annotated; its holding is left
/// [`Holding::Unknown`] (the Lease is not part of the object).
pub fn of_crd(crd: &CustomResourceDefinition) -> Option<Registration> {
    let saved = local::saved::<CrdPrevious>(crd.metadata.annotations.as_ref()).transpose()?;
    let targets = crd.spec.conversion.as_ref().and_then(conversion_target).into_iter().collect();
    let consequence = "lists and reads of Runners at a version other than the one they are stored at fail: \
                       the apiserver cannot convert them"
        .to_string();
    let saved = saved.map(|s| (s.by, crd_restores(&s.previous)));
    Some(registration(Object::Crd, targets, consequence, saved))
}

/// The ValidatingWebhookConfiguration as a registration, when annotated.
pub fn of_validating(vwc: &ValidatingWebhookConfiguration) -> Option<Registration> {
    let saved = local::saved::<ValidatingPrevious>(vwc.metadata.annotations.as_ref()).transpose()?;
    let webhooks = vwc.webhooks.as_deref().unwrap_or_default();
    let targets = webhooks.iter().filter_map(|w| admission_target(&w.client_config)).collect();
    let fails = webhooks.iter().any(|w| w.failure_policy.as_deref() != Some("Ignore"));
    let consequence = if fails {
        "creates and updates of Runners are refused: the validating webhook's failurePolicy is Fail"
    } else {
        "creates and updates of Runners wait for the webhook's timeout, then are admitted unchecked"
    };
    let saved = saved.map(|s| (s.by, validating_restores(&s.previous)));
    Some(registration(Object::Validating, targets, consequence.into(), saved))
}

fn registration(
    object: Object,
    targets: Vec<Target>,
    consequence: String,
    saved: Result<(Holder, String), String>,
) -> Registration {
    let saved = saved.map(|(by, restores)| Held { by, restores, holding: Holding::Unknown });
    Registration { object, targets, consequence, saved }
}

/// Where an admission webhook sends reviews (the apiserver's defaults
/// filled in, as for conversion).
pub fn admission_target(cc: &WebhookClientConfig) -> Option<Target> {
    let service =
        cc.service.as_ref().map(|s| (s.namespace.as_str(), s.name.as_str(), s.port, s.path.as_deref()));
    Target::of(service, cc.url.as_deref())
}

/// The CRD's saved state, in words.
fn crd_restores(p: &CrdPrevious) -> String {
    let conversion = match p.conversion.as_ref().and_then(conversion_target) {
        Some(t) => format!("conversion through {}", t.describe()),
        None => "no conversion webhook (strategy None)".into(),
    };
    let names = |served: bool| {
        let v: Vec<&str> = p.served.iter().filter(|(_, s)| **s == served).map(|(n, _)| n.as_str()).collect();
        if v.is_empty() { "none".to_string() } else { v.join(", ") }
    };
    format!("{conversion}; versions served: {}; not served: {}", names(true), names(false))
}

/// The webhook configuration's saved state, in words.
fn validating_restores(p: &ValidatingPrevious) -> String {
    match &p.webhooks {
        None => "deleted (a local manager created it)".into(),
        Some(w) if w.is_empty() => "no webhooks".into(),
        Some(w) => {
            let each: Vec<String> = w
                .iter()
                .map(|w| match admission_target(&w.client_config) {
                    Some(t) => format!("{} through {}", w.name, t.describe()),
                    None => w.name.clone(),
                })
                .collect();
            format!("webhooks: {}", each.join("; "))
        }
    }
}

#[cfg(test)]
#[path = "registrations_tests.rs"]
mod tests;
