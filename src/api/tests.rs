//! The schema the CRD gets from these types, checked against the shared bounds.

use super::*;
use kube::CustomResourceExt;

fn spec() -> RunnerSpec {
    RunnerSpec::new("nginx")
}

#[test]
fn a_valid_spec_passes() {
    assert_eq!(spec().validate(), Ok(()));
}

#[test]
fn replicas_outside_one_to_three_names_the_field_and_range() {
    for r in [0, 4, -1] {
        let err = RunnerSpec { replicas: r, ..spec() }.validate().unwrap_err();
        assert!(err.contains("spec.replicas") && err.contains("1..=3"), "{err}");
    }
}

#[test]
fn port_outside_range_is_rejected() {
    let err = spec().port(70000).validate().unwrap_err();
    assert!(err.contains("spec.expose.port") && err.contains("65535"), "{err}");
}

#[test]
fn host_pattern_in_the_schema_is_the_shared_constant() {
    let crd = serde_json::to_string(&Runner::crd()).unwrap();
    let escaped = serde_json::to_string(HOST_PATTERN).unwrap();
    assert!(crd.contains(escaped.trim_matches('"')));
}

#[test]
fn schema_bounds_match_the_shared_constants() {
    let crd = serde_json::to_value(Runner::crd()).unwrap();
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let props = &spec["properties"];
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    assert_eq!(num(&props["replicas"]["minimum"]), f64::from(MIN_REPLICAS));
    assert_eq!(num(&props["replicas"]["maximum"]), f64::from(MAX_REPLICAS));
    assert_eq!(num(&props["replicas"]["default"]), f64::from(DEFAULT_REPLICAS));
    let expose = &props["expose"]["properties"];
    assert_eq!(num(&expose["port"]["minimum"]), f64::from(MIN_PORT));
    assert_eq!(num(&expose["port"]["maximum"]), f64::from(MAX_PORT));
    assert_eq!(num(&expose["port"]["default"]), f64::from(DEFAULT_PORT));
    assert_eq!(props["expose"]["default"], serde_json::json!({ "port": DEFAULT_PORT }));
    assert_eq!(num(&props["image"]["minLength"]), 1.0);
    assert_eq!(num(&props["image"]["maxLength"]), MAX_IMAGE_LEN as f64);
    let hosts = &expose["hosts"];
    assert_eq!((num(&hosts["minItems"]), num(&hosts["maxItems"])), (1.0, MAX_HOSTS as f64));
    assert_eq!(hosts["x-kubernetes-list-type"], "set");
    assert_eq!(num(&hosts["items"]["maxLength"]), MAX_HOST_LEN as f64);
    assert_eq!(hosts["items"]["pattern"], HOST_PATTERN);
    // What `kubectl explain` shows states the same bounds.
    let says =
        |v: &serde_json::Value, bound: usize| v["description"].to_string().contains(&bound.to_string());
    assert!(says(&props["image"], MAX_IMAGE_LEN) && says(hosts, MAX_HOST_LEN) && says(hosts, MAX_HOSTS));
    assert_eq!(spec["required"], serde_json::json!(["image"]));
}

#[test]
fn the_finalizer_patch_tests_and_removes_only_our_entry() {
    let mut r = Runner::new("web", spec());
    r.metadata.finalizers = Some(vec!["a.io/keep".into(), FINALIZER.into(), "b.io/keep".into()]);
    let patch = serde_json::to_value(remove_finalizer_patch(&r).unwrap()).unwrap();
    let path = "/metadata/finalizers/1";
    assert_eq!(
        patch,
        serde_json::json!([{ "op": "test", "path": path, "value": FINALIZER }, { "op": "remove", "path": path }])
    );
    let mut doc = serde_json::to_value(&r).unwrap();
    json_patch::patch(&mut doc, &remove_finalizer_patch(&r).unwrap()).unwrap();
    assert_eq!(doc["metadata"]["finalizers"], serde_json::json!(["a.io/keep", "b.io/keep"]));
    r.metadata.finalizers = Some(vec!["a.io/keep".into()]);
    assert!(remove_finalizer_patch(&r).is_none());
}

#[test]
fn the_finalizer_patch_fails_when_the_list_moved() {
    let mut r = Runner::new("web", spec());
    r.metadata.finalizers = Some(vec!["a.io/keep".into(), FINALIZER.into()]);
    let patch = remove_finalizer_patch(&r).unwrap();
    let mut moved = serde_json::to_value(&r).unwrap();
    moved["metadata"]["finalizers"] = serde_json::json!([FINALIZER, "a.io/keep"]);
    assert!(json_patch::patch(&mut moved, &patch).is_err());
    assert_eq!(moved["metadata"]["finalizers"], serde_json::json!([FINALIZER, "a.io/keep"]));
}

/// The rules as the apiserver will read them, from the generated CRD.
fn cel_rules(crd: &serde_json::Value, at: &[&str]) -> Vec<serde_json::Value> {
    let mut node = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    for key in at {
        node = &node["properties"][*key];
    }
    node["x-kubernetes-validations"].as_array().cloned().unwrap_or_default()
}

#[test]
fn the_crd_checks_the_name_at_the_root_on_create_only() {
    let crd = serde_json::to_value(Runner::crd()).unwrap();
    let root = cel_rules(&crd, &[]);
    assert_eq!(root.len(), 1, "{root:?}");
    let rule = root[0]["rule"].as_str().unwrap();
    assert!(rule.contains("self.metadata.name") && rule.contains(rules::NAME_PATTERN), "{rule}");
    assert!(rule.contains(&format!("size(self.metadata.name) <= {MAX_NAME_LEN}")), "{rule}");
    assert_eq!(root[0]["optionalOldSelf"], true);
    let msg = root[0]["message"].as_str().unwrap();
    assert!(msg.starts_with("metadata.name must be a DNS-1035 label of at most 63 characters"), "{msg}");
}

#[test]
fn the_crd_refuses_ip_hosts_and_images_that_are_not_references() {
    let crd = serde_json::to_value(Runner::crd()).unwrap();
    let host = cel_rules(&crd, &["spec", "expose", "hosts"]);
    assert_eq!(host.len(), 1, "{host:?}");
    assert_eq!(host[0]["rule"], format!("self.all(h, !h.matches(r'{}'))", rules::IPV4_PATTERN));
    assert_eq!(host[0]["message"], rules::HOST_NOT_IP);
    let image = cel_rules(&crd, &["spec", "image"]);
    assert_eq!(image.len(), 1, "{image:?}");
    let rule = image[0]["rule"].as_str().unwrap();
    assert!(rule.ends_with(&format!("self.matches(r'{}')", rules::IMAGE_PATTERN)), "{rule}");
    assert_eq!(image[0]["optionalOldSelf"], true);
    assert_eq!(image[0]["message"], rules::IMAGE_NOT_A_REFERENCE);
    assert!(cel_rules(&crd, &["spec"]).is_empty() && cel_rules(&crd, &["spec", "expose", "port"]).is_empty());
}

#[test]
fn spec_validate_gives_the_schema_refusals_with_the_field() {
    let cases = [
        (RunnerSpec { image: "a".repeat(MAX_IMAGE_LEN + 1), ..spec() }, "spec.image: 513 characters"),
        (
            RunnerSpec { image: "nginx 1.27".into(), ..spec() },
            "spec.image: \"nginx 1.27\" must be an image reference",
        ),
        (spec().host("a.com").host("10.0.0.1"), "spec.expose.hosts[1]: \"10.0.0.1\" must be a DNS name"),
    ];
    for (s, want) in cases {
        let err = s.validate().unwrap_err();
        assert!(err.starts_with(want), "{err}");
    }
    assert_eq!(RunnerSpec { image: "a".repeat(MAX_IMAGE_LEN), ..spec() }.validate(), Ok(()));
}

#[test]
fn conditions_are_a_list_map_keyed_by_type() {
    let crd = serde_json::to_value(Runner::crd()).unwrap();
    let c = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"];
    assert_eq!(c["x-kubernetes-list-type"], "map");
    assert_eq!(c["x-kubernetes-list-map-keys"], serde_json::json!(["type"]));
}
