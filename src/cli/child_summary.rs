//! Pure: a Runner's children ([`crate::client::children`]) summarised as
//! data for `get -o wide`, `describe` and `delete --wait`, one line per
//! child kind, in [`crate::kinds::all`] order.

use k8s_openapi::api::core::v1::Pod;
use kube::{Resource, ResourceExt};

use crate::api::Runner;
use crate::client::children::Children;
use crate::kinds;

/// One child, as a line: what it is, whether the Runner controls it, and
/// its state in a few words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSummary {
    pub kind: &'static str,
    pub name: String,
    /// The child has a controller ownerReference to this Runner's UID.
    pub owned: bool,
    pub state: String,
}

/// True when `obj` is the Runner's ([`crate::ownership::ownership`]).
pub fn controlled_by(obj: &impl Resource, runner: &Runner) -> bool {
    let Some(uid) = runner.meta().uid.as_deref() else { return false };
    crate::ownership::ownership(obj.meta(), uid) == crate::ownership::Ownership::Ours
}

/// One line per child that exists, a `missing` line for a wanted child
/// that does not (nothing for a kind not readable), then one line per Pod.
pub fn summarize(runner: &Runner, c: &Children, pods: &[Pod]) -> Vec<ChildSummary> {
    let mut out = Vec::new();
    for &kind in kinds::all() {
        match c.get(kind.kind()) {
            Some(obj) => out.push(ChildSummary {
                kind: kind.kind(),
                name: obj.name_any(),
                owned: controlled_by(obj, runner),
                state: kind.state(obj),
            }),
            // A kind that could not be read is not said to be missing.
            None if kind.wanted(runner) && c.is_readable(kind.kind()) => out.push(ChildSummary {
                kind: kind.kind(),
                name: runner.name_any(),
                owned: false,
                state: "missing".into(),
            }),
            None => {}
        }
    }
    for p in pods {
        out.push(ChildSummary { kind: "Pod", name: p.name_any(), owned: true, state: pod_state(p) });
    }
    out
}

/// `Running`, `Pending`, or a container's waiting reason such as
/// `ImagePullBackOff`, which is what a user needs to see first.
pub fn pod_state(p: &Pod) -> String {
    let status = p.status.clone().unwrap_or_default();
    let waiting = status
        .container_statuses
        .iter()
        .flatten()
        .find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone());
    if p.metadata.deletion_timestamp.is_some() {
        return "Terminating".into();
    }
    waiting.or(status.phase).unwrap_or_else(|| "Unknown".into())
}

/// `deploy 2/3,svc,ing` for the wide table: which children exist, with the
/// Deployment's ready count; `!` marks one the Runner does not control.
pub fn short(runner: &Runner, c: &Children) -> String {
    let parts: Vec<String> = c
        .iter()
        .map(|child| {
            let mark = if controlled_by(&child.object, runner) { "" } else { "!" };
            match child.kind.brief(&child.object) {
                Some(detail) => format!("{}{mark} {detail}", child.kind.short()),
                None => format!("{}{mark}", child.kind.short()),
            }
        })
        .collect();
    if parts.is_empty() { "<none>".into() } else { parts.join(",") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::DynamicObject;
    use serde_json::json;

    fn runner(spec: crate::api::RunnerSpec) -> Runner {
        let mut r = Runner::new("web", spec);
        r.metadata.namespace = Some("ns".into());
        r.metadata.uid = Some("u1".into());
        r
    }

    fn child(kind: &str, owner: &str, extra: serde_json::Value) -> Children {
        let api_version = kinds::by_name(kind).unwrap().api_resource().api_version;
        let mut obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": { "name": "web", "namespace": "ns", "ownerReferences": [{
                "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner", "name": "web", "uid": owner, "controller": true }] },
        }))
        .unwrap();
        if let (Some(o), serde_json::Value::Object(e)) = (obj.data.as_object_mut(), extra) {
            o.extend(e);
        }
        let mut c = Children::default();
        c.insert(kinds::by_name(kind).unwrap(), obj);
        c
    }

    fn deployment(owner: &str) -> Children {
        child(
            "Deployment",
            owner,
            json!({ "spec": { "replicas": 2, "selector": {}, "template": {} },
                    "status": { "readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1 } }),
        )
    }

    fn lines(s: &[ChildSummary]) -> Vec<(&str, &str)> {
        s.iter().map(|c| (c.kind, c.state.as_str())).collect()
    }

    #[test]
    fn a_missing_child_is_reported_only_where_the_spec_wants_one() {
        let one = runner(crate::api::RunnerSpec::new("nginx"));
        let s = summarize(&one, &Children::default(), &[]);
        let always = kinds::all().iter().filter(|k| k.when().is_empty());
        assert_eq!(lines(&s), always.map(|k| (k.kind(), "missing")).collect::<Vec<_>>());
        assert!(s.len() < kinds::all().len(), "one replica and no host: not every kind");
        let all = runner(crate::api::RunnerSpec::every_field());
        let s = summarize(&all, &Children::default(), &[]);
        let names: Vec<_> = s.iter().map(|c| c.kind).collect();
        let every: Vec<_> = kinds::all().iter().map(|k| k.kind()).collect();
        assert_eq!(names, every, "a host and 2 replicas");
    }

    #[test]
    fn a_kind_not_readable_is_left_out_not_called_missing() {
        let r = runner(crate::api::RunnerSpec::new("nginx").replicas(2));
        for &kind in kinds::all() {
            let mut c = Children::default();
            c.mark_unreadable(crate::client::children::NotReadable::of(kind, "get"));
            let s = summarize(&r, &c, &[]);
            assert!(s.iter().all(|l| l.kind != kind.kind()), "{}: {s:?}", kind.kind());
            assert!(s.iter().all(|l| l.state == "missing"), "the others still are: {s:?}");
        }
    }

    #[test]
    fn a_deployment_owned_by_another_uid_is_marked_not_owned() {
        let r = runner(crate::api::RunnerSpec::new("nginx"));
        let s = summarize(&r, &deployment("someone-else"), &[]);
        assert!(!s[0].owned);
        assert_eq!(s[0].state, "1/2 ready, 2 updated, 1 available");
        assert_eq!(short(&r, &deployment("someone-else")), "deploy! 1/2");
    }

    #[test]
    fn an_owned_deployment_shows_its_ready_count_in_the_short_form() {
        let r = runner(crate::api::RunnerSpec::new("nginx"));
        assert!(summarize(&r, &deployment("u1"), &[])[0].owned);
        assert_eq!(short(&r, &deployment("u1")), "deploy 1/2");
        let mut both = deployment("u1");
        let budget = child("PodDisruptionBudget", "u1", json!({ "spec": { "minAvailable": 1 } }));
        both.insert(
            kinds::by_name("PodDisruptionBudget").unwrap(),
            budget.get("PodDisruptionBudget").unwrap().clone(),
        );
        assert_eq!(short(&r, &both), "deploy 1/2,pdb");
        assert_eq!(short(&r, &Children::default()), "<none>");
    }

    #[test]
    fn a_pod_waiting_on_its_image_shows_the_waiting_reason() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": { "name": "web-1" },
            "status": { "phase": "Pending", "containerStatuses": [{
                "name": "c", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": { "waiting": { "reason": "ImagePullBackOff" } } }] },
        }))
        .unwrap();
        assert_eq!(pod_state(&p), "ImagePullBackOff");
    }
}
