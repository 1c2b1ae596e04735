//! The rewrite by the apiserver's own migrator, where the cluster serves
//! `storagemigration.k8s.io`: one StorageVersionMigration for Runners,
//! followed until it succeeds or fails. The migrator rewrites each object
//! the way `rewrite` does (a no-change write, guarded) but from inside the
//! control plane. It reports no per-object counts.
//!
//! Resuming: an unfinished migration of Runners that is already there (an
//! earlier run's, interrupted) is followed rather than a second one made.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use super::Error;
use crate::api::GROUP;
use crate::error::FromApi;

pub const SVM_GROUP: &str = "storagemigration.k8s.io";
const KIND: &str = "StorageVersionMigration";

/// How often the migration's status is read.
const POLL: Duration = Duration::from_secs(1);

/// How a followed migration ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub name: String,
    pub interrupted: bool,
}

/// The StorageVersionMigration group/version the apiserver prefers, when
/// it serves the resource at all.
pub async fn served(client: &Client) -> Result<Option<String>, Error> {
    let groups =
        client.list_api_groups().await.map_err(|e| Error::api("discover", "API groups", "", "", e))?;
    let Some(group) = groups.groups.iter().find(|g| g.name == SVM_GROUP) else { return Ok(None) };
    let Some(gv) = group.preferred_version.as_ref().map(|v| v.group_version.clone()) else { return Ok(None) };
    let resources = client
        .list_api_group_resources(&gv)
        .await
        .map_err(|e| Error::api("discover", "API resources", "", &gv, e))?;
    Ok(resources.resources.iter().any(|r| r.name == "storageversionmigrations").then_some(gv))
}

/// The migration object for Runners at `group_version` of the SVM API
/// (v1alpha1 names the version to migrate to; later ones the resource only).
pub fn manifest(group_version: &str, storage_version: &str) -> Value {
    let mut resource = json!({ "group": GROUP, "resource": "runners" });
    if group_version.ends_with("/v1alpha1") {
        resource["version"] = json!(storage_version);
    }
    json!({ "apiVersion": group_version, "kind": KIND,
            "metadata": { "generateName": "runners-" }, "spec": { "resource": resource } })
}

/// `Succeeded`, `Failed` (with its message), or `None` while running.
pub fn outcome(object: &Value) -> Option<Result<(), String>> {
    let conditions = object["status"]["conditions"].as_array()?;
    let is_true = |t: &str| conditions.iter().find(|c| c["type"] == t && c["status"] == "True");
    if is_true("Succeeded").is_some() {
        return Some(Ok(()));
    }
    is_true("Failed").map(|c| Err(c["message"].as_str().unwrap_or("no message").to_string()))
}

/// True when `object` migrates Runners.
fn migrates_runners(object: &Value) -> bool {
    object["spec"]["resource"]["group"] == GROUP && object["spec"]["resource"]["resource"] == "runners"
}

/// Starts (or picks up) the migration of Runners and follows it until it
/// ends or `cancel` completes; `progress` gets a line per poll.
pub async fn run(
    client: &Client,
    group_version: &str,
    storage_version: &str,
    cancel: impl Future<Output = ()>,
    progress: &mut dyn FnMut(&str),
) -> Result<Run, Error> {
    let (group, version) = group_version.split_once('/').unwrap_or((SVM_GROUP, group_version));
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, KIND),
        "storageversionmigrations",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let existing = api.list(&Default::default()).await.map_err(|e| Error::api("list", KIND, "", "", e))?;
    let unfinished = existing.items.into_iter().find(|o| {
        let v = serde_json::to_value(o).unwrap_or_default();
        migrates_runners(&v) && outcome(&v).is_none()
    });
    let name = match unfinished.and_then(|o| o.metadata.name) {
        Some(name) => name,
        None => {
            let object: DynamicObject = serde_json::from_value(manifest(group_version, storage_version))
                .map_err(|e| Error::api("encode", KIND, "", "", kube::Error::SerdeError(e)))?;
            let made = api
                .create(&PostParams::default(), &object)
                .await
                .map_err(|e| Error::api("create", KIND, "", "", e))?;
            made.metadata.name.unwrap_or_default()
        }
    };
    let follow = async {
        loop {
            let object = api.get(&name).await.map_err(|e| Error::api("get", KIND, "", &name, e))?;
            let v = serde_json::to_value(&object).unwrap_or_default();
            match outcome(&v) {
                Some(Ok(())) => return Ok(()),
                Some(Err(message)) => return Err(Error::MigrationFailed { name: name.clone(), message }),
                None => progress(&format!("{KIND} {name}: running")),
            }
            tokio::time::sleep(POLL).await;
        }
    };
    let interrupted = tokio::select! {
        r = follow => { r?; false }
        () = cancel => true,
    };
    Ok(Run { name, interrupted })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alpha_api_names_the_version_to_migrate_to_and_later_ones_do_not() {
        let alpha = manifest("storagemigration.k8s.io/v1alpha1", "v1beta1");
        assert_eq!(
            alpha["spec"]["resource"],
            json!({ "group": GROUP, "resource": "runners", "version": "v1beta1" })
        );
        let beta = manifest("storagemigration.k8s.io/v1beta1", "v1beta1");
        assert_eq!(beta["spec"]["resource"], json!({ "group": GROUP, "resource": "runners" }));
        assert!(migrates_runners(&beta));
    }

    #[test]
    fn the_outcome_is_read_from_the_succeeded_and_failed_conditions() {
        let with = |conditions: Value| json!({ "status": { "conditions": conditions } });
        assert_eq!(outcome(&json!({})), None);
        assert_eq!(outcome(&with(json!([{ "type": "Running", "status": "True" }]))), None);
        assert_eq!(outcome(&with(json!([{ "type": "Succeeded", "status": "True" }]))), Some(Ok(())));
        let failed = with(json!([{ "type": "Failed", "status": "True", "message": "gone" }]));
        assert_eq!(outcome(&failed), Some(Err("gone".into())));
    }
}
