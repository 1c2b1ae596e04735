//! The CRD's side: its conversion caBundle made equal to the Secret's
//! `ca.crt`, by server-side apply under the webhook's own field manager,
//! which owns only that field (with a URL target, the whole conversion
//! stanza, since nothing else routes to a process on the loopback).
//! The apply carries the resourceVersion just read, so a replica writing
//! from a stale read gets a conflict and reads again. A CRD that does not
//! convert through a webhook (installed without the manager) is left alone.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tracing::info;

use crate::api::CRD_NAME;
use crate::client::guarded::{self, Step};
use crate::error::FromApi;
use crate::manager::error::{Error, Result};
use crate::webhook::{FIELD_MANAGER, Target};

const KIND: &str = "CustomResourceDefinition";

/// Pure: the apply body that makes the CRD trust `ca_bundle` (PEM) on
/// `target`; None when `crd` already does, (with the Service as target)
/// when it does not convert through a webhook at all, or when a local
/// manager holds it ([`super::held_locally`]).
pub fn apply_body(
    crd: &CustomResourceDefinition,
    target: &Target,
    ca_bundle: &str,
) -> Option<serde_json::Value> {
    if super::held_locally(&crd.metadata) {
        return None;
    }
    let conversion = crd.spec.conversion.as_ref();
    let client_config = conversion.and_then(|c| c.webhook.as_ref()).and_then(|w| w.client_config.as_ref());
    let current = client_config.and_then(|c| c.ca_bundle.as_ref()).map(|b| b.0.as_slice());
    let rv = crd.metadata.resource_version.clone();
    let meta = json!({ "name": CRD_NAME, "resourceVersion": rv });
    let crd_kind = |spec| json!({ "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": meta, "spec": spec });
    let webhook = conversion.is_some_and(|c| c.strategy == "Webhook");
    match target {
        Target::Service { .. } => {
            if !webhook || current == Some(ca_bundle.as_bytes()) {
                return None;
            }
            let bundle = k8s_openapi::ByteString(ca_bundle.as_bytes().to_vec());
            Some(crd_kind(json!({ "conversion": { "webhook": { "clientConfig": { "caBundle": bundle } } } })))
        }
        Target::Url(url) => {
            let same_url = client_config.and_then(|c| c.url.as_deref()) == Some(url.as_str());
            if webhook && same_url && current == Some(ca_bundle.as_bytes()) {
                return None;
            }
            Some(crd_kind(json!({ "conversion": crate::manifests::conversion(target, Some(ca_bundle)) })))
        }
    }
}

/// Reads the CRD and applies [`apply_body`] until it holds (a
/// [`guarded::write`]). Ok(false) when the CRD does not convert through a
/// webhook (nothing to do for the Service target; the caller says so once).
pub async fn ensure_ca_bundle(client: &kube::Client, target: &Target, ca_bundle: &str) -> Result<bool> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let (crds, params) = (&crds, &params);
    guarded::write(
        || async move { crds.get(CRD_NAME).await.map_err(|e| Error::api("get", KIND, "", CRD_NAME, e)) },
        |crd| {
            Ok(match apply_body(&crd, target, ca_bundle) {
                None => Step::Done(crd.spec.conversion.as_ref().is_some_and(|c| c.strategy == "Webhook")),
                Some(body) => Step::Write(body),
            })
        },
        |body| async move {
            crds.patch(CRD_NAME, params, &Patch::Apply(&body)).await?;
            info!("the Runner CRD's conversion caBundle now matches the webhook's CA");
            Ok(true)
        },
    )
    .await
    .map_err(|f| super::guarded_error(KIND, CRD_NAME, "apply caBundle to", f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::local::SAVED_ANNOTATION;

    #[test]
    fn a_crd_a_local_manager_holds_is_left_alone() {
        let service = Target::Service { namespace: "runner-system".into() };
        let mut crd = crate::manifests::crd_with_webhook();
        assert!(apply_body(&crd, &service, "PEM").is_some(), "no caBundle yet");
        crd.metadata.annotations = Some([(SAVED_ANNOTATION.to_string(), "{}".to_string())].into());
        assert_eq!(apply_body(&crd, &service, "PEM"), None);
        assert_eq!(apply_body(&crd, &Target::Url("https://127.0.0.1:1/convert".into()), "PEM"), None);
    }
}
