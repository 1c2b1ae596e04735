//! Conversion between the Runner's versions: a webhook the apiserver
//! cannot reach (every list of Runners then fails, so this is said first),
//! a caBundle that does not verify the serving certificate, a certificate
//! near its end, and `status.storedVersions` holding a version no longer
//! served (the next upgrade that drops it fails).

use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;

use super::super::finding::{Code, Finding, ObjectRef};
use super::super::snapshot::{Readable, Snapshot};
use super::super::view::conversion::{self as view, Target};
use super::super::view::registrations;
use super::certs;
use super::{age, human};
use crate::api::CRD_NAME;
use crate::client::webhook_probe as probe;
use crate::manifests::MANAGER_NAME;
use crate::manifests::MANAGER_NAMESPACE as NAMESPACE;
use crate::webhook::SECRET;
use crate::webhook::certs::{Cert, parse_bundle};
use crate::webhook::secret::{CA_CRT, TLS_CRT};

/// A certificate closer than this to its end is reported. The manager
/// renews a serving certificate with a third of its life left (30 of 90
/// days) and its CA with a year left, so one this close means renewal
/// stopped; two weeks still leave time to find out why before the
/// apiserver refuses the webhook and every read of Runners fails.
pub const NEAR_EXPIRY: Duration = Duration::from_secs(14 * 24 * 3600);

pub fn check(s: &Snapshot) -> Vec<Finding> {
    let mut out: Vec<Finding> = unreachable(s).into_iter().collect();
    if let Some(crd) = &s.crd {
        out.extend(stored_versions(crd));
    }
    out.extend(certificates(s));
    out.extend(not_readable(s));
    out
}

fn crd_ref() -> ObjectRef {
    ObjectRef::new("CustomResourceDefinition", "", CRD_NAME)
}

fn secret_ref() -> ObjectRef {
    ObjectRef::new("Secret", NAMESPACE, SECRET)
}

/// The conversion webhook fails: Runner reads the apiserver refused for
/// want of conversion, or diagnose's own dry run at a converted version
/// ([`crate::client::webhook_probe`]). What the apiserver said, where the
/// CRD sends conversion, what that Service has behind it, and the fix for
/// the cause the apiserver named.
fn unreachable(s: &Snapshot) -> Option<Finding> {
    let c = &s.conversion;
    if registrations::crd_abandoned(s) {
        // The same cause, said once: `local-webhooks-abandoned` carries
        // the failed reads and the fix.
        return None;
    }
    let target = s.crd.as_ref().and_then(view::target);
    let call = registrations::call_failure(s, probe::Registration::Conversion);
    let message = match (c.failed_reads.is_empty(), call) {
        (false, _) => {
            "the apiserver cannot convert stored Runners: its conversion webhook fails, so reading Runners fails"
                .to_string()
        }
        (true, Some(call)) => call.describe(),
        (true, None) => return None,
    };
    let mut f = Finding::error(Code::ConversionWebhookUnreachable, crd_ref(), message);
    for read in &c.failed_reads {
        f = f.evidence(format!("{}: {}", read.what, read.error));
    }
    if let Some(call) = call {
        f = f.evidence(registrations::call_evidence(s, call));
    }
    f = f.evidence(match (&target, &s.crd) {
        (Some(t), _) => format!("the CRD sends conversion to {}", t.describe()),
        (None, Some(_)) => "the CRD no longer converts by webhook; a read now should succeed".into(),
        (None, None) => "the CRD could not be read: where it sends conversion is unknown".into(),
    });
    f = f.evidence(service_evidence(s, crate::webhook::PATH));
    let cause = match call {
        Some(call) => call.cause,
        None => c.failed_reads.first().map_or(probe::Cause::Other, |r| probe::Cause::of(&r.error)),
    };
    let url = match &target {
        Some(Target::Url(url)) => Some(url.as_str()),
        _ => None,
    };
    Some(f.fix(probe::fix(probe::Registration::Conversion, cause, url)))
}

/// What the webhook's Service ([`view::service`]) has behind it, for
/// evidence: the one reading the conversion and admission checks share.
pub(super) fn service_evidence(s: &Snapshot, path: &str) -> String {
    let c = &s.conversion;
    let (ns, name) = view::service(s.crd.as_ref());
    match (&c.service, &c.endpoints) {
        (Readable::Read(None), _) => format!("Service {ns}/{name} does not exist"),
        (_, Readable::Read(slices)) => match ready_addresses(slices) {
            addresses if addresses.is_empty() => {
                format!("Service {ns}/{name} has no ready endpoints: no manager serves {path} behind it")
            }
            addresses => format!("Service {ns}/{name} has ready endpoints: {}", addresses.join(", ")),
        },
        (_, Readable::Refused(n)) => {
            format!("the endpoints of Service {ns}/{name} are not readable ({} {})", n.verb, n.resource)
        }
        _ => format!("the endpoints of Service {ns}/{name} could not be read"),
    }
}

/// The addresses of ready endpoints (an unset `ready` counts as ready, as
/// the API defines it).
fn ready_addresses(slices: &[EndpointSlice]) -> Vec<String> {
    let ready = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false));
    ready.flat_map(|e| e.addresses.iter().cloned()).collect()
}

/// `status.storedVersions` entries the CRD does not serve: Runners may
/// still be stored at them, and an upgrade that drops one from
/// `spec.versions` is refused until a storage migration.
fn stored_versions(crd: &CustomResourceDefinition) -> Option<Finding> {
    let stored = crd.status.as_ref().and_then(|st| st.stored_versions.clone()).unwrap_or_default();
    let served = |v: &str| crd.spec.versions.iter().any(|cv| cv.name == v && cv.served);
    let unserved: Vec<&String> = stored.iter().filter(|v| !served(v)).collect();
    if unserved.is_empty() {
        return None;
    }
    let names: Vec<&str> = unserved.iter().map(|v| v.as_str()).collect();
    let storage = crd.spec.versions.iter().find(|v| v.storage).map(|v| v.name.as_str()).unwrap_or("none");
    let serving: Vec<&str> = crd.spec.versions.iter().filter(|v| v.served).map(|v| v.name.as_str()).collect();
    Some(
        Finding::warning(
            Code::StoredVersionNotServed,
            crd_ref(),
            format!(
                "status.storedVersions holds {}, no longer served: Runners may still be stored so, and an upgrade \
                 that drops it fails (\"must remain in spec.versions until a storage migration\")",
                names.join(", ")
            ),
        )
        .evidence(format!("storedVersions: {}", stored.join(", ")))
        .evidence(format!("served: {}; storage: {storage}", serving.join(", ")))
        .fix("kubectl runner migrate   # rewrites every Runner at the storage version, then prunes storedVersions"),
    )
}

/// The serving certificate against the CRD's caBundle, and every
/// certificate's end date.
fn certificates(s: &Snapshot) -> Vec<Finding> {
    let Some(Some(secret)) = s.conversion.certs.get() else { return vec![] };
    let bundle = s.crd.as_ref().and_then(view::ca_bundle);
    let serving = secret.serving.as_deref().map(parse_bundle);
    let ca = secret.ca.as_deref().map(parse_bundle);
    let mut out = vec![];
    // The Secret serves behind the Service; a CRD pointed at a URL (a
    // local manager's `--local-webhooks`) carries that process's own CA.
    let behind_service = s
        .crd
        .as_ref()
        .and_then(|c| c.spec.conversion.as_ref()?.webhook.as_ref()?.client_config.as_ref()?.service.as_ref())
        .is_some();
    if let (Some(serving), Some(bundle), true) = (&serving, bundle, behind_service) {
        out.extend(mismatch(serving, parse_bundle(bundle), ca.as_ref(), s.now));
    }
    // Each certificate once: ca.crt usually is the caBundle.
    let mut seen: Vec<&Cert> = vec![];
    let bundle = bundle.map(parse_bundle);
    let sources = [
        (secret_ref(), format!("{TLS_CRT} of Secret {NAMESPACE}/{SECRET}"), serving.as_ref()),
        (crd_ref(), "the CRD's caBundle".to_string(), bundle.as_ref()),
        (secret_ref(), format!("{CA_CRT} of Secret {NAMESPACE}/{SECRET}"), ca.as_ref()),
    ];
    for (object, source, parsed) in &sources {
        for c in parsed.iter().flat_map(|p| p.as_ref().ok()).flatten() {
            if seen.iter().all(|s| s.der != c.der) {
                seen.push(c);
                out.extend(expiring(object, source, c, s.now));
            }
        }
    }
    out
}

/// The caBundle does not verify tls.crt: the apiserver refuses the TLS
/// connection and conversion fails.
fn mismatch(
    serving: &Result<Vec<Cert>, String>,
    bundle: Result<Vec<Cert>, String>,
    ca: Option<&Result<Vec<Cert>, String>>,
    now: Timestamp,
) -> Option<Finding> {
    let why = match (serving, &bundle) {
        (Ok(serving), Ok(bundle)) => certs::verify(serving, bundle, now).err()?,
        (Err(e), _) => format!("{TLS_CRT}: {e}"),
        (_, Err(e)) => format!("caBundle: {e}"),
    };
    let mut f = Finding::error(
        Code::ConversionCaMismatch,
        crd_ref(),
        format!(
            "the CRD's caBundle does not verify the webhook's serving certificate ({TLS_CRT} of Secret {NAMESPACE}/{SECRET}): \
             the apiserver refuses the webhook and conversion fails"
        ),
    )
    .evidence(why);
    if let Ok(serving) = serving
        && let Some(leaf) = serving.first()
    {
        f = f.evidence(format!("{TLS_CRT}: {} issued by {}", leaf.subject, leaf.issuer));
    }
    if let Ok(bundle) = &bundle {
        let subjects: Vec<&str> = bundle.iter().map(|c| c.subject.as_str()).collect();
        f = f.evidence(format!("caBundle: {}", subjects.join("; ")));
    }
    let own_ca_verifies = match (serving, ca) {
        (Ok(serving), Some(Ok(ca))) => certs::verify(serving, ca, now).is_ok(),
        _ => false,
    };
    Some(if own_ca_verifies {
        f.evidence(format!("the Secret's {CA_CRT} verifies it: the caBundle is stale")).fix(format!(
            "kubectl patch crd {CRD_NAME} --type=merge -p \"{{\\\"spec\\\":{{\\\"conversion\\\":{{\\\"webhook\\\":{{\\\"clientConfig\\\":{{\\\"caBundle\\\":\\\"$(kubectl -n {NAMESPACE} get secret {SECRET} -o jsonpath='{{.data.ca\\.crt}}')\\\"}}}}}}}}}}\""
        ))
    } else {
        f.evidence(format!("the Secret's {CA_CRT} does not verify it either")).fix(fix_renew())
    })
}

/// A certificate past its end (an error: TLS refuses it now) or within
/// [`NEAR_EXPIRY`] of it (a warning).
fn expiring(object: &ObjectRef, source: &str, c: &Cert, now: Timestamp) -> Option<Finding> {
    let f = if now >= c.not_after {
        Finding::error(
            Code::ConversionCertExpiring,
            object.clone(),
            format!(
                "a certificate of {source} expired {} ago: the apiserver refuses the webhook",
                human(age(now, c.not_after))
            ),
        )
    } else {
        let left = age(c.not_after, now);
        if left >= NEAR_EXPIRY {
            return None;
        }
        Finding::warning(
            Code::ConversionCertExpiring,
            object.clone(),
            format!("a certificate of {source} expires in {}; then conversion fails", human(left)),
        )
    };
    Some(
        f.evidence(format!("{}, issued by {}, valid until {}", c.subject, c.issuer, c.not_after))
            .evidence(format!("reported within {} of the end", human(NEAR_EXPIRY)))
            .fix(fix_renew()),
    )
}

/// The one place that says how to get certificates renewed: the manager
/// renews them and injects the CA into the CRD when it starts.
fn fix_renew() -> String {
    format!(
        "kubectl -n {NAMESPACE} rollout restart deployment/{MANAGER_NAME}   # the manager renews the webhook's certificates and injects the CA"
    )
}

/// Reads refused for the conversion checks, said once: a tenant may not
/// read the manager's Secret, and that narrows what is seen, not the verdict.
/// Runner reads that failed for want of conversion are named here too,
/// with the per-Runner checks they skipped.
fn not_readable(s: &Snapshot) -> Vec<Finding> {
    let c = &s.conversion;
    let gather = ObjectRef::new("Diagnose", "", "gather");
    let mut out = vec![];
    if !c.failed_reads.is_empty() {
        let mut f = Finding::info(
            Code::NotReadable,
            gather.clone(),
            "Runners not readable until the apiserver can convert them; the per-Runner checks were skipped",
        );
        for read in &c.failed_reads {
            f = f.evidence(read.what.clone());
        }
        out.push(f.fix(if registrations::crd_abandoned(s) {
            "restore what the local manager left (local-webhooks-abandoned): kubectl runner diagnose --fix"
        } else {
            "bring the conversion webhook back (conversion-webhook-unreachable), then diagnose again"
        }));
    }
    let service_ns = view::service(s.crd.as_ref()).0;
    let refused = [
        (c.service.refused(), service_ns.as_str()),
        (c.endpoints.refused(), service_ns.as_str()),
        (c.certs.refused(), NAMESPACE),
    ];
    let refused: Vec<_> = refused.into_iter().filter_map(|(n, ns)| Some((n?, ns))).collect();
    if !refused.is_empty() {
        let kinds: Vec<&str> = refused.iter().map(|(n, _)| n.kind).collect();
        let mut f = Finding::info(
            Code::NotReadable,
            gather,
            format!(
                "not readable with these permissions: {}; the conversion webhook's checks that need them were skipped",
                kinds.join(", ")
            ),
        );
        for (n, ns) in &refused {
            f = f.evidence(format!("{} {} in namespace {ns}", n.verb, n.resource));
        }
        out.push(f.fix("an administrator's kubectl runner diagnose checks the webhook's certificates"));
    }
    out
}
