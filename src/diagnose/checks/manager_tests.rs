//! The manager rules, table-driven, and the presence and queue notes.

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
            &[Code::ManagerNotReady, Code::ManagerPodWaiting, Code::ManagerRestarts, Code::ManagerNotVisible],
        ),
        ("nothing at all, nothing waiting", |s| s.manager = Default::default(), &[Code::ManagerNotVisible]),
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
    assert_eq!(crate::diagnose::view::manager::namespace_args(args.map(String::from)), ["a", "b", "c", "d"]);
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
    let queue =
        QueueNote { high: 2, normal: 0, low: 10, oldest_wait: std::time::Duration::from_millis(3200) };
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
    assert!(found[0].message.contains("a local manager runs on laptop, pid 4242"), "{}", found[0].message);
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
