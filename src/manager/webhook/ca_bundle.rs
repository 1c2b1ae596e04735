//! The registrations' side of the keeper: the caBundle of the CRD's
//! conversion and of the validating webhook made equal to the Secret's
//! `ca.crt`, by server-side apply under the webhook's own field manager,
//! which owns only that field (with a URL target, the whole conversion
//! stanza or webhook: nothing else routes to a process on the loopback).
//! The apply carries the resourceVersion just read, so a replica writing
//! from a stale read gets a conflict and reads again ([`guarded::write`]).
//! What differs between the two is [`Kept`]; the decision
//! ([`apply_body`]) and the write ([`ensure`]) are written once.
//!
//! The keeper creates neither: `install` makes the CRD, `install
//! --with-manager` or a local manager the configuration. A manager run as a
//! process (a URL target) that created the configuration and then died
//! would leave every Runner write refused (failurePolicy Fail) with nothing
//! to restore it; a conversion pointed at a dead URL fails reads only.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tracing::info;

use crate::client::guarded::{self, Step};
use crate::error::{FromApi, is_not_found};
use crate::manager::error::{Error, Result};
use crate::manifests::{conversion, validating_webhook};
use crate::webhook::local::{Registration, SAVED_ANNOTATION, object_name};
use crate::webhook::{FIELD_MANAGER, Target, VALIDATING_WEBHOOK};

/// How a registration's webhook of ours is reached now.
pub struct Reached<'a> {
    /// Whether a keeper behind the Service keeps its caBundle: the CRD's
    /// conversion whenever it goes through a webhook (the CRD belongs to
    /// the installation), the configuration's webhook only when routed to
    /// a Service (else someone else's, or one a local manager rewrote).
    pub by_service: bool,
    pub url: Option<&'a str>,
    pub ca_bundle: Option<&'a [u8]>,
}

/// What the keeper needs to know of a registration kind.
pub trait Kept: Registration {
    /// Its webhook of ours; None when it has none.
    fn reached(&self) -> Option<Reached<'_>>;
    /// For `target`: the URL our webhook should have (None: the Service)
    /// and the apply body's fields besides its type and metadata.
    fn wanted(target: &Target, ca_bundle: &str) -> (Option<String>, Value);
}

impl Kept for CustomResourceDefinition {
    fn reached(&self) -> Option<Reached<'_>> {
        let conversion = self.spec.conversion.as_ref().filter(|c| c.strategy == "Webhook")?;
        let config = conversion.webhook.as_ref().and_then(|w| w.client_config.as_ref());
        let ca_bundle = config.and_then(|c| c.ca_bundle.as_ref()).map(|b| b.0.as_slice());
        Some(Reached { by_service: true, url: config.and_then(|c| c.url.as_deref()), ca_bundle })
    }

    fn wanted(target: &Target, ca_bundle: &str) -> (Option<String>, Value) {
        match target {
            Target::Service { .. } => {
                let bundle = k8s_openapi::ByteString(ca_bundle.as_bytes().to_vec());
                (
                    None,
                    json!({ "spec": { "conversion": { "webhook": { "clientConfig": { "caBundle": bundle } } } } }),
                )
            }
            Target::Url(url) => {
                (Some(url.clone()), json!({ "spec": { "conversion": conversion(target, Some(ca_bundle)) } }))
            }
        }
    }
}

impl Kept for ValidatingWebhookConfiguration {
    fn reached(&self) -> Option<Reached<'_>> {
        let ours = self.webhooks.iter().flatten().find(|w| w.name == VALIDATING_WEBHOOK)?;
        let config = &ours.client_config;
        let ca_bundle = config.ca_bundle.as_ref().map(|b| b.0.as_slice());
        Some(Reached { by_service: config.service.is_some(), url: config.url.as_deref(), ca_bundle })
    }

    fn wanted(target: &Target, ca_bundle: &str) -> (Option<String>, Value) {
        match target {
            Target::Service { .. } => {
                let bundle = k8s_openapi::ByteString(ca_bundle.as_bytes().to_vec());
                (
                    None,
                    json!({ "webhooks": [{ "name": VALIDATING_WEBHOOK, "clientConfig": { "caBundle": bundle } }] }),
                )
            }
            Target::Url(_) => {
                let webhook = validating_webhook(target, Some(ca_bundle));
                (webhook.client_config.url.clone(), json!({ "webhooks": [webhook] }))
            }
        }
    }
}

/// Pure: the apply body that makes `object`'s webhook trust `ca_bundle`
/// (PEM) on `target`, guarded by the resourceVersion read; None when it
/// already does, when (Service target) the Service does not keep it
/// ([`Reached::by_service`]), or when a local manager holds it (it carries
/// [`SAVED_ANNOTATION`]: left alone until put back, or the two would
/// rewrite each other's caBundle every round).
pub fn apply_body<K: Kept>(object: &K, target: &Target, ca_bundle: &str) -> Option<Value> {
    if object.meta().annotations.as_ref().is_some_and(|a| a.contains_key(SAVED_ANNOTATION)) {
        return None;
    }
    let now = object.reached();
    let (url, mut body) = K::wanted(target, ca_bundle);
    let trusted = now.as_ref().is_some_and(|n| n.ca_bundle == Some(ca_bundle.as_bytes()));
    let holds = match url {
        None => trusted || !now.is_some_and(|n| n.by_service),
        Some(url) => trusted && now.and_then(|n| n.url) == Some(url.as_str()),
    };
    if holds {
        return None;
    }
    body["apiVersion"] = K::api_version(&()).into();
    body["kind"] = K::kind(&()).into();
    body["metadata"] = json!({ "name": K::NAME, "resourceVersion": object.meta().resource_version });
    Some(body)
}

/// Reads `K` and applies [`apply_body`] until it holds (a
/// [`guarded::write`]). Ok(false) when it is not there or has no webhook
/// of ours (nothing to keep: the caller says so once).
pub async fn ensure<K: Kept>(client: &kube::Client, target: &Target, ca_bundle: &str) -> Result<bool> {
    let api: Api<K> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let (api, params) = (&api, &params);
    guarded::write(
        || async move { api.get_opt(K::NAME).await.map_err(|e| Error::api("get", K::kind(&()), "", K::NAME, e)) },
        |object| {
            Ok(match object {
                None => Step::Done(false),
                Some(o) => apply_body(&o, target, ca_bundle).map_or(Step::Done(o.reached().is_some()), Step::Write),
            })
        },
        |body| async move {
            match api.patch(K::NAME, params, &Patch::Apply(&body)).await {
                Ok(_) => {
                    info!("{}'s caBundle now matches the webhook's CA", object_name::<K>());
                    Ok(true)
                }
                Err(e) if is_not_found(&e) => Ok(false),
                Err(e) => Err(e),
            }
        },
    )
    .await
    .map_err(|f| super::guarded_error::<K>("", K::NAME, "apply caBundle to", f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifests::validating_webhook_configuration;

    #[test]
    fn a_crd_a_local_manager_holds_is_left_alone() {
        let service = Target::Service { namespace: "runner-system".into() };
        let mut crd = crate::manifests::crd_with_webhook();
        assert!(apply_body(&crd, &service, "PEM").is_some(), "no caBundle yet");
        crd.metadata.annotations = Some([("other".to_string(), "x".to_string())].into());
        assert!(apply_body(&crd, &service, "PEM").is_some(), "another annotation holds nothing");
        crd.metadata.annotations = Some([(SAVED_ANNOTATION.to_string(), "{}".to_string())].into());
        assert_eq!(apply_body(&crd, &service, "PEM"), None);
        assert_eq!(apply_body(&crd, &Target::Url("https://127.0.0.1:1/convert".into()), "PEM"), None);
    }

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
