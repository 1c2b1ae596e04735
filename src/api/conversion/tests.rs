//! Round trips over generated Runners of every shape: each optional field
//! set and unset, zero to several hosts, status or none, annotations of
//! our key's name written by users (envelope-looking ones included).

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::{Amounts, PodSecurity, Resources, Runner, RunnerSpec, RunnerStatus, v1alpha1};

const ALPHA: &str = "lab.cloudlab.training/v1alpha1";
const BETA: &str = "lab.cloudlab.training/v1beta1";

fn host() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,6}(\\.[a-z]{2,4}){0,2}"
}

fn resources() -> impl Strategy<Value = Option<Resources>> {
    let amounts = (proptest::option::of("[1-9]00m"), proptest::option::of("[1-9]{1,2}Mi"))
        .prop_map(|(cpu, memory)| Amounts { cpu, memory });
    proptest::option::of((proptest::option::of(amounts.clone()), proptest::option::of(amounts)))
        .prop_map(|r| r.map(|(requests, limits)| Resources { requests, limits }))
}

/// What a user may put under our annotation's key: nothing, any text, or
/// something that looks like the envelope.
fn user_annotation() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        any::<String>().prop_map(Some),
        proptest::collection::vec(host(), 0..3).prop_map(|h| Some(json!({ "hosts": h }).to_string())),
        Just(Some(r#"{"annotation":"{\"hosts\":[\"a.b\"]}"}"#.to_string())),
    ]
}

fn status() -> impl Strategy<Value = Option<RunnerStatus>> {
    proptest::option::of((0..4i32, proptest::option::of(1..9i64), proptest::option::of(".{0,12}")).prop_map(
        |(ready, generation, message)| RunnerStatus {
            ready_replicas: ready,
            observed_generation: generation,
            message,
            ..RunnerStatus::default()
        },
    ))
}

fn metadata(annotation: Option<String>) -> Value {
    let mut m = json!({ "name": "web", "namespace": "team", "uid": "u-1", "resourceVersion": "7",
                        "labels": { "app": "web" }, "finalizers": ["lab.cloudlab.training/cleanup"] });
    if let Some(a) = annotation {
        m["annotations"] = json!({ EXTRA_HOSTS_ANNOTATION: a, "other": "kept" });
    }
    m
}

prop_compose! {
    fn v1beta1_runner()(
        image in "[a-z]{1,8}(:[0-9]\\.[0-9]{1,2})?",
        replicas in 1..=3i32,
        port in 1..=65535i32,
        hosts in proptest::collection::btree_set(host(), 0..5),
        resources in resources(),
        restricted in any::<bool>(),
        annotation in user_annotation(),
        status in status(),
    ) -> Value {
        let mut spec = RunnerSpec::new(image).replicas(replicas).port(port);
        spec.expose.hosts = hosts.into_iter().collect();
        spec.resources = resources;
        spec.pod_security = restricted.then_some(PodSecurity::Restricted);
        let mut r = serde_json::to_value(Runner::new("web", spec)).unwrap();
        r["metadata"] = metadata(annotation);
        if let Some(s) = status { r["status"] = serde_json::to_value(s).unwrap(); }
        r
    }
}

prop_compose! {
    fn v1alpha1_runner()(
        image in "[a-z]{1,8}",
        replicas in 1..=3i32,
        port in 1..=65535i32,
        host in proptest::option::of(host()),
        resources in resources(),
        annotation in user_annotation(),
        status in status(),
    ) -> Value {
        let spec = v1alpha1::RunnerSpec { image, replicas, port, host, resources, pod_security: None };
        let mut r = serde_json::to_value(v1alpha1::Runner::new("web", spec)).unwrap();
        r["metadata"] = metadata(annotation);
        if let Some(s) = status { r["status"] = serde_json::to_value(s).unwrap(); }
        r
    }
}

proptest! {
    #[test]
    fn v1beta1_to_v1alpha1_and_back_is_identity(r in v1beta1_runner()) {
        let old = convert(&r, ALPHA).unwrap();
        // The old version's types (deny_unknown_fields) take the result:
        // nothing of v1beta1 is left in a place v1alpha1 would prune.
        let typed: v1alpha1::Runner = serde_json::from_value(old.clone()).unwrap();
        prop_assert_eq!(typed.spec.host.as_deref(), r["spec"]["expose"]["hosts"][0].as_str());
        prop_assert_eq!(convert(&old, BETA).unwrap(), r);
    }

    #[test]
    fn v1alpha1_to_v1beta1_and_back_is_identity(r in v1alpha1_runner()) {
        // The one exception (module doc): no host, yet more hosts.
        let annotation = r["metadata"]["annotations"][EXTRA_HOSTS_ANNOTATION].as_str();
        prop_assume!(r["spec"]["host"].is_string() || !annotation.is_some_and(is_envelope));
        let new = convert(&r, BETA).unwrap();
        let typed: Runner = serde_json::from_value(new.clone()).unwrap();
        prop_assert_eq!(typed.spec.first_host(), r["spec"]["host"].as_str());
        prop_assert_eq!(convert(&new, ALPHA).unwrap(), r);
    }

    #[test]
    fn converting_to_the_same_version_changes_nothing(r in v1beta1_runner()) {
        prop_assert_eq!(convert(&r, BETA).unwrap(), r);
    }
}

/// `every_field()` is where a new field goes first: one v1alpha1 cannot
/// hold fails here until the conversion carries it.
#[test]
fn every_field_survives_a_round_trip_through_v1alpha1() {
    let r = serde_json::to_value(Runner::new("web", RunnerSpec::every_field())).unwrap();
    let old = convert(&r, ALPHA).unwrap();
    serde_json::from_value::<v1alpha1::Runner>(old.clone()).expect("v1alpha1 holds every field it is given");
    assert_eq!(convert(&old, BETA).unwrap(), r);
}

#[test]
fn the_hosts_v1alpha1_cannot_hold_ride_in_the_annotation() {
    let spec = RunnerSpec::new("nginx").host("a.com").host("b.com").host("c.com");
    let r = serde_json::to_value(Runner::new("web", spec)).unwrap();
    let old = convert(&r, ALPHA).unwrap();
    assert_eq!(old["spec"]["host"], "a.com");
    assert_eq!(old["spec"]["port"], 80);
    assert!(old["spec"].get("expose").is_none());
    assert_eq!(old["metadata"]["annotations"][EXTRA_HOSTS_ANNOTATION], r#"{"hosts":["b.com","c.com"]}"#);
    // A v1alpha1 client changes the host: the others stay behind it.
    let mut edited = old.clone();
    edited["spec"]["host"] = json!("z.com");
    let new = convert(&edited, BETA).unwrap();
    assert_eq!(new["spec"]["expose"]["hosts"], json!(["z.com", "b.com", "c.com"]));
    assert!(new["metadata"].get("annotations").is_none());
    // ...and one that removes the host asked for no Ingress.
    edited["spec"].as_object_mut().unwrap().remove("host");
    let new = convert(&edited, BETA).unwrap();
    assert!(new["spec"]["expose"].get("hosts").is_none(), "{new}");
}

#[test]
fn an_object_of_no_runner_version_is_refused_naming_the_version() {
    let r = json!({ "apiVersion": "lab.cloudlab.training/v2", "kind": "Runner", "spec": {} });
    let err = convert(&r, BETA).unwrap_err();
    assert!(err.starts_with("apiVersion: \"lab.cloudlab.training/v2\" is not a Runner version"), "{err}");
    let ok = serde_json::to_value(Runner::new("web", RunnerSpec::new("nginx"))).unwrap();
    assert!(convert(&ok, "apps/v1").unwrap_err().contains("served: lab.cloudlab.training/v1alpha1, "));
}

#[test]
fn a_review_answers_every_object_or_fails_the_request() {
    let one = serde_json::to_value(Runner::new("a", RunnerSpec::new("nginx").host("a.com"))).unwrap();
    let request = |objects: Vec<Value>| -> ConversionReview {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": { "uid": "u-9", "desiredAPIVersion": ALPHA, "objects": objects }
        }))
        .unwrap()
    };
    let answer = serde_json::to_value(review(request(vec![one.clone(), one.clone()]))).unwrap();
    assert_eq!(answer["response"]["uid"], "u-9");
    assert_eq!(answer["response"]["result"]["status"], "Success");
    assert_eq!(answer["response"]["convertedObjects"][1]["spec"]["host"], "a.com");
    let mut bad = one.clone();
    bad["spec"]["expose"]["hosts"] = json!("not-a-list");
    let answer = serde_json::to_value(review(request(vec![one, bad]))).unwrap();
    assert_eq!(answer["response"]["result"]["status"], "Failure");
    let message = answer["response"]["result"]["message"].as_str().unwrap();
    assert!(message.starts_with("spec.expose.hosts: not a list of names"), "{message}");
    assert!(
        answer["response"].get("convertedObjects").is_none_or(|o| o.as_array().is_some_and(Vec::is_empty))
    );
}
