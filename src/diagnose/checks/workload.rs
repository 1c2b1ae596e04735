//! The workload: the Runner's Deployment gave up progressing, or its
//! Pods cannot pull, start or be scheduled. The Pod's own reason and message
//! are the evidence; they usually name the fix (a typo in the image, a quota).
//! Only Pods of the Deployment's current ReplicaSet count, by the rule the
//! manager's status reads ([`crate::rollout::CurrentPods`]): a stuck Pod of
//! the ReplicaSet a rollout is replacing is on its way out.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::super::finding::{Code, Finding};
use super::super::snapshot::{RunnerState, Snapshot};
use super::{controlled_by, ns_flag, runner_ref};
use crate::pods_refused::{PodsRefused, RefusedBy};
use crate::rollout::{CurrentPods, POD_TEMPLATE_HASH_LABEL};

/// Why one Pod is not running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodProblem {
    pub pod: String,
    /// `None` for scheduling problems.
    pub container: Option<String>,
    pub reason: String,
    pub message: String,
}

impl PodProblem {
    /// `Pod web-1 container app: ImagePullBackOff: Back-off pulling image "x"`.
    pub fn sentence(&self) -> String {
        let who = match &self.container {
            Some(c) => format!("Pod {} container {c}", self.pod),
            None => format!("Pod {}", self.pod),
        };
        if self.message.is_empty() {
            format!("{who}: {}", self.reason)
        } else {
            format!("{who}: {}: {}", self.reason, self.message)
        }
    }

    pub fn is_scheduling(&self) -> bool {
        self.container.is_none()
    }
}

/// The waiting reasons (init containers first) and scheduling failures of a Pod.
pub fn pod_problems(p: &Pod) -> Vec<PodProblem> {
    let Some(st) = &p.status else { return vec![] };
    let mut out = vec![];
    let statuses = st.init_container_statuses.iter().flatten().chain(st.container_statuses.iter().flatten());
    for cs in statuses {
        if let Some(w) = cs.state.as_ref().and_then(|s| s.waiting.as_ref()) {
            let reason = w.reason.clone().unwrap_or_default();
            if crate::rollout::is_failing_pod_reason(&reason) {
                out.push(PodProblem {
                    pod: p.name_any(),
                    container: Some(cs.name.clone()),
                    reason,
                    message: w.message.clone().unwrap_or_default(),
                });
            }
        }
    }
    if st.phase.as_deref() == Some("Pending") {
        for c in st.conditions.iter().flatten() {
            if c.type_ == "PodScheduled" && c.status == "False" {
                out.push(PodProblem {
                    pod: p.name_any(),
                    container: None,
                    reason: c.reason.clone().unwrap_or("Unschedulable".into()),
                    message: c.message.clone().unwrap_or_default(),
                });
            }
        }
    }
    out
}

pub fn check(_s: &Snapshot, rs: &RunnerState) -> Vec<Finding> {
    if rs.runner.metadata.deletion_timestamp.is_some() {
        return vec![];
    }
    let mut out = vec![];
    let mut rollout = None;
    if let Some(d) = rs.deployment().filter(|d| controlled_by(&d.metadata, rs)) {
        // The rules the manager's status reads, through the same rollout.
        let r = rollout.insert(crate::rollout::of(Some(&d), rs.runner.spec.replicas));
        if let Some(refused) = &r.pods_refused {
            out.push(pods_refused(rs, &d.name_any(), refused));
        }
        let conds = d.status.iter().flat_map(|s| s.conditions.iter().flatten());
        for c in conds {
            if c.type_.as_deref() == Some("Progressing")
                && c.status.as_deref() == Some("False")
                && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
            {
                out.push(
                    Finding::error(
                        Code::ProgressDeadlineExceeded,
                        runner_ref(rs),
                        format!(
                            "Deployment {} stopped progressing: {}",
                            d.name_any(),
                            c.message.clone().unwrap_or_default()
                        ),
                    )
                    .fix(format!(
                        "kubectl {} rollout status deployment/{}",
                        ns_flag(rs),
                        d.name_any()
                    )),
                );
            }
        }
    }
    let current = CurrentPods::of(rollout.as_ref());
    for p in rs.pods.iter().filter(|p| current.includes(template_hash(p))) {
        for prob in pod_problems(p) {
            let code = if prob.is_scheduling() { Code::PodUnschedulable } else { Code::PodWaiting };
            let fix = if prob.reason.contains("Image") {
                format!(
                    "kubectl {} patch runner {} --type=merge -p '{{\"spec\":{{\"image\":\"IMAGE\"}}}}'   # now {}",
                    ns_flag(rs),
                    rs.runner.name_any(),
                    rs.runner.spec.image
                )
            } else {
                format!("kubectl {} describe pod {}", ns_flag(rs), prob.pod)
            };
            out.push(Finding::error(code, runner_ref(rs), prob.sentence()).fix(fix));
        }
    }
    out
}

fn template_hash(p: &Pod) -> Option<&str> {
    p.labels().get(POD_TEMPLATE_HASH_LABEL).map(String::as_str)
}

/// Admission refuses the Deployment's Pods: what refused them, and the
/// Runner field (or the namespace's policy) that fixes it.
fn pods_refused(rs: &RunnerState, deployment: &str, refused: &PodsRefused) -> Finding {
    let patch = match refused.by {
        RefusedBy::PodSecurity => Some(r#"{"spec":{"podSecurity":"restricted"}}"#),
        RefusedBy::QuotaNeedsResources | RefusedBy::LimitRange => Some(
            r#"{"spec":{"resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"500m","memory":"128Mi"}}}}"#,
        ),
        _ => None,
    };
    let command = match patch {
        Some(p) => {
            format!("kubectl {} patch runner {} --type=merge -p '{p}'", ns_flag(rs), rs.runner.name_any())
        }
        None => format!("kubectl {} describe deployment {deployment}", ns_flag(rs)),
    };
    Finding::error(
        Code::PodsRefused,
        runner_ref(rs),
        format!("Deployment {deployment} cannot create Pods: {}", refused.sentence()),
    )
    .fix(format!("{}: {command}", refused.by.fix()))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{self, pod};
    use super::*;
    use serde_json::json;

    fn waiting(reason: &str) -> Pod {
        pod(
            "web-1",
            json!({ "phase": "Pending", "containerStatuses": [{ "name": "app", "ready": false, "restartCount": 0,
                "image": "x", "imageID": "", "state": { "waiting": { "reason": reason, "message": "m" } } }] }),
        )
    }

    #[test]
    fn pod_waiting_reasons_are_reported_by_name() {
        let cases: &[(&str, Option<Code>)] = &[
            ("ImagePullBackOff", Some(Code::PodWaiting)),
            ("ErrImagePull", Some(Code::PodWaiting)),
            ("CrashLoopBackOff", Some(Code::PodWaiting)),
            ("ContainerCreating", None),
        ];
        for (reason, want) in cases {
            let mut s = fixtures::healthy();
            s.runners[0].pods = vec![waiting(reason)];
            let f = check(&s, &s.runners[0]);
            assert_eq!(f.first().map(|f| f.code), *want, "{reason}");
            if let Some(f) = f.first() {
                assert!(f.message.contains(reason) && f.message.contains("web-1"), "{}", f.message);
            }
        }
    }

    #[test]
    fn only_pods_of_the_current_replica_set_are_reported_and_every_pod_without_a_deployment() {
        let of_template = |hash: &str| {
            let mut p = waiting("ImagePullBackOff");
            p.labels_mut().insert(crate::rollout::POD_TEMPLATE_HASH_LABEL.into(), hash.into());
            p
        };
        let cases = [
            ("the current ReplicaSet's", fixtures::TEMPLATE_HASH, true, true),
            ("a replaced ReplicaSet's", "old0hash", true, false),
            ("no Deployment: any", "old0hash", false, true),
        ];
        for (case, hash, with_deployment, reported) in cases {
            let mut s = fixtures::healthy();
            if !with_deployment {
                s.runners[0].children = Default::default();
            }
            s.runners[0].pods = vec![of_template(hash)];
            let f = check(&s, &s.runners[0]);
            assert_eq!(f.iter().any(|f| f.code == Code::PodWaiting), reported, "{case}: {f:?}");
        }
    }

    #[test]
    fn an_unschedulable_pod_carries_the_scheduler_message() {
        let mut s = fixtures::healthy();
        s.runners[0].pods = vec![pod(
            "web-1",
            json!({ "phase": "Pending", "conditions": [{ "type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": "0/1 nodes are available: 1 Insufficient cpu." }] }),
        )];
        let f = check(&s, &s.runners[0]);
        assert_eq!(f[0].code, Code::PodUnschedulable);
        assert!(f[0].message.contains("Insufficient cpu"), "{}", f[0].message);
    }

    #[test]
    fn a_deployment_past_its_progress_deadline_is_an_error() {
        let mut s = fixtures::healthy();
        fixtures::edit_child(&mut s.runners[0], |d: &mut k8s_openapi::api::apps::v1::Deployment| {
            let st = d.status.as_mut().unwrap();
            st.conditions = Some(vec![fixtures::from(json!({ "type": "Progressing", "status": "False",
                "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet \"web-1\" has timed out progressing." }))]);
        });
        let f = check(&s, &s.runners[0]);
        assert_eq!(f[0].code, Code::ProgressDeadlineExceeded);
        assert!(f[0].message.contains("timed out"), "{}", f[0].message);
    }

    #[test]
    fn pods_refused_at_admission_are_an_error_naming_what_refused_them_and_the_field_that_fixes_it() {
        let cases = [
            (
                r#"pods "web-1" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true"#,
                "podSecurity",
            ),
            (
                r#"pods "web-1" is forbidden: failed quota: q: must specify limits.cpu for: runner"#,
                "resources",
            ),
        ];
        for (msg, field) in cases {
            let mut s = fixtures::healthy();
            fixtures::edit_child(&mut s.runners[0], |d: &mut k8s_openapi::api::apps::v1::Deployment| {
                d.status.as_mut().unwrap().conditions =
                    Some(vec![fixtures::from(json!({ "type": "ReplicaFailure",
                    "status": "True", "reason": "FailedCreate", "message": msg }))]);
            });
            let f = check(&s, &s.runners[0]);
            assert_eq!(f[0].code, Code::PodsRefused, "{msg}");
            assert!(f[0].message.contains(msg), "{}", f[0].message);
            let fix = f[0].fix.clone().unwrap_or_default();
            assert!(
                fix.contains(&format!("spec.{field}")) && fix.contains(&format!("{{\"{field}\"")),
                "{fix}"
            );
        }
    }

    #[test]
    fn healthy_pods_say_nothing() {
        let s = fixtures::healthy();
        assert!(check(&s, &s.runners[0]).is_empty());
    }
}
