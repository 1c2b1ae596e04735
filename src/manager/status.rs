//! Pure: the Runner's status from what was observed. No I/O, no clock (the
//! caller passes `now`), so every rule is a unit test.
//!
//! Readiness comes from the Deployment's *current* revision: its
//! observedGeneration must have caught up and the updated and available
//! replicas must equal the desired count. A Deployment still rolling out
//! an old ReplicaSet is never reported Ready.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use crate::api::{Phase, Runner, RunnerStatus, condition};
use crate::kinds::Facts;
use crate::kinds::deployment::DeploymentView;
use crate::ownership::Refused;
use crate::rollout::{self, Rollout};

/// What the reconciler saw this pass.
#[derive(Debug, Default)]
pub struct Observed {
    /// What the Runner's own children told ([`crate::kinds::ChildKind::facts`]):
    /// the Deployment's rollout, if it exists and is ours; whether an
    /// Ingress of ours routes the host.
    pub facts: Facts,
    /// The first stuck Pod's (reason, message), from the Pod view
    /// ([`super::pod_problems`]); only Pods of the Deployment's current
    /// ReplicaSet count ([`crate::rollout::CurrentPods`]).
    pub pod_problem: Option<(String, String)>,
    /// Children whose name is taken by an object this Runner does not
    /// control.
    pub refused: Vec<Refused>,
    /// The apiserver's messages for children it refuses to store.
    pub rejected: Vec<String>,
}

/// The phase, and the reason and message of the Ready condition, first
/// cause first. Any child that is not ours fails the Runner, whatever the
/// Deployment says: a foreign Service would serve its URL.
fn verdict(seen: &Observed, r: &Rollout, desired: i32) -> (Phase, String, String) {
    let (ready_n, updated) = (r.ready, r.updated);
    if !seen.refused.is_empty() {
        return (Phase::Failed, condition::REASON_ADOPTION_REFUSED.into(), refusal(seen));
    }
    if !seen.rejected.is_empty() {
        return (Phase::Failed, condition::REASON_CHILD_REJECTED.into(), seen.rejected.join("; "));
    }
    if seen.facts.rollout.is_none() {
        return (
            Phase::Pending,
            "DeploymentMissing".into(),
            "waiting for the Deployment to be created".into(),
        );
    }
    // Before the deadline: refused Pods are why it passes, and they are
    // known at once, ten minutes before it.
    if let Some(refused) = &r.pods_refused {
        return (Phase::Failed, crate::pods_refused::REASON.into(), refused.sentence());
    }
    if let Some(msg) = &r.deadline_exceeded {
        return (Phase::Failed, "ProgressDeadlineExceeded".into(), msg.clone());
    }
    if r.complete {
        return (Phase::Available, "Available".into(), format!("{ready_n}/{desired} replicas ready"));
    }
    if let Some((reason, msg)) = seen.pod_problem.clone() {
        let phase =
            if crate::rollout::is_failing_pod_reason(&reason) { Phase::Failed } else { Phase::Progressing };
        let text = if msg.is_empty() { reason.clone() } else { format!("{reason}: {msg}") };
        return (phase, reason, text);
    }
    // One reason for the whole rollout: its steps (replicas updated, then
    // ready) are progress, said in the message, which is written spaced
    // ([`super::status_write`]); a reason of their own made each step a
    // milestone, written at once (a third status write for most rollouts).
    let msg = if !r.caught_up || updated < desired {
        format!("{updated}/{desired} replicas updated, {ready_n} ready")
    } else {
        format!("{ready_n}/{desired} replicas ready")
    };
    (Phase::Progressing, REASON_ROLLING_OUT.into(), msg)
}

/// The Ready condition's reason while a rollout is underway.
const REASON_ROLLING_OUT: &str = "RollingOut";

fn refusal(seen: &Observed) -> String {
    let names = seen.refused.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    format!("{names}; left untouched")
}

/// Computes the status. The Runner's current status supplies the
/// lastTransitionTime of conditions whose status did not change, so an
/// unchanged pass yields an equal status.
pub fn compute(runner: &Runner, seen: &Observed, now: &Time) -> RunnerStatus {
    let desired = runner.spec.replicas;
    let generation = runner.metadata.generation;
    let r = seen.facts.rollout.clone().unwrap_or_else(|| rollout::of::<DeploymentView>(None, desired));
    let (phase, reason, message) = verdict(seen, &r, desired);
    let ready_cond = make_condition(
        condition::READY,
        r.complete && phase == Phase::Available,
        &reason,
        &message,
        generation,
    );
    let owned_cond = owned_condition(seen, generation);
    let old = runner.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    RunnerStatus {
        observed_generation: generation,
        replicas: r.total,
        ready_replicas: r.ready,
        updated_replicas: r.updated,
        available_replicas: r.available,
        phase,
        url: Some(url(runner, seen.facts.routed)),
        message: Some(message),
        selector: Some(crate::kinds::meta::selector_string(runner)),
        conditions: merge_conditions(old, vec![ready_cond, owned_cond], now),
    }
}

/// ChildrenOwned: true unless a child with our name belongs to someone else.
fn owned_condition(seen: &Observed, generation: Option<i64>) -> Condition {
    if seen.refused.is_empty() {
        let msg = "all children are controlled by this Runner";
        make_condition(condition::CHILDREN_OWNED, true, "Owned", msg, generation)
    } else {
        let reason = condition::REASON_ADOPTION_REFUSED;
        make_condition(condition::CHILDREN_OWNED, false, reason, &refusal(seen), generation)
    }
}

fn make_condition(type_: &str, ok: bool, reason: &str, message: &str, generation: Option<i64>) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: Time(Default::default()),
    }
}

/// Keeps lastTransitionTime where a condition's status did not change;
/// stamps `now` where it did or where the condition is new.
pub fn merge_conditions(old: &[Condition], new: Vec<Condition>, now: &Time) -> Vec<Condition> {
    new.into_iter()
        .map(|mut c| {
            c.last_transition_time = match old.iter().find(|o| o.type_ == c.type_) {
                Some(o) if o.status == c.status => o.last_transition_time.clone(),
                _ => now.clone(),
            };
            c
        })
        .collect()
}

/// `http://<first host>` with an Ingress, else the in-cluster Service URL.
pub fn url(runner: &Runner, ingress: bool) -> String {
    match (runner.spec.first_host(), ingress) {
        (Some(host), true) => format!("http://{host}"),
        _ => {
            let ns = runner.namespace().unwrap_or_default();
            let port = runner.spec.expose.port;
            let port = if port == 80 { String::new() } else { format!(":{port}") };
            format!("http://{}.{ns}.svc.cluster.local{port}", runner.name_any())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RunnerSpec;
    use crate::kinds::ChildKind;
    use crate::kinds::deployment::Deployments;
    use serde_json::json;

    fn runner(generation: i64) -> Runner {
        let mut r = Runner::new("web", RunnerSpec::new("nginx").replicas(2));
        r.metadata.namespace = Some("team".into());
        r.metadata.uid = Some("u1".into());
        r.metadata.generation = Some(generation);
        r
    }

    fn deployment(
        generation: i64,
        observed: i64,
        updated: i32,
        available: i32,
        replicas: i32,
    ) -> DeploymentView {
        serde_json::from_value(json!({
            "metadata": { "name": "web", "generation": generation },
            "status": { "observedGeneration": observed, "updatedReplicas": updated, "availableReplicas": available,
                        "readyReplicas": available, "replicas": replicas }
        }))
        .unwrap()
    }

    /// What a pass saw with `d` as the Runner's Deployment.
    fn with(d: &DeploymentView) -> Observed {
        let mut facts = Facts::default();
        Deployments::facts(d, &runner(1), &mut facts);
        Observed { facts, ..Default::default() }
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_000_000).unwrap())
    }

    fn ready_condition(s: &RunnerStatus) -> &Condition {
        s.conditions.iter().find(|c| c.type_ == condition::READY).unwrap()
    }

    #[test]
    fn all_replicas_of_the_current_revision_available_means_ready() {
        let d = deployment(3, 3, 2, 2, 2);
        let s = compute(&runner(1), &with(&d), &now());
        assert_eq!(s.phase, Phase::Available);
        assert_eq!(ready_condition(&s).status, "True");
        assert_eq!(s.message.as_deref(), Some("2/2 replicas ready"));
        assert_eq!(s.observed_generation, Some(1));
    }

    #[test]
    fn a_deployment_whose_controller_has_not_caught_up_is_not_ready() {
        let d = deployment(4, 3, 2, 2, 2);
        let s = compute(&runner(1), &with(&d), &now());
        assert_eq!(s.phase, Phase::Progressing);
        assert_eq!(ready_condition(&s).status, "False");
    }

    /// Not caught up, then replicas updated, then the new ones becoming
    /// available: progress within one verdict, so only the first status of
    /// the generation and the last are milestones written at once.
    #[test]
    fn a_rollout_keeps_one_verdict_from_its_first_step_to_its_last() {
        use crate::manager::status_write::{Clock, When, when};
        let steps = [deployment(2, 1, 2, 2, 2), deployment(2, 2, 1, 2, 3), deployment(2, 2, 2, 1, 2)];
        let statuses: Vec<RunnerStatus> =
            steps.iter().map(|d| compute(&runner(2), &with(d), &now())).collect();
        let verdicts: Vec<(Phase, &str)> =
            statuses.iter().map(|s| (s.phase, ready_condition(s).reason.as_str())).collect();
        assert_eq!(verdicts, [(Phase::Progressing, REASON_ROLLING_OUT); 3]);
        let t = std::time::Instant::now();
        let clock = Clock { written: Some(t), generation: Some((Some(2), t)), deferred: None };
        for pair in statuses.windows(2) {
            assert!(matches!(when(Some(&pair[0]), &pair[1], &clock, t), When::After(_)), "{pair:#?}");
        }
        let done = compute(&runner(2), &with(&deployment(2, 2, 2, 2, 2)), &now());
        assert_eq!(when(statuses.last(), &done, &clock, t), When::Now, "Available is a milestone");
    }

    #[test]
    fn old_replicas_still_running_during_a_rollout_are_not_ready() {
        let d = deployment(2, 2, 1, 2, 3);
        let s = compute(&runner(2), &with(&d), &now());
        assert_eq!(s.phase, Phase::Progressing);
        assert_eq!(ready_condition(&s).status, "False");
    }

    #[test]
    fn image_pull_backoff_fails_the_runner_with_the_pods_reason() {
        let d = deployment(1, 1, 2, 0, 2);
        let problem = Some(("ImagePullBackOff".to_string(), "Back-off pulling image".to_string()));
        let seen = Observed { pod_problem: problem, ..with(&d) };
        let s = compute(&runner(1), &seen, &now());
        assert_eq!(s.phase, Phase::Failed);
        assert_eq!(s.message.as_deref(), Some("ImagePullBackOff: Back-off pulling image"));
        assert_eq!(ready_condition(&s).reason, "ImagePullBackOff");
    }

    #[test]
    fn pods_refused_at_admission_fail_the_runner_at_once_with_the_apiservers_message() {
        let mut d = deployment(1, 1, 0, 0, 0);
        let msg =
            r#"pods "web-1" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true"#;
        d.status.as_mut().unwrap().conditions = Some(vec![
            serde_json::from_value(json!({
            "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": msg }))
            .unwrap(),
        ]);
        let s = compute(&runner(1), &with(&d), &now());
        assert_eq!((s.phase, ready_condition(&s).reason.as_str()), (Phase::Failed, "PodsRefused"));
        assert_eq!(ready_condition(&s).status, "False");
        assert_eq!(
            s.message.as_deref(),
            Some(format!("PodSecurity admission refused the Pods: {msg}").as_str())
        );
    }

    #[test]
    fn a_waiting_reason_that_fixes_itself_is_progress_not_failure() {
        let d = deployment(1, 1, 2, 0, 2);
        let problem = Some(("ContainerCreating".to_string(), String::new()));
        let s = compute(&runner(1), &Observed { pod_problem: problem, ..with(&d) }, &now());
        assert_eq!(s.phase, Phase::Progressing);
        assert_eq!(s.message.as_deref(), Some("ContainerCreating"));
        assert_eq!(ready_condition(&s).status, "False");
    }

    fn refused(kind: &'static str) -> Refused {
        Refused {
            kind,
            namespace: "team".into(),
            name: "web".into(),
            ownership: crate::ownership::Ownership::Foreign,
        }
    }

    #[test]
    fn a_foreign_service_fails_a_runner_whose_deployment_is_ready() {
        let d = deployment(1, 1, 2, 2, 2);
        let seen = Observed { refused: vec![refused("Service")], ..with(&d) };
        let s = compute(&runner(1), &seen, &now());
        assert_eq!(s.phase, Phase::Failed);
        assert_eq!(ready_condition(&s).status, "False");
        assert!(ready_condition(&s).message.contains("Service team/web"), "{:?}", s.message);
    }

    #[test]
    fn a_child_the_apiserver_refuses_fails_the_runner_with_its_message() {
        let seen = Observed {
            rejected: vec!["Service \"web\" is invalid: spec.ports[0].port".into()],
            ..Default::default()
        };
        let s = compute(&runner(1), &seen, &now());
        assert_eq!(
            (s.phase, ready_condition(&s).reason.as_str()),
            (Phase::Failed, condition::REASON_CHILD_REJECTED)
        );
        assert!(s.message.unwrap().contains("is invalid: spec.ports[0].port"));
    }

    #[test]
    fn a_refused_deployment_is_reported_with_adoption_refused() {
        let seen = Observed { refused: vec![refused("Deployment")], ..Default::default() };
        let s = compute(&runner(1), &seen, &now());
        assert_eq!(s.phase, Phase::Failed);
        let owned = s.conditions.iter().find(|c| c.type_ == condition::CHILDREN_OWNED).unwrap();
        assert_eq!(
            (owned.status.as_str(), owned.reason.as_str()),
            ("False", condition::REASON_ADOPTION_REFUSED)
        );
    }

    #[test]
    fn an_unchanged_pass_keeps_transition_times_so_nothing_is_written() {
        let d = deployment(1, 1, 2, 2, 2);
        let seen = with(&d);
        let mut r = runner(1);
        r.status = Some(compute(&r, &seen, &now()));
        let later = Time(k8s_openapi::jiff::Timestamp::from_second(2_000_000).unwrap());
        assert_eq!(r.status.clone().unwrap(), compute(&r, &seen, &later));
    }

    #[test]
    fn a_status_flip_stamps_a_new_transition_time() {
        let mut r = runner(1);
        r.status = Some(compute(&r, &Observed::default(), &now()));
        let d = deployment(1, 1, 2, 2, 2);
        let later = Time(k8s_openapi::jiff::Timestamp::from_second(2_000_000).unwrap());
        let s = compute(&r, &with(&d), &later);
        assert_eq!(ready_condition(&s).last_transition_time, later);
    }

    #[test]
    fn url_is_the_host_with_an_ingress_else_the_service() {
        let mut r = runner(1);
        assert_eq!(url(&r, false), "http://web.team.svc.cluster.local");
        r.spec.expose.hosts = vec!["web.example.com".into()];
        assert_eq!(url(&r, true), "http://web.example.com");
        r.spec.expose.port = 8080;
        assert_eq!(url(&r, false), "http://web.team.svc.cluster.local:8080");
    }
}
