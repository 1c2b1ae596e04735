//! The manager: who holds the leader Lease and when it renewed; the
//! in-cluster Deployment's readiness, restarts and its Pods' waiting reasons;
//! and "no manager at all", which is an error only when some Runner in scope
//! is waiting for one.
//!
//! Every running manager, a local `kubectl runner run-manager` without
//! `--leader-elect` too, renews a presence Lease: a local one is named
//! (host and pid), and two that reconcile the same namespaces without
//! leader election are a warning (they would fight over every child).

use kube::ResourceExt;

use super::super::finding::{Code, Finding, ObjectRef};
use super::super::snapshot::{RunnerState, Snapshot};
use super::{human, workload};
pub use crate::diagnose::view::manager::{View, view};
use crate::manifests::{LEADER_LEASE, MANAGER_NAME, MANAGER_NAMESPACE};

/// Runners named as evidence of a needed manager before "and N more".
const MAX_WAITING: usize = 5;

/// Why this Runner needs a running manager now, if it does.
pub fn waiting_for_manager(s: &Snapshot, rs: &RunnerState) -> Option<String> {
    let name = format!("{}/{}", rs.runner.namespace().unwrap_or_default(), rs.runner.name_any());
    if super::finalizer::stuck_for(s, rs).is_some() {
        return Some(format!("Runner {name} is stuck deleting"));
    }
    let missing = super::child_ownership::missing(s, rs);
    if !missing.is_empty() {
        return Some(format!("Runner {name} is missing its {}", missing.join(", ")));
    }
    if super::status::generation_behind(s, rs).is_some() {
        return Some(format!("Runner {name}'s latest spec was never observed"));
    }
    None
}

pub fn check(s: &Snapshot) -> Vec<Finding> {
    let v = view(s);
    let dep_ref = ObjectRef::new("Deployment", MANAGER_NAMESPACE, MANAGER_NAME);
    let lease_ref = ObjectRef::new("Lease", MANAGER_NAMESPACE, LEADER_LEASE);
    let mut out = vec![];
    if let Some(l) = &v.lease {
        let when =
            l.renewed_ago.map(|a| format!("renewed {} ago", human(a))).unwrap_or("never renewed".into());
        if l.fresh {
            let found =
                Finding::info(Code::ManagerLeader, lease_ref, format!("leader is {}, {when}", l.holder));
            out.push(match v.leader_queue() {
                Some(q) => found.evidence(q.describe()),
                None => found,
            });
        } else {
            out.push(
                Finding::warning(
                    Code::ManagerLeaseStale,
                    lease_ref,
                    format!("no manager holds the leader Lease: last holder {}, {when}", l.holder),
                )
                .evidence("a leader renews well within leaseDurationSeconds; this one stopped (crashed, scaled down, or lost its Lease permissions)"),
            );
        }
    }
    if let Some(d) = &s.manager.deployment {
        out.extend(deployment_findings(d, &s.manager.pods, &dep_ref));
    }
    out.extend(presence_findings(&v));
    if v.absent() {
        let waiting: Vec<String> = s.runners.iter().filter_map(|rs| waiting_for_manager(s, rs)).collect();
        if waiting.is_empty() {
            out.push(
                Finding::info(
                    Code::ManagerNotVisible,
                    dep_ref,
                    "no manager is visible; nothing in scope is waiting for one",
                )
                .evidence(v.absent_evidence()),
            );
        } else {
            let mut f =
                Finding::error(Code::ManagerAbsent, dep_ref, "no manager is running, and Runners need one")
                    .evidence(v.absent_evidence());
            let more = waiting.len().saturating_sub(MAX_WAITING);
            for w in waiting.into_iter().take(MAX_WAITING) {
                f = f.evidence(w);
            }
            if more > 0 {
                f = f.evidence(format!("and {more} more Runners"));
            }
            out.push(f.fix(
                "kubectl runner install --with-manager --image IMAGE   # or locally: kubectl runner run-manager --leader-elect",
            ));
        }
    }
    out
}

/// The local managers (no leader election), and each pair of running
/// managers that reconcile the same namespaces at once: at least one of
/// them without leader election.
fn presence_findings(v: &View) -> Vec<Finding> {
    let lease_ref =
        |p: &crate::diagnose::view::manager::Presence| ObjectRef::new("Lease", MANAGER_NAMESPACE, &p.lease);
    let mut out = vec![];
    for p in v.present.iter().filter(|p| !p.leader_elect) {
        let found = Finding::info(
            Code::ManagerLocal,
            lease_ref(p),
            format!("a local manager runs on {}, watching {}, without leader election", p.who(), p.scope()),
        );
        out.push(match p.queue {
            Some(q) => found.evidence(q.describe()),
            None => found,
        });
    }
    for (i, a) in v.present.iter().enumerate() {
        for b in v.present.iter().skip(i + 1).filter(|b| !(a.leader_elect && b.leader_elect)) {
            let shared = match a.shared_with(b) {
                Some(ns) if ns.is_empty() => continue,
                Some(ns) => format!("namespace(s) {}", ns.join(", ")),
                None => "all namespaces".into(),
            };
            out.push(
                Finding::warning(
                    Code::ManagerOverlap,
                    lease_ref(b),
                    format!("two managers reconcile {shared} without leader election: they undo each other's writes"),
                )
                .evidence(format!("{} watches {}", a.who(), a.scope()))
                .evidence(format!("{} watches {}", b.who(), b.scope()))
                .fix("stop one of them, or run both with --leader-elect"),
            );
        }
    }
    out
}

fn deployment_findings(
    d: &k8s_openapi::api::apps::v1::Deployment,
    pods: &[k8s_openapi::api::core::v1::Pod],
    dep_ref: &ObjectRef,
) -> Vec<Finding> {
    let mut out = vec![];
    let st = d.status.clone().unwrap_or_default();
    let want = d.spec.replicas.unwrap_or(1);
    let ready = st.ready_replicas.unwrap_or(0);
    if ready < 1 {
        let mut f = Finding::error(
            Code::ManagerNotReady,
            dep_ref.clone(),
            format!("the in-cluster manager is not ready ({ready}/{want} Pods ready)"),
        );
        if want == 0 {
            f = f.fix(format!("kubectl -n {MANAGER_NAMESPACE} scale deployment {MANAGER_NAME} --replicas=1"));
        } else if pods.is_empty() {
            f = f.evidence("no Pods: check the ReplicaSet's events (quota, admission, ServiceAccount)").fix(
                format!("kubectl -n {MANAGER_NAMESPACE} describe replicaset -l app.kubernetes.io/name={MANAGER_NAME}"),
            );
        } else {
            f = f.fix(format!("kubectl -n {MANAGER_NAMESPACE} logs deployment/{MANAGER_NAME}"));
        }
        out.push(f);
    }
    for p in pods {
        for prob in workload::pod_problems(p) {
            out.push(
                Finding::error(Code::ManagerPodWaiting, dep_ref.clone(), prob.sentence())
                    .fix(format!("kubectl -n {MANAGER_NAMESPACE} describe pod {}", p.name_any())),
            );
        }
        for cs in p.status.iter().flat_map(|s| s.container_statuses.iter().flatten()) {
            if cs.restart_count > 0 {
                let last = cs.last_state.as_ref().and_then(|l| l.terminated.as_ref());
                let mut f = Finding::warning(
                    Code::ManagerRestarts,
                    dep_ref.clone(),
                    format!("manager Pod {} restarted {} times", p.name_any(), cs.restart_count),
                );
                if let Some(t) = last {
                    f = f.evidence(format!(
                        "last exit: {} (code {}){}",
                        t.reason.as_deref().unwrap_or("unknown"),
                        t.exit_code,
                        t.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
                    ));
                }
                out.push(f.fix(format!(
                    "kubectl -n {MANAGER_NAMESPACE} logs {} -c {} --previous",
                    p.name_any(),
                    cs.name
                )));
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
