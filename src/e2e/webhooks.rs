//! e2e's webhook step: whichever manager serves the webhooks (a local
//! `run-manager --local-webhooks`, e2e's own with `--local-webhooks`, or
//! the in-cluster one behind its Service), an old client's Runner is
//! converted and a host another Runner holds is refused. With no webhook
//! registered the step is skipped, saying how to register one: a cluster
//! installed without the manager serves only the storage version.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

use super::ctx::{Ctx, until};
use super::error::{Error, Result};
use crate::api::{CRD_NAME, GROUP, Runner, RunnerSpec};
use crate::client::webhook_probe::{self, Outcome};
use crate::error::FromApi;
use crate::webhook::VALIDATING_CONFIG;
use crate::webhook::local::{Holder, SAVED_ANNOTATION, Saved};

const OLD: &str = "e2e-old-client";
const DUP: &str = "e2e-same-host";
/// How long the webhooks may take to become reachable.
const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// Who serves the webhooks, as the registrations say, and the versions to
/// probe them at; None when the CRD does not convert through a webhook or
/// no webhook configuration exists.
async fn served_by(c: &Ctx) -> Result<Option<(String, Vec<String>)>> {
    let crd = Api::<CustomResourceDefinition>::all(c.client.clone())
        .get(CRD_NAME)
        .await
        .map_err(|e| Error::api("get", "CustomResourceDefinition", "", CRD_NAME, e))?;
    let vwc = Api::<ValidatingWebhookConfiguration>::all(c.client.clone())
        .get_opt(VALIDATING_CONFIG)
        .await
        .map_err(|e| Error::api("get", "ValidatingWebhookConfiguration", "", VALIDATING_CONFIG, e))?;
    let converts = crd.spec.conversion.as_ref().is_some_and(|c| c.strategy == "Webhook");
    if !converts || vwc.is_none() {
        return Ok(None);
    }
    let local = crd.metadata.annotations.as_ref().and_then(|a| a.get(SAVED_ANNOTATION));
    let server = match local.and_then(|v| serde_json::from_str::<Saved<serde_json::Value>>(v).ok()) {
        Some(Saved { by: Holder { holder, url, .. }, .. }) => {
            format!("the local manager {holder:?} at {url}")
        }
        None => "the in-cluster manager".into(),
    };
    Ok(Some((server, webhook_probe::versions(Some(&crd)))))
}

/// The apiserver can call both webhooks: a dry-run create at each version
/// ([`webhook_probe`], what diagnose and `install --wait` ask), retried
/// for a moment as a just-started manager becomes reachable.
async fn answered(c: &Ctx, versions: &[String]) -> Result<()> {
    let outcomes = webhook_probe::until_answered(&c.client, &c.ns, versions, ANSWER_WITHIN).await;
    for o in outcomes {
        if let Outcome::Failed(f) = o {
            return Err(Error::StepFailed(format!("{} (the apiserver: {})", f.describe(), f.message)));
        }
    }
    Ok(())
}

/// The step.
pub async fn webhooks(c: &Ctx) -> Result<String> {
    let Some((server, versions)) = served_by(c).await? else {
        return Err(Error::NotApplicable(
            "no webhook is registered (`kubectl runner install --with-manager`, \
             `kubectl runner run-manager --local-webhooks`, or `e2e --local-webhooks`)"
                .into(),
        ));
    };
    answered(c, &versions).await?;
    let host = format!("{}.e2e.example", c.ns);
    let gvk = GroupVersionKind::gvk(GROUP, "v1alpha1", "Runner");
    let old_api: Api<DynamicObject> =
        Api::namespaced_with(c.client.clone(), &c.ns, &ApiResource::from_gvk_with_plural(&gvk, "runners"));
    let old: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Runner",
        "metadata": { "name": OLD },
        "spec": { "image": c.opts.image, "replicas": 1, "port": 80, "host": host },
    }))
    .map_err(|source| Error::Encode { what: "a v1alpha1 Runner", source })?;
    old_api
        .create(&PostParams::default(), &old)
        .await
        .map_err(|e| Error::api("create", "Runner (v1alpha1)", &c.ns, OLD, e))?;
    let runners: Api<Runner> = Api::namespaced(c.client.clone(), &c.ns);
    let stored = runners.get(OLD).await.map_err(|e| Error::api("get", "Runner", &c.ns, OLD, e))?;
    if stored.spec.expose.hosts != [host.clone()] {
        return Err(Error::StepFailed(format!(
            "the v1alpha1 host {host} reads as hosts {:?} in {}",
            stored.spec.expose.hosts,
            crate::api::VERSION
        )));
    }
    // The webhook's index follows Runners by watch: the refusal comes once
    // it has seen the first (a dry run, so nothing is stored either way).
    let mut dup = Runner::new(DUP, RunnerSpec::new(c.opts.image.clone()));
    dup.spec.expose.hosts = vec![host.clone()];
    let dry = PostParams { dry_run: true, ..Default::default() };
    let refusal = until(|| {
        let (runners, dup, dry) = (runners.clone(), dup.clone(), dry.clone());
        async move {
            match runners.create(&dry, &dup).await {
                Err(kube::Error::Api(s)) if s.code < 500 => Some(Ok(s.message.clone())),
                Err(e) => Some(Err(Error::api("create", "Runner", &c.ns, DUP, e))),
                Ok(_) => None,
            }
        }
    })
    .await?;
    if !refusal.contains(OLD) {
        return Err(Error::StepFailed(format!(
            "the second Runner with host {host} was refused, but not naming {OLD}: {refusal}"
        )));
    }
    runners
        .delete(OLD, &DeleteParams::default())
        .await
        .map_err(|e| Error::api("delete", "Runner", &c.ns, OLD, e))?;
    until(|| {
        let runners = runners.clone();
        async move { runners.get_opt(OLD).await.ok()?.is_none().then_some(()) }
    })
    .await;
    Ok(format!("served by {server}: a v1alpha1 Runner converted, a taken host refused naming its holder"))
}
