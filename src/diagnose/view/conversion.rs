//! Pure: where the Runner CRD sends conversion, read from its
//! `spec.conversion`. Gather reads it to know which Service to look at; the
//! conversion checks, to name that target and the fix.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, WebhookClientConfig,
};

use crate::manifests::MANAGER_NAMESPACE;

/// Where the apiserver sends a ConversionReview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `clientConfig.service`: through a Service, to `https://NAME.NAMESPACE.svc:PORT/PATH`.
    Service { namespace: String, name: String, port: i32, path: String },
    /// `clientConfig.url`: straight to a URL (a manager run outside the cluster).
    Url(String),
}

impl Target {
    /// A client config's route (conversion's and admission's are different
    /// types with the same fields), the apiserver's defaults filled in
    /// where it leaves them out: port 443, path "/".
    pub fn of(service: Option<(&str, &str, Option<i32>, Option<&str>)>, url: Option<&str>) -> Option<Target> {
        match (service, url) {
            (Some((namespace, name, port, path)), _) => Some(Target::Service {
                namespace: namespace.into(),
                name: name.into(),
                port: port.unwrap_or(443),
                path: path.unwrap_or("/").into(),
            }),
            (None, url) => url.map(|u| Target::Url(u.into())),
        }
    }

    /// `Service runner-system/runner-webhook (port 443, path /convert)` or
    /// `URL https://...`, for evidence.
    pub fn describe(&self) -> String {
        match self {
            Target::Service { namespace, name, port, path } => {
                format!("Service {namespace}/{name} (port {port}, path {path})")
            }
            Target::Url(url) => format!("URL {url}"),
        }
    }
}

/// The webhook's clientConfig, when the CRD converts by webhook.
pub fn client_config(crd: &CustomResourceDefinition) -> Option<&WebhookClientConfig> {
    webhook_client_config(crd.spec.conversion.as_ref()?)
}

fn webhook_client_config(conversion: &CustomResourceConversion) -> Option<&WebhookClientConfig> {
    if conversion.strategy != "Webhook" {
        return None;
    }
    conversion.webhook.as_ref()?.client_config.as_ref()
}

/// Where the CRD sends conversion; `None` when it does not convert by
/// webhook (strategy `None` only rewrites apiVersion, and cannot fail).
pub fn target(crd: &CustomResourceDefinition) -> Option<Target> {
    conversion_target(crd.spec.conversion.as_ref()?)
}

/// [`target`] of a conversion stanza (a live CRD's, or the one a local
/// manager saved).
pub fn conversion_target(conversion: &CustomResourceConversion) -> Option<Target> {
    let cc = webhook_client_config(conversion)?;
    let service =
        cc.service.as_ref().map(|s| (s.namespace.as_str(), s.name.as_str(), s.port, s.path.as_deref()));
    Target::of(service, cc.url.as_deref())
}

/// The webhook's Service as `(namespace, name)`: the one the CRD names,
/// else (a URL, or a CRD that could not be read) the one the install
/// creates, which is what an in-cluster manager serves behind.
pub fn service(crd: Option<&CustomResourceDefinition>) -> (String, String) {
    match crd.and_then(target) {
        Some(Target::Service { namespace, name, .. }) => (namespace, name),
        _ => (MANAGER_NAMESPACE.to_string(), crate::webhook::SERVICE.to_string()),
    }
}

/// The CRD's caBundle (PEM), when it has one.
pub fn ca_bundle(crd: &CustomResourceDefinition) -> Option<&[u8]> {
    client_config(crd)?.ca_bundle.as_ref().map(|b| b.0.as_slice()).filter(|b| !b.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(conversion: serde_json::Value) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": { "name": "runners.lab.cloudlab.training" },
            "spec": { "group": "lab.cloudlab.training", "scope": "Namespaced",
                      "names": { "plural": "runners", "kind": "Runner" }, "versions": [],
                      "conversion": conversion }
        }))
        .unwrap()
    }

    #[test]
    fn a_service_target_fills_in_the_apiservers_defaults() {
        let c = crd(json!({ "strategy": "Webhook", "webhook": { "conversionReviewVersions": ["v1"],
            "clientConfig": { "service": { "namespace": "ops", "name": "hook" } } } }));
        let want =
            Target::Service { namespace: "ops".into(), name: "hook".into(), port: 443, path: "/".into() };
        assert_eq!(target(&c), Some(want));
        assert_eq!(service(Some(&c)), ("ops".to_string(), "hook".to_string()));
    }

    #[test]
    fn a_url_target_falls_back_to_the_installed_service_name() {
        let c = crd(json!({ "strategy": "Webhook", "webhook": { "conversionReviewVersions": ["v1"],
            "clientConfig": { "url": "https://127.0.0.1:9443/convert" } } }));
        assert_eq!(target(&c), Some(Target::Url("https://127.0.0.1:9443/convert".into())));
        assert_eq!(service(Some(&c)), ("runner-system".to_string(), "runner-webhook".to_string()));
        assert_eq!(service(None), service(Some(&c)));
    }

    #[test]
    fn strategy_none_has_no_target_even_with_a_webhook_stanza() {
        let c = crd(json!({ "strategy": "None", "webhook": { "conversionReviewVersions": ["v1"],
            "clientConfig": { "url": "https://x/convert" } } }));
        assert_eq!(target(&c), None);
        assert_eq!(ca_bundle(&c), None);
    }
}
