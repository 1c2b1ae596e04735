//! `diagnose --fix`: removes our finalizer from a Runner stuck Terminating,
//! and only when the promise it stands for is already kept (the children are
//! gone). The candidates come from the snapshot (pure); the removal re-reads
//! the Runner and its children right before patching, and the patch carries the
//! resourceVersion of that read, so a Runner re-created or changed in
//! between is never touched.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};

use super::checks::finalizer;
use super::snapshot::Snapshot;
use crate::api::{FINALIZER, RUNNER_UID_LABEL, Runner};
use crate::error::{Error, Result};

/// A Runner whose finalizer may be removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalizerFix {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// What the finalizer promised, to show before asking.
    pub promise: String,
}

/// Stuck Runners whose children are all gone.
pub fn candidates(s: &Snapshot) -> Vec<FinalizerFix> {
    s.runners
        .iter()
        .filter(|rs| finalizer::stuck_for(s, rs).is_some() && finalizer::children_gone(rs))
        .map(|rs| FinalizerFix {
            namespace: rs.runner.namespace().unwrap_or_default(),
            name: rs.runner.name_any(),
            uid: rs.runner.metadata.uid.clone().unwrap_or_default(),
            promise: finalizer::promise(rs),
        })
        .collect()
}

/// Re-checks that no child labelled with the Runner's UID remains, then
/// removes exactly our finalizer.
pub async fn remove_finalizer(client: &Client, fix: &FinalizerFix) -> Result<()> {
    let (ns, name) = (fix.namespace.as_str(), fix.name.as_str());
    let runners: Api<Runner> = Api::namespaced(client.clone(), ns);
    let r = runners.get(name).await.map_err(|e| Error::api("get", "Runner", ns, name, e))?;
    if r.metadata.uid.as_deref() != Some(fix.uid.as_str()) {
        return Err(Error::FixRecreated { namespace: ns.to_string(), name: name.to_string() });
    }
    if !r.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let remaining = remaining_children(client, ns, &fix.uid).await?;
    if !remaining.is_empty() {
        return Err(Error::FixChildrenRemain {
            namespace: ns.to_string(),
            name: name.to_string(),
            children: remaining,
        });
    }
    // The resourceVersion makes the patch conditional: if anything changed
    // since the read above, the apiserver answers 409 and nothing is removed.
    let keep: Vec<&String> = r.finalizers().iter().filter(|f| *f != FINALIZER).collect();
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": r.metadata.resource_version, "finalizers": keep }
    });
    runners
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::api("remove the finalizer from", "Runner", ns, name, e))?;
    Ok(())
}

/// `Deployment ns/x`-style names of objects still labelled with `uid`.
async fn remaining_children(client: &Client, ns: &str, uid: &str) -> Result<Vec<String>> {
    let lp = ListParams::default().labels(&format!("{RUNNER_UID_LABEL}={uid}"));
    let list_err = |kind: &'static str| {
        move |e| Error::api("list", kind, ns, &format!("-l {RUNNER_UID_LABEL}={uid}"), e)
    };
    let d = Api::<Deployment>::namespaced(client.clone(), ns)
        .list_metadata(&lp)
        .await
        .map_err(list_err("Deployment"))?;
    let s = Api::<Service>::namespaced(client.clone(), ns)
        .list_metadata(&lp)
        .await
        .map_err(list_err("Service"))?;
    let i = Api::<Ingress>::namespaced(client.clone(), ns)
        .list_metadata(&lp)
        .await
        .map_err(list_err("Ingress"))?;
    let mut out = vec![];
    out.extend(d.items.iter().map(|m| format!("Deployment {ns}/{}", m.name_any())));
    out.extend(s.items.iter().map(|m| format!("Service {ns}/{}", m.name_any())));
    out.extend(i.items.iter().map(|m| format!("Ingress {ns}/{}", m.name_any())));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::checks::fixtures;

    #[test]
    fn only_stuck_runners_without_children_are_candidates() {
        let mut s = fixtures::healthy();
        assert!(candidates(&s).is_empty());
        s.runners[0].runner.metadata.deletion_timestamp = Some(fixtures::from(fixtures::ago(600).into()));
        assert!(candidates(&s).is_empty(), "children still there");
        s.runners[0].deployment = None;
        s.runners[0].service = None;
        let c = candidates(&s);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].namespace.as_str(), c[0].name.as_str(), c[0].uid.as_str()), ("app", "web", "uid-1"));
        assert!(c[0].promise.contains("removing it by hand skips that cleanup"));
    }
}
