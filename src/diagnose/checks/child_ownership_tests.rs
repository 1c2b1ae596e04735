//! The child rules on fixtures: missing, foreign, stale, the Ingress, and
//! when a missing child is reported at once.

use super::super::fixtures;
use super::*;
use crate::diagnose::snapshot::Snapshot;

fn codes(s: &Snapshot) -> Vec<Code> {
    check(s, &s.runners[0]).iter().map(|f| f.code).collect()
}

#[test]
fn child_rules() {
    type Case = (&'static str, fn(&mut Snapshot), &'static [Code]);
    let cases: &[Case] = &[
        ("healthy", |_| {}, &[]),
        ("Service gone", |s| drop(s.runners[0].children.remove("Service")), &[Code::ChildMissing]),
        (
            "just created, nothing yet",
            |s| {
                let r = &mut s.runners[0];
                r.runner.metadata.creation_timestamp = Some(fixtures::from(fixtures::ago(2).into()));
                r.runner.status = None;
                r.children = Default::default();
            },
            &[],
        ),
        (
            "host without Ingress",
            |s| s.runners[0].runner.spec.expose.hosts = vec!["a.example".into()],
            &[Code::ChildMissing],
        ),
        (
            "Ingress without host",
            |s| fixtures::set_child(&mut s.runners[0], fixtures::ingress("a.example")),
            &[Code::IngressWithoutHost],
        ),
        (
            "Ingress for another host",
            |s| {
                s.runners[0].runner.spec.expose.hosts = vec!["b.example".into()];
                fixtures::set_child(&mut s.runners[0], fixtures::ingress("a.example"));
            },
            &[Code::IngressHostMismatch],
        ),
        (
            "Ingress for the first of two hosts",
            |s| {
                s.runners[0].runner.spec.expose.hosts = vec!["a.example".into(), "b.example".into()];
                fixtures::set_child(&mut s.runners[0], fixtures::ingress("a.example"));
            },
            &[Code::IngressHostMismatch],
        ),
        (
            "squatter without owner",
            |s| s.runners[0].children.get_mut("Deployment").unwrap().metadata.owner_references = None,
            &[Code::ChildForeign],
        ),
        ("two replicas without a budget", |s| s.runners[0].runner.spec.replicas = 2, &[Code::ChildMissing]),
        (
            "two replicas with a budget of ours",
            |s| {
                s.runners[0].runner.spec.replicas = 2;
                fixtures::set_child(&mut s.runners[0], fixtures::pdb());
            },
            &[],
        ),
        (
            "someone else's budget under the name",
            |s| {
                s.runners[0].runner.spec.replicas = 2;
                fixtures::set_child(&mut s.runners[0], fixtures::pdb());
                s.runners[0].children.get_mut("PodDisruptionBudget").unwrap().metadata.owner_references =
                    None;
            },
            &[Code::ChildForeign],
        ),
        (
            "owned by an earlier Runner of the same name",
            |s| {
                s.runners[0].children.get_mut("Service").unwrap().metadata.owner_references =
                    Some(fixtures::from(fixtures::owner("uid-0")))
            },
            &[Code::ChildStaleOwner],
        ),
        (
            "a deleting Runner is the finalizer check's business",
            |s| {
                s.runners[0].runner.metadata.deletion_timestamp =
                    Some(fixtures::from(fixtures::ago(100).into()));
                s.runners[0].children.remove("Service");
            },
            &[],
        ),
    ];
    for (name, break_it, want) in cases {
        let mut s = fixtures::healthy();
        break_it(&mut s);
        assert_eq!(codes(&s), *want, "{name}");
    }
}

#[test]
fn a_missing_child_names_the_likely_cause() {
    type Case = (&'static str, fn(&mut Snapshot), &'static str);
    let cases: &[Case] = &[
        ("manager absent", |s| s.manager = Default::default(), "manager absent"),
        (
            "create denied",
            |s| {
                for a in
                    s.access.iter_mut().filter(|a| a.permission.resource == "services" && a.verb == "create")
                {
                    a.allowed = false;
                }
            },
            "can't create services in app",
        ),
        (
            "watch elsewhere",
            |s| {
                let d = s.manager.deployment.as_mut().unwrap();
                d.spec.template.spec.as_mut().unwrap().containers[0].args =
                    Some(vec!["--namespace=other".into()]);
            },
            "watches only other, not app",
        ),
        ("nothing visible wrong", |_| {}, "its logs say why"),
    ];
    for (name, break_it, want) in cases {
        let mut s = fixtures::healthy();
        s.runners[0].children.remove("Service");
        break_it(&mut s);
        let f = check(&s, &s.runners[0]);
        assert!(f[0].evidence.iter().any(|e| e.contains(want)), "{name}: {:#?}", f[0].evidence);
    }
}

#[test]
fn a_foreign_child_quotes_the_adoption_refused_condition() {
    let mut s = fixtures::healthy();
    let r = &mut s.runners[0];
    r.children.get_mut("Deployment").unwrap().metadata.owner_references = None;
    r.runner.status.as_mut().unwrap().conditions[1] = fixtures::from(serde_json::json!({
        "type": "ChildrenOwned", "status": "False", "reason": "AdoptionRefused",
        "message": "Deployment app/web is not owned by this Runner", "lastTransitionTime": fixtures::ago(10) }));
    r.children.get_mut("Deployment").unwrap().metadata.managed_fields = Some(vec![
        fixtures::from(
            serde_json::json!({ "manager": "kube-controller-manager", "operation": "Update", "subresource": "status" }),
        ),
        fixtures::from(serde_json::json!({ "manager": "kubectl-create", "operation": "Update" })),
    ]);
    let f = &check(&s, &s.runners[0])[0];
    assert!(f.evidence.iter().any(|e| e.contains("AdoptionRefused")), "{:#?}", f.evidence);
    assert!(
        f.evidence.contains(&"written by field manager \"kubectl-create\"".to_string()),
        "{:#?}",
        f.evidence
    );
    assert!(f.fix.as_deref().unwrap().contains("delete deployment web"), "{:?}", f.fix);
}

/// A Runner 2 s old whose Service is gone, with `change` applied.
fn young_without_service(change: fn(&mut Snapshot)) -> Vec<Code> {
    let mut s = fixtures::healthy();
    let r = &mut s.runners[0];
    r.runner.metadata.creation_timestamp = Some(fixtures::from(fixtures::ago(2).into()));
    r.children.remove("Service");
    change(&mut s);
    codes(&s)
}

#[test]
fn a_young_runner_waits_out_the_grace_only_while_a_manager_is_still_making_its_children() {
    // A manager runs, and the status is for an older generation: it may
    // still be working on this spec.
    let working = |s: &mut Snapshot| s.runners[0].runner.metadata.generation = Some(2);
    assert_eq!(young_without_service(working), []);
    // No status yet, a manager runs: the same.
    assert_eq!(young_without_service(|s| s.runners[0].runner.status = None), []);
    // The status says the children were made for this generation.
    assert_eq!(young_without_service(|_| {}), [Code::ChildMissing]);
    // No manager anywhere: nothing will make it.
    let none = |s: &mut Snapshot| {
        s.manager = Default::default();
        s.runners[0].runner.status = None;
    };
    assert_eq!(young_without_service(none), [Code::ChildMissing]);
}

#[test]
fn a_kind_not_readable_is_never_missing_and_the_others_still_are() {
    use crate::client::children::NotReadable;
    for &kind in crate::kinds::all() {
        let mut s = fixtures::healthy();
        s.runners[0].runner.spec = crate::api::RunnerSpec::every_field();
        let r = &mut s.runners[0];
        r.children = Default::default();
        r.children.mark_unreadable(NotReadable::of(kind, "get"));
        let missing = missing(&s, &s.runners[0]);
        assert!(!missing.contains(&kind.kind()), "{}: {missing:?}", kind.kind());
        assert_eq!(missing.len(), crate::kinds::all().len() - 1, "{}: {missing:?}", kind.kind());
    }
}
