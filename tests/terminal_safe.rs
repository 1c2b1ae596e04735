//! Nothing from the cluster reaches a terminal raw, on the real local
//! control plane: a Runner whose image holds escape sequences, written
//! while the CRD had no image rule (as a cluster had it before the rule
//! existed), is listed and described with its control characters escaped
//! and printed byte-exact as JSON and YAML; it can still be scaled,
//! labelled and deleted. A new Runner with such an image is refused by the
//! CLI (exit 2, before any request) and by the apiserver, naming
//! `spec.image`.
//!
//! One test swaps the CRD for a copy without the image rule; every test
//! here holds [`CRD_LOCK`] so none sees the CRD without its rule.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use kubectl_runner::api::{CRD_NAME, Runner, RunnerSpec};
use support::{ManagerHandle, TestNs, cli, ensure_crd, wait_for};

static CRD_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const MANAGER: &str = "kubectl-runner-tests";
/// Sets the terminal's title, then turns its text red.
const HOSTILE: &str = "nginx\u{1b}]0;PWNED\u{7}\u{1b}[31m:1";
/// How the human-readable output shows it.
const SHOWN: &str = "nginx\\x1b]0;PWNED\\x07\\x1b[31m:1";

fn spec(image: &str) -> RunnerSpec {
    RunnerSpec::new(image)
}

/// Characters in `bytes` a terminal would act on: control characters other
/// than the line breaks of the output itself, and bidi overrides.
fn raw_controls(bytes: &[u8]) -> Vec<char> {
    let bidi = |c: char| matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    String::from_utf8_lossy(bytes).chars().filter(|c| (c.is_control() && *c != '\n') || bidi(*c)).collect()
}

/// Runs the CLI and checks it succeeded and wrote nothing a terminal would
/// act on, on either stream. Returns stdout.
async fn shown(args: &[&str]) -> String {
    let o = cli(args).await;
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{args:?}: {}\n{out}\n{err}", o.status);
    assert_eq!(raw_controls(&o.stdout), Vec::<char>::new(), "{args:?} stdout:\n{out}");
    assert_eq!(raw_controls(&o.stderr), Vec::<char>::new(), "{args:?} stderr:\n{err}");
    out.into_owned()
}

/// Waits until the image rule is served (or gone): a CRD update reaches the
/// apiserver's handlers a little after it is stored. The probe is a
/// dry-run create that only the image rule refuses.
async fn image_rule_in_force(api: &Api<Runner>, in_force: bool) {
    let what = if in_force { "the image rule to be in force" } else { "the image rule to be gone" };
    let pp = PostParams { dry_run: true, field_manager: Some(MANAGER.into()) };
    let probe = Runner::new("probe", spec("Probe"));
    wait_for(what, Duration::from_secs(30), || {
        let (pp, probe) = (pp.clone(), probe.clone());
        async move {
            let refused = match api.create(&pp, &probe).await {
                Ok(_) => false,
                Err(kube::Error::Api(s)) if s.code == 422 => true,
                Err(e) => panic!("probing the image rule: {e}"),
            };
            (refused == in_force).then_some(())
        }
    })
    .await;
}

/// Applies the CRD of the code without the rule on `spec.image`.
async fn apply_crd_without_the_image_rule(client: &Client) {
    let mut crd = serde_json::to_value(kubectl_runner::manifests::runner_crd()).unwrap();
    for version in crd["spec"]["versions"].as_array_mut().unwrap() {
        let image = &mut version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["image"];
        image.as_object_mut().unwrap().remove("x-kubernetes-validations").expect("the CRD has an image rule");
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(CRD_NAME, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&crd)).await.unwrap();
}

/// A namespace, the CRD of the code, its rules in force, and the lock.
async fn setup(prefix: &str) -> (tokio::sync::MutexGuard<'static, ()>, TestNs, Api<Runner>) {
    let lock = CRD_LOCK.lock().await;
    let ns = TestNs::new(prefix).await;
    ensure_crd(&ns.client).await;
    let api: Api<Runner> = ns.api();
    image_rule_in_force(&api, true).await;
    (lock, ns, api)
}

/// A Warning Event about `r` whose reason, source and message hold escapes.
async fn hostile_event(ns: &TestNs, r: &Runner) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let event: Event = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "web.hostile" },
        "involvedObject": { "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner",
                            "name": r.name_any(), "namespace": ns.name, "uid": r.uid() },
        "type": "Warning", "reason": "Pulled\u{1b}[5m", "source": { "component": "someone\u{7}" },
        "message": "pulling \u{1b}]0;PWNED\u{7}\u{1b}[2J\u{9b}31m \u{202e}gnp.exe",
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }))
    .unwrap();
    Api::<Event>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &event)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_runner_admitted_before_the_image_rule_is_shown_escaped_and_can_still_be_scaled_and_deleted() {
    let (_lock, ns, api) = setup("safe-legacy").await;
    apply_crd_without_the_image_rule(&ns.client).await;
    image_rule_in_force(&api, false).await;
    api.create(&PostParams::default(), &Runner::new("web", spec(HOSTILE))).await.unwrap();
    ensure_crd(&ns.client).await;
    image_rule_in_force(&api, true).await;
    // The manager adds its finalizer and writes status: updates that keep
    // the old image are admitted.
    let manager = ManagerHandle::start(&ns.client, &ns.name);
    let r = wait_for("the manager to reconcile the old Runner", Duration::from_secs(60), || {
        let api = api.clone();
        async move {
            let r = api.get("web").await.ok()?;
            let seen = r.status.as_ref().is_some_and(|s| s.observed_generation.is_some());
            (seen && !r.finalizers().is_empty()).then_some(r)
        }
    })
    .await;
    hostile_event(&ns, &r).await;

    let n = ns.name.as_str();
    for args in [&["get", "-n", n][..], &["get", "-A"], &["get", "web", "-n", n, "-o", "wide"]] {
        let out = shown(args).await;
        assert!(out.contains(SHOWN) && out.lines().count() >= 2, "{args:?}:\n{out}");
    }
    let out = shown(&["describe", "web", "-n", n]).await;
    for want in [
        &format!("  Image:                {SHOWN}\n"),
        "Pulled\\x1b[5m",
        "someone\\x07",
        "pulling \\x1b]0;PWNED\\x07\\x1b[2J\\u{9b}31m \\u{202e}gnp.exe",
    ] {
        assert!(out.contains(want), "describe: missing {want:?} in\n{out}");
    }
    // JSON and YAML are the data, exactly as stored.
    let json = cli(&["get", "web", "-n", n, "-o", "json"]).await;
    assert!(json.status.success());
    assert_eq!(serde_json::from_slice::<Runner>(&json.stdout).unwrap().spec.image, HOSTILE);
    let yaml = cli(&["get", "web", "-n", n, "-o", "yaml"]).await;
    assert!(yaml.status.success());
    assert_eq!(serde_yaml::from_slice::<Runner>(&yaml.stdout).unwrap().spec.image, HOSTILE);

    // Scaled (the scale subresource) and labelled with the old image kept.
    shown(&["scale", "web", "-n", n, "--replicas", "2"]).await;
    let patch = serde_json::json!({ "metadata": { "labels": { "touched": "yes" } } });
    api.patch("web", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let r = api.get("web").await.unwrap();
    assert_eq!((r.spec.replicas, r.spec.image.as_str()), (2, HOSTILE));
    // A new image must be a reference, though.
    let patch = serde_json::json!({ "spec": { "image": "nginx\u{1b}[8m" } });
    let err = api.patch("web", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("spec.image")),
        "{err}"
    );

    // Deleted: the manager removes its finalizer with the old image kept.
    let out = shown(&["delete", "web", "-n", n, "--wait", "--timeout", "60s"]).await;
    assert!(out.contains("runner.lab.cloudlab.training/web deleted"), "{out}");
    assert!(api.get_opt("web").await.unwrap().is_none());
    manager.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_new_runner_with_an_image_that_is_no_reference_is_refused_by_the_cli_first_and_by_the_apiserver() {
    let (_lock, ns, api) = setup("safe-refused").await;
    let digest = format!("web@sha256:{}", "0".repeat(63));
    for image in ["Nginx", "nginx 1.27", HOSTILE, "nginx:1\u{9b}2J", digest.as_str(), "a//b"] {
        let o = cli(&["create", "web", "-n", &ns.name, "--image", image]).await;
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{image:?}: {err}");
        assert!(
            err.starts_with("error: spec.image: ") && err.contains("must be an image reference"),
            "{err}"
        );
        assert_eq!(raw_controls(&o.stderr), Vec::<char>::new(), "{image:?}: {err}");
        assert!(api.get_opt("web").await.unwrap().is_none(), "{image:?}: the CLI sent it");

        let refused = api.create(&PostParams::default(), &Runner::new("web", spec(image))).await.unwrap_err();
        let kube::Error::Api(s) = refused else { panic!("{image:?}: {refused}") };
        assert_eq!(s.code, 422, "{image:?}: {}", s.message);
        assert!(
            s.message.contains("spec.image") && s.message.contains("must be an image reference"),
            "{s:?}"
        );
    }
}
