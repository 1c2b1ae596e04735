//! `kubectl runner e2e`: proves the whole Runner lifecycle on whatever
//! cluster the kubeconfig points at, in a temporary namespace, and cleans up
//! only what it created (the namespace; the CRD only if it installed it).
//!
//! ```text
//! preflight ─► namespace (+CRD) ─► manager (in-process | running) ─► steps ─► cleanup
//!                                                                    │ each: run, time, oracle
//!                                                                    ▼
//!                                                              Report (data: the CLI renders it)
//! ```
pub mod cluster;
pub mod ctx;
pub mod error;
pub mod oracle;
pub mod report;
pub mod steps;
pub mod webhooks;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

pub use report::{Report, StepResult};

use crate::api::CRD_NAME;
use crate::error::FromApi;
pub use error::{Error, Result};

/// Label on the namespaces e2e creates.
pub const E2E_LABEL: &str = "lab.cloudlab.training/e2e";

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// The kubeconfig context in use (the report names it).
    pub context: String,
    /// Use the manager already running in the cluster instead of starting one.
    pub use_running_manager: bool,
    /// Leave the namespace (and CRD) for inspection.
    pub keep: bool,
    /// The image the Runners use (kwok and kind both accept any for the
    /// lifecycle; on kind it must be pullable).
    pub image: String,
    /// The image the rollout step changes to.
    pub image_update: String,
    /// Per-step timeout.
    pub timeout: Duration,
    /// Where to dump Events and objects when a step fails.
    pub artifacts: std::path::PathBuf,
    /// Annotations of the namespace e2e creates: what a cluster's admission
    /// reads there (e.g. PodNodeSelector's node selector) applies to the
    /// test Pods.
    pub namespace_annotations: BTreeMap<String, String>,
    /// Serve the webhooks from e2e's own manager (`--local-webhooks`): its
    /// Lease and probe go to the e2e namespace.
    pub local_webhooks: Option<crate::manager::webhook::local::LocalConfig>,
}

/// Runs preflight, the steps, and cleanup. Returns the report whether the
/// steps passed or not; Err only when setup itself failed.
pub async fn run(client: Client, opts: Options, progress: &dyn Fn(&StepResult)) -> Result<Report> {
    let started = Instant::now();
    let cluster = cluster::Cluster::detect(&client, &opts.context).await;
    let ns = format!("runner-e2e-{:06x}", rand::random::<u32>() & 0xffffff);
    let installed_crd = set_up(&client, &ns, &opts.namespace_annotations).await?;
    let manager = (!opts.use_running_manager).then(|| InProcessManager::start(&client, &ns, &opts));
    let ctx =
        steps::Ctx { client: client.clone(), ns: ns.clone(), opts: opts.clone(), cluster: cluster.clone() };
    let mut results = Vec::new();
    let interrupted = tokio::select! {
        _ = run_steps(&ctx, progress, &mut results) => false,
        _ = tokio::signal::ctrl_c() => true,
    };
    let failed = interrupted || results.iter().any(|r| !r.ok);
    let artifacts = if failed { steps::dump_artifacts(&ctx).await.ok() } else { None };
    if let Some(manager) = manager {
        results.extend(manager.stop().await);
    }
    if !opts.keep {
        clean_up(&client, &ns, installed_crd).await;
    }
    Ok(Report {
        cluster,
        namespace: ns,
        installed_crd,
        kept: opts.keep,
        interrupted,
        steps: results,
        seconds: started.elapsed().as_secs_f64(),
        artifacts: artifacts.map(|p| p.display().to_string()),
    })
}

/// The namespace, and the CRD when absent; true when this run installed
/// the CRD. A failure removes the namespace again.
async fn set_up(client: &Client, ns: &str, annotations: &BTreeMap<String, String>) -> Result<bool> {
    create_namespace(client, ns, annotations).await?;
    match ensure_crd(client).await {
        Ok(installed) => Ok(installed),
        Err(e) => {
            delete_namespace(client, ns).await;
            Err(e)
        }
    }
}

/// Removes the namespace, and the CRD when this run installed it.
async fn clean_up(client: &Client, ns: &str, installed_crd: bool) {
    delete_namespace(client, ns).await;
    if installed_crd {
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let _ = crds.delete(CRD_NAME, &DeleteParams::default()).await;
    }
}

/// A manager reconciling only the e2e namespace, in this process.
struct InProcessManager {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<crate::manager::Result<()>>,
}

impl InProcessManager {
    fn start(client: &Client, ns: &str, opts: &Options) -> InProcessManager {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let mut cfg = crate::manager::Config::namespaced(ns);
        cfg.local_webhooks =
            opts.local_webhooks.clone().map(|l| crate::manager::webhook::local::LocalConfig {
                lease_namespace: ns.into(),
                probe_namespace: ns.into(),
                ..l
            });
        let task = tokio::spawn(crate::manager::run(client.clone(), cfg, async move {
            let _ = stopped.await;
        }));
        InProcessManager { stop, task }
    }

    /// Stops it; a failed step named "manager" when it ended in an error.
    async fn stop(self) -> Option<StepResult> {
        let _ = self.stop.send(());
        match self.task.await {
            Ok(Err(e)) => Some(StepResult {
                name: "manager".into(),
                ok: false,
                skipped: false,
                seconds: 0.0,
                detail: e.to_string(),
            }),
            _ => None,
        }
    }
}

/// Runs the steps in order into `results`, reporting each, until one fails.
async fn run_steps(ctx: &steps::Ctx, progress: &dyn Fn(&StepResult), results: &mut Vec<StepResult>) {
    for step in steps::all() {
        let r = run_step(ctx, &step).await;
        progress(&r);
        let ok = r.ok;
        results.push(r);
        if !ok {
            break;
        }
    }
}

/// One step under the step timeout; once it passes, the namespace must also
/// show no `diagnose` errors ([`oracle`]).
async fn run_step(ctx: &steps::Ctx, step: &steps::Step) -> StepResult {
    let t = Instant::now();
    let timeout = ctx.opts.timeout;
    let (mut ok, mut detail, skipped) = match tokio::time::timeout(timeout, (step.run)(ctx)).await {
        Ok(Ok(detail)) => (true, detail, false),
        Ok(Err(e @ Error::NotApplicable(_))) => (true, e.to_string(), true),
        Ok(Err(e)) => (false, e.to_string(), false),
        Err(_) => (false, format!("timed out after {timeout:?}"), false),
    };
    if ok {
        let errors = oracle::errors(&ctx.client, &ctx.ns, ctx.opts.use_running_manager).await;
        if !errors.is_empty() {
            ok = false;
            detail = format!("diagnose found errors: {}", errors.join("; "));
        }
    }
    StepResult { name: step.name.to_string(), ok, skipped, seconds: t.elapsed().as_secs_f64(), detail }
}

/// A context name that looks like production: e2e refuses it without --yes.
pub fn looks_like_production(context: &str) -> bool {
    let c = context.to_lowercase();
    ["prod", "production", "live"]
        .iter()
        .any(|w| c.split(|ch: char| !ch.is_alphanumeric()).any(|part| part == *w))
}

async fn create_namespace(client: &Client, ns: &str, annotations: &BTreeMap<String, String>) -> Result<()> {
    let labels = [(E2E_LABEL.to_string(), "true".to_string())].into();
    let obj = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.to_string()),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then(|| annotations.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|e| Error::api("create", "Namespace", "", ns, e))?;
    Ok(())
}

async fn delete_namespace(client: &Client, ns: &str) {
    let _ = Api::<Namespace>::all(client.clone()).delete(ns, &DeleteParams::background()).await;
}

/// Installs the CRD when absent; true when this run installed it.
/// How long e2e waits for a CRD being deleted to be gone.
const CRD_GONE: Duration = Duration::from_secs(60);

async fn ensure_crd(client: &Client) -> Result<bool> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let get =
        || async { crds.get_opt(CRD_NAME).await.map_err(|e| Error::api("get", "CRD", "", CRD_NAME, e)) };
    // One being deleted (the previous e2e run installed it and removed it
    // on its way out) refuses every create: wait until it is gone.
    let deadline = std::time::Instant::now() + CRD_GONE;
    loop {
        match get().await? {
            None => break,
            Some(crd) if crd.metadata.deletion_timestamp.is_none() => return Ok(false),
            Some(_) if std::time::Instant::now() >= deadline => {
                return Err(Error::StepFailed(format!(
                    "the Runner CRD {CRD_NAME} is still being deleted after {CRD_GONE:?} (Runners with a finalizer left?)"
                )));
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    let crd = crate::manifests::crd();
    crds.patch(CRD_NAME, &PatchParams::apply(crate::api::FIELD_MANAGER), &Patch::Apply(&crd))
        .await
        .map_err(|e| Error::api("apply", "CRD", "", CRD_NAME, e))?;
    crate::client::wait_crd_established(client, Duration::from_secs(30)).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_looking_contexts_are_recognised() {
        for c in ["prod", "gke_acme_prod-eu", "Production", "live-cluster"] {
            assert!(looks_like_production(c), "{c}");
        }
        for c in ["kind-handbook-lab", "dev", "staging", "product-demo", "kwok-local"] {
            assert!(!looks_like_production(c), "{c}");
        }
    }
}
