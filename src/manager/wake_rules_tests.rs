//! Which Runner and child events need a pass, and how urgently.

use super::*;
use crate::api::RunnerSpec;
use crate::kinds::packed::Packed;

/// A Runner as the watches cache it.
type CachedRunner = Packed<Runner>;

fn runner(uid: &str, generation: i64, edit: impl FnOnce(&mut Runner)) -> Runner {
    let mut r = Runner::new("web", RunnerSpec::new("nginx:1"));
    r.metadata.uid = Some(uid.into());
    r.metadata.generation = Some(generation);
    edit(&mut r);
    r
}

fn cached(uid: &str, generation: i64, edit: impl FnOnce(&mut Runner)) -> CachedRunner {
    Packed::pack(runner(uid, generation, edit)).expect("packs")
}

#[test]
fn a_runner_needs_a_pass_when_new_or_its_spec_deletion_or_finalizers_change() {
    let meta = |r: CachedRunner| kube::Resource::meta(&r).clone();
    let base = meta(cached("u1", 1, |_| {}));
    let changed = |after: CachedRunner| runner_changed(Some(&base), &meta(after));
    assert!(runner_changed(None, &base), "new");
    assert!(!changed(cached("u1", 1, |r| r.status = Some(Default::default()))), "our own status write");
    assert!(changed(cached("u1", 2, |_| {})), "spec");
    assert!(changed(cached("u2", 1, |_| {})), "deleted and created again");
    assert!(changed(cached("u1", 1, |r| r.metadata.finalizers = Some(vec!["x".into()]))), "finalizers");
    let ours = |r: &mut Runner| r.metadata.finalizers = Some(vec![crate::api::FINALIZER.into()]);
    assert!(!changed(cached("u1", 1, ours)), "our finalizer added: the pass that added it converges");
    let with_ours = meta(cached("u1", 1, ours));
    assert!(runner_changed(Some(&with_ours), &base), "our finalizer removed by someone: a pass puts it back");
    let deleting = |r: &mut Runner| {
        r.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ))
    };
    assert!(changed(cached("u1", 1, deleting)), "deletion");
}

#[test]
fn a_change_to_a_runner_that_exists_goes_before_a_create_and_a_list_after_both() {
    let meta = |r: CachedRunner| kube::Resource::meta(&r).clone();
    let base = meta(cached("u1", 1, |_| {}));
    let spec = meta(cached("u1", 2, |_| {}));
    let again = meta(cached("u2", 1, |_| {}));
    assert_eq!(runner_work(None, &base, false), Some((Priority::Normal, Trigger::RunnerCreated)));
    assert_eq!(runner_work(Some(&base), &again, false), Some((Priority::Normal, Trigger::RunnerCreated)));
    assert_eq!(runner_work(Some(&base), &spec, false), Some((Priority::High, Trigger::RunnerChange)));
    assert_eq!(runner_work(None, &base, true), Some((Priority::Low, Trigger::RunnerListed)));
    assert_eq!(runner_work(Some(&base), &base, false), None, "nothing changed");
}

#[test]
fn a_change_that_landed_while_our_pass_ran_is_not_hidden_by_our_writes_answer() {
    // Our status write answered with generation 3 (a person's change landed
    // meanwhile) and observedGeneration 2: the pass had converged 2.
    let ours = runner("u1", 3, |r| {
        r.status = Some(crate::api::RunnerStatus { observed_generation: Some(2), ..Default::default() })
    });
    let change = kube::Resource::meta(&cached("u1", 3, |_| {})).clone();
    let saw = what_our_pass_saw(&ours);
    assert_eq!(runner_work(Some(&saw), &change, false), Some((Priority::High, Trigger::RunnerChange)));
    // Caught up: our answer at the generation it observed hides its echo.
    let caught_up = runner("u1", 3, |r| {
        r.status = Some(crate::api::RunnerStatus { observed_generation: Some(3), ..Default::default() })
    });
    assert_eq!(runner_work(Some(&what_our_pass_saw(&caught_up)), &change, false), None);
}

#[test]
fn a_child_edited_or_new_is_urgent_and_its_status_moving_is_not() {
    let meta = |generation: Option<i64>, label: &str| ObjectMeta {
        generation,
        labels: Some([("team".to_string(), label.to_string())].into()),
        ..Default::default()
    };
    let before = meta(Some(3), "a");
    let rows = [
        ("status only", Some(meta(Some(3), "a")), meta(Some(3), "a"), Priority::Low),
        ("spec edited", Some(before.clone()), meta(Some(4), "a"), Priority::High),
        ("labels edited", Some(before.clone()), meta(Some(3), "b"), Priority::High),
        ("not cached before", None, meta(Some(3), "a"), Priority::High),
        ("a kind without generations", Some(meta(None, "a")), meta(None, "a"), Priority::High),
    ];
    for (what, before, now, want) in rows {
        assert_eq!(child_priority(before.as_ref(), &now), want, "{what}");
    }
}
