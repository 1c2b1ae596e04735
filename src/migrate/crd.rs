//! The CRD reads and the one CRD write migrate makes, and the Runner `Api`
//! at a chosen version (migrate reads Runners at the versions the CRD
//! names, not at the one this binary was built with).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectList, PostParams};

use super::{Error, Method, Plan, Prune, preflight};
use crate::api::{CRD_NAME, GROUP};
use crate::client::guarded::{self, Step};
use crate::error::{FromApi, is_not_found};

/// Runners per LIST page: a page is what is held in memory at once.
pub const PAGE_SIZE: u32 = 500;

/// The Runner CRD, or the shared error's `CrdMissing`.
pub async fn read(client: &Client) -> Result<CustomResourceDefinition, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.get(CRD_NAME).await {
        Ok(crd) => Ok(crd),
        Err(e) if is_not_found(&e) => Err(crate::error::Error::CrdMissing.into()),
        Err(e) => Err(Error::api("get", "CustomResourceDefinition", "", CRD_NAME, e)),
    }
}

/// Runners at `version`, in all namespaces.
pub fn runners(client: &Client, version: &str) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &resource(version))
}

/// The Runner resource at `version`.
pub fn resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, version, "Runner"), "runners")
}

/// One page of Runners at `version`, all namespaces, from `token` on.
pub async fn page(
    api: &Api<DynamicObject>,
    version: &str,
    token: Option<String>,
) -> Result<ObjectList<DynamicObject>, Error> {
    let lp = ListParams { limit: Some(PAGE_SIZE), continue_token: token, ..Default::default() };
    let mut list = api.list(&lp).await.map_err(|e| Error::api("list", "Runner", "*", "", e))?;
    // Items of a list may come without apiVersion and kind; a PUT needs both.
    let ar = resource(version);
    for o in &mut list.items {
        o.types = Some(kube::api::TypeMeta { api_version: ar.api_version.clone(), kind: ar.kind.clone() });
    }
    Ok(list)
}

/// Sets `status.storedVersions` to the storage version alone, when the
/// CRD is as at the start but for what the apiserver and a storage
/// migrator write on their own ([`super::unchanged_but_conditions`]): the
/// migrator writes a `StorageMigrating` condition while it runs (1.37's
/// does), so the resourceVersion read at the start has moved by then. A
/// [`guarded::write`]: the CRD is read and compared again, the prune is
/// guarded by the resourceVersion of that read, and a conflict reads again;
/// one that keeps changing is reported changed. storedVersions already
/// pruned, and nothing else changed, is reported as such: by a migrator
/// that prunes on success (1.37's does), or nothing to do after `Update`.
pub async fn prune(
    client: &Client,
    at_start: &CustomResourceDefinition,
    plan: &Plan,
    method: &Method,
) -> Result<Prune, Error> {
    let changed = Prune::CrdChanged { at_start: plan.crd_resource_version.clone() };
    let already = match method {
        Method::Update => Prune::NothingToDo,
        Method::StorageVersionMigration { .. } => Prune::PrunedByMigration,
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds = &crds;
    guarded::write(
        || read(client),
        |mut now| {
            let stored = |crd: &mut CustomResourceDefinition, versions: Vec<String>| {
                crd.status.get_or_insert_with(Default::default).stored_versions = Some(versions);
            };
            let stored_now = now.status.as_ref().and_then(|s| s.stored_versions.as_ref());
            let pruned_already = stored_now == Some(&plan.stored_after());
            if pruned_already {
                // Compared as at the start: the prune may be the migrator's.
                stored(&mut now, plan.stored_before.clone());
            }
            if !super::unchanged_but_conditions(at_start, &now) {
                return Ok(Step::Done(changed.clone()));
            }
            if pruned_already {
                return Ok(Step::Done(already.clone()));
            }
            stored(&mut now, plan.stored_after());
            Ok(Step::Write(now))
        },
        |pruned| async move {
            crds.replace_status(CRD_NAME, &PostParams::default(), &pruned).await?;
            Ok(Prune::Pruned)
        },
    )
    .await
    .or_else(|failed| match failed {
        guarded::Failed::Before(e) => Err(e),
        guarded::Failed::Write(e) => {
            Err(Error::api("update status of", "CustomResourceDefinition", "", CRD_NAME, e))
        }
        guarded::Failed::KeptChanging => Ok(changed),
    })
}

/// The preflight's reads: every Runner at each old version the apiserver
/// still serves, page by page, each round-tripped through the storage
/// version by [`preflight::check`] with `convert`. Stops at the first
/// refusal; returns how many Runners passed.
pub async fn preflight<F>(
    client: &Client,
    plan: &Plan,
    convert: F,
    progress: &mut dyn FnMut(usize),
) -> Result<usize, Error>
where
    F: Fn(&serde_json::Value, &str) -> Result<serde_json::Value, String> + Copy,
{
    let to = super::api_version(&plan.storage);
    let mut checked = 0;
    for version in plan.checkable().0 {
        let api = runners(client, version);
        let from = super::api_version(version);
        let mut token = None;
        loop {
            let list = page(&api, version, token).await?;
            for object in &list.items {
                let value = serde_json::to_value(object).unwrap_or_default();
                preflight::check(&value, &from, &to, convert)?;
                checked += 1;
                progress(checked);
            }
            match list.metadata.continue_ {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => break,
            }
        }
    }
    Ok(checked)
}
