//! Rendering on fixed inputs: no cluster, no clock.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::safe::escape;
use super::*;
use crate::cli::child_summary::ChildSummary;
use crate::cli::output::describe::Description;

fn now() -> Timestamp {
    "2024-01-01T01:00:00Z".parse().unwrap()
}

fn runner(ns: &str, name: &str, status: serde_json::Value) -> Runner {
    serde_json::from_value(json!({
        "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner",
        "metadata": { "name": name, "namespace": ns, "uid": format!("uid-{name}"), "generation": 1,
                      "creationTimestamp": "2024-01-01T00:55:00Z",
                      "managedFields": [{ "manager": "x", "operation": "Update" }] },
        "spec": { "image": "nginx:1.27", "replicas": 2, "expose": { "port": 80 } },
        "status": status,
    }))
    .unwrap()
}

fn available() -> serde_json::Value {
    json!({ "observedGeneration": 1, "readyReplicas": 2, "phase": "Available", "url": "http://web.ns.svc:80",
            "conditions": [{ "type": "Ready", "status": "True", "reason": "MinimumReplicasAvailable",
                             "message": "2/2 ready", "lastTransitionTime": "2024-01-01T00:58:00Z" }] })
}

#[test]
fn ages_read_like_kubectl() {
    let cases = [
        (-5, "<invalid>"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (185, "3m5s"),
        (600, "10m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 120, "3h2m"),
        (10 * 3600, "10h"),
        (50 * 3600, "2d2h"),
        (30 * 86400, "30d"),
        (800 * 86400, "2y70d"),
        (9 * 365 * 86400, "9y"),
    ];
    for (secs, want) in cases {
        assert_eq!(age(secs), want, "{secs}s");
    }
}

#[test]
fn the_table_has_kubectls_columns_three_space_gutters_and_no_trailing_spaces() {
    let rs = [runner("ns", "web", available())];
    let opts = TableOpts { header: true, ..Default::default() };
    let out = runner_table(&rs, opts, &BTreeMap::new(), now());
    let want = "\
NAME   IMAGE        REPLICAS   READY   PHASE       URL                    AGE
web    nginx:1.27   2          2/2     Available   http://web.ns.svc:80   5m
";
    assert_eq!(out, want);
}

#[test]
fn all_namespaces_puts_namespace_first_and_a_runner_without_status_is_pending() {
    let rs = [runner("a", "web", json!(null)), runner("b", "api", available())];
    let opts = TableOpts { namespace_column: true, header: true, ..Default::default() };
    let out = runner_table(&rs, opts, &BTreeMap::new(), now());
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("NAMESPACE   NAME"), "{out}");
    assert!(
        lines[1].starts_with("a           web") && lines[1].contains("0/2") && lines[1].contains("Pending"),
        "{out}"
    );
    assert!(lines[1].contains("<none>"), "a missing URL shows <none>: {out}");
}

#[test]
fn wide_adds_children_and_the_ready_reason() {
    let rs = [runner("ns", "web", available())];
    let opts = TableOpts { wide: true, header: true, ..Default::default() };
    let out = runner_table(&rs, opts, &BTreeMap::new(), now());
    assert!(out.lines().next().unwrap().ends_with("AGE   CHILDREN   REASON"), "{out}");
    assert!(out.lines().nth(1).unwrap().ends_with("<none>     MinimumReplicasAvailable"), "{out}");
}

#[test]
fn rows_streamed_by_watch_have_no_header() {
    let rs = [runner("ns", "web", available())];
    let out = runner_table(&rs, TableOpts::default(), &BTreeMap::new(), now());
    assert_eq!(out.lines().count(), 1);
    assert!(out.starts_with("web "));
}

#[test]
fn json_of_several_runners_is_a_list_without_managed_fields() {
    let rs = [runner("ns", "a", available()), runner("ns", "b", available())];
    let v: serde_json::Value = serde_json::from_str(&runners(&rs, GetFormat::Json, false)).unwrap();
    assert_eq!(v["kind"], "List");
    assert_eq!(v["items"].as_array().unwrap().len(), 2);
    assert!(v["items"][0]["metadata"].get("managedFields").is_none());
}

#[test]
fn yaml_of_one_named_runner_is_the_object_itself() {
    let out = runners(&[runner("ns", "web", available())], GetFormat::Yaml, true);
    let v: serde_json::Value = serde_yaml::from_str(&out).unwrap();
    assert_eq!(v["kind"], "Runner");
    assert_eq!(v["spec"]["replicas"], 2);
}

#[test]
fn names_are_resource_slash_name_lines() {
    let rs = [runner("ns", "a", available()), runner("ns", "b", available())];
    assert_eq!(
        runners(&rs, GetFormat::Name, false),
        "runner.lab.cloudlab.training/a\nrunner.lab.cloudlab.training/b\n"
    );
}

#[test]
fn describe_shows_spec_status_conditions_children_and_events() {
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": { "name": "e1" }, "type": "Normal", "reason": "ScalingReplicaSet", "count": 2,
        "involvedObject": { "kind": "Deployment", "name": "web" }, "source": { "component": "deployment-controller" },
        "message": "Scaled up replica set web-abc to 2", "lastTimestamp": "2024-01-01T00:59:00Z",
    }))
    .unwrap();
    let d = Description {
        runner: runner("ns", "web", available()),
        children: vec![ChildSummary {
            kind: "Deployment",
            name: "web".into(),
            owned: true,
            state: "2/2 ready".into(),
        }],
        events: vec![event],
    };
    let out = describe(&d, now());
    for want in [
        "Name:                   web",
        "  Image:                nginx:1.27",
        "  Phase:                Available",
        "  Observed generation:  1 (spec generation 1)",
        "  Ready   True     MinimumReplicasAvailable   2m    2/2 ready",
        "  Deployment   web    yes     2/2 ready",
        "  Normal   ScalingReplicaSet   60s (x2)   deployment-controller   Deployment/web   Scaled up replica set web-abc to 2",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
}

#[test]
fn describe_of_an_unreconciled_runner_points_at_diagnose() {
    let d = Description { runner: runner("ns", "web", json!(null)), children: vec![], events: vec![] };
    let out = describe(&d, now());
    assert!(out.contains("kubectl runner diagnose"), "{out}");
    assert!(out.contains("Events:\n  <none>"), "{out}");
}

#[test]
fn rows_streamed_by_watch_line_up_with_the_table_printed_first() {
    let rs = [runner("ns", "web", available())];
    let opts = TableOpts { header: true, ..Default::default() };
    let first = runner_table(&rs, opts, &BTreeMap::new(), now());
    let mut w = WatchTable::new(&rs, opts, &BTreeMap::new(), now());
    let row = w.row(&runner("ns", "a", json!(null)), &BTreeMap::new(), now());
    let header = first.lines().next().unwrap();
    assert_eq!(row.find("nginx"), header.find("IMAGE"), "{first}{row}");
    assert_eq!(row.find("Pending"), header.find("PHASE"), "{first}{row}");
}

/// An image written before admission refused it, as in the issue.
const HOSTILE: &str = "nginx\u{1b}]0;PWNED\u{7}\u{1b}[31m:1";
/// How every human-readable renderer shows it.
const SHOWN: &str = "nginx\\x1b]0;PWNED\\x07\\x1b[31m:1";

/// Control characters in rendered text other than the line breaks the
/// renderer itself writes.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars().filter(|c| *c != '\n' && escape(&c.to_string()) != c.to_string()).collect()
}

fn hostile_runner() -> Runner {
    let mut r = runner("ns", "web", available());
    r.spec.image = HOSTILE.into();
    let st = r.status.as_mut().unwrap();
    st.message = Some("pulling \u{9b}2J\u{202e}evil".into());
    st.url = Some("http://web\u{1b}[8m".into());
    st.conditions[0].reason = "Bad\u{7f}Reason".into();
    st.conditions[0].message = "two\nlines\r".into();
    r
}

#[test]
fn tables_show_control_characters_from_the_cluster_escaped() {
    let rs = [hostile_runner()];
    for opts in [
        TableOpts { header: true, ..Default::default() },
        TableOpts { header: true, wide: true, namespace_column: true, labels: false },
    ] {
        let out = runner_table(&rs, opts, &BTreeMap::new(), now());
        assert_eq!(raw_controls(&out), Vec::<char>::new(), "{out}");
        assert!(out.contains(SHOWN) && out.contains("http://web\\x1b[8m"), "{out}");
        let mut w = WatchTable::new(&rs, opts, &BTreeMap::new(), now());
        let row = w.row(&rs[0], &BTreeMap::new(), now());
        assert_eq!(raw_controls(&row), Vec::<char>::new(), "{row}");
        assert!(row.contains(SHOWN), "{row}");
    }
    let wide = runner_table(
        &rs,
        TableOpts { header: true, wide: true, ..Default::default() },
        &BTreeMap::new(),
        now(),
    );
    assert!(wide.contains("Bad\\x7fReason"), "{wide}");
}

#[test]
fn describe_shows_control_characters_from_the_cluster_escaped() {
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": { "name": "e1" }, "type": "Warning", "reason": "Failed\u{1b}[5m",
        "involvedObject": { "kind": "Runner", "name": "web" }, "reportingComponent": "someone\u{7}",
        "message": "Failed to pull image \"nginx\u{1b}]0;PWNED\u{7}\": \u{9b}\u{202e}",
        "lastTimestamp": "2024-01-01T00:59:00Z",
    }))
    .unwrap();
    let child =
        ChildSummary { kind: "Deployment", name: "web".into(), owned: true, state: "0/2 \u{1b}[2J".into() };
    let d = Description { runner: hostile_runner(), children: vec![child], events: vec![event] };
    let out = describe(&d, now());
    assert_eq!(raw_controls(&out), Vec::<char>::new(), "{out}");
    for want in [
        &format!("  Image:                {SHOWN}\n"),
        "  Message:              pulling \\u{9b}2J\\u{202e}evil\n",
        "two\\nlines\\r",
        "0/2 \\x1b[2J",
        "Failed\\x1b[5m",
        "someone\\x07",
        "Failed to pull image \"nginx\\x1b]0;PWNED\\x07\": \\u{9b}\\u{202e}",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
}

#[test]
fn json_and_yaml_keep_the_exact_data() {
    let r = hostile_runner();
    let json = runners(std::slice::from_ref(&r), GetFormat::Json, true);
    let yaml = runners(std::slice::from_ref(&r), GetFormat::Yaml, true);
    let back =
        [serde_json::from_str::<Runner>(&json).unwrap(), serde_yaml::from_str::<Runner>(&yaml).unwrap()];
    for back in back {
        assert_eq!(back.spec.image, HOSTILE);
        assert_eq!(back.status, r.status);
    }
    // Each in its own syntax, as kubectl prints them.
    assert!(json.contains(r#""image": "nginx\u001b]0;PWNED\u0007\u001b[31m:1""#), "{json}");
    assert!(yaml.contains(r#"image: "nginx\e]0;PWNED\a\e[31m:1""#), "{yaml}");
}

#[test]
fn error_lines_and_progress_lines_escape_what_the_cluster_said() {
    let e = Error::Invalid(format!("spec.image: {HOSTILE}"));
    assert_eq!(error(&e, &Default::default()), format!("error: spec.image: {SHOWN}\n"));
    let e = Error::WaitRunner {
        namespace: "ns".into(),
        name: "web".into(),
        goal: "be Available",
        after: std::time::Duration::from_secs(60),
        last: progress_line(&hostile_runner()),
        has_status: true,
    };
    let line = error(&e, &Default::default());
    assert_eq!(raw_controls(&line), Vec::<char>::new(), "{line}");
    assert!(line.contains("web: Available 2/2 ready (pulling \\u{9b}2J\\u{202e}evil)"), "{line}");
    assert_eq!(warning("gone\u{1b}[1A"), "warning: gone\\x1b[1A\n");
    assert_eq!(no_resources(Some("ns\u{7}")), "No Runners found in ns\\x07 namespace.\n");
}
