//! Reading Runners, for every command that needs one: one LIST call for
//! many (so a hundred Runners cost what `kubectl get runners` costs), one GET
//! for one, and one reading of the apiserver's 404 that tells a missing
//! Runner from a missing CRD.

use kube::Client;
use kube::api::{Api, ListParams};

use crate::api::Runner;
use crate::error::{Error, FromApi, Result, is_not_found};

/// The Runner `Api` in `ns`, or in all namespaces when `None`.
pub fn api(client: &Client, ns: Option<&str>) -> Api<Runner> {
    super::scoped(client, ns)
}

/// A 404 without a Status body ("404 page not found") or with the generic
/// "the server could not find the requested resource" means the resource
/// type, not an object, is missing: the CRD is not installed.
pub fn is_crd_missing(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404
        && (s.message.contains("page not found") || s.message.contains("could not find the requested resource")))
}

/// The error for `op` on the Runner `ns/name`: [`Error::CrdMissing`] when
/// the apiserver does not know Runners at all.
pub fn error(op: &'static str, ns: &str, name: &str, e: kube::Error) -> Error {
    if is_crd_missing(&e) { Error::CrdMissing } else { Error::api(op, "Runner", ns, name, e) }
}

/// Runners in `ns` (all namespaces when `None`), optionally filtered by a
/// label selector, sorted by namespace then name as kubectl prints them.
pub async fn list(client: &Client, ns: Option<&str>, selector: Option<&str>) -> Result<Vec<Runner>> {
    let mut lp = ListParams::default();
    if let Some(s) = selector {
        lp = lp.labels(s);
    }
    let mut items =
        list_paged(&api(client, ns), lp).await.map_err(|e| error("list", ns.unwrap_or("*"), "", e))?;
    // The apiserver already returns this order from etcd; do not depend on it.
    items.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    Ok(items)
}

/// Objects per page of [`list_paged`], as kubectl pages its lists.
pub const PAGE: u32 = 500;

/// Every object `lp` selects, [`PAGE`] at a time. Paged, the list is read
/// from etcd when the apiserver's watch cache cannot start, which is the
/// case when a stored Runner cannot be converted: the apiserver then
/// answers at once with the failed conversion (500), where an unpaged list
/// is answered 429 "storage is (re)initializing", which kube's client
/// retries for minutes.
pub async fn list_paged<K>(a: &Api<K>, lp: ListParams) -> kube::Result<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut lp = lp.limit(PAGE);
    let mut out = vec![];
    loop {
        let page = a.list(&lp).await?;
        out.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => return Ok(out),
        }
    }
}

/// The Runner `ns/name`.
pub async fn get(client: &Client, ns: &str, name: &str) -> Result<Runner> {
    api(client, Some(ns)).get(name).await.map_err(|e| error("get", ns, name, e))
}

/// The Runner `ns/name`, `None` when it does not exist.
pub async fn get_opt(client: &Client, ns: &str, name: &str) -> Result<Option<Runner>> {
    match api(client, Some(ns)).get(name).await {
        Ok(r) => Ok(Some(r)),
        Err(e) if is_not_found(&e) && !is_crd_missing(&e) => Ok(None),
        Err(e) => Err(error("get", ns, name, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure(message, "NotFound").with_code(code).boxed())
    }

    #[test]
    fn a_404_for_the_resource_type_means_the_crd_is_missing_and_one_for_a_name_does_not() {
        assert!(matches!(error("get", "ns", "web", status(404, "404 page not found")), Error::CrdMissing));
        let gone = status(404, "runners.lab.cloudlab.training \"web\" not found");
        assert!(matches!(error("get", "ns", "web", gone), Error::Api(_)));
    }
}
