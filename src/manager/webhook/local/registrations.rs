//! The writes of a local manager's registrations: the Runner CRD's
//! conversion and the ValidatingWebhookConfiguration, pointed at this
//! process and put back, each decided by the pure functions of
//! [`crate::webhook::local`] on a fresh read and written guarded by that
//! read's resourceVersion (a conflict reads again).

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use tracing::warn;

use super::super::guarded_error;
use crate::api::CRD_NAME;
use crate::client::guarded::{self, Step};
use crate::error::{FromApi, is_not_found};
use crate::manager::error::{Error, Result};
use crate::webhook::VALIDATING_CONFIG;
use crate::webhook::local::{self, Holder, Restore};

const CRD: &str = "CustomResourceDefinition";
const VWC: &str = "ValidatingWebhookConfiguration";

fn api_err(kind: &'static str, name: &str, op: &'static str, e: kube::Error) -> Error {
    Error::api(op, kind, "", name, e)
}

/// Points the CRD's conversion and the webhook configuration at `by.url`,
/// trusting `ca` (PEM). The caller holds the local Lease, so an earlier
/// holder named on the objects is no longer alive.
pub async fn point(client: &kube::Client, by: &Holder, ca: &str) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds = &crds;
    let conversion = crate::manifests::conversion(&local::target(&by.url), Some(ca));
    guarded::write(
        || async move { crds.get(CRD_NAME).await.map_err(|e| api_err(CRD, CRD_NAME, "get", e)) },
        |crd| {
            let pointed = local::point_crd(&crd, by, conversion.clone());
            pointed.map(Step::Write).map_err(|e| Error::Webhook(e.to_string()))
        },
        |pointed| async move { crds.replace(CRD_NAME, &PostParams::default(), &pointed).await.map(drop) },
    )
    .await
    .map_err(|f| guarded_error(CRD, CRD_NAME, "update", f))?;
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let configs = &configs;
    let desired = crate::manifests::validating_webhook_configuration(&local::target(&by.url), Some(ca));
    guarded::write(
        || async move {
            configs.get_opt(VALIDATING_CONFIG).await.map_err(|e| api_err(VWC, VALIDATING_CONFIG, "get", e))
        },
        |current| {
            let pointed = local::point_validating(current.as_ref(), by, desired.clone())
                .map_err(|e| Error::Webhook(e.to_string()))?;
            Ok(Step::Write((current.is_some(), pointed)))
        },
        |(exists, pointed)| async move {
            match exists {
                false => configs.create(&PostParams::default(), &pointed).await.map(drop),
                true => configs.replace(VALIDATING_CONFIG, &PostParams::default(), &pointed).await.map(drop),
            }
        },
    )
    .await
    .map_err(|f| guarded_error(VWC, VALIDATING_CONFIG, "write", f))
}

/// Puts back what `holder` replaced: the webhook configuration first (so
/// no write is judged by a server about to stop), then the CRD. Objects
/// another holder took meanwhile are left as they are. Both are tried;
/// the first error is returned.
pub async fn restore(client: &kube::Client, holder: &str) -> Result<()> {
    let validating = restore_validating(client, holder).await;
    let crd = restore_crd(client, holder).await;
    validating.and(crd)
}

/// A restore's write: the configuration put back, or deleted guarded by
/// the resourceVersion read (one the local manager created).
enum Write {
    Replace(Box<ValidatingWebhookConfiguration>),
    Delete(Option<String>),
}

async fn restore_validating(client: &kube::Client, holder: &str) -> Result<()> {
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let configs = &configs;
    guarded::write(
        || async move {
            configs.get_opt(VALIDATING_CONFIG).await.map_err(|e| api_err(VWC, VALIDATING_CONFIG, "get", e))
        },
        |current| {
            let Some(current) = current else { return Ok(Step::Done(())) };
            Ok(match local::restore_validating(&current, Some(holder)).map_err(Error::Webhook)? {
                None => Step::Done(()),
                Some(Restore::Replace(back)) => Step::Write(Write::Replace(Box::new(back))),
                Some(Restore::Delete) => Step::Write(Write::Delete(current.metadata.resource_version)),
            })
        },
        |restore| async move {
            let written = match restore {
                Write::Replace(back) => {
                    configs.replace(VALIDATING_CONFIG, &PostParams::default(), &back).await.map(drop)
                }
                Write::Delete(resource_version) => {
                    let pre = Preconditions { resource_version, uid: None };
                    let params = DeleteParams { preconditions: Some(pre), ..Default::default() };
                    configs.delete(VALIDATING_CONFIG, &params).await.map(drop)
                }
            };
            match written {
                Err(e) if is_not_found(&e) => Ok(()),
                other => other,
            }
        },
    )
    .await
    .map_err(|f| guarded_error(VWC, VALIDATING_CONFIG, "restore", f))
}

async fn restore_crd(client: &kube::Client, holder: &str) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds = &crds;
    guarded::write(
        || async move { crds.get_opt(CRD_NAME).await.map_err(|e| api_err(CRD, CRD_NAME, "get", e)) },
        |crd| {
            let Some(crd) = crd else { return Ok(Step::Done(())) };
            match local::restore_crd(&crd, Some(holder)).map_err(Error::Webhook)? {
                Some(back) => Ok(Step::Write(back)),
                None => {
                    warn!("the Runner CRD no longer names this manager; left as it is");
                    Ok(Step::Done(()))
                }
            }
        },
        |back| async move { crds.replace(CRD_NAME, &PostParams::default(), &back).await.map(drop) },
    )
    .await
    .map_err(|f| guarded_error(CRD, CRD_NAME, "restore", f))
}
