//! The webhook registrations as diagnose sees them: the
//! ValidatingWebhookConfiguration, and the Lease of each local manager a
//! saved annotation names (in the namespace it names). The CRD itself is
//! read with the installation.
//!
//! A refused read (a tenant may not read cluster-scoped webhook
//! configurations, nor Leases elsewhere) is [`Readable::Refused`], "not
//! readable"; any other failure is a gap.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;

use super::Gaps;
use super::conversion::{readable, refused};
use crate::diagnose::snapshot::Readable;
use crate::webhook::VALIDATING_CONFIG;
use crate::webhook::local::LEASE;

/// The ValidatingWebhookConfiguration [`VALIDATING_CONFIG`].
pub async fn read_validating(client: &Client) -> (Readable<Option<ValidatingWebhookConfiguration>>, Gaps) {
    let mut gaps = Gaps::default();
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let read = readable(
        &mut gaps,
        format!("get ValidatingWebhookConfiguration {VALIDATING_CONFIG}"),
        refused(
            "ValidatingWebhookConfiguration",
            "get",
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
        ),
        api.get_opt(VALIDATING_CONFIG).await,
    );
    (read, gaps)
}

/// The Lease [`LEASE`] in each of `namespaces`, read concurrently.
pub async fn read_leases(
    client: &Client,
    namespaces: BTreeSet<String>,
) -> (BTreeMap<String, Readable<Option<Lease>>>, Gaps) {
    let reads = namespaces.into_iter().map(|ns| async move {
        let api: Api<Lease> = Api::namespaced(client.clone(), &ns);
        let r = api.get_opt(LEASE).await;
        (ns, r)
    });
    let mut gaps = Gaps::default();
    let mut out = BTreeMap::new();
    for (ns, r) in futures::future::join_all(reads).await {
        let what = format!("get Lease {ns}/{LEASE}");
        let lease = readable(&mut gaps, what, refused("Lease", "get", "leases.coordination.k8s.io"), r);
        out.insert(ns, lease);
    }
    (out, gaps)
}
