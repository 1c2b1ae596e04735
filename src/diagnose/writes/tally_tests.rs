//! The tally's rules, each from a sequence of writes as the watch would
//! attribute them.

use super::*;

const OURS: &str = crate::api::FIELD_MANAGER;

fn by(manager: &str, op: &str, sub: &str) -> Option<Writer> {
    Some(Writer { manager: manager.into(), operation: op.into(), subresource: sub.into() })
}

fn write(ms: u64, writer: Option<Writer>, fields: &[&str], generation_changed: bool) -> Write {
    Write {
        at: Duration::from_millis(ms),
        writer,
        status_only: !fields.is_empty() && fields.iter().all(|f| f.starts_with("status")),
        fields: fields.iter().map(|f| f.to_string()).collect(),
        generation_changed,
    }
}

fn object(kind: &str, name: &str, writes: Vec<Write>) -> ObjectWrites {
    ObjectWrites { kind: kind.into(), namespace: "app".into(), name: name.into(), writes }
}

fn observed(objects: Vec<ObjectWrites>) -> Observed {
    Observed {
        window: Duration::from_secs(20),
        objects: objects.into_iter().filter(|o| !o.writes.is_empty()).collect(),
    }
}

/// `every` ms for the 20 s window, starting at `from` ms.
fn ticks(from: u64, every: u64) -> impl Iterator<Item = u64> {
    (from..20_000).step_by(every as usize)
}

/// A script setting the Deployment's replicas every 150 ms, the manager
/// putting them back 40 ms later; the controller-manager's status writes
/// and the manager's Runner status writes follow each change.
fn fighter() -> Observed {
    let mut deploy = vec![];
    let mut runner = vec![];
    for t in ticks(0, 150) {
        deploy.push(write(t, by("kubectl", "Update", ""), &["spec.replicas"], true));
        deploy.push(write(
            t + 10,
            by("kube-controller-manager", "Update", "status"),
            &["status.replicas"],
            false,
        ));
        deploy.push(write(t + 40, by(OURS, "Apply", ""), &["spec.replicas"], true));
        runner.push(write(t + 60, by(OURS, "Apply", "status"), &["status.replicas"], false));
    }
    observed(vec![object("Runner", "web", runner), object("Deployment", "web", deploy)])
}

#[test]
fn a_script_against_the_manager_is_one_fight_naming_both_managers_and_the_field() {
    let o = fighter();
    let t = tally(&o, &LIMITS);
    assert!(t.storms.is_empty(), "the fight explains the status writes: {:#?}", t.storms);
    assert_eq!(t.fights.len(), 1);
    let f = &t.fights[0];
    assert_eq!(
        (f.object.kind.as_str(), f.fields.as_slice()),
        ("Deployment", &["spec.replicas".to_string()][..])
    );
    let names: Vec<&str> = f.sides.iter().map(|s| s.writer.as_ref().unwrap().manager.as_str()).collect();
    assert_eq!(names, ["kubectl", OURS]);
    assert_eq!((f.sides[0].writes, f.sides[1].writes), (134, 134));
    assert_eq!(f.handovers, 267);
    assert!(f.per_minute > 1000.0, "{}", f.per_minute);
}

#[test]
fn a_loop_writing_an_annotation_is_a_storm_naming_the_writer_and_the_field() {
    let tick = "metadata.annotations[example.org/tick]";
    let writes = ticks(0, 150).map(|t| write(t, by("looper", "Update", ""), &[tick], false)).collect();
    let o = observed(vec![object("Deployment", "web", writes)]);
    let t = tally(&o, &LIMITS);
    assert!(t.fights.is_empty());
    let s = &t.storms[0];
    assert_eq!((s.writes, s.per_minute.round() as i64), (134, 402));
    assert_eq!(s.writers, [Side { writer: by("looper", "Update", ""), writes: 134 }]);
    assert_eq!(s.fields, [(tick.to_string(), 134)]);
    assert!(!t.runner_generation_changed);
}

/// A Deployment's generation moves with its annotations too, so the
/// controller-manager observes each tick; its first status write in the
/// window observes a tick made before the window. None of its writes is
/// the storm, which names only the loop.
#[test]
fn a_loop_on_a_deployment_annotation_is_the_storm_and_not_the_status_writes_that_observe_it() {
    let tick = "metadata.annotations[example.org/tick]";
    let observes = |t| {
        write(t, by("kube-controller-manager", "Update", "status"), &["status.observedGeneration"], false)
    };
    let mut writes = vec![observes(20)];
    for t in ticks(100, 150) {
        writes.push(write(t, by("looper", "Update", ""), &[tick], true));
        writes.push(observes(t + 30));
    }
    let o = observed(vec![object("Deployment", "web", writes)]);
    let t = tally(&o, &LIMITS);
    assert_eq!(t.storms.len(), 1, "{:#?}", t.storms);
    let s = &t.storms[0];
    assert_eq!(s.writers, [Side { writer: by("looper", "Update", ""), writes: 133 }]);
    assert_eq!(s.fields, [(tick.to_string(), 133)]);
}

#[test]
fn storm_and_fight_thresholds() {
    type Case = (&'static str, Observed, usize, usize);
    let status = |t| write(t, by(OURS, "Apply", "status"), &["status.message"], false);
    let cases: Vec<Case> = vec![
        ("a quiet Runner", observed(vec![]), 0, 0),
        (
            "a rollout: a spec change, then the controllers' status writes",
            {
                let mut d = vec![write(1_000, by(OURS, "Apply", ""), &["spec.template"], true)];
                d.extend(ticks(1_100, 300).take(25).map(|t| {
                    write(t, by("kube-controller-manager", "Update", "status"), &["status.replicas"], false)
                }));
                let r = vec![write(900, by("kubectl", "Update", ""), &["spec.image"], true)];
                let pod = ticks(1_200, 200)
                    .take(20)
                    .map(|t| write(t, by("kubelet", "Update", "status"), &["status.phase"], false))
                    .collect();
                observed(vec![
                    object("Runner", "web", r),
                    object("Deployment", "web", d),
                    object("Pod", "web-1", pod),
                ])
            },
            0,
            0,
        ),
        (
            "a status hot loop, no spec change",
            observed(vec![object("Runner", "web", ticks(0, 100).map(status).collect())]),
            0,
            1,
        ),
        (
            "status writes long after the last spec change are counted",
            {
                let mut w = vec![write(0, by("kubectl", "Update", ""), &["spec.replicas"], true)];
                w.extend(ticks(10_500, 100).map(status));
                observed(vec![object("Runner", "web", w)])
            },
            0,
            1,
        ),
        (
            "writes that change nothing",
            observed(vec![object(
                "Service",
                "web",
                ticks(0, 200).map(|t| write(t, by("x", "Apply", ""), &[], false)).collect(),
            )]),
            0,
            1,
        ),
        (
            "a few writes in a short window are no storm",
            Observed {
                window: Duration::from_secs(2),
                objects: vec![object("Runner", "web", ticks(0, 300).take(6).map(status).collect())],
            },
            0,
            0,
        ),
        (
            "kubectl scale deploy, put back once: drift repaired, no fight",
            observed(vec![object(
                "Deployment",
                "web",
                vec![
                    write(1_000, by("kubectl", "Update", ""), &["spec.replicas"], true),
                    write(1_050, by(OURS, "Apply", ""), &["spec.replicas"], true),
                ],
            )]),
            0,
            0,
        ),
        (
            "two scales, each put back: a fight",
            observed(vec![object(
                "Deployment",
                "web",
                vec![
                    write(1_000, by("kubectl", "Update", ""), &["spec.replicas"], true),
                    write(1_050, by(OURS, "Apply", ""), &["spec.replicas"], true),
                    write(5_000, by("kubectl", "Update", ""), &["spec.replicas"], true),
                    write(5_050, by(OURS, "Apply", ""), &["spec.replicas"], true),
                ],
            )]),
            1,
            0,
        ),
    ];
    for (name, o, fights, storms) in cases {
        let t = tally(&o, &LIMITS);
        assert_eq!((t.fights.len(), t.storms.len()), (fights, storms), "{name}: {t:#?}");
    }
}

#[test]
fn a_script_editing_the_runner_is_the_storm_not_the_manager_passing_it_on() {
    let runner =
        ticks(0, 150).map(|t| write(t, by("script", "Update", ""), &["spec.replicas"], true)).collect();
    let deploy = ticks(30, 150).map(|t| write(t, by(OURS, "Apply", ""), &["spec.replicas"], true)).collect();
    let o = observed(vec![object("Runner", "web", runner), object("Deployment", "web", deploy)]);
    let t = tally(&o, &LIMITS);
    let stormy: Vec<&str> = t.storms.iter().map(|s| s.object.kind.as_str()).collect();
    assert_eq!(stormy, ["Runner"]);
    assert!(t.runner_generation_changed && t.fights.is_empty());
}

#[test]
fn fields_fought_over_by_the_same_two_managers_are_one_fight() {
    let mut w = vec![];
    for t in ticks(0, 1_000) {
        w.push(write(t, by("hpa", "Update", ""), &["spec.replicas", "spec.template"], true));
        w.push(write(t + 500, by(OURS, "Apply", ""), &["spec.replicas", "spec.template"], true));
    }
    let o = observed(vec![object("Deployment", "web", w)]);
    let t = tally(&o, &LIMITS);
    assert_eq!(t.fights.len(), 1);
    assert_eq!(t.fights[0].fields, ["spec.replicas", "spec.template"]);
}
