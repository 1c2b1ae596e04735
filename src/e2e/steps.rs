//! The lifecycle steps of `kubectl runner e2e`, in order. Each step acts,
//! then waits for the cluster to show the result, and returns a short detail.

use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::error::{Error, Result};
use crate::api::{Runner, RunnerSpec, condition};
use crate::client::children::{self, Children};
use crate::error::FromApi;
use crate::ownership::{Ownership, ownership};

pub use super::ctx::{Ctx, until};

type StepFuture<'a> = Pin<Box<dyn Future<Output = Result<String>> + Send + 'a>>;

/// One named step.
pub struct Step {
    pub name: &'static str,
    pub run: for<'a> fn(&'a Ctx) -> StepFuture<'a>,
}

const WEB: &str = "e2e-web";
const SQUAT: &str = "e2e-squatter";

/// The steps in order.
pub fn all() -> Vec<Step> {
    vec![
        Step { name: "create a Runner and wait until Ready", run: |c| Box::pin(create_and_ready(c)) },
        Step {
            name: "every wanted child controlled by the Runner; Service has a ClusterIP",
            run: |c| Box::pin(children_owned(c)),
        },
        Step { name: "scale 1 -> 3 -> 2; a PodDisruptionBudget from 2", run: |c| Box::pin(scale(c)) },
        Step { name: "delete the Deployment; it comes back", run: |c| Box::pin(self_heal(c)) },
        Step { name: "change the image; it rolls out", run: |c| Box::pin(rollout(c)) },
        Step {
            name: "a same-name foreign Deployment is refused and left intact",
            run: |c| Box::pin(foreign(c)),
        },
        Step {
            name: "webhooks: an old client's Runner converts, a taken host is refused",
            run: |c| Box::pin(super::webhooks::webhooks(c)),
        },
        Step {
            name: "delete the Runner; it and its children are gone, its record stays",
            run: |c| Box::pin(delete(c)),
        },
    ]
}

fn runners(c: &Ctx) -> Api<Runner> {
    Api::namespaced(c.client.clone(), &c.ns)
}

fn ns_api<K>(c: &Ctx) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    Api::namespaced(c.client.clone(), &c.ns)
}

/// Until the Runner has `replicas` ready, or a Pod of the namespace cannot
/// get its image (that never heals by waiting).
async fn wait_available(c: &Ctx, name: &str, replicas: i32) -> Result<Runner> {
    let api = runners(c);
    until(|| {
        let api = api.clone();
        async move {
            if let Some(m) = super::cluster::missing_image(&c.client, &c.ns, &c.cluster).await {
                return Some(Err(Error::StepFailed(m)));
            }
            let r = api.get(name).await.ok()?;
            let s = r.status.as_ref()?;
            (crate::api::is_ready(&r) && s.ready_replicas == replicas).then_some(Ok(r))
        }
    })
    .await
}

async fn create_and_ready(c: &Ctx) -> Result<String> {
    let spec = RunnerSpec::new(c.opts.image.clone());
    runners(c)
        .create(&PostParams::default(), &Runner::new(WEB, spec))
        .await
        .map_err(|e| Error::api("create", "Runner", &c.ns, WEB, e))?;
    let r = wait_available(c, WEB, 1).await?;
    Ok(r.status.and_then(|s| s.message).unwrap_or_default())
}

/// Every child kind the Runner's spec wants exists and is the Runner's;
/// no other kind is there. Returns the Runner's UID and its children. A
/// kind the user may not read is not checked ([`Children::unreadable`]).
async fn wanted_children(c: &Ctx) -> Result<(String, Children)> {
    let r = runners(c).get(WEB).await.map_err(|e| Error::api("get", "Runner", &c.ns, WEB, e))?;
    let uid = r.uid().unwrap_or_default();
    let found = children::fetch(&c.client, &c.ns, WEB).await?;
    for kind in crate::kinds::all().iter().filter(|k| found.is_readable(k.kind())) {
        let ours = found.get(kind.kind()).is_some_and(|o| ownership(&o.metadata, &uid) == Ownership::Ours);
        let gone = found.get(kind.kind()).is_none_or(|o| o.metadata.deletion_timestamp.is_some());
        if kind.wanted(&r) && !ours {
            return Err(Error::StepFailed(format!(
                "{} {WEB} is not controlled by Runner UID {uid}",
                kind.kind()
            )));
        }
        if !kind.wanted(&r) && !gone {
            return Err(Error::StepFailed(format!("{} {WEB} exists, the spec wants none", kind.kind())));
        }
    }
    Ok((uid, found))
}

async fn children_owned(c: &Ctx) -> Result<String> {
    let (uid, found) = wanted_children(c).await?;
    let mut ip = "not read".to_string();
    if found.is_readable("Service") {
        let s =
            ns_api::<Service>(c).get(WEB).await.map_err(|e| Error::api("get", "Service", &c.ns, WEB, e))?;
        ip = s.spec.and_then(|s| s.cluster_ip).unwrap_or_default();
        if ip.is_empty() || ip == "None" {
            return Err(Error::StepFailed("the Service has no ClusterIP".into()));
        }
    }
    // Said once, here: the later steps skip the same kinds silently.
    let unchecked: Vec<String> =
        found.unreadable().iter().map(|n| format!("{} ({} {})", n.kind, n.verb, n.resource)).collect();
    match unchecked.is_empty() {
        true => Ok(format!("uid {uid}, clusterIP {ip}")),
        false => {
            Ok(format!("uid {uid}, clusterIP {ip}; not readable, so not checked: {}", unchecked.join(", ")))
        }
    }
}

async fn scale(c: &Ctx) -> Result<String> {
    for n in [3, 2] {
        runners(c)
            .patch_scale(WEB, &PatchParams::default(), &Patch::Merge(json!({ "spec": { "replicas": n } })))
            .await
            .map_err(|e| Error::api("scale", "Runner", &c.ns, WEB, e))?;
        wait_available(c, WEB, n).await?;
        // The manager writes the children before the status says Ready.
        wanted_children(c).await?;
    }
    Ok("2/2 ready, with its PodDisruptionBudget".into())
}

async fn self_heal(c: &Ctx) -> Result<String> {
    let deps = ns_api::<Deployment>(c);
    let old = deps.get(WEB).await.map_err(|e| Error::api("get", "Deployment", &c.ns, WEB, e))?.uid();
    deps.delete(WEB, &DeleteParams::background())
        .await
        .map_err(|e| Error::api("delete", "Deployment", &c.ns, WEB, e))?;
    let new = until(|| {
        let (deps, old) = (deps.clone(), old.clone());
        async move { deps.get_opt(WEB).await.ok().flatten().filter(|d| d.uid() != old).map(|d| d.uid()) }
    })
    .await;
    wait_available(c, WEB, 2).await?;
    Ok(format!("re-created as {}", new.unwrap_or_default()))
}

async fn rollout(c: &Ctx) -> Result<String> {
    let image = c.opts.image_update.clone();
    runners(c)
        .patch(WEB, &PatchParams::default(), &Patch::Merge(json!({ "spec": { "image": image } })))
        .await
        .map_err(|e| Error::api("patch", "Runner", &c.ns, WEB, e))?;
    let r = wait_available(c, WEB, 2).await?;
    let d =
        ns_api::<Deployment>(c).get(WEB).await.map_err(|e| Error::api("get", "Deployment", &c.ns, WEB, e))?;
    let live = d.spec.template.spec.and_then(|s| s.containers.first().and_then(|c| c.image.clone()));
    if live.as_deref() != Some(image.as_str()) {
        return Err(Error::StepFailed(format!("Deployment image is {live:?}, want {image}")));
    }
    Ok(format!("{} updated replicas on {image}", r.status.map(|s| s.updated_replicas).unwrap_or(0)))
}

async fn foreign(c: &Ctx) -> Result<String> {
    let squatter: Deployment = serde_json::from_value(json!({
        "metadata": { "name": SQUAT, "labels": { "app": SQUAT } },
        "spec": { "replicas": 1, "selector": { "matchLabels": { "app": SQUAT } },
                  "template": { "metadata": { "labels": { "app": SQUAT } },
                                "spec": { "containers": [{ "name": "c", "image": c.opts.image }] } } }
    }))
    .map_err(|source| Error::Encode { what: "the foreign Deployment", source })?;
    let deps = ns_api::<Deployment>(c);
    let before = deps
        .create(&PostParams::default(), &squatter)
        .await
        .map_err(|e| Error::api("create", "Deployment", &c.ns, SQUAT, e))?;
    let spec = RunnerSpec::new(c.opts.image.clone());
    let api = runners(c);
    api.create(&PostParams::default(), &Runner::new(SQUAT, spec))
        .await
        .map_err(|e| Error::api("create", "Runner", &c.ns, SQUAT, e))?;
    until(|| {
        let api = api.clone();
        async move {
            let r = api.get(SQUAT).await.ok()?;
            let refused = r.status.as_ref()?.conditions.iter().any(|c| {
                c.type_ == condition::CHILDREN_OWNED && c.reason == condition::REASON_ADOPTION_REFUSED
            });
            refused.then_some(())
        }
    })
    .await;
    api.delete(SQUAT, &DeleteParams::default())
        .await
        .map_err(|e| Error::api("delete", "Runner", &c.ns, SQUAT, e))?;
    until(|| {
        let api = api.clone();
        async move { api.get_opt(SQUAT).await.ok().and_then(|o| o.is_none().then_some(())) }
    })
    .await;
    let after = deps.get(SQUAT).await.map_err(|e| Error::api("get", "Deployment", &c.ns, SQUAT, e))?;
    if after.uid() != before.uid()
        || after.metadata.owner_references.is_some()
        || after.metadata.generation != before.metadata.generation
    {
        return Err(Error::StepFailed("the foreign Deployment was changed or replaced".into()));
    }
    Ok("AdoptionRefused; the squatter survived the Runner's deletion".into())
}

async fn delete(c: &Ctx) -> Result<String> {
    let api = runners(c);
    let uid = api.get(WEB).await.map_err(|e| Error::api("get", "Runner", &c.ns, WEB, e))?.uid();
    api.delete(WEB, &DeleteParams::default())
        .await
        .map_err(|e| Error::api("delete", "Runner", &c.ns, WEB, e))?;
    until(|| {
        let api = api.clone();
        async move {
            let gone = api.get_opt(WEB).await.ok()?.is_none()
                && children::fetch(&c.client, &c.ns, WEB).await.ok()?.is_empty();
            gone.then_some(())
        }
    })
    .await;
    let entry = recorded(c, uid.as_deref().unwrap_or_default()).await?;
    // The last spec: the rollout step's image, the scale step's count.
    if (entry.image.as_str(), entry.replicas) != (c.opts.image_update.as_str(), 2) {
        return Err(Error::StepFailed(format!(
            "the deletion record holds image {} and {} replicas, want {} and 2",
            entry.image, entry.replicas, c.opts.image_update
        )));
    }
    Ok(format!("the Runner and every child gone; recorded as {}", entry.key()))
}

/// The entry of the Runner with `uid` in the namespace's deletion record.
async fn recorded(c: &Ctx, uid: &str) -> Result<crate::deletion_record::Entry> {
    use crate::deletion_record::{CONFIGMAP, entries};
    let cm = ns_api::<ConfigMap>(c)
        .get_opt(CONFIGMAP)
        .await
        .map_err(|e| Error::api("get", "ConfigMap", &c.ns, CONFIGMAP, e))?
        .ok_or_else(|| {
            Error::StepFailed(format!("no ConfigMap {CONFIGMAP}: the deletion was not recorded"))
        })?;
    entries(&cm).0.into_iter().find(|e| e.uid == uid).ok_or_else(|| {
        Error::StepFailed(format!("ConfigMap {CONFIGMAP} holds no entry for Runner {WEB} (UID {uid})"))
    })
}

/// Writes Events, Runners, Deployments and Pods of the namespace as YAML to
/// `<artifacts>/<namespace>/`, for a failed run.
pub async fn dump_artifacts(c: &Ctx) -> Result<std::path::PathBuf> {
    let dir = c.opts.artifacts.join(&c.ns);
    std::fs::create_dir_all(&dir).map_err(|source| Error::Artifacts { dir: dir.clone(), source })?;
    let lp = ListParams::default();
    let write = |name: &str, yaml: String| std::fs::write(dir.join(name), yaml);
    let to_yaml = |v: &dyn erased::Yaml| v.yaml();
    if let Ok(l) = ns_api::<Event>(c).list(&lp).await {
        let _ = write("events.yaml", to_yaml(&l.items));
    }
    if let Ok(l) = runners(c).list(&lp).await {
        let _ = write("runners.yaml", to_yaml(&l.items));
    }
    if let Ok(l) = ns_api::<Deployment>(c).list(&lp).await {
        let _ = write("deployments.yaml", to_yaml(&l.items));
    }
    if let Ok(l) = ns_api::<Pod>(c).list(&lp).await {
        let _ = write("pods.yaml", to_yaml(&l.items));
    }
    Ok(dir)
}

mod erased {
    /// Object-safe "serialize to YAML" for the dump.
    pub trait Yaml {
        fn yaml(&self) -> String;
    }
    impl<T: serde::Serialize> Yaml for T {
        fn yaml(&self) -> String {
            serde_yaml::to_string(self).unwrap_or_default()
        }
    }
}
