use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::diagnose::checks::fixtures::pointed_at;
use crate::webhook::local::{self, Holder};

fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().unwrap()
}

fn by() -> Holder {
    Holder {
        holder: "laptop pid 1".into(),
        lease_namespace: "dev".into(),
        url: "https://127.0.0.1:9443".into(),
    }
}

fn lease(holder: Option<&str>, renewed: Option<&str>) -> Lease {
    serde_json::from_value(json!({ "metadata": { "name": LEASE, "namespace": "dev" },
        "spec": { "holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": 15 } }))
    .unwrap()
}

#[test]
fn the_holding_follows_the_lease_branch_by_branch() {
    let renewed = |t: &str| lease(Some("laptop pid 1"), Some(t));
    let cases = [
        (
            Some(renewed("2026-01-01T11:59:58.000000Z")),
            Holding::Live { renewed: "2026-01-01T11:59:58Z".parse().unwrap() },
        ),
        (
            Some(renewed("2026-01-01T11:50:00.000000Z")),
            Holding::Expired { expired: Some("2026-01-01T11:50:15Z".parse().unwrap()) },
        ),
        (Some(lease(Some("laptop pid 1"), None)), Holding::Expired { expired: None }),
        (None, Holding::NoLease),
        (
            Some(lease(Some("desk pid 2"), Some("2026-01-01T11:59:59.000000Z"))),
            Holding::OtherHolder { holder: Some("desk pid 2".into()) },
        ),
        (Some(lease(None, None)), Holding::OtherHolder { holder: None }),
    ];
    for (lease, want) in cases {
        let got = holding(&by(), lease.as_ref(), now());
        assert_eq!(got.abandoned(), !matches!(want, Holding::Live { .. }), "{want:?}");
        assert_eq!(got, want);
    }
    assert_eq!(
        Holding::Expired { expired: Some("2026-01-01T11:50:15Z".parse().unwrap()) }.describe(&by(), now()),
        "its Lease dev/runner-local-webhooks expired 9m45s ago, at 2026-01-01T11:50:15Z"
    );
    assert!(!Holding::Unknown.abandoned());
}

#[test]
fn only_annotated_objects_are_registrations_and_they_name_their_lease_namespaces() {
    let crd = crate::manifests::crd();
    assert!(of_crd(&crd).is_none());
    assert!(lease_namespaces(Some(&crd), None).is_empty());
    let (conversion, desired) = pointed_at(&by());
    let pointed = local::point(Some(&crd), &by(), conversion).unwrap();
    let vwc: k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration =
        local::point(None, &by(), desired.clone()).unwrap();
    let r = of_crd(&pointed).unwrap();
    assert_eq!(r.targets, [Target::Url("https://127.0.0.1:9443/convert".into())]);
    let held = r.saved.unwrap();
    assert_eq!((held.by, held.holding), (by(), Holding::Unknown));
    assert!(
        held.restores.starts_with("no conversion webhook (strategy None); versions served: "),
        "{}",
        held.restores
    );
    assert_eq!(lease_namespaces(Some(&pointed), Some(&vwc)).into_iter().collect::<Vec<_>>(), ["dev"]);

    // A configuration that existed before: its webhooks are what comes back.
    let service = crate::webhook::Target::Service { namespace: "runner-system".into() };
    let installed = crate::manifests::validating_webhook_configuration(&service, None);
    let taken = local::point(Some(&installed), &by(), desired).unwrap();
    let held = of_validating(&taken).unwrap().saved.unwrap();
    assert_eq!(
        held.restores,
        "webhooks: validate.runners.lab.cloudlab.training through Service runner-system/runner-webhook (port 443, path /validate)"
    );
}
