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
mod tests {
    use super::super::fixtures;
    use super::*;
    use crate::diagnose::snapshot::Snapshot;
    use serde_json::json;

    fn codes(s: &Snapshot) -> Vec<Code> {
        check(s).iter().map(|f| f.code).collect()
    }

    fn crashing_pod() -> k8s_openapi::api::core::v1::Pod {
        fixtures::from(json!({
            "metadata": { "name": "mgr-1", "namespace": MANAGER_NAMESPACE },
            "status": { "phase": "Running", "containerStatuses": [{
                "name": "manager", "ready": false, "restartCount": 4, "image": "x", "imageID": "",
                "state": { "waiting": { "reason": "CrashLoopBackOff", "message": "back-off 40s" } },
                "lastState": { "terminated": { "exitCode": 1, "reason": "Error" } } }] }
        }))
    }

    #[test]
    fn manager_rules() {
        type Case = (&'static str, fn(&mut Snapshot), &'static [Code]);
        let cases: &[Case] = &[
            ("ready and leading", |_| {}, &[Code::ManagerLeader]),
            (
                "lease stale but Deployment ready",
                |s| s.manager.lease = Some(fixtures::lease(120)),
                &[Code::ManagerLeaseStale],
            ),
            (
                "crash looping",
                |s| {
                    s.manager.deployment = Some(fixtures::manager_deployment(0));
                    s.manager.pods = vec![crashing_pod()];
                    s.manager.lease = None;
                },
                &[
                    Code::ManagerNotReady,
                    Code::ManagerPodWaiting,
                    Code::ManagerRestarts,
                    Code::ManagerNotVisible,
                ],
            ),
            (
                "nothing at all, nothing waiting",
                |s| s.manager = Default::default(),
                &[Code::ManagerNotVisible],
            ),
            (
                "nothing at all, a Runner lacks its Service",
                |s| {
                    s.manager = Default::default();
                    s.runners[0].children.remove("Service");
                },
                &[Code::ManagerAbsent],
            ),
        ];
        for (name, break_it, want) in cases {
            let mut s = fixtures::healthy();
            break_it(&mut s);
            assert_eq!(codes(&s), *want, "{name}");
        }
    }

    #[test]
    fn absence_is_explained_honestly_about_local_managers() {
        let s = fixtures::without_manager();
        let e = view(&s).absent_evidence();
        assert!(e.contains("no Deployment runner-system/runner-controller-manager"), "{e}");
        assert!(e.contains("no fresh presence Lease in runner-system"), "{e}");
    }

    #[test]
    fn a_fresh_lease_alone_means_a_manager_is_present() {
        let mut s = fixtures::without_manager();
        s.manager.lease = Some(fixtures::lease(3));
        assert!(!view(&s).absent());
        s.manager.lease = Some(fixtures::lease(60));
        assert!(view(&s).absent());
    }

    #[test]
    fn only_no_deployment_lease_or_pod_means_none_running() {
        type Case = (&'static str, fn(&mut Snapshot), bool);
        let cases: &[Case] = &[
            ("nothing at all", |_| {}, true),
            ("a stale Lease", |s| s.manager.lease = Some(fixtures::lease(120)), true),
            ("a fresh Lease (local --leader-elect)", |s| s.manager.lease = Some(fixtures::lease(3)), false),
            ("a ready Deployment", |s| s.manager.deployment = Some(fixtures::manager_deployment(1)), false),
            (
                "an unready Deployment with a Pod",
                |s| {
                    s.manager.deployment = Some(fixtures::manager_deployment(0));
                    s.manager.pods = vec![crashing_pod()];
                },
                false,
            ),
            (
                "an unready Deployment without Pods",
                |s| s.manager.deployment = Some(fixtures::manager_deployment(0)),
                true,
            ),
        ];
        for (name, set_up, want) in cases {
            let mut s = fixtures::without_manager();
            set_up(&mut s);
            assert_eq!(view(&s).none_running(), *want, "{name}");
        }
    }

    #[test]
    fn namespace_flags_limit_the_watch() {
        let args = ["run-manager", "--namespace=a", "--namespace", "b", "-n", "c", "--leader-elect"];
        assert_eq!(crate::diagnose::view::manager::namespace_args(args.map(String::from)), ["a", "b", "c"]);
        let args = ["run-manager", "--watch-namespace=a,b", "--watch-namespace", "c,d"];
        assert_eq!(
            crate::diagnose::view::manager::namespace_args(args.map(String::from)),
            ["a", "b", "c", "d"]
        );
        let mut s = fixtures::healthy();
        let d = s.manager.deployment.as_mut().unwrap();
        d.spec.template.spec.as_mut().unwrap().containers[0].args = Some(vec!["--namespace=other".into()]);
        assert!(view(&s).ignores("app"));
        assert!(!view(&s).ignores("other"));
    }

    fn present(
        holder: &str,
        watches: &[&str],
        leader_elect: bool,
        renewed_secs_ago: i64,
    ) -> k8s_openapi::api::coordination::v1::Lease {
        let mut l = fixtures::lease(renewed_secs_ago);
        l.metadata.name = Some(format!("runner-manager-{}", holder.replace(' ', "-")));
        l.spec.as_mut().unwrap().holder_identity = Some(holder.into());
        l.metadata.annotations = Some(
            [
                (crate::manifests::PRESENCE_NAMESPACES.to_string(), watches.join(",")),
                (crate::manifests::PRESENCE_LEADER_ELECT.to_string(), leader_elect.to_string()),
            ]
            .into(),
        );
        l
    }

    #[test]
    fn the_leaders_and_a_local_managers_work_queue_is_shown_from_their_presence() {
        use crate::queue_note::QueueNote;
        let queue = QueueNote { high: 2, low: 10, oldest_wait: std::time::Duration::from_millis(3200) };
        let with_queue = |mut l: k8s_openapi::api::coordination::v1::Lease, name: String| {
            l.metadata.name = Some(name);
            let a = l.metadata.annotations.get_or_insert_default();
            a.insert(crate::manifests::PRESENCE_QUEUE.into(), queue.encode());
            l
        };
        let mut s = fixtures::healthy();
        let leader = crate::manifests::presence_lease_name("runner-controller-manager-abc");
        s.manager.presences = vec![with_queue(present("pod pid 1", &[], true, 2), leader)];
        let found = check(&s);
        let lead = found.iter().find(|f| f.code == Code::ManagerLeader).expect("the leader");
        assert!(
            lead.evidence.iter().any(|e| e.contains("12 Runner(s) waiting") && e.contains("3.2 s")),
            "{lead:?}"
        );

        let mut s = fixtures::without_manager();
        let local = present("laptop pid 4242", &["app"], false, 3);
        s.manager.presences = vec![with_queue(local, "runner-manager-laptop".into())];
        let found = check(&s);
        assert!(found[0].evidence.iter().any(|e| e.contains("2 high priority")), "{:?}", found[0]);
        let mut garbled = present("laptop pid 4242", &["app"], false, 3);
        garbled
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(crate::manifests::PRESENCE_QUEUE.into(), "\u{1b}[2J".into());
        s.manager.presences = vec![garbled];
        assert!(check(&s)[0].evidence.is_empty(), "a note that does not parse is not shown");
    }

    #[test]
    fn a_local_manager_is_named_by_host_and_pid_and_is_no_absence() {
        let mut s = fixtures::without_manager();
        s.runners[0].children.remove("Service");
        assert_eq!(codes(&s), [Code::ManagerAbsent]);
        s.manager.presences = vec![present("laptop pid 4242", &["app"], false, 3)];
        let found = check(&s);
        assert_eq!(found.iter().map(|f| f.code).collect::<Vec<_>>(), [Code::ManagerLocal]);
        assert!(
            found[0].message.contains("a local manager runs on laptop, pid 4242"),
            "{}",
            found[0].message
        );
        assert!(found[0].message.contains("namespace(s) app"), "{}", found[0].message);
        s.manager.presences = vec![present("laptop pid 4242", &["app"], false, 60)];
        assert_eq!(codes(&s), [Code::ManagerAbsent], "a presence no longer renewed: the manager is gone");
    }

    #[test]
    fn two_managers_on_shared_namespaces_without_leader_election_are_a_warning() {
        type Case = (&'static str, [(&'static [&'static str], bool); 2], bool);
        let cases: &[Case] = &[
            ("both local, same namespace", [(&["a"], false), (&["a", "b"], false)], true),
            ("both local, disjoint", [(&["a"], false), (&["b"], false)], false),
            ("a local one beside the leader-elected in-cluster one", [(&[], true), (&["b"], false)], true),
            ("both leader-elected", [(&[], true), (&[], true)], false),
            ("both local, all namespaces", [(&[], false), (&[], false)], true),
        ];
        for (name, [(wa, la), (wb, lb)], want) in cases {
            let mut s = fixtures::without_manager();
            s.manager.presences = vec![present("one pid 1", wa, *la, 2), present("two pid 2", wb, *lb, 2)];
            let overlap: Vec<Finding> =
                check(&s).into_iter().filter(|f| f.code == Code::ManagerOverlap).collect();
            assert_eq!(overlap.len(), usize::from(*want), "{name}: {overlap:?}");
        }
    }
}
