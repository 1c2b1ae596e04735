//! The writes of a local manager's registrations: the Runner CRD's
//! conversion and the ValidatingWebhookConfiguration, pointed at this
//! process and put back, each decided by the pure functions of
//! [`crate::webhook::local`] on a fresh read and written guarded by that
//! read's resourceVersion (a conflict reads again).

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use tracing::warn;

use crate::api::CRD_NAME;
use crate::error::FromApi;
use crate::manager::error::{Error, Result};
use crate::webhook::VALIDATING_CONFIG;
use crate::webhook::local::{self, Holder, Restore};

/// Attempts when other writers keep changing an object.
const ATTEMPTS: usize = 5;

const CRD: &str = "CustomResourceDefinition";
const VWC: &str = "ValidatingWebhookConfiguration";

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn api_err(kind: &'static str, name: &str, op: &'static str, e: kube::Error) -> Error {
    Error::api(op, kind, "", name, e)
}

fn kept_changing(what: &str) -> Error {
    Error::Webhook(format!("{what} kept changing under {ATTEMPTS} guarded writes"))
}

/// Points the CRD's conversion and the webhook configuration at `by.url`,
/// trusting `ca` (PEM). The caller holds the local Lease, so an earlier
/// holder named on the objects is no longer alive.
pub async fn point(client: &kube::Client, by: &Holder, ca: &str) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut done = false;
    for _ in 0..ATTEMPTS {
        let crd = crds.get(CRD_NAME).await.map_err(|e| api_err(CRD, CRD_NAME, "get", e))?;
        let conversion = crate::manifests::conversion(&local::target(&by.url), Some(ca));
        let pointed =
            local::point_crd(&crd, by, conversion, false).map_err(|e| Error::Webhook(e.to_string()))?;
        match crds.replace(CRD_NAME, &PostParams::default(), &pointed).await {
            Ok(_) => {
                done = true;
                break;
            }
            Err(e) if conflict(&e) => continue,
            Err(e) => return Err(api_err(CRD, CRD_NAME, "update", e)),
        }
    }
    if !done {
        return Err(kept_changing(CRD_NAME));
    }
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    for _ in 0..ATTEMPTS {
        let current = configs
            .get_opt(VALIDATING_CONFIG)
            .await
            .map_err(|e| api_err(VWC, VALIDATING_CONFIG, "get", e))?;
        let desired = crate::manifests::validating_webhook_configuration(&local::target(&by.url), Some(ca));
        let pointed = local::point_validating(current.as_ref(), by, desired, false)
            .map_err(|e| Error::Webhook(e.to_string()))?;
        let written = match current {
            None => configs.create(&PostParams::default(), &pointed).await,
            Some(_) => configs.replace(VALIDATING_CONFIG, &PostParams::default(), &pointed).await,
        };
        match written {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(api_err(VWC, VALIDATING_CONFIG, "write", e)),
        }
    }
    Err(kept_changing(VALIDATING_CONFIG))
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

async fn restore_validating(client: &kube::Client, holder: &str) -> Result<()> {
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let err = |op, e| api_err(VWC, VALIDATING_CONFIG, op, e);
    for _ in 0..ATTEMPTS {
        let Some(current) = configs.get_opt(VALIDATING_CONFIG).await.map_err(|e| err("get", e))? else {
            return Ok(());
        };
        let restore = local::restore_validating(&current, Some(holder)).map_err(Error::Webhook)?;
        let written = match restore {
            None => return Ok(()),
            Some(Restore::Replace(back)) => {
                configs.replace(VALIDATING_CONFIG, &PostParams::default(), &back).await.map(drop)
            }
            Some(Restore::Delete) => {
                let pre =
                    Preconditions { resource_version: current.metadata.resource_version.clone(), uid: None };
                let params = DeleteParams { preconditions: Some(pre), ..Default::default() };
                configs.delete(VALIDATING_CONFIG, &params).await.map(drop)
            }
        };
        match written {
            Ok(()) => return Ok(()),
            Err(e) if conflict(&e) => continue,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(err("restore", e)),
        }
    }
    Err(kept_changing(VALIDATING_CONFIG))
}

async fn restore_crd(client: &kube::Client, holder: &str) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for _ in 0..ATTEMPTS {
        let crd = match crds.get(CRD_NAME).await {
            Ok(c) => c,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(api_err(CRD, CRD_NAME, "get", e)),
        };
        let Some(back) = local::restore_crd(&crd, Some(holder)).map_err(Error::Webhook)? else {
            warn!("the Runner CRD no longer names this manager; left as it is");
            return Ok(());
        };
        match crds.replace(CRD_NAME, &PostParams::default(), &back).await {
            Ok(_) => return Ok(()),
            Err(e) if conflict(&e) => continue,
            Err(e) => return Err(api_err(CRD, CRD_NAME, "restore", e)),
        }
    }
    Err(kept_changing(CRD_NAME))
}
