//! The wording, fixes and counts of `write-fight` and `write-storm`.

use std::time::Duration;

use super::super::fixtures;
use super::*;
use crate::diagnose::finding::Severity;
use crate::diagnose::writes::Write;

fn by(manager: &str, op: &str) -> Option<Writer> {
    Some(Writer { manager: manager.into(), operation: op.into(), subresource: String::new() })
}

fn write(ms: u64, writer: Option<Writer>, fields: &[&str]) -> Write {
    Write {
        at: Duration::from_millis(ms),
        writer,
        status_only: false,
        fields: fields.iter().map(|f| f.to_string()).collect(),
        generation_changed: fields.iter().any(|f| f.starts_with("spec")),
    }
}

fn observed(kind: &str, writes: Vec<Write>) -> Option<Observed> {
    let object = ObjectWrites { kind: kind.into(), namespace: "app".into(), name: "web".into(), writes };
    Some(Observed { window: Duration::from_secs(20), objects: vec![object] })
}

/// `a` and `b` set `field` by turns, every 500 ms for 20 s.
fn by_turns(kind: &str, a: &str, b: &str, field: &str) -> Option<Observed> {
    let writes =
        (0..40).map(|i| write(i * 500, by(if i % 2 == 0 { a } else { b }, "Update"), &[field])).collect();
    observed(kind, writes)
}

fn findings(observed: Option<Observed>) -> Vec<Finding> {
    let mut rs = fixtures::runner_state();
    rs.observed = observed;
    check(&rs)
}

#[test]
fn a_replicas_fight_with_the_manager_points_at_the_runners_scale_subresource() {
    let f = findings(by_turns("Deployment", "kubectl", FIELD_MANAGER, "spec.replicas"));
    assert_eq!(f.len(), 1);
    let f = &f[0];
    assert_eq!((f.code, f.severity), (Code::WriteFight, Severity::Error));
    assert_eq!(f.object, runner_ref(&fixtures::runner_state()));
    assert_eq!(
        f.message,
        "spec.replicas of Deployment app/web is set by turns by kubectl and kubectl-runner: 39 hand-overs in 20s"
    );
    assert!(
        f.evidence.contains(&"kubectl (Update) set it 20 times, kubectl-runner (Update) 20 times".into())
    );
    assert!(f.evidence.iter().any(|e| e.starts_with("kubectl-runner is the Runner's manager")), "{f:#?}");
    let fix = f.fix.as_deref().unwrap();
    assert!(fix.contains("kubectl scale runner/web --replicas=N -n app"), "{fix}");
    assert!(fix.contains("apiVersion lab.cloudlab.training/v1beta1, kind Runner"), "{fix}");
    let counts = f.writes.as_ref().unwrap();
    assert_eq!((counts.writes, counts.handovers, counts.per_minute), (40, Some(39), 120.0));
    assert_eq!(
        counts.managers.iter().map(|m| m.manager.as_str()).collect::<Vec<_>>(),
        ["kubectl", FIELD_MANAGER]
    );
}

#[test]
fn other_fights_say_whom_to_stop() {
    let image = "spec.template.spec.containers[name=app].image";
    let with_us = findings(by_turns("Deployment", "argocd", FIELD_MANAGER, image));
    assert_eq!(
        with_us[0].fix.as_deref(),
        Some(format!("stop argocd from writing {image}, and change the Runner's spec instead: the manager passes it on").as_str())
    );
    let without_us = findings(by_turns("Service", "helm", "flux", "metadata.labels.tier"));
    let fix = without_us[0].fix.as_deref().unwrap();
    assert_eq!(fix, "stop flux or helm from writing metadata.labels.tier, or leave the field to the other");
    assert!(!without_us[0].evidence.iter().any(|e| e.contains("the Runner's manager")));
}

#[test]
fn a_storm_names_the_writer_the_fields_and_the_steady_generation() {
    let tick = "metadata.annotations[example.org/tick]";
    let f = findings(observed(
        "Deployment",
        (0..100).map(|i| write(i * 200, by("looper", "Update"), &[tick])).collect(),
    ));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].code, Code::WriteStorm);
    assert_eq!(
        f[0].message,
        "Deployment app/web was written 300 times a minute (100 writes in 20s) while the Runner's generation stayed 1"
    );
    assert_eq!(
        f[0].evidence,
        ["by looper (Update): 100 writes".to_string(), format!("changed: {tick} (100)")]
    );
    assert!(f[0].fix.as_deref().unwrap().starts_with("find the loop in looper"));
    let json = serde_json::to_value(&f[0]).unwrap();
    assert_eq!(json["writes"]["fields"], serde_json::json!([{ "field": tick, "writes": 100 }]));
    assert_eq!(json["writes"]["perMinute"], 300.0);
    assert_eq!(json["writes"]["kind"], "Deployment");
    assert!(json["writes"].get("handovers").is_none());
}

#[test]
fn writes_that_change_nothing_are_called_that() {
    let f =
        findings(observed("Service", (0..50).map(|i| write(i * 400, by("looper", "Apply"), &[])).collect()));
    assert!(f[0].evidence.iter().any(|e| e.starts_with("writes that change nothing")), "{f:#?}");
    assert!(f[0].fix.as_deref().unwrap().contains("sends the object unchanged"));
}

#[test]
fn nothing_observed_or_nothing_written_finds_nothing() {
    assert!(findings(None).is_empty());
    assert!(findings(Some(Observed { window: Duration::from_secs(20), objects: vec![] })).is_empty());
}
