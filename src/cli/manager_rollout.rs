//! `install --with-manager --wait`: waits until the manager Deployment's
//! rollout is complete, as `kubectl rollout status` would, and when it is
//! not, says why with its Pods' problems (an image that cannot be pulled, a
//! preflight that exits for lack of RBAC and so crash-loops).

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::error::{Error, Result};
use crate::client::webhook_probe::{self, Outcome};
use crate::error::FromApi;
use crate::manager::pod_view::PodView;
use crate::manifests::{MANAGER_NAME, MANAGER_NAMESPACE};
use crate::rollout::{self, Rollout};

/// Polls every second until the rollout completes, its progress deadline
/// passes, or `timeout` does.
pub async fn wait(client: &kube::Client, timeout: Duration) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let deadline = Instant::now() + timeout;
    loop {
        let d = deployments
            .get_opt(MANAGER_NAME)
            .await
            .map_err(|e| Error::api("get", "Deployment", MANAGER_NAMESPACE, MANAGER_NAME, e))?;
        let desired = d.as_ref().and_then(|d| d.spec.replicas).unwrap_or(1);
        let r = rollout::of(d.as_ref(), desired);
        if r.complete {
            return Ok(());
        }
        if r.deadline_exceeded.is_some() || Instant::now() >= deadline {
            let problems = pod_problems(client).await;
            return Err(Error::ManagerNotRolledOut { after: timeout, detail: why(&r, desired, &problems) });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// After the rollout: until the apiserver can call the webhooks
/// ([`webhook_probe::until_answered`], a dry-run create at each version the
/// installed CRD serves), or `timeout`. A Ready manager is not yet
/// reachable: the Service's endpoint and the node's proxy rules follow it
/// by a moment, and with `failurePolicy: Fail` every Runner write is
/// refused meanwhile. A dry run refused for another reason (no permission
/// to create Runners in the manager's namespace) says nothing about the
/// webhooks: no wait.
pub async fn wait_webhooks(client: &kube::Client, timeout: Duration) -> Result<()> {
    let versions = webhook_probe::versions(Some(&crate::manifests::crd_with_webhook()));
    let outcomes = webhook_probe::until_answered(client, MANAGER_NAMESPACE, &versions, timeout).await;
    let why: Vec<String> = outcomes
        .iter()
        .zip(&versions)
        .filter_map(|(o, v)| match o {
            Outcome::Failed(f) => Some(format!("{} (the apiserver: {})", f.describe(), f.message)),
            Outcome::Unserved => Some(format!("the apiserver does not serve Runners at {v} yet")),
            Outcome::Passed | Outcome::NotChecked(_) => None,
        })
        .collect();
    if why.is_empty() {
        return Ok(());
    }
    Err(Error::ManagerNotRolledOut {
        after: timeout,
        detail: format!("the webhooks do not answer: {}", why.join("; ")),
    })
}

/// (Pod name, reason, message) of each manager Pod that is stuck.
async fn pod_problems(client: &kube::Client) -> Vec<(String, String, String)> {
    let pods: Api<PodView> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let lp = ListParams::default().labels("app.kubernetes.io/component=manager");
    let Ok(list) = pods.list(&lp).await else { return vec![] };
    list.items
        .iter()
        .filter_map(|p| p.problem().map(|(reason, message)| (p.name_any(), reason, message)))
        .collect()
}

/// Pure: the rollout's counts and each stuck Pod, in one sentence.
fn why(r: &Rollout, desired: i32, problems: &[(String, String, String)]) -> String {
    let mut out = match &r.deadline_exceeded {
        Some(m) => format!("progress deadline exceeded ({m})"),
        None => format!("{}/{desired} replicas updated, {} available", r.updated, r.available),
    };
    for (pod, reason, message) in problems {
        out.push_str(&format!("; Pod {pod}: {reason}"));
        if !message.is_empty() {
            out.push_str(&format!(" ({message})"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_names_the_counts_and_each_stuck_pod() {
        let r = rollout::of::<Deployment>(None, 1);
        let problems = vec![("mgr-1".into(), "ImagePullBackOff".into(), "pull access denied".into())];
        let s = why(&r, 1, &problems);
        assert!(s.starts_with("0/1 replicas updated, 0 available"), "{s}");
        assert!(s.contains("Pod mgr-1: ImagePullBackOff (pull access denied)"), "{s}");
    }
}
