//! The conversion webhook as diagnose sees it: which Runner reads failed
//! because the apiserver could not convert a stored Runner, and the
//! webhook's Service, its EndpointSlices and the certificates of its
//! Secret.
//!
//! A refused read (403: a tenant may not read the manager's Secret) is
//! [`Readable::Refused`], "not readable"; any other failure is a gap.

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ListParams};

use super::Gaps;
use crate::client::children::{NotReadable, is_forbidden};
use crate::diagnose::snapshot::{ConversionState, Readable, WebhookCerts};
use crate::diagnose::view::conversion as view;
use crate::manifests::MANAGER_NAMESPACE as NAMESPACE;
use crate::webhook::SECRET;
use crate::webhook::secret::{CA_CRT, TLS_CRT};

/// How the apiserver words a conversion it could not do, whether the
/// webhook did not answer or answered with a failure:
/// `conversion webhook for lab.cloudlab.training/v1alpha1, Kind=Runner failed: ...`.
const FAILED_CONVERSION: &str = "conversion webhook for";

/// The label EndpointSlices carry with their Service's name.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// True when the apiserver answered a Runner read with a failed conversion:
/// a list fails as a whole when one stored Runner cannot be converted. A
/// GET, and a paged list (read from etcd), answer 500 (`InternalError`,
/// `StorageReadError`); a list the watch cache should serve answers 429
/// "storage is (re)initializing" with the same words, as the cache cannot
/// start either.
pub fn is_conversion_failure(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if matches!(s.code, 500 | 429) && s.message.contains(FAILED_CONVERSION))
}

/// Reads the webhook's Service, EndpointSlices and Secret when the CRD
/// converts by webhook, or `needed` anyway: a Runner read failed for want
/// of conversion (then also when the CRD could not be read: the failure
/// names the webhook either way), or the validating webhook routes to a
/// Service. `failed_reads` stays empty: gather fills it.
pub async fn read(
    client: &Client,
    crd: Option<&CustomResourceDefinition>,
    needed: bool,
) -> (ConversionState, Gaps) {
    let mut gaps = Gaps::default();
    let webhook = crd.and_then(view::target).is_some();
    if !webhook && !needed {
        return (ConversionState::default(), gaps);
    }
    let (ns, name) = view::service(crd);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let by_service = ListParams::default().labels(&format!("{SERVICE_NAME_LABEL}={name}"));
    let (service, endpoints, secret) =
        tokio::join!(services.get_opt(&name), slices.list(&by_service), secrets.get_opt(SECRET));
    let state = ConversionState {
        failed_reads: vec![],
        service: readable(
            &mut gaps,
            format!("get Service {ns}/{name}"),
            refused("Service", "get", "services"),
            service,
        ),
        endpoints: readable(
            &mut gaps,
            format!("list EndpointSlices of Service {ns}/{name}"),
            refused("EndpointSlice", "list", "endpointslices.discovery.k8s.io"),
            endpoints.map(|l| l.items),
        ),
        certs: readable(
            &mut gaps,
            format!("get Secret {NAMESPACE}/{SECRET}"),
            refused("Secret", "get", "secrets"),
            secret.map(|s| s.map(certs)),
        ),
    };
    (state, gaps)
}

pub(super) fn refused(kind: &'static str, verb: &'static str, resource: &str) -> NotReadable {
    NotReadable { kind, verb, resource: resource.to_string() }
}

/// The value, "not readable" on a 403, else unknown after recording a gap.
pub(super) fn readable<T>(
    gaps: &mut Gaps,
    what: String,
    on_403: NotReadable,
    r: kube::Result<T>,
) -> Readable<T> {
    match r {
        Ok(v) => Readable::Read(v),
        Err(e) if is_forbidden(&e) => Readable::Refused(on_403),
        Err(e) => {
            gaps.take::<()>(what, Err(e));
            Readable::Unknown
        }
    }
}

/// The certificates of the Secret; its keys are dropped here.
fn certs(secret: Secret) -> WebhookCerts {
    let mut data = secret.data.unwrap_or_default();
    let mut take = |key: &str| data.remove(key).map(|b| b.0).filter(|b| !b.is_empty());
    WebhookCerts { serving: take(TLS_CRT), ca: take(CA_CRT) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure(message, "InternalError").with_code(code)))
    }

    #[test]
    fn only_a_500_naming_the_conversion_webhook_is_a_conversion_failure() {
        let msg = "conversion webhook for lab.cloudlab.training/v1alpha1, Kind=Runner failed: \
                   Post \"https://127.0.0.1:1/convert?timeout=30s\": dial tcp 127.0.0.1:1: connect: connection refused";
        assert!(is_conversion_failure(&api_error(500, msg)));
        assert!(is_conversion_failure(&api_error(429, &format!("storage is (re)initializing: {msg}"))));
        assert!(!is_conversion_failure(&api_error(500, "etcdserver: request timed out")));
        assert!(!is_conversion_failure(&api_error(429, "storage is (re)initializing")));
        assert!(!is_conversion_failure(&api_error(403, msg)));
    }

    #[test]
    fn only_the_certificates_of_the_secret_are_kept() {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": { "name": SECRET, "namespace": NAMESPACE },
            // "c2VydmluZw==" is "serving", "Y2E=" is "ca", "a2V5" is "key".
            "data": { "tls.crt": "c2VydmluZw==", "ca.crt": "Y2E=", "tls.key": "a2V5", "ca.key": "a2V5" }
        }))
        .unwrap();
        let c = certs(secret);
        assert_eq!(c, WebhookCerts { serving: Some(b"serving".to_vec()), ca: Some(b"ca".to_vec()) });
    }
}
