use serde_json::{Value, json};

use super::*;
use crate::api::RUNNER_UID_LABEL;
use crate::kinds::served_fixture::{as_json, body, decode, is_subset, live_deployment, runner};

fn desired(r: &Runner) -> Deployment {
    Deployments::desired(r).unwrap()
}

#[test]
fn the_deployment_selects_the_runners_uid_and_runs_its_image_on_its_port() {
    let r = runner();
    let spec = desired(&r).spec;
    assert_eq!(spec.replicas, Some(r.spec.replicas));
    assert_eq!(spec.selector.match_labels.unwrap()[RUNNER_UID_LABEL], "uid-1");
    let c = &spec.template.spec.as_ref().unwrap().containers[0];
    assert_eq!(c.image.as_deref(), Some(r.spec.image.as_str()));
    assert_eq!(c.ports.as_ref().unwrap()[0].container_port, r.spec.expose.port);
    let v = as_json(&desired(&r));
    assert_eq!((v["apiVersion"].as_str(), v["kind"].as_str()), (Some("apps/v1"), Some("Deployment")));
    assert!(v.get("status").is_none() && v["spec"].get("strategy").is_none(), "only our fields: {v}");
}

/// A rollout's steps are progress; its end, a label of ours taken
/// off, or a spec change are not.
#[test]
fn only_a_rollout_step_that_keeps_its_verdict_is_progress_only() {
    let r = runner();
    let at = |updated: i32, available: i32, total: i32, reason: &str, edit: &dyn Fn(&mut Value)| {
        let mut v = live_deployment(&r);
        v["status"] = json!({
            "observedGeneration": v["metadata"]["generation"], "replicas": total,
            "updatedReplicas": updated, "readyReplicas": available, "availableReplicas": available,
            "conditions": [{ "type": "Progressing", "status": "True", "reason": reason,
                             "message": "ReplicaSet \"web-2\" is progressing." }],
        });
        edit(&mut v);
        Packed::pack(decode::<DeploymentView>(v)).unwrap()
    };
    let step = |u, a, t| at(u, a, t, "ReplicaSetUpdated", &|_| {});
    let first = step(1, 2, 3);
    assert_eq!(Deployments::wake(&first, &step(2, 2, 3)), Wake::Progress, "one more replica updated");
    assert_eq!(Deployments::wake(&step(2, 2, 3), &step(2, 1, 3)), Wake::Progress, "one less available");
    let done = at(2, 2, 2, "NewReplicaSetAvailable", &|_| {});
    assert_eq!(Deployments::wake(&step(2, 2, 3), &done), Wake::Now, "complete");
    let unlabelled = at(1, 2, 3, "ReplicaSetUpdated", &|v| {
        v["metadata"]["labels"].as_object_mut().unwrap().remove(RUNNER_UID_LABEL);
    });
    assert_eq!(Deployments::wake(&first, &unlabelled), Wake::Now, "a label of ours");
    let scaled = at(1, 2, 3, "ReplicaSetUpdated", &|v| v["spec"]["replicas"] = json!(5));
    assert_eq!(Deployments::wake(&first, &scaled), Wake::Now, "the spec");
}

/// A status change that leaves the rollout as the status reads it
/// (counts, caught up, the current ReplicaSet, the verdict) wakes
/// nothing; one that names a new current ReplicaSet wakes a pass, so a
/// stuck Pod of it fails the Runner.
#[test]
fn a_status_change_the_rollout_does_not_read_wakes_nothing() {
    let r = runner();
    let at = |generation_seen: i64, reason: &str, message: &str| {
        let mut v = live_deployment(&r);
        v["metadata"]["generation"] = json!(2);
        v["status"] = json!({
            "observedGeneration": generation_seen, "replicas": 2, "updatedReplicas": 2,
            "readyReplicas": 2, "availableReplicas": 2,
            "conditions": [{ "type": "Progressing", "status": "True", "reason": reason, "message": message }],
        });
        Packed::pack(decode::<DeploymentView>(v)).unwrap()
    };
    let old = at(1, "NewReplicaSetAvailable", "ReplicaSet \"web-1\" has successfully progressed.");
    let created = at(1, "NewReplicaSetCreated", "Created new replica set \"web-2\"");
    let seen = at(2, "NewReplicaSetCreated", "Created new replica set \"web-2\"");
    let progressing = at(2, "ReplicaSetUpdated", "ReplicaSet \"web-2\" is progressing.");
    let other = at(2, "ReplicaSetUpdated", "ReplicaSet \"web-3\" is progressing.");
    for (before, now, nothing, why) in [
        (&old, &created, true, "not caught up: the message is not read"),
        (&created, &seen, false, "caught up"),
        (&seen, &progressing, true, "the same ReplicaSet, another word"),
        (&progressing, &other, false, "another current ReplicaSet"),
    ] {
        assert_eq!(Deployments::wake(before, now) == Wake::Nothing, nothing, "{why}");
    }
}

#[test]
fn a_deployment_view_holds_every_desired_field_and_the_rollout() {
    let r = runner();
    let d: DeploymentView = decode(live_deployment(&r));
    assert!(is_subset(Deployments::MERGE, &body(&desired(&r)), &as_json(&d)));
    assert_eq!((d.metadata.uid.as_deref(), d.metadata.generation), (Some("d-1"), Some(3)));
    let mut facts = Facts::default();
    Deployments::facts(&d, &r, &mut facts);
    let rollout = facts.rollout.unwrap();
    assert!(rollout.caught_up && rollout.complete, "{rollout:?}");
}

#[test]
fn a_deployment_view_keeps_of_the_status_what_the_rollout_reads() {
    let r = runner();
    let mut live = live_deployment(&r);
    let at = "2026-01-01T00:00:00Z";
    (live["status"]["collisionCount"], live["status"]["updatedReplicas"]) = (json!(1), json!(1));
    live["status"]["conditions"] = json!([
        { "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
          "message": "Deployment has minimum availability.", "lastUpdateTime": at, "lastTransitionTime": at },
        { "type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
          "message": "ReplicaSet \"web-5d9c7b6f4\" is progressing.", "lastUpdateTime": at, "lastTransitionTime": at },
        { "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
          "message": "pods \"web-5d9c7b6f4-x\" is forbidden: exceeded quota: q", "lastTransitionTime": at },
    ]);
    let (d, full): (DeploymentView, Deployment) = (decode(live.clone()), decode(live));
    let st = d.status.as_ref().unwrap();
    let kept: Vec<_> =
        st.conditions.iter().flatten().map(|c| c.type_.as_deref().unwrap_or_default()).collect();
    assert_eq!(kept, ["Progressing", "ReplicaFailure"]);
    assert!(
        st.conditions
            .iter()
            .flatten()
            .all(|c| c.last_update_time.is_none() && c.last_transition_time.is_none())
    );
    assert_eq!(st.collision_count, None);
    let rollout = rollout::of(Some(&d), 2);
    assert_eq!(rollout, rollout::of(Some(&full), 2), "the view judges the rollout as the whole object does");
    assert_eq!(rollout.current, rollout::CurrentPods::Template("5d9c7b6f4".into()));
    assert!(rollout.pods_refused.is_some());
    assert!(decode::<DeploymentView>(json!({ "metadata": {}, "status": null })).status.is_none());
}

#[test]
fn a_deployment_view_drops_managed_fields_annotations_and_pod_defaults() {
    let d: DeploymentView = decode(live_deployment(&runner()));
    assert!(d.metadata.managed_fields.is_none() && d.metadata.annotations.is_none());
    let v = as_json(&d);
    assert!(v["spec"].get("strategy").is_none());
    assert!(v["spec"]["template"]["spec"].get("dnsPolicy").is_none());
    assert!(v["spec"]["template"]["spec"]["containers"][0].get("terminationMessagePath").is_none());
}

#[test]
fn drift_in_an_owned_field_or_a_foreign_selector_key_is_still_seen() {
    let r = runner();
    let want = body(&desired(&r));
    let mut live = live_deployment(&r);
    live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("evil:1");
    assert!(!is_subset(Deployments::MERGE, &want, &as_json(&decode::<DeploymentView>(live))));
    let mut live = live_deployment(&r);
    live["spec"]["selector"]["matchLabels"]["extra"] = json!("x");
    assert!(!is_subset(Deployments::MERGE, &want, &as_json(&decode::<DeploymentView>(live))));
}

fn c(live: &mut serde_json::Value) -> &mut serde_json::Value {
    &mut live["spec"]["template"]["spec"]["containers"][0]
}

#[test]
fn quantities_stored_canonically_are_not_drift_but_a_changed_limit_or_profile_is() {
    let r = runner();
    let want = body(&desired(&r));
    let mut live = live_deployment(&r);
    c(&mut live)["resources"]["requests"]["cpu"] = json!("100m"); // every_field says 0.1
    assert!(is_subset(Deployments::MERGE, &want, &as_json(&decode::<DeploymentView>(live))));
    let mut live = live_deployment(&r);
    c(&mut live)["resources"]["limits"]["memory"] = json!("256Mi");
    assert!(!is_subset(Deployments::MERGE, &want, &as_json(&decode::<DeploymentView>(live))));
    let mut live = live_deployment(&r);
    c(&mut live)["securityContext"]["allowPrivilegeEscalation"] = json!(true);
    assert!(!is_subset(Deployments::MERGE, &want, &as_json(&decode::<DeploymentView>(live))));
    let mut live = live_deployment(&r);
    live["spec"]["template"]["spec"]["securityContext"] = json!({});
    assert!(!is_subset(Deployments::MERGE, &want, &as_json(&decode::<DeploymentView>(live))));
}

#[test]
fn without_the_new_fields_the_pod_template_is_as_before() {
    let mut r = runner();
    r.spec = crate::api::RunnerSpec::new("nginx:1.27");
    let v = as_json(&desired(&r));
    let pod = &v["spec"]["template"]["spec"];
    assert!(pod.get("securityContext").is_none(), "{pod}");
    assert!(
        pod["containers"][0].get("securityContext").is_none()
            && pod["containers"][0].get("resources").is_none()
    );
}

#[test]
fn a_sidecar_and_foreign_labels_are_not_drift() {
    let r = runner();
    let mut live = live_deployment(&r);
    live["metadata"]["labels"]["team"] = json!("a");
    live["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "proxy", "image": "envoy:1" }));
    let d: DeploymentView = decode(live);
    assert!(is_subset(Deployments::MERGE, &body(&desired(&r)), &as_json(&d)));
    assert_eq!(d.spec.template.spec.containers.len(), 2);
}

#[test]
fn our_update_entry_is_kept_as_a_marker_without_its_fields() {
    let r = runner();
    let mut live = live_deployment(&r);
    live["metadata"]["managedFields"].as_array_mut().unwrap().push(json!({
        "manager": "kubectl-runner", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": { "f:spec": {} }
    }));
    let d: DeploymentView = decode(live);
    assert!(crate::kinds::managed_fields::needs_upgrade(&d.metadata));
    assert!(d.metadata.managed_fields.as_ref().unwrap().iter().all(|e| e.fields_v1.is_none()));
}

#[test]
fn describe_and_wide_show_the_ready_count() {
    let d: Deployment = decode(live_deployment(&runner()));
    assert_eq!(Deployments::state(&d), "2/2 ready, 2 updated, 2 available");
    assert_eq!(Deployments::brief(&d).as_deref(), Some("2/2"));
    let empty: Deployment = decode::<Deployment>(json!({ "metadata": {} }));
    assert_eq!(Deployments::brief(&empty).as_deref(), Some("0/1"));
}
