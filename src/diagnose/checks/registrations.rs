//! The webhook registrations. A local manager (`run-manager
//! --local-webhooks`) points the CRD's conversion and the validating
//! webhook at itself; when it dies without restoring them (kill -9, a
//! laptop closed), conversion fails and every Runner create is refused
//! until someone puts them back. That is said first, before the conversion
//! failure it explains, with `diagnose --fix` as the fix. A holder whose
//! Lease is fresh is only noted; an annotation that does not parse is
//! reported and never restored from. Besides: a validating webhook routed
//! to the in-cluster Service with no ready endpoint refuses creates too.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhook;

use super::super::finding::{Code, Finding, ObjectRef};
use super::super::snapshot::Snapshot;
use super::super::view::conversion::{self as conversion_view, Target};
use super::super::view::registrations::{self as view, Holding, Object, Registration, admission_target};
use super::conversion::{fix_unreachable, serves, service_evidence};
use crate::webhook::local::SAVED_ANNOTATION;
use crate::webhook::{VALIDATE_PATH, VALIDATING_CONFIG};

/// What `--fix` runs; the same for every abandoned registration.
pub const FIX: &str = "kubectl runner diagnose --fix";

pub fn check(s: &Snapshot) -> Vec<Finding> {
    let registrations = view::read(s);
    let mut out: Vec<Finding> = registrations.iter().filter_map(|r| registration(s, r)).collect();
    out.extend(admission_unreachable(s));
    out.extend(not_readable(s, &registrations));
    out
}

fn object_ref(o: Object) -> ObjectRef {
    ObjectRef::new(o.kind(), "", o.name())
}

/// `it sends conversion reviews to URL https://...`.
fn sends(r: &Registration) -> String {
    let reviews = match r.object {
        Object::Crd => "conversion",
        Object::Validating => "admission",
    };
    let targets: Vec<String> = r.targets.iter().map(Target::describe).collect();
    match targets.is_empty() {
        true => format!("it sends no {reviews} reviews anywhere"),
        false => format!("it sends {reviews} reviews to {}", targets.join(", ")),
    }
}

fn registration(s: &Snapshot, r: &Registration) -> Option<Finding> {
    let object = object_ref(r.object);
    let held = match &r.saved {
        Ok(held) => held,
        Err(why) => return Some(invalid(r, why)),
    };
    let by = &held.by;
    if let Holding::Live { .. } = held.holding {
        let message = format!("served by the local manager {:?} at {}", by.holder, by.url);
        return Some(
            Finding::info(Code::LocalWebhooksServed, object, message)
                .evidence(sends(r))
                .evidence(held.holding.describe(by, s.now))
                .evidence(format!("what stopping it (Ctrl-C) restores: {}", held.restores)),
        );
    }
    if !held.holding.abandoned() {
        // Not readable, or the read failed: said by not_readable or as a gap.
        return None;
    }
    let message =
        format!("left pointing at the local manager {:?}, which is gone: {}", by.holder, r.consequence);
    let mut f = Finding::error(Code::LocalWebhooksAbandoned, object, message)
        .evidence(sends(r))
        .evidence(held.holding.describe(by, s.now));
    if r.object == Object::Crd {
        for read in &s.conversion.failed_reads {
            f = f.evidence(format!("{}: {}", read.what, read.error));
        }
    }
    Some(f.evidence(format!("what diagnose --fix restores: {}", held.restores)).fix(FIX))
}

/// An annotation this tool did not write (or someone edited): what the
/// object held before is unknown, so nothing is restored from it.
fn invalid(r: &Registration, why: &str) -> Finding {
    let resource = match r.object {
        Object::Crd => "crd",
        Object::Validating => "validatingwebhookconfiguration",
    };
    Finding::warning(
        Code::LocalWebhooksAnnotationInvalid,
        object_ref(r.object),
        format!(
            "carries {SAVED_ANNOTATION}, which does not parse: what it held before a local manager is unknown, so \
             diagnose --fix does not restore it, and the in-cluster manager leaves it alone while the annotation is there"
        ),
    )
    .evidence(why.to_string())
    .evidence(sends(r))
    .fix(format!(
        "put its client config back by hand (kubectl runner manifests shows the installed one), then: kubectl annotate {resource} {} {SAVED_ANNOTATION}-",
        r.object.name()
    ))
}

/// The validating webhook routes to the webhook's Service, which has no
/// ready endpoint: with failurePolicy Fail every Runner create and update
/// is refused. The Service is judged as the conversion check judges it.
fn admission_unreachable(s: &Snapshot) -> Option<Finding> {
    let vwc = s.registrations.validating.get()?.as_ref()?;
    let (ns, name) = conversion_view::service(s.crd.as_ref());
    let routed = |w: &&ValidatingWebhook| {
        matches!(admission_target(&w.client_config),
                 Some(Target::Service { namespace, name: n, .. }) if namespace == ns && n == name)
    };
    let routed: Vec<&ValidatingWebhook> = vwc.webhooks.iter().flatten().filter(routed).collect();
    if routed.is_empty() || serves(&s.conversion) {
        return None;
    }
    let object = ObjectRef::new(Object::Validating.kind(), "", VALIDATING_CONFIG);
    let mut f = if routed.iter().any(|w| w.failure_policy.as_deref() != Some("Ignore")) {
        Finding::error(
            Code::AdmissionWebhookUnreachable,
            object,
            "the validating webhook's Service has no ready endpoint: creates and updates of Runners are refused \
             (failurePolicy Fail); deletes still go through",
        )
    } else {
        Finding::warning(
            Code::AdmissionWebhookUnreachable,
            object,
            "the validating webhook's Service has no ready endpoint: creates and updates of Runners wait for its \
             timeout, then are admitted unchecked (failurePolicy Ignore)",
        )
    };
    for w in &routed {
        let target = admission_target(&w.client_config).map(|t| t.describe()).unwrap_or_default();
        f = f.evidence(format!("the webhook {} sends admission reviews to {target}", w.name));
    }
    // Routed to the Service: the in-cluster manager's fix.
    Some(f.evidence(service_evidence(s, VALIDATE_PATH)).fix(fix_unreachable(None)))
}

/// Reads refused for these checks, said once: a tenant may not read the
/// cluster-scoped webhook configuration or a Lease in another namespace;
/// that narrows what is seen, not the verdict.
fn not_readable(s: &Snapshot, registrations: &[Registration]) -> Option<Finding> {
    let mut kinds = vec![];
    let mut lines = vec![];
    if let Some(n) = s.registrations.validating.refused() {
        kinds.push(n.kind);
        lines.push(format!(
            "{} {}: whether a local manager left {} pointing at itself was not checked",
            n.verb,
            n.resource,
            Object::Validating.display()
        ));
    }
    for r in registrations {
        if let Ok(held) = &r.saved
            && let Holding::NotReadable(n) = &held.holding
        {
            if !kinds.contains(&n.kind) {
                kinds.push(n.kind);
            }
            lines.push(format!(
                "{} {} in namespace {}: whether the local manager {:?} holding {} is alive is unknown",
                n.verb,
                n.resource,
                held.by.lease_namespace,
                held.by.holder,
                r.object.display()
            ));
        }
    }
    if lines.is_empty() {
        return None;
    }
    let message = format!(
        "not readable with these permissions: {}; the webhook registration checks that need them were skipped",
        kinds.join(", ")
    );
    let f = Finding::info(Code::NotReadable, ObjectRef::new("Diagnose", "", "gather"), message);
    let f = lines.into_iter().fold(f, Finding::evidence);
    Some(f.fix("an administrator's kubectl runner diagnose checks the webhook registrations"))
}
