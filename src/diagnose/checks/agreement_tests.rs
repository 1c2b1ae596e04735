//! The manager's status and `diagnose` judge the same child and the same
//! Pod the same way: `e2e` uses `diagnose` as its oracle, and a user reads
//! both. Each case goes through the manager's rule (ownership, then the
//! status it computes; the Pod through the manager's Pod view) and through
//! `diagnose`'s checks, and the two verdicts must match.

use serde_json::json;

use super::fixtures;
use crate::diagnose::finding::Severity;
use crate::kinds::deployment::{DeploymentView, Deployments};
use crate::kinds::{ChildKind, Facts, view};
use crate::manager::pod_view::PodView;
use crate::manager::status::{self, Observed};
use crate::ownership::{Ownership, ownership};
use crate::rollout::FAILING_POD_REASONS;

/// What the manager's status learns from `d` as the Runner's own Deployment.
fn facts(d: &DeploymentView, rs: &super::RunnerState) -> Facts {
    let mut facts = Facts::default();
    Deployments::facts(d, &rs.runner, &mut facts);
    facts
}

fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(fixtures::now())
}

/// Errors `diagnose` reports whose message names `what`.
fn diagnose_errors(rs: super::RunnerState, what: &str) -> usize {
    let mut s = fixtures::healthy();
    s.runners = vec![rs];
    super::run(&s).iter().filter(|f| f.severity == Severity::Error && f.message.contains(what)).count()
}

#[test]
fn the_manager_and_diagnose_agree_on_whose_deployment_it_is() {
    type Case = (&'static str, fn(&mut k8s_openapi::api::apps::v1::Deployment), bool);
    let cases: [Case; 4] = [
        ("ours", |_| {}, true),
        ("foreign: no owner", |d| d.metadata.owner_references = None, false),
        (
            "stale: an earlier Runner's UID",
            |d| d.metadata.owner_references = Some(fixtures::from(fixtures::owner("uid-0"))),
            false,
        ),
        ("ours without the UID label", |d| d.metadata.labels = None, true),
    ];
    for (name, change, ours) in cases {
        let mut rs = fixtures::runner_state();
        fixtures::edit_child(&mut rs, change);
        let d = rs.deployment().unwrap();
        let view: DeploymentView = view::of(&d).unwrap();
        let manager_ours = ownership(&d.metadata, fixtures::UID) == Ownership::Ours;
        let refused = (!manager_ours).then(|| crate::ownership::Refused {
            kind: "Deployment",
            namespace: fixtures::NS.into(),
            name: fixtures::NAME.into(),
            ownership: ownership(&d.metadata, fixtures::UID),
        });
        let seen = Observed {
            facts: if manager_ours { facts(&view, &rs) } else { Facts::default() },
            refused: refused.into_iter().collect(),
            ..Default::default()
        };
        let st = status::compute(&rs.runner, &seen, &now());
        let manager_refuses = st
            .conditions
            .iter()
            .any(|c| c.type_ == crate::api::condition::CHILDREN_OWNED && c.status == "False");
        let diagnose_refuses = diagnose_errors(rs, "Deployment") > 0;
        assert_eq!(manager_ours, ours, "{name}: the manager's ownership");
        assert_eq!(manager_refuses, !ours, "{name}: the manager's status");
        assert_eq!(diagnose_refuses, !ours, "{name}: diagnose");
    }
}

#[test]
fn the_manager_and_diagnose_agree_on_which_pod_reasons_are_failures() {
    let reasons = FAILING_POD_REASONS.iter().copied().chain(["ContainerCreating", "PodInitializing"]);
    for reason in reasons {
        let status = json!({ "phase": "Pending",
            "containerStatuses": [{ "name": "app", "ready": false, "restartCount": 0, "image": "x", "imageID": "",
                                    "state": { "waiting": { "reason": reason, "message": "m" } } }] });
        let pod = fixtures::pod("web-1", status);
        let view: PodView = serde_json::from_value(serde_json::to_value(&pod).unwrap()).unwrap();
        let mut rs = fixtures::runner_state();
        rs.pods = vec![pod];
        let d: k8s_openapi::api::apps::v1::Deployment = fixtures::from(json!({
            "metadata": { "name": "web", "generation": 1 },
            "status": { "observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 0 } }));
        let d: DeploymentView = view::of(&d).unwrap();
        let seen = Observed { facts: facts(&d, &rs), pod_problem: view.problem(), ..Default::default() };
        let manager_fails = status::compute(&rs.runner, &seen, &now()).phase == crate::api::Phase::Failed;
        let diagnose_fails = diagnose_errors(rs, reason) > 0;
        assert_eq!(
            manager_fails, diagnose_fails,
            "{reason}: manager Failed={manager_fails}, diagnose error={diagnose_fails}"
        );
        assert_eq!(manager_fails, FAILING_POD_REASONS.contains(&reason), "{reason}");
    }
}

#[test]
fn the_manager_and_diagnose_agree_on_pods_admission_refuses() {
    let refused = |message: &str| {
        json!({ "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                                          "message": message })
    };
    let cases = [
        (
            refused(r#"pods "web-1" is forbidden: violates PodSecurity "restricted:latest": seccompProfile"#),
            true,
        ),
        (refused(r#"pods "web-1" is forbidden: failed quota: q: must specify limits.cpu for: runner"#), true),
        (refused(r#"pods "web-1" is forbidden: exceeded quota: q, requested: pods=1"#), true),
        (refused(r#"admission webhook "deny.example.com" denied the request: no"#), true),
        (refused("pods \"web-1\" is forbidden: error looking up service account"), true),
        (
            json!({ "type": "ReplicaFailure", "status": "False", "reason": "FailedCreate", "message": "old" }),
            false,
        ),
        (
            json!({ "type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": "m" }),
            false,
        ),
    ];
    for (condition, want) in cases {
        let mut rs = fixtures::runner_state();
        fixtures::edit_child(&mut rs, |d: &mut k8s_openapi::api::apps::v1::Deployment| {
            let st = d.status.get_or_insert_default();
            (st.observed_generation, st.replicas, st.updated_replicas, st.available_replicas) =
                (d.metadata.generation, Some(0), Some(0), Some(0));
            st.conditions = Some(vec![fixtures::from(condition.clone())]);
        });
        let view: DeploymentView = view::of(&rs.deployment().unwrap()).unwrap();
        let seen = Observed { facts: facts(&view, &rs), ..Default::default() };
        let st = status::compute(&rs.runner, &seen, &now());
        let manager_refused = st.phase == crate::api::Phase::Failed
            && st.conditions.iter().any(|c| c.reason == crate::pods_refused::REASON);
        let mut s = fixtures::healthy();
        s.runners = vec![rs];
        let diagnose_refused = super::run(&s)
            .iter()
            .any(|f| f.severity == Severity::Error && f.code == crate::diagnose::finding::Code::PodsRefused);
        assert_eq!((manager_refused, diagnose_refused), (want, want), "{condition}");
    }
}

#[test]
fn the_manager_and_diagnose_agree_that_only_the_current_replica_sets_pods_speak() {
    use crate::manager::pod_problems::PodProblems;
    use kube::runtime::watcher::Event;
    let named = |hash: &str| format!("ReplicaSet \"web-{hash}\" is progressing.");
    // (case, the stuck Pod's template hash, generation seen, Progressing message, fails)
    let cases = [
        ("a Pod of the current ReplicaSet", fixtures::TEMPLATE_HASH, 1, named(fixtures::TEMPLATE_HASH), true),
        ("a Pod of the ReplicaSet being replaced", "old0hash", 1, named(fixtures::TEMPLATE_HASH), false),
        (
            "the controller has not caught up",
            fixtures::TEMPLATE_HASH,
            0,
            named(fixtures::TEMPLATE_HASH),
            false,
        ),
    ];
    for (case, hash, observed, message, fails) in cases {
        let mut rs = fixtures::runner_state();
        fixtures::edit_child(&mut rs, |d: &mut k8s_openapi::api::apps::v1::Deployment| {
            let st = d.status.get_or_insert_default();
            (
                st.observed_generation,
                st.replicas,
                st.updated_replicas,
                st.ready_replicas,
                st.available_replicas,
            ) = (Some(observed), Some(2), Some(1), Some(1), Some(1));
            st.conditions = Some(vec![fixtures::from(json!({ "type": "Progressing", "status": "True",
                "reason": "ReplicaSetUpdated", "message": message }))]);
        });
        let mut pod = fixtures::pod(
            "web-stuck",
            json!({ "phase": "Pending", "containerStatuses": [{ "name": "app", "ready": false, "restartCount": 0,
                "image": "x", "imageID": "", "state": { "waiting": { "reason": "ImagePullBackOff", "message": "m" } } }] }),
        );
        let labels = pod.metadata.labels.get_or_insert_default();
        labels.insert(crate::rollout::POD_TEMPLATE_HASH_LABEL.into(), hash.into());
        labels.insert(crate::ownership::INSTANCE_LABEL.into(), fixtures::NAME.into());
        // The manager: its Pod view, asked with the rollout its Deployment view gives.
        let problems = PodProblems::default();
        problems.apply(Event::Apply(serde_json::from_value(serde_json::to_value(&pod).unwrap()).unwrap()));
        let view: DeploymentView = view::of(&rs.deployment().unwrap()).unwrap();
        let facts = facts(&view, &rs);
        let current = &facts.rollout.as_ref().unwrap().current;
        let seen = Observed {
            pod_problem: problems.first(fixtures::NS, fixtures::UID, current),
            facts,
            ..Default::default()
        };
        let manager_fails = status::compute(&rs.runner, &seen, &now()).phase == crate::api::Phase::Failed;
        rs.pods = vec![pod];
        let diagnose_fails = diagnose_errors(rs, "ImagePullBackOff") > 0;
        assert_eq!((manager_fails, diagnose_fails), (fails, fails), "{case}");
    }
}
