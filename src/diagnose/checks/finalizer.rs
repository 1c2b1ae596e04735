//! Stuck finalizers: a Runner deleted longer ago than the grace
//! period that still carries our finalizer, or deleted at all while no
//! manager runs anywhere (then nothing can ever remove the finalizer, so
//! waiting out the grace period would only hide the cause). The finding says what holds it:
//! children still present (and what holds *them*), no manager, a manager that
//! does not watch the namespace, or missing delete permissions.
//!
//! The finalizer is a promise: the Runner stays until its children are gone.
//! `--fix` may remove it only when that promise is already kept
//! ([`children_gone`]), so the messages never suggest removing it blindly.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::super::finding::{Code, Finding};
use super::super::snapshot::{AccessCheck, RunnerState, Snapshot};
use super::{age, controlled_by, human, ns_flag, runner_ref};
use crate::api::{FINALIZER, RUNNER_UID_LABEL};
use crate::diagnose::view::manager::{self as manager_view, View};

/// What the finalizer promises, said wherever removing it comes up.
pub fn promise(rs: &RunnerState) -> String {
    format!(
        "the {FINALIZER} finalizer keeps the Runner until the manager has deleted its {} (label \
         {RUNNER_UID_LABEL}={}); removing it by hand skips that cleanup",
        kind_list(),
        rs.runner.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// How long the Runner has been stuck deleting, if it is: our finalizer still
/// on it, and deleted longer ago than the grace period, or at all when
/// [`View::none_running`] (the grace period is for a manager to do its work).
pub fn stuck_for(s: &Snapshot, rs: &RunnerState) -> Option<Duration> {
    let deleted = rs.runner.metadata.deletion_timestamp.as_ref()?;
    let held = rs.runner.finalizers().iter().any(|f| f == FINALIZER);
    if !held {
        return None;
    }
    let for_ = age(s.now, deleted.0);
    let grace = if manager_view::view(s).none_running() { Duration::ZERO } else { s.thresholds.grace };
    (for_ >= grace).then_some(for_)
}

/// The fix while children remain and no manager runs: the manager deletes
/// them and then releases the Runner; nothing else should.
pub const START_THE_MANAGER: &str = "start the manager (kubectl runner run-manager --leader-elect, or kubectl runner \
     install --with-manager --image IMAGE); it deletes the children, then removes the finalizer. Do not remove \
     the finalizer by hand: that leaves the children behind";

/// Every child kind, as a sentence: `A, B and C`.
fn kind_list() -> String {
    let kinds: Vec<&str> = crate::kinds::all().iter().map(|k| k.kind()).collect();
    match kinds.split_last() {
        Some((last, init)) if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => kinds.join(""),
    }
}

/// The children this Runner still controls, as (kind, metadata).
fn owned_children(rs: &RunnerState) -> Vec<(&'static str, &ObjectMeta)> {
    rs.children
        .iter()
        .map(|c| (c.kind.kind(), &c.object.metadata))
        .filter(|(_, m)| controlled_by(m, rs))
        .collect()
}

/// True when none of the Runner's children remain, so removing the
/// finalizer breaks no promise.
pub fn children_gone(rs: &RunnerState) -> bool {
    owned_children(rs).is_empty()
}

/// A Runner stuck Terminating: one finding whose evidence says what still
/// exists, what keeps it from going, and whose fix depends on both.
pub fn check(s: &Snapshot, rs: &RunnerState) -> Vec<Finding> {
    let Some(stuck) = stuck_for(s, rs) else { return vec![] };
    let ns = rs.runner.namespace().unwrap_or_default();
    let name = rs.runner.name_any();
    let mut f = Finding::error(
        Code::FinalizerStuck,
        runner_ref(rs),
        format!("Runner {ns}/{name} has been Terminating for {}, held by {FINALIZER}", human(stuck)),
    );
    let children = owned_children(rs);
    let v = manager_view::view(s);
    let evidence = children.iter().map(|(kind, m)| child_state(s, &ns, kind, m)).chain(blockers(
        s,
        rs,
        &v,
        !children.is_empty(),
    ));
    for line in evidence {
        f = f.evidence(line);
    }
    if children.is_empty() && !v.absent() && !v.ignores(&ns) {
        f = f.evidence(
            "its children are gone and a manager runs: it should remove the finalizer on its next pass",
        );
    }
    f = f.evidence(promise(rs));
    vec![f.fix(fix(rs, &v, children.is_empty()))]
}

/// Where a child that still exists is in its own deletion.
fn child_state(s: &Snapshot, ns: &str, kind: &str, m: &ObjectMeta) -> String {
    let name = m.name.as_deref().unwrap_or("");
    let fins = m.finalizers.clone().unwrap_or_default();
    match &m.deletion_timestamp {
        None => format!("{kind} {ns}/{name} still exists and is not being deleted"),
        Some(t) if fins.iter().any(|f| f == "foregroundDeletion") => format!(
            "{kind} {ns}/{name} is in foreground deletion since {} ago, waiting for its own dependents (finalizers: {})",
            human(age(s.now, t.0)),
            fins.join(", ")
        ),
        Some(t) if !fins.is_empty() => format!(
            "{kind} {ns}/{name} is being deleted since {} ago but held by finalizers: {}",
            human(age(s.now, t.0)),
            fins.join(", ")
        ),
        Some(t) => format!("{kind} {ns}/{name} is being deleted since {} ago", human(age(s.now, t.0))),
    }
}

/// What keeps the Runner from going: no manager, a manager that does not
/// watch its namespace, permissions the manager lacks for the cleanup (child
/// deletes only while children remain), finalizers that are not ours.
fn blockers(s: &Snapshot, rs: &RunnerState, v: &View, children_left: bool) -> Vec<String> {
    let ns = rs.runner.namespace().unwrap_or_default();
    let mut out = vec![];
    if v.absent() {
        out.push(View::ABSENT_SHORT.to_string());
    }
    if v.ignores(&ns) {
        out.push(format!(
            "the in-cluster manager watches only {}, not {ns}",
            v.watched.clone().unwrap_or_default().join(", ")
        ));
    }
    let needed = |a: &&AccessCheck| {
        let child_delete = a.verb == "delete"
            && crate::kinds::all().iter().any(|k| k.plural() == a.permission.resource)
            && children_left;
        let runner_write = a.permission.resource == "runners" && ["patch", "update"].contains(&a.verb);
        !a.allowed && (child_delete || runner_write) && (a.namespace == ns || a.namespace.is_empty())
    };
    for a in s.access.iter().filter(needed) {
        out.push(format!("{} can't {} {} in {ns}", s.service_account, a.verb, a.permission.resource_ref()));
    }
    let others: Vec<&str> =
        rs.runner.finalizers().iter().map(String::as_str).filter(|x| *x != FINALIZER).collect();
    if !others.is_empty() {
        out.push(format!("also held by finalizers that are not ours: {}", others.join(", ")));
    }
    out
}

/// Remove the finalizer only when the children are gone; else start the
/// manager when there is none; else look at what holds the children.
fn fix(rs: &RunnerState, v: &View, children_gone: bool) -> String {
    let name = rs.runner.name_any();
    if children_gone {
        format!(
            "kubectl runner diagnose {name} {} --fix   # the children are gone, so removing the finalizer breaks no promise",
            ns_flag(rs)
        )
    } else if v.absent() {
        START_THE_MANAGER.to_string()
    } else {
        format!(
            "kubectl {} get {} {name} -o yaml   # see what holds them",
            ns_flag(rs),
            crate::kinds::all().iter().map(|k| k.kind().to_lowercase()).collect::<Vec<_>>().join(",")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::*;
    use crate::diagnose::snapshot::{ManagerState, Snapshot};

    fn deleting(secs_ago: i64) -> Snapshot {
        let mut s = fixtures::healthy();
        s.runners[0].runner.metadata.deletion_timestamp =
            Some(fixtures::from(fixtures::ago(secs_ago).into()));
        s
    }

    fn evidence(s: &Snapshot) -> Vec<String> {
        check(s, &s.runners[0]).into_iter().flat_map(|f| f.evidence).collect()
    }

    #[test]
    fn a_runner_deleted_within_the_grace_period_is_not_stuck() {
        let s = deleting(5);
        assert!(check(&s, &s.runners[0]).is_empty());
    }

    #[test]
    fn the_grace_period_applies_only_while_a_manager_may_be_running() {
        type Case = (&'static str, fn(&mut Snapshot), i64, bool);
        let cases: &[Case] = &[
            ("ready in-cluster manager, 5 s ago", |_| {}, 5, false),
            ("ready in-cluster manager, 120 s ago", |_| {}, 120, true),
            ("no manager anywhere, 3 s ago", |s| s.manager = Default::default(), 3, true),
            ("no manager anywhere, just now", |s| s.manager = Default::default(), 0, true),
            (
                "local manager holding a fresh Lease, 3 s ago",
                |s| s.manager = ManagerState { lease: Some(fixtures::lease(2)), ..Default::default() },
                3,
                false,
            ),
            (
                "only a stale Lease, 3 s ago",
                |s| s.manager = ManagerState { lease: Some(fixtures::lease(300)), ..Default::default() },
                3,
                true,
            ),
            (
                "manager Pod starting, 3 s ago",
                |s| {
                    s.manager.deployment = Some(fixtures::manager_deployment(0));
                    s.manager.pods = vec![fixtures::running_pod()];
                    s.manager.lease = None;
                },
                3,
                false,
            ),
        ];
        for (name, set_up, secs_ago, want_stuck) in cases {
            let mut s = deleting(*secs_ago);
            set_up(&mut s);
            assert_eq!(stuck_for(&s, &s.runners[0]).is_some(), *want_stuck, "{name}");
            assert_eq!(check(&s, &s.runners[0]).len(), usize::from(*want_stuck), "{name}");
        }
    }

    #[test]
    fn with_no_manager_and_children_left_the_fix_is_to_start_the_manager() {
        let mut s = deleting(3);
        s.manager = Default::default();
        let f = &check(&s, &s.runners[0])[0];
        assert_eq!(f.severity, crate::diagnose::finding::Severity::Error);
        let fix = f.fix.as_deref().unwrap();
        assert!(fix.starts_with("start the manager (kubectl runner run-manager --leader-elect"), "{fix}");
        assert!(fix.contains("Do not remove the finalizer by hand"), "{fix}");
        assert!(!fix.contains("--fix"), "{fix}");
        assert!(f.evidence.iter().any(|e| e.contains("manager absent")), "{:?}", f.evidence);
    }

    #[test]
    fn a_runner_without_our_finalizer_is_not_ours_to_explain() {
        let mut s = deleting(600);
        s.runners[0].runner.metadata.finalizers = Some(vec!["someone.else/x".into()]);
        assert!(check(&s, &s.runners[0]).is_empty());
    }

    #[test]
    fn stuck_finalizer_causes() {
        type Case = (&'static str, fn(&mut Snapshot), &'static str);
        let cases: &[Case] = &[
            ("children still there", |_| {}, "Deployment app/web still exists and is not being deleted"),
            (
                "child in foreground deletion",
                |s| {
                    let m = &mut s.runners[0].children.get_mut("Deployment").unwrap().metadata;
                    m.deletion_timestamp = Some(fixtures::from(fixtures::ago(60).into()));
                    m.finalizers = Some(vec!["foregroundDeletion".into()]);
                },
                "foreground deletion",
            ),
            ("manager absent", |s| s.manager = Default::default(), "manager absent"),
            (
                "delete denied",
                |s| {
                    for a in s
                        .access
                        .iter_mut()
                        .filter(|a| a.permission.resource == "deployments" && a.verb == "delete")
                    {
                        a.allowed = false;
                    }
                },
                "can't delete deployments.apps in app",
            ),
            (
                "someone else's finalizer",
                |s| s.runners[0].runner.metadata.finalizers.as_mut().unwrap().push("x.io/hold".into()),
                "not ours: x.io/hold",
            ),
            ("always", |_| {}, "removing it by hand skips that cleanup"),
        ];
        for (name, break_it, want) in cases {
            let mut s = deleting(120);
            break_it(&mut s);
            let ev = evidence(&s);
            assert!(ev.iter().any(|e| e.contains(want)), "{name}: {ev:#?}");
        }
    }

    #[test]
    fn fix_offers_removal_only_when_the_children_are_gone() {
        let mut s = deleting(120);
        let f = &check(&s, &s.runners[0])[0];
        assert!(!f.fix.as_deref().unwrap().contains("--fix"), "{:?}", f.fix);
        assert!(!children_gone(&s.runners[0]));
        s.runners[0].children = Default::default();
        let f = &check(&s, &s.runners[0])[0];
        assert!(f.fix.as_deref().unwrap().contains("--fix"), "{:?}", f.fix);
        assert!(children_gone(&s.runners[0]));
    }

    #[test]
    fn a_foreign_same_name_object_does_not_hold_the_runner() {
        let mut s = deleting(120);
        s.runners[0].children.get_mut("Deployment").unwrap().metadata.owner_references = None;
        s.runners[0].children.remove("Service");
        assert!(children_gone(&s.runners[0]));
    }
}
