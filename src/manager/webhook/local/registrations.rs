//! A local manager's registrations (the Runner CRD's conversion and the
//! ValidatingWebhookConfiguration): pointed at this process
//! ([`local::point`] on a fresh read, written guarded by its
//! resourceVersion), and put back on exit where they still name it
//! ([`put_back`], as `diagnose --fix` does after a crash).

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use tracing::info;

use super::super::guarded_error;
use crate::client::guarded::{self, Step};
use crate::client::registrations::put_back;
use crate::error::FromApi;
use crate::manager::error::{Error, Result};
use crate::manifests::{conversion, validating_webhook_configuration};
use crate::webhook::local::{self, Holder, Registration};

/// Points the CRD's conversion and the webhook configuration at `by.url`,
/// trusting `ca` (PEM). The caller holds the local Lease, so an earlier
/// holder named on the objects is no longer alive.
pub async fn point(client: &kube::Client, by: &Holder, ca: &str) -> Result<()> {
    let target = local::target(&by.url);
    point_one::<CustomResourceDefinition>(client, by, || conversion(&target, Some(ca))).await?;
    point_one::<ValidatingWebhookConfiguration>(client, by, || {
        validating_webhook_configuration(&target, Some(ca))
    })
    .await
}

async fn point_one<K: Registration>(
    client: &kube::Client,
    by: &Holder,
    pointing: impl Fn() -> K::Pointing,
) -> Result<()> {
    let api: Api<K> = Api::all(client.clone());
    let api = &api;
    guarded::write(
        || async move { api.get_opt(K::NAME).await.map_err(|e| Error::api("get", K::kind(&()), "", K::NAME, e)) },
        |current| {
            local::point(current.as_ref(), by, pointing()).map(Step::Write).map_err(Error::Webhook)
        },
        |pointed| async move { guarded::create_or_replace(api, K::NAME, &pointed).await.map(drop) },
    )
    .await
    .map_err(|f| guarded_error::<K>("", K::NAME, "point", f))
}

/// Puts back what `holder` replaced: the webhook configuration first (so
/// no write is judged by a server about to stop), then the CRD. Objects
/// another holder took meanwhile are left as they are. Both are tried;
/// the first error is returned.
pub async fn restore(client: &kube::Client, holder: &str) -> Result<()> {
    let validating = restore_one::<ValidatingWebhookConfiguration>(client, holder).await;
    let crd = restore_one::<CustomResourceDefinition>(client, holder).await;
    validating.and(crd)
}

async fn restore_one<K: Registration>(client: &kube::Client, holder: &str) -> Result<()> {
    let put = put_back::<K, _, _, _>(client, Some(holder), Error::Webhook, |_| async { Ok(()) }).await;
    if put.map_err(|f| guarded_error::<K>("", K::NAME, "restore", f))?.is_none() {
        info!("{} no longer names this manager; left as it is", local::object_name::<K>());
    }
    Ok(())
}
