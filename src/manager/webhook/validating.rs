//! The ValidatingWebhookConfiguration's side, as [`super::crd`] does the
//! CRD's: its webhook's caBundle made equal to the Secret's `ca.crt`, by
//! server-side apply under the webhook's own field manager (with a URL
//! target, the whole webhook, pointed at the URL), guarded by the
//! resourceVersion just read.
//!
//! The keeper never creates it: `install --with-manager` or a local
//! manager does. A manager run as a process (a URL target) that created
//! one and then died would leave every Runner write in the cluster refused
//! (failurePolicy Fail) with nothing to restore it; the CRD, by contrast,
//! always exists, and a conversion pointed at a dead URL fails reads only.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tracing::info;

use crate::client::guarded::{self, Step};
use crate::error::{FromApi, is_not_found};
use crate::manager::error::{Error, Result};
use crate::webhook::{FIELD_MANAGER, Target, VALIDATING_CONFIG, VALIDATING_WEBHOOK};

const KIND: &str = "ValidatingWebhookConfiguration";

/// Pure: the apply body that makes the configuration's webhook trust
/// `ca_bundle` (PEM) on `target`; None when it already does, when it has
/// no webhook of ours routed to a Service (Service target: someone else's
/// configuration, or one a local manager rewrote), or when a local manager
/// holds it ([`super::held_locally`]).
pub fn apply_body(
    vwc: &ValidatingWebhookConfiguration,
    target: &Target,
    ca_bundle: &str,
) -> Option<serde_json::Value> {
    if super::held_locally(&vwc.metadata) {
        return None;
    }
    let ours = vwc.webhooks.iter().flatten().find(|w| w.name == VALIDATING_WEBHOOK);
    let current = ours.and_then(|w| w.client_config.ca_bundle.as_ref()).map(|b| b.0.as_slice());
    let meta = json!({ "name": VALIDATING_CONFIG, "resourceVersion": vwc.metadata.resource_version });
    let body = |webhook| {
        json!({ "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": meta, "webhooks": [webhook] })
    };
    match target {
        Target::Service { .. } => {
            let routed = ours.is_some_and(|w| w.client_config.service.is_some());
            if !routed || current == Some(ca_bundle.as_bytes()) {
                return None;
            }
            let bundle = k8s_openapi::ByteString(ca_bundle.as_bytes().to_vec());
            Some(body(json!({ "name": VALIDATING_WEBHOOK, "clientConfig": { "caBundle": bundle } })))
        }
        Target::Url(_) => {
            let want = crate::manifests::validating_webhook(target, Some(ca_bundle));
            if ours.is_some_and(|w| w.client_config == want.client_config) {
                return None;
            }
            Some(body(serde_json::to_value(want).expect("a webhook serializes")))
        }
    }
}

/// Reads the configuration and applies [`apply_body`] until it holds (a
/// [`guarded::write`]). Ok(false) when there is none (installed without
/// it, or deleted, also between the read and the write).
pub async fn ensure_ca_bundle(client: &kube::Client, target: &Target, ca_bundle: &str) -> Result<bool> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let (api, params) = (&api, &params);
    guarded::write(
        || async move {
            api.get_opt(VALIDATING_CONFIG)
                .await
                .map_err(|e| Error::api("get", KIND, "", VALIDATING_CONFIG, e))
        },
        |vwc| {
            Ok(match vwc {
                None => Step::Done(false),
                Some(vwc) => apply_body(&vwc, target, ca_bundle).map_or(Step::Done(true), Step::Write),
            })
        },
        |body| async move {
            match api.patch(VALIDATING_CONFIG, params, &Patch::Apply(&body)).await {
                Ok(_) => {
                    info!("the Runner validating webhook's caBundle now matches the webhook's CA");
                    Ok(true)
                }
                Err(e) if is_not_found(&e) => Ok(false),
                Err(e) => Err(e),
            }
        },
    )
    .await
    .map_err(|f| super::guarded_error(KIND, VALIDATING_CONFIG, "apply caBundle to", f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifests::validating_webhook_configuration;
    use crate::webhook::local::SAVED_ANNOTATION;

    fn installed() -> ValidatingWebhookConfiguration {
        let mut v =
            validating_webhook_configuration(&Target::Service { namespace: "runner-system".into() }, None);
        v.metadata.resource_version = Some("7".into());
        v
    }

    #[test]
    fn the_service_target_sets_only_the_ca_bundle_of_our_webhook_guarded_by_the_resource_version() {
        let service = Target::Service { namespace: "runner-system".into() };
        let body = apply_body(&installed(), &service, "PEM").expect("a write");
        assert_eq!(body["metadata"]["resourceVersion"], "7");
        assert_eq!(
            body["webhooks"],
            json!([{ "name": VALIDATING_WEBHOOK, "clientConfig": { "caBundle": "UEVN" } }])
        );
        let mut trusted = installed();
        trusted.webhooks.as_mut().unwrap()[0].client_config.ca_bundle =
            Some(k8s_openapi::ByteString(b"PEM".to_vec()));
        assert_eq!(apply_body(&trusted, &service, "PEM"), None, "nothing to write");
    }

    #[test]
    fn the_url_target_points_the_whole_webhook_at_the_url() {
        let url = Target::Url("https://127.0.0.1:9443/convert".into());
        let body = apply_body(&installed(), &url, "PEM").expect("a write");
        let webhook = &body["webhooks"][0];
        assert_eq!(
            webhook["clientConfig"],
            json!({ "url": "https://127.0.0.1:9443/validate", "caBundle": "UEVN" })
        );
        assert_eq!(webhook["failurePolicy"], "Fail");
        let pointed = validating_webhook_configuration(&url, Some("PEM"));
        assert_eq!(apply_body(&pointed, &url, "PEM"), None);
        assert!(apply_body(&pointed, &url, "OTHER").is_some(), "a new CA");
    }

    #[test]
    fn a_configuration_a_local_manager_holds_is_left_alone() {
        let mut held = installed();
        held.metadata.annotations = Some([(SAVED_ANNOTATION.to_string(), "{}".to_string())].into());
        let service = Target::Service { namespace: "runner-system".into() };
        assert_eq!(apply_body(&held, &service, "PEM"), None);
        assert_eq!(apply_body(&held, &Target::Url("https://127.0.0.1:1/convert".into()), "PEM"), None);
    }
}
