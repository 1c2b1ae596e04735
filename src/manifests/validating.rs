//! The ValidatingWebhookConfiguration for Runners: what CEL in the CRD
//! cannot see (a host held by another Runner or an Ingress, in any
//! namespace) and warnings it cannot give (an image with no tag or
//! `:latest`). Served by the manager beside `/convert`, at
//! [`VALIDATE_PATH`]; `install --with-manager` routes it to the Service,
//! a local `run-manager --local-webhooks` to itself.
//!
//! The choices, each a way a webhook breaks a cluster when it is down:
//! - `failurePolicy: Fail`: a host conflict admitted while the webhook is
//!   down is never caught afterwards (two Ingresses then fight over the
//!   host), so a write that cannot be checked is refused, with the
//!   apiserver's error naming the webhook;
//! - only CREATE and UPDATE of `runners` (not `runners/status`): a DELETE
//!   never calls it, so a dead webhook never blocks a delete;
//! - `matchConditions` skip a Runner being deleted (the manager's
//!   finalizer removal is an UPDATE) and an UPDATE that leaves the spec as
//!   it was (finalizers, labels, annotations): only what the webhook
//!   judges sends a request;
//! - `timeoutSeconds: 5`: the lookup is in memory; the apiserver's default
//!   of 10 s would hold every `kubectl apply` that long on a hung endpoint;
//! - `sideEffects: None`: it only reads, so dry-run requests call it too
//!   (a local manager's first-request probe is one);
//! - `matchPolicy: Equivalent` on the storage version: a v1alpha1 write is
//!   converted first, so the webhook judges one shape.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, RuleWithOperations, ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::webhook::{
    REVIEW_VERSIONS, SERVICE, SERVICE_PORT, Target, VALIDATE_PATH, VALIDATING_CONFIG, VALIDATING_WEBHOOK,
};

/// Seconds the apiserver waits for an answer before failing the write.
pub const TIMEOUT_SECONDS: i32 = 5;

/// The configuration routing Runner writes to `target`, trusting
/// `ca_bundle` (PEM) when given (the in-cluster manager injects it).
pub fn validating_webhook_configuration(
    target: &Target,
    ca_bundle: Option<&str>,
) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta { name: Some(VALIDATING_CONFIG.into()), ..Default::default() },
        webhooks: Some(vec![validating_webhook(target, ca_bundle)]),
    }
}

/// The one webhook of [`validating_webhook_configuration`].
pub fn validating_webhook(target: &Target, ca_bundle: Option<&str>) -> ValidatingWebhook {
    let condition =
        |name: &str, expression: &str| MatchCondition { name: name.into(), expression: expression.into() };
    ValidatingWebhook {
        name: VALIDATING_WEBHOOK.into(),
        admission_review_versions: REVIEW_VERSIONS.iter().map(|v| v.to_string()).collect(),
        client_config: client_config(target, VALIDATE_PATH, ca_bundle),
        failure_policy: Some("Fail".into()),
        match_policy: Some("Equivalent".into()),
        side_effects: "None".into(),
        timeout_seconds: Some(TIMEOUT_SECONDS),
        rules: Some(vec![RuleWithOperations {
            api_groups: Some(vec![crate::api::GROUP.into()]),
            api_versions: Some(vec![crate::api::VERSION.into()]),
            operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
            resources: Some(vec!["runners".into()]),
            scope: Some("Namespaced".into()),
        }]),
        match_conditions: Some(vec![
            condition("not-being-deleted", "!has(object.metadata.deletionTimestamp)"),
            condition("spec-written", "request.operation == 'CREATE' || object.spec != oldObject.spec"),
        ]),
        namespace_selector: None,
        object_selector: None,
    }
}

/// Where the apiserver sends this webhook's reviews: the Service (port
/// [`SERVICE_PORT`], `path`) or the URL target's origin with `path`.
pub fn client_config(target: &Target, path: &str, ca_bundle: Option<&str>) -> WebhookClientConfig {
    let (service, url) = match target {
        Target::Service { namespace } => (
            Some(ServiceReference {
                name: SERVICE.into(),
                namespace: namespace.clone(),
                path: Some(path.into()),
                port: Some(SERVICE_PORT),
            }),
            None,
        ),
        Target::Url(_) => (None, target.url_with_path(path)),
    };
    WebhookClientConfig { ca_bundle: ca_bundle.map(|b| ByteString(b.as_bytes().to_vec())), service, url }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_and_status_writes_never_call_the_webhook() {
        let w = validating_webhook(&Target::Service { namespace: "runner-system".into() }, None);
        let rule = &w.rules.as_ref().unwrap()[0];
        assert_eq!(rule.operations.as_deref().unwrap(), ["CREATE", "UPDATE"]);
        assert_eq!(rule.resources.as_deref().unwrap(), ["runners"], "not runners/status");
        let conditions: Vec<&str> =
            w.match_conditions.iter().flatten().map(|c| c.expression.as_str()).collect();
        assert!(conditions.iter().any(|c| c.contains("deletionTimestamp")), "{conditions:?}");
        assert_eq!(w.side_effects, "None", "dry-run requests must be allowed to call it");
    }

    #[test]
    fn the_url_target_keeps_its_origin_and_takes_the_validate_path() {
        let c =
            client_config(&Target::Url("https://10.0.0.1:4443/convert".into()), VALIDATE_PATH, Some("PEM"));
        assert_eq!(c.url.as_deref(), Some("https://10.0.0.1:4443/validate"));
        assert!(c.service.is_none());
        assert_eq!(c.ca_bundle.unwrap().0, b"PEM");
        let s = client_config(&Target::Service { namespace: "ns".into() }, VALIDATE_PATH, None);
        assert_eq!(s.service.unwrap().path.as_deref(), Some("/validate"));
    }
}
