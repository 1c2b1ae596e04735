//! The registration rules, from what a local manager leaves
//! (`fixtures::locally_served`: the CRD and a webhook configuration it
//! created, pointed at itself with `webhook::local`), and the validating
//! webhook routed to the installed Service.

use std::collections::BTreeMap;

use super::certs::tests::{CA, SERVING};
use super::fixtures::{self, LOCAL_NS, abandoned, local_lease, locally_served, with_webhook};
use super::registrations::{FIX, check};
use crate::client::children::NotReadable;
use crate::client::webhook_probe as probe;
use crate::diagnose::finding::{Code, Finding, Severity};
use crate::diagnose::snapshot::{Gap, Readable, Snapshot};
use crate::webhook::local::SAVED_ANNOTATION;

const LIST_FAILED: &str = "conversion webhook for lab.cloudlab.training/v1alpha1, Kind=Runner failed: \
    Post \"https://127.0.0.1:9443/convert?timeout=30s\": dial tcp 127.0.0.1:9443: connect: connection refused";

fn codes(f: &[Finding]) -> Vec<(Code, Severity)> {
    f.iter().map(|f| (f.code, f.severity)).collect()
}

fn set_lease(s: &mut Snapshot, lease: Readable<Option<k8s_openapi::api::coordination::v1::Lease>>) {
    s.registrations.leases = BTreeMap::from([(LOCAL_NS.to_string(), lease)]);
}

#[test]
fn registrations_left_by_a_dead_local_manager_come_first_with_what_fails_and_the_fix() {
    let mut s = abandoned();
    s.runners.clear();
    s.conversion.failed_reads = vec![Gap { what: "list Runners in app".into(), error: LIST_FAILED.into() }];
    s.manager = Default::default(); // an error of its own, which would otherwise sort by its object
    let all = super::run(&s);
    assert_eq!(
        codes(&all[..2]),
        [(Code::LocalWebhooksAbandoned, Severity::Error), (Code::LocalWebhooksAbandoned, Severity::Error)],
        "{all:#?}"
    );
    assert!(
        all.iter().all(|f| f.code != Code::ConversionWebhookUnreachable),
        "one cause, said once: {all:#?}"
    );

    let (crd, vwc) = (&all[0], &all[1]);
    assert_eq!(crd.object.display(), "CustomResourceDefinition runners.lab.cloudlab.training");
    assert_eq!(
        crd.message,
        "left pointing at the local manager \"laptop pid 4242\", which is gone: lists and reads of Runners at a \
         version other than the one they are stored at fail: the apiserver cannot convert them"
    );
    assert_eq!(crd.evidence[0], "it sends conversion reviews to URL https://127.0.0.1:9443/convert");
    // Renewed 600 s ago with a 15 s duration: expired 585 s ago.
    assert!(
        crd.evidence[1].starts_with("its Lease dev/runner-local-webhooks expired 9m45s ago, at "),
        "{crd:#?}"
    );
    assert_eq!(crd.evidence[2], format!("list Runners in app: {LIST_FAILED}"));
    assert!(crd.evidence[3].contains("no conversion webhook (strategy None)"), "{crd:#?}");
    assert_eq!(crd.fix.as_deref(), Some(FIX));

    assert_eq!(vwc.object.display(), "ValidatingWebhookConfiguration runner-validation");
    assert!(
        vwc.message.ends_with(
            "creates and updates of Runners are refused: the validating webhook's failurePolicy is Fail"
        ),
        "{vwc:#?}"
    );
    assert_eq!(vwc.evidence[0], "it sends admission reviews to URL https://127.0.0.1:9443/validate");
    assert_eq!(vwc.evidence[2], "what diagnose --fix restores: deleted (a local manager created it)");
    assert_eq!(vwc.fix.as_deref(), Some(FIX));

    let skipped: Vec<&Finding> = all.iter().filter(|f| f.code == Code::NotReadable).collect();
    assert_eq!(skipped.len(), 1, "{all:#?}");
    assert!(skipped[0].fix.as_deref().unwrap().contains("local-webhooks-abandoned"), "{skipped:#?}");
}

#[test]
fn a_live_local_manager_is_a_note_and_nothing_else() {
    let s = locally_served(3);
    let f = check(&s);
    assert_eq!(codes(&f), [(Code::LocalWebhooksServed, Severity::Info); 2], "{f:#?}");
    assert_eq!(f[0].message, "served by the local manager \"laptop pid 4242\" at https://127.0.0.1:9443");
    assert_eq!(f[0].evidence[1], "its Lease dev/runner-local-webhooks was renewed 3s ago");
    let all = super::run(&s);
    assert!(all.iter().all(|f| f.severity == Severity::Info), "{all:#?}");
}

#[test]
fn the_lease_decides_by_the_wall_clock_with_a_few_seconds_of_slack() {
    let holder = fixtures::local_holder().holder;
    type Case =
        (&'static str, Readable<Option<k8s_openapi::api::coordination::v1::Lease>>, Option<&'static str>);
    let cases: Vec<Case> = vec![
        ("renewed within its 15 s and 5 s of slack", Readable::Read(Some(local_lease(&holder, 19))), None),
        ("one second later", Readable::Read(Some(local_lease(&holder, 20))), Some("expired 5s ago")),
        (
            "no Lease",
            Readable::Read(None),
            Some("there is no Lease dev/runner-local-webhooks: its holder is gone"),
        ),
        (
            "another holder, alive",
            Readable::Read(Some(local_lease("desk pid 7", 1))),
            Some("Lease dev/runner-local-webhooks names another holder, \"desk pid 7\""),
        ),
    ];
    for (name, lease, abandoned) in cases {
        let mut s = locally_served(0);
        set_lease(&mut s, lease);
        let f = check(&s);
        match abandoned {
            None => assert!(f.iter().all(|f| f.code == Code::LocalWebhooksServed), "{name}: {f:#?}"),
            Some(why) => {
                assert_eq!(codes(&f), [(Code::LocalWebhooksAbandoned, Severity::Error); 2], "{name}: {f:#?}");
                assert!(f[0].evidence[1].contains(why), "{name}: {:?}", f[0].evidence);
            }
        }
    }
}

#[test]
fn an_annotation_that_does_not_parse_is_reported_and_never_restored_from() {
    let mut s = abandoned();
    let crd = s.crd.as_mut().unwrap();
    crd.metadata.annotations.as_mut().unwrap().insert(SAVED_ANNOTATION.into(), "{\"holder\": 1".into());
    let f = check(&s);
    assert_eq!(
        codes(&f),
        [
            (Code::LocalWebhooksAnnotationInvalid, Severity::Warning),
            (Code::LocalWebhooksAbandoned, Severity::Error)
        ],
        "{f:#?}"
    );
    assert!(f[0].message.contains("does not parse"), "{f:#?}");
    assert!(f[0].fix.as_deref().unwrap().ends_with(&format!("{SAVED_ANNOTATION}-")), "{f:#?}");
    let restorable = crate::diagnose::restore::candidates(&s);
    assert_eq!(restorable.len(), 1, "only the configuration: {restorable:?}");
}

#[test]
fn a_lease_or_configuration_not_readable_is_a_note_and_no_verdict() {
    let mut s = abandoned();
    set_lease(
        &mut s,
        Readable::Refused(NotReadable { kind: "Lease", verb: "get", resource: "leases".into() }),
    );
    let f = check(&s);
    assert_eq!(codes(&f), [(Code::NotReadable, Severity::Info)], "{f:#?}");
    assert!(f[0].evidence[0].starts_with("get leases in namespace dev: whether the local manager"), "{f:#?}");
    assert!(crate::diagnose::restore::candidates(&s).is_empty());

    let mut s = fixtures::healthy();
    s.registrations.validating = Readable::Refused(NotReadable {
        kind: "ValidatingWebhookConfiguration",
        verb: "get",
        resource: "validatingwebhookconfigurations".into(),
    });
    let f = check(&s);
    assert_eq!(codes(&f), [(Code::NotReadable, Severity::Info)], "{f:#?}");
    assert!(f[0].message.contains("ValidatingWebhookConfiguration"), "{f:#?}");
}

/// The installed webhook configuration, routed to the installed Service.
fn installed(s: &mut Snapshot, failure_policy: &str) {
    let service = crate::webhook::Target::Service { namespace: crate::manifests::MANAGER_NAMESPACE.into() };
    let mut vwc = crate::manifests::validating_webhook_configuration(&service, None);
    vwc.webhooks.as_mut().unwrap()[0].failure_policy = Some(failure_policy.into());
    s.registrations.validating = Readable::Read(Some(vwc));
}

const NO_ENDPOINTS: &str = "Internal error occurred: failed calling webhook \
    \"validate.runners.lab.cloudlab.training\": failed to call webhook: Post \
    \"https://runner-webhook.runner-system.svc:443/validate?timeout=5s\": no endpoints available for service \
    \"runner-webhook\"";

#[test]
fn a_validating_webhook_the_apiserver_cannot_call_refuses_creates_in_its_words() {
    let mut s = with_webhook(CA, SERVING);
    installed(&mut s, "Fail");
    s.registrations.probe_namespace = "default".into();
    s.registrations.probes = vec![probe::Outcome::Passed];
    assert_eq!(check(&s), [], "served");
    // Ready endpoints or not, the apiserver's answer decides.
    s.registrations.probes = vec![probe::judge(crate::api::VERSION, Some((500, NO_ENDPOINTS)))];
    let f = check(&s);
    assert_eq!(codes(&f), [(Code::AdmissionWebhookUnreachable, Severity::Error)], "{f:#?}");
    assert!(
        f[0].message.contains("runner-validation") && f[0].message.contains("no ready endpoint"),
        "{f:#?}"
    );
    assert!(f[0].message.contains("every Runner create and update is refused"), "{f:#?}");
    assert_eq!(
        f[0].evidence,
        [
            format!(
                "a dry-run create of a Runner at {} in namespace default: {NO_ENDPOINTS}",
                crate::api::VERSION
            ),
            "the webhook validate.runners.lab.cloudlab.training sends admission reviews to Service \
             runner-system/runner-webhook (port 443, path /validate)"
                .into(),
            "Service runner-system/runner-webhook has ready endpoints: 10.0.0.7".to_string(),
        ]
    );
    assert!(f[0].fix.as_deref().unwrap().starts_with("make the in-cluster manager ready"), "{f:#?}");
}

#[test]
fn a_dry_run_refused_for_want_of_permission_is_a_note_only_where_a_webhook_is_registered() {
    let mut s = with_webhook(CA, SERVING);
    s.registrations.probes = vec![probe::judge(crate::api::VERSION, Some((403, "forbidden")))];
    let f = check(&s);
    assert_eq!(codes(&f), [(Code::NotReadable, Severity::Info)], "{f:#?}");
    assert!(
        f[0].message.contains("not checked") && f[0].message.contains("may not create Runners"),
        "{f:#?}"
    );
    let mut plain = fixtures::healthy();
    plain.registrations.probes = s.registrations.probes.clone();
    assert_eq!(check(&plain), [], "nothing registered: nothing to check");
}
