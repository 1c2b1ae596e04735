//! The conversion rules, each broken in one way from a healthy webhook
//! (`fixtures::with_webhook`) and each absent from it.

use k8s_openapi::jiff::SignedDuration;

use super::certs::tests::{
    CA, CA_SOON, OTHER_CA, SERVING, SERVING_EXPIRED, SERVING_SOON, SERVING_UNDER_CA_SOON,
};
use super::conversion::{NEAR_EXPIRY, check};
use super::fixtures::{self, with_webhook};
use crate::client::webhook_probe as probe;
use crate::diagnose::finding::{Code, Finding, Severity};
use crate::diagnose::snapshot::{Gap, Readable, Snapshot, WebhookCerts};
use crate::manifests::MANAGER_NAMESPACE as NAMESPACE;
use crate::webhook::SECRET;

const LIST_FAILED: &str = "conversion webhook for lab.cloudlab.training/v1alpha1, Kind=Runner failed: \
    Post \"https://runner-webhook.runner-system.svc:443/convert?timeout=30s\": no endpoints available \
    for service \"runner-webhook\" (InternalError, HTTP 500)";

fn with_code(f: &[Finding], code: Code) -> Vec<&Finding> {
    f.iter().filter(|f| f.code == code).collect()
}

/// The codes of the conversion group only (the CRD built here differs from
/// the generated one, which the install check may say).
fn conversion_codes(s: &Snapshot) -> Vec<Code> {
    check(s).iter().map(|f| f.code).filter(|c| *c != Code::NotReadable).collect()
}

/// The webhook Service's Runner list failed: the Runners are not in the snapshot.
fn list_failed(s: &mut Snapshot) {
    s.runners.clear();
    s.conversion.failed_reads =
        vec![Gap { what: format!("list Runners in {}", fixtures::NS), error: LIST_FAILED.into() }];
}

#[test]
fn a_healthy_webhook_or_none_at_all_has_no_conversion_finding() {
    assert_eq!(check(&fixtures::healthy()), []);
    assert_eq!(check(&with_webhook(CA, SERVING)), []);
}

#[test]
fn a_failed_runner_list_comes_first_naming_the_service_its_endpoints_and_the_fix() {
    let mut s = with_webhook(CA, SERVING);
    s.conversion.endpoints = Readable::Read(vec![fixtures::endpoint_slice(&[("10.0.0.7", Some(false))])]);
    list_failed(&mut s);
    s.manager = Default::default(); // another error, which would sort first by its object
    let all = super::run(&s);
    assert_eq!(all[0].code, Code::ConversionWebhookUnreachable, "{all:#?}");
    assert!(with_code(&all, Code::ManagerAbsent).iter().all(|f| f.severity == Severity::Error));
    let f = &all[0];
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(f.object.display(), "CustomResourceDefinition runners.lab.cloudlab.training");
    assert_eq!(f.evidence[0], format!("list Runners in app: {LIST_FAILED}"));
    assert_eq!(
        f.evidence[1],
        "the CRD sends conversion to Service runner-system/runner-webhook (port 443, path /convert)"
    );
    assert_eq!(
        f.evidence[2],
        "Service runner-system/runner-webhook has no ready endpoints: no manager serves /convert behind it"
    );
    let fix = f.fix.as_deref().unwrap();
    assert!(fix.starts_with("make the in-cluster manager ready"), "no endpoints: {f:#?}");
    assert!(fix.contains("run-manager --local-webhooks --take-over"), "{f:#?}");
    let skipped = with_code(&all, Code::NotReadable);
    assert_eq!(skipped.len(), 1, "{all:#?}");
    assert!(skipped[0].message.starts_with("Runners not readable"), "{}", skipped[0].message);
    assert_eq!(skipped[0].evidence, ["list Runners in app"]);
}

#[test]
fn the_unreachable_webhook_says_what_the_service_has_and_a_url_gets_its_own_fix() {
    let mut s = with_webhook(CA, SERVING);
    list_failed(&mut s);
    let f = &check(&s)[0];
    assert_eq!(f.evidence[2], "Service runner-system/runner-webhook has ready endpoints: 10.0.0.7");
    s.conversion.service = Readable::Read(None);
    assert_eq!(check(&s)[0].evidence[2], "Service runner-system/runner-webhook does not exist");

    let url = "https://127.0.0.1:1/convert";
    let cc = s.crd.as_mut().unwrap().spec.conversion.as_mut().unwrap();
    let cc = cc.webhook.as_mut().unwrap().client_config.as_mut().unwrap();
    (cc.service, cc.url) = (None, Some(url.into()));
    let f = &check(&s)[0];
    assert_eq!(f.evidence[1], format!("the CRD sends conversion to URL {url}"));
    assert!(
        f.fix.as_deref().unwrap().contains(&format!("start the local manager that serves {url}")),
        "{f:#?}"
    );
}

/// What the apiserver answers a dry-run create at v1alpha1 when the
/// conversion webhook's certificate does not verify.
fn conversion_call_fails(s: &mut Snapshot) {
    let message = "conversion webhook for lab.cloudlab.training/v1alpha1, Kind=Runner failed: Post \
        \"https://runner-webhook.runner-system.svc:443/convert?timeout=30s\": tls: failed to verify certificate: \
        x509: certificate signed by unknown authority";
    s.registrations.probe_namespace = "default".into();
    s.registrations.probes = vec![probe::Outcome::Passed, probe::judge("v1alpha1", Some((500, message)))];
}

#[test]
fn a_dry_run_the_apiserver_cannot_convert_is_an_error_with_its_words_even_with_ready_endpoints() {
    let mut s = with_webhook(CA, SERVING);
    conversion_call_fails(&mut s);
    let f = check(&s);
    assert_eq!(conversion_codes(&s), [Code::ConversionWebhookUnreachable], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Error);
    assert!(
        f[0].message.contains("conversion webhook fails") && f[0].message.contains("at v1alpha1"),
        "{f:#?}"
    );
    assert!(f[0].evidence[0].starts_with("a dry-run create of a Runner at v1alpha1 in namespace default: "));
    assert!(f[0].evidence[0].contains("x509: certificate signed by unknown authority"), "{f:#?}");
    assert_eq!(f[0].evidence[2], "Service runner-system/runner-webhook has ready endpoints: 10.0.0.7");
    assert!(f[0].fix.as_deref().unwrap().contains("caBundle"), "{f:#?}");
}

#[test]
fn a_service_without_a_ready_endpoint_is_no_finding_while_the_apiserver_answers() {
    let mut s = with_webhook(CA, SERVING);
    s.conversion.endpoints = Readable::Read(vec![fixtures::endpoint_slice(&[("10.0.0.7", Some(false))])]);
    s.registrations.probes = vec![probe::Outcome::Passed, probe::Outcome::Passed];
    assert_eq!(conversion_codes(&s), []);
}

#[test]
fn a_crd_that_could_not_be_read_still_names_the_installed_service() {
    let mut s = with_webhook(CA, SERVING);
    list_failed(&mut s);
    s.crd = None;
    let f = &check(&s)[0];
    assert_eq!(f.code, Code::ConversionWebhookUnreachable);
    assert_eq!(f.evidence[1], "the CRD could not be read: where it sends conversion is unknown");
    assert!(f.evidence[2].starts_with("Service runner-system/runner-webhook has ready endpoints"), "{f:#?}");
}

#[test]
fn a_ca_bundle_that_does_not_verify_the_serving_certificate_is_an_error() {
    // The Secret's own ca.crt verifies tls.crt: the CRD's caBundle is stale.
    let mut s = with_webhook(OTHER_CA, SERVING);
    s.conversion.certs =
        Readable::Read(Some(WebhookCerts { serving: Some(SERVING.into()), ca: Some(CA.into()) }));
    let f = check(&s);
    assert_eq!(conversion_codes(&s), [Code::ConversionCaMismatch], "{f:#?}");
    let t = format!("{:?}", f[0].evidence);
    assert!(t.contains("UnknownIssuer") && t.contains("caBundle: CN=another-ca"), "{t}");
    assert!(t.contains("the caBundle is stale"), "{t}");
    let fix = f[0].fix.as_deref().unwrap();
    assert!(
        fix.starts_with("kubectl patch crd runners.lab.cloudlab.training") && fix.contains("ca\\.crt"),
        "{fix}"
    );

    // Neither verifies it: the Secret itself is inconsistent.
    let s = with_webhook(OTHER_CA, SERVING);
    let f = check(&s);
    assert_eq!(conversion_codes(&s), [Code::ConversionCaMismatch], "{f:#?}");
    assert!(f[0].fix.as_deref().unwrap().contains("rollout restart"), "{f:#?}");
}

#[test]
fn a_crd_pointed_at_a_local_manager_is_not_judged_against_the_installed_secret() {
    // --local-webhooks: the CRD carries that process's CA and a URL; the
    // Secret left by an in-cluster manager serves nothing the apiserver calls.
    let mut s = with_webhook(OTHER_CA, SERVING);
    let webhook = s.crd.as_mut().unwrap().spec.conversion.as_mut().unwrap().webhook.as_mut().unwrap();
    let config = webhook.client_config.as_mut().unwrap();
    config.service = None;
    config.url = Some("https://127.0.0.1:9443/convert".into());
    assert!(!conversion_codes(&s).contains(&Code::ConversionCaMismatch), "{:#?}", check(&s));
}

#[test]
fn a_bundle_that_is_not_pem_is_a_mismatch_saying_so() {
    let s = with_webhook(b"not a certificate", SERVING);
    let f = check(&s);
    assert_eq!(conversion_codes(&s), [Code::ConversionCaMismatch], "{f:#?}");
    assert_eq!(f[0].evidence[0], "caBundle: no PEM certificate in it");
}

#[test]
fn a_serving_certificate_near_its_end_is_a_warning_and_past_it_an_error() {
    let s = with_webhook(CA, SERVING_SOON);
    let f = check(&s);
    assert_eq!(conversion_codes(&s), [Code::ConversionCertExpiring], "{f:#?}");
    assert_eq!(
        (f[0].severity, f[0].object.display()),
        (Severity::Warning, format!("Secret {NAMESPACE}/{SECRET}"))
    );
    assert!(f[0].message.contains("tls.crt") && f[0].message.contains("expires in 9d0h"), "{}", f[0].message);
    assert!(f[0].evidence[0].contains("valid until 2026-01-10T12:00:00Z"), "{f:#?}");
    assert!(f[0].fix.as_deref().unwrap().contains("rollout restart"), "{f:#?}");

    let s = with_webhook(CA, SERVING_EXPIRED);
    let f = check(&s);
    assert_eq!(conversion_codes(&s), [Code::ConversionCertExpiring], "an expiry, not a mismatch: {f:#?}");
    assert_eq!(f[0].severity, Severity::Error);
    assert!(f[0].message.contains("expired 7d12h ago"), "{}", f[0].message);
}

#[test]
fn a_ca_near_its_end_is_reported_once_on_the_crd_that_trusts_it() {
    let s = with_webhook(CA_SOON, SERVING_UNDER_CA_SOON);
    let f = check(&s);
    assert_eq!(conversion_codes(&s), [Code::ConversionCertExpiring], "ca.crt is the caBundle: {f:#?}");
    assert_eq!(f[0].object.display(), "CustomResourceDefinition runners.lab.cloudlab.training");
    assert!(f[0].message.contains("the CRD's caBundle"), "{}", f[0].message);
}

#[test]
fn near_means_closer_than_the_constant() {
    let mut s = with_webhook(CA, SERVING);
    let end: k8s_openapi::jiff::Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
    let near = SignedDuration::try_from(NEAR_EXPIRY).unwrap();
    s.now = end.checked_sub(near).unwrap();
    assert_eq!(conversion_codes(&s), []);
    s.now = s.now.checked_add(SignedDuration::from_secs(1)).unwrap();
    assert_eq!(conversion_codes(&s), [Code::ConversionCertExpiring]);
}

#[test]
fn a_stored_version_no_longer_served_points_at_migrate() {
    let mut s = fixtures::healthy();
    let crd = s.crd.as_mut().unwrap();
    let mut old = crd.spec.versions[0].clone();
    (old.name, old.served, old.storage) = ("v1alpha0".into(), false, false);
    crd.spec.versions.push(old);
    let current = crd.spec.versions[0].name.clone();
    crd.status.get_or_insert_default().stored_versions = Some(vec!["v1alpha0".into(), current.clone()]);
    let f = check(&s);
    assert_eq!(conversion_codes(&s), [Code::StoredVersionNotServed], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(f[0].message.contains("holds v1alpha0") && f[0].message.contains("until a storage migration"));
    assert_eq!(f[0].evidence[0], format!("storedVersions: v1alpha0, {current}"));
    assert!(f[0].fix.as_deref().unwrap().starts_with("kubectl runner migrate"), "{f:#?}");

    // Gone from spec.versions altogether counts as not served too.
    s.crd.as_mut().unwrap().spec.versions.pop();
    assert_eq!(conversion_codes(&s), [Code::StoredVersionNotServed]);
    // Served again, or pruned: nothing to say.
    let crd = s.crd.as_mut().unwrap();
    crd.status.as_mut().unwrap().stored_versions = Some(vec![current]);
    assert_eq!(conversion_codes(&s), []);
}

#[test]
fn a_refused_secret_is_not_readable_and_no_certificate_is_judged() {
    let mut s = with_webhook(OTHER_CA, SERVING_EXPIRED);
    s.conversion.certs = Readable::Refused(crate::client::children::NotReadable {
        kind: "Secret",
        verb: "get",
        resource: "secrets".into(),
    });
    let f = check(&s);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!((f[0].code, f[0].severity), (Code::NotReadable, Severity::Info));
    assert!(f[0].message.contains("Secret"), "{}", f[0].message);
    assert_eq!(f[0].evidence, ["get secrets in namespace runner-system"]);
    let all = super::run(&s);
    assert!(all.iter().all(|f| f.severity == Severity::Info), "a narrower view is no error: {all:#?}");
}
