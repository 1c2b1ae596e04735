//! The webhook registrations. A local manager (`run-manager
//! --local-webhooks`) points the CRD's conversion and the validating
//! webhook at itself; when it dies without restoring them (kill -9, a
//! laptop closed), conversion fails and every Runner create is refused
//! until someone puts them back. That is said first, before the conversion
//! failure it explains, with `diagnose --fix` as the fix. A holder whose
//! Lease is fresh is only noted; an annotation that does not parse is
//! reported and never restored from. Besides: a validating webhook the
//! apiserver could not call in diagnose's dry run refuses creates too.

use super::super::finding::{Code, Finding, ObjectRef};
use super::super::snapshot::{Readable, Snapshot};
use super::super::view::conversion::{self as conversion_view, Target};
use super::super::view::registrations::{self as view, Holding, Object, Registration, admission_target};
use super::conversion::service_evidence;
use crate::client::webhook_probe as probe;
use crate::webhook::local::SAVED_ANNOTATION;
use crate::webhook::{VALIDATE_PATH, VALIDATING_CONFIG};

/// What `--fix` runs; the same for every abandoned registration.
pub const FIX: &str = "kubectl runner diagnose --fix";

pub fn check(s: &Snapshot) -> Vec<Finding> {
    let registrations = view::read(s);
    let mut out: Vec<Finding> = registrations.iter().filter_map(|r| registration(s, r)).collect();
    out.extend(admission_unreachable(s));
    out.extend(not_checked(s));
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

/// The apiserver could not call the validating webhook in diagnose's dry
/// run ([`crate::client::webhook_probe`]): with failurePolicy Fail every
/// Runner create and update is refused. Its own words are the evidence; a
/// Service with ready endpoints proves nothing (a wrong caBundle, a wrong
/// path). Left to `local-webhooks-abandoned` when a dead local manager
/// holds it.
fn admission_unreachable(s: &Snapshot) -> Option<Finding> {
    let failure = view::call_failure(s, probe::Registration::Validation)?;
    if view::abandoned(s, Object::Validating) {
        return None;
    }
    let object = ObjectRef::new(Object::Validating.kind(), "", VALIDATING_CONFIG);
    let mut f = Finding::error(Code::AdmissionWebhookUnreachable, object, failure.describe())
        .evidence(view::call_evidence(s, failure));
    let ours = s.registrations.validating.get().and_then(Option::as_ref).and_then(|v| v.webhooks.clone());
    let targets: Vec<(String, Target)> = ours
        .into_iter()
        .flatten()
        .filter_map(|w| Some((w.name.clone(), admission_target(&w.client_config)?)))
        .collect();
    for (name, target) in &targets {
        f = f.evidence(format!("the webhook {name} sends admission reviews to {}", target.describe()));
    }
    if targets.iter().any(|(_, t)| matches!(t, Target::Service { .. })) {
        f = f.evidence(service_evidence(s, VALIDATE_PATH));
    }
    let url = targets.iter().find_map(|(_, t)| match t {
        Target::Url(url) => Some(url.as_str()),
        Target::Service { .. } => None,
    });
    Some(f.fix(failure.fix(url)))
}

/// The dry runs could not tell (no permission to create Runners there, no
/// such namespace) while a registration of ours exists or could not be
/// read: a note, not an alarm.
fn not_checked(s: &Snapshot) -> Option<Finding> {
    let why = s.registrations.probes.iter().find_map(|o| match o {
        probe::Outcome::NotChecked(why) => Some(why),
        _ => None,
    })?;
    let converts = s.crd.as_ref().and_then(conversion_view::target).is_some();
    let validates = !matches!(s.registrations.validating, Readable::Read(None));
    if !converts && !validates {
        return None;
    }
    let message = format!("whether the apiserver can call the webhooks was not checked: {why}");
    let f = Finding::info(Code::NotReadable, ObjectRef::new("Diagnose", "", "webhook-probe"), message);
    Some(
        f.evidence(format!("a dry-run create of a Runner in namespace {}", s.registrations.probe_namespace))
            .fix("kubectl runner diagnose -n NAMESPACE, for a namespace where you may create Runners, or an administrator's kubectl runner diagnose"),
    )
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
