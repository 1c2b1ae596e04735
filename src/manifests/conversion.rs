//! The CRD's `spec.conversion`: through the manager's webhook, reached by
//! its Service in the cluster or by a URL (a manager running as a process
//! next to a local apiserver, where no Service IP is reachable). Used by
//! `install --with-manager` (the Service, no caBundle: the manager injects
//! it) and by the manager itself with a URL target.

use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, ServiceReference, WebhookClientConfig, WebhookConversion,
};

use crate::webhook::{PATH, REVIEW_VERSIONS, SERVICE, SERVICE_PORT, Target};

/// `strategy: Webhook` to `target`, answering ConversionReview `v1`, with
/// `ca_bundle` (PEM) when given. Without it, the field is left to whoever
/// owns it (the manager, under its own field manager).
pub fn conversion(target: &Target, ca_bundle: Option<&str>) -> CustomResourceConversion {
    let (service, url) = match target {
        Target::Service { namespace } => (
            Some(ServiceReference {
                name: SERVICE.into(),
                namespace: namespace.clone(),
                path: Some(PATH.into()),
                port: Some(SERVICE_PORT),
            }),
            None,
        ),
        Target::Url(url) => (None, Some(url.clone())),
    };
    CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                ca_bundle: ca_bundle.map(|b| ByteString(b.as_bytes().to_vec())),
                service,
                url,
            }),
            conversion_review_versions: REVIEW_VERSIONS.iter().map(|v| v.to_string()).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_target_names_the_service_port_and_path_and_leaves_the_ca_bundle_out() {
        let c = conversion(&Target::Service { namespace: "runner-system".into() }, None);
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": { "service": { "name": "runner-webhook", "namespace": "runner-system", "path": "/convert", "port": 443 } },
                    "conversionReviewVersions": ["v1"],
                },
            })
        );
    }

    #[test]
    fn the_url_target_carries_the_ca_bundle_base64() {
        let c = conversion(&Target::Url("https://127.0.0.1:9443/convert".into()), Some("PEM"));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v["webhook"]["clientConfig"],
            serde_json::json!({ "url": "https://127.0.0.1:9443/convert", "caBundle": "UEVN" })
        );
    }
}
