//! The webhooks, conversion (`/convert`) and validating (`/validate`), on
//! one server: the names every side shares (the manager that serves them,
//! the manifests that route to them, the RBAC that lets the manager keep
//! its Secret and caBundles, and diagnose, which checks them), the pure
//! certificate logic ([`certs`]) with the Secret's layout ([`secret`]),
//! and what a local manager's registrations become ([`local`]).
//!
//! ```text
//!  apiserver ──HTTPS──► Service runner-webhook:443 ──► every manager Pod :9443 /convert, /validate
//!      ▲ trusts the caBundles (CRD, runner-validation)     │ serves tls.crt/tls.key
//!      └───────── ca.crt ◄── Secret runner-webhook-tls ◄───┘ kept by every replica
//! ```
//!
//! Everything lives in the manager's namespace (runner-system when
//! installed; the manifests' `MANAGER_NAMESPACE`). This module imports
//! neither the manifests nor the manager: both import it.

pub mod certs;
pub mod local;
pub mod secret;

/// The Service in front of every manager replica's webhook port.
pub const SERVICE: &str = "runner-webhook";
/// The Secret holding the CA bundle and the serving certificate. `install`
/// creates it empty, so the manager needs no `create` on Secrets.
pub const SECRET: &str = "runner-webhook-tls";
/// The manager's container port for `/convert` and `/validate`, named [`PORT_NAME`].
pub const CONTAINER_PORT: i32 = 9443;
/// The container port's name, which the Service targets.
pub const PORT_NAME: &str = "webhook";
/// The Service's port; the CRD's service reference names it.
pub const SERVICE_PORT: i32 = 443;
/// Where the apiserver posts ConversionReviews.
pub const PATH: &str = "/convert";
/// Where the apiserver posts AdmissionReviews of Runner writes.
pub const VALIDATE_PATH: &str = "/validate";
/// The ValidatingWebhookConfiguration's name (cluster-scoped).
pub const VALIDATING_CONFIG: &str = "runner-validation";
/// The webhook's name in it (a qualified name, as the apiserver requires).
pub const VALIDATING_WEBHOOK: &str = "validate.runners.lab.cloudlab.training";
/// The ConversionReview versions the manager answers (the CRD lists them).
pub const REVIEW_VERSIONS: &[&str] = &["v1"];
/// Field manager of the manager's writes to the CRD's conversion (the
/// caBundle; with a URL target, the whole stanza): not install's, so a
/// re-install never takes the caBundle back.
pub const FIELD_MANAGER: &str = "kubectl-runner-webhook";

/// The DNS names the apiserver may dial the Service by, in `namespace`:
/// what the serving certificate must hold.
pub fn service_dns_names(namespace: &str) -> Vec<String> {
    vec![format!("{SERVICE}.{namespace}.svc"), format!("{SERVICE}.{namespace}.svc.cluster.local")]
}

/// Where the CRD sends ConversionReviews: the Service (in the cluster), or a
/// URL (a manager running as a process, e.g. on the loopback next to a
/// local apiserver, where no Service IP is reachable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `SERVICE` in this namespace, port `SERVICE_PORT`, path `PATH`.
    Service { namespace: String },
    /// An `https://` URL, path included.
    Url(String),
}

impl Target {
    /// A URL target's authority (`host:port`); none for the Service.
    fn authority(&self) -> Option<&str> {
        let Target::Url(url) = self else { return None };
        url.strip_prefix("https://")?.split(['/', '?', '#']).next()
    }

    /// The host the certificate must name besides the Service's DNS names:
    /// a URL's host (an IP or a DNS name); none for the Service.
    pub fn extra_name(&self) -> Option<String> {
        let authority = self.authority()?;
        let host = match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next()?,
            None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
        };
        (!host.is_empty()).then(|| host.to_string())
    }

    /// A URL target's origin (scheme and authority) followed by `path`:
    /// where the same server answers another review. None for the Service.
    pub fn url_with_path(&self, path: &str) -> Option<String> {
        Some(format!("https://{}{path}", self.authority()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_names_are_the_ones_the_apiserver_dials() {
        assert_eq!(
            service_dns_names(crate::manifests::MANAGER_NAMESPACE),
            ["runner-webhook.runner-system.svc", "runner-webhook.runner-system.svc.cluster.local"]
        );
    }

    #[test]
    fn a_url_target_names_its_host_and_the_service_none() {
        let url = |u: &str| Target::Url(u.into()).extra_name();
        assert_eq!(url("https://127.0.0.1:9443/convert").as_deref(), Some("127.0.0.1"));
        assert_eq!(url("https://[::1]:9443/convert").as_deref(), Some("::1"));
        assert_eq!(url("https://webhook.example/convert").as_deref(), Some("webhook.example"));
        assert_eq!(url("http://127.0.0.1/convert"), None);
        assert_eq!(Target::Service { namespace: "runner-system".into() }.extra_name(), None);
    }
}
