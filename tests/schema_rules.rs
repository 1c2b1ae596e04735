//! The CRD's schema rules against the real local control plane: the CRD
//! generated from the code refuses Runners that could never have children,
//! naming the field, and the CLI's checks give the same verdict as the
//! apiserver for every case. Each test has its own temporary namespace.
//!
//! One test swaps the CRD for a copy without the name rule, to stand for a
//! Runner admitted before the rule existed; every test here holds
//! [`CRD_LOCK`] so none sees the CRD without its rule.

mod support;

use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubectl_runner::api::{CRD_NAME, MAX_IMAGE_LEN, MAX_NAME_LEN, Runner, RunnerSpec, rules};
use kubectl_runner::cli::create;
use support::{TestNs, ensure_crd, wait_for};

static CRD_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const MANAGER: &str = "kubectl-runner-tests";

/// The start of what both the apiserver and the CLI say about a bad image.
const NOT_A_REFERENCE: &str = "must be an image reference [HOST[:PORT]/]PATH[:TAG][@sha256:DIGEST]";

fn spec() -> RunnerSpec {
    RunnerSpec::new("nginx:1.27")
}

fn runner(name: &str, spec: RunnerSpec) -> Runner {
    Runner::new(name, spec)
}

/// The apiserver's verdict on `r`, by server-side apply (what `kubectl
/// apply --server-side` sends) and by create (what `kubectl create` and our
/// CLI send), both as dry runs: they must agree. `Err` holds the message.
async fn admit(api: &Api<Runner>, r: &Runner) -> Result<(), String> {
    let name = r.metadata.name.clone().unwrap();
    let mut pp = PatchParams::apply(MANAGER).force();
    pp.dry_run = true;
    let applied = api.patch(&name, &pp, &Patch::Apply(r)).await.map(|_| ());
    let pp = PostParams { dry_run: true, field_manager: Some(MANAGER.into()) };
    let created = api.create(&pp, r).await.map(|_| ());
    let verdict = |res: kube::Result<()>| match res {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 422 => Err(s.message),
        Err(e) => panic!("{name}: not a verdict: {e}"),
    };
    let (applied, created) = (verdict(applied), verdict(created));
    assert_eq!(applied.is_ok(), created.is_ok(), "{name}: apply {applied:?}, create {created:?}");
    created
}

/// Waits until the CRD's name rule is served (or gone): a CRD update reaches
/// the apiserver's handlers a little after it is stored. The probe is a
/// dry-run create of a name no test creates, so it never meets a conflict.
async fn rules_in_force(api: &Api<Runner>, in_force: bool) {
    let what = if in_force { "the name rule to be in force" } else { "the name rule to be gone" };
    let pp = PostParams { dry_run: true, field_manager: Some(MANAGER.into()) };
    let probe = runner("probe.v2", spec());
    wait_for(what, Duration::from_secs(30), || {
        let (pp, probe) = (pp.clone(), probe.clone());
        async move {
            let refused = match api.create(&pp, &probe).await {
                Ok(_) => false,
                Err(kube::Error::Api(s)) if s.code == 422 => true,
                Err(e) => panic!("probing the name rule: {e}"),
            };
            (refused == in_force).then_some(())
        }
    })
    .await;
}

/// A namespace, the CRD of the code, its rules in force, and the lock.
async fn setup(prefix: &str) -> (tokio::sync::MutexGuard<'static, ()>, TestNs, Api<Runner>) {
    let lock = CRD_LOCK.lock().await;
    let ns = TestNs::new(prefix).await;
    ensure_crd(&ns.client).await;
    let api: Api<Runner> = ns.api();
    rules_in_force(&api, true).await;
    (lock, ns, api)
}

#[tokio::test]
async fn names_a_service_cannot_take_are_refused_naming_metadata_name() {
    let (_lock, _ns, api) = setup("adm-name").await;
    for name in ["web.v2", "2web", &"a".repeat(MAX_NAME_LEN + 1), "web-", "Web"] {
        let msg = admit(&api, &runner(name, spec())).await.expect_err(name);
        assert!(
            msg.contains("metadata.name must be a DNS-1035 label of at most 63 characters"),
            "{name}: {msg}"
        );
        let cli = create::from_flags(name, "ns", spec()).unwrap_err().to_string();
        assert!(cli.contains("metadata.name") && cli.contains("at most 63 characters"), "{name}: {cli}");
    }
    for name in ["web", "a", &"a".repeat(MAX_NAME_LEN), "web-2"] {
        admit(&api, &runner(name, spec())).await.unwrap_or_else(|m| panic!("{name}: {m}"));
        create::from_flags(name, "ns", spec()).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[tokio::test]
async fn the_cli_and_the_apiserver_agree_on_every_host_and_image() {
    let (_lock, _ns, api) = setup("adm-spec").await;
    let host = |h: &str| spec().host(h);
    let image = |i: &str| RunnerSpec { image: i.into(), ..spec() };
    let long = "a".repeat(MAX_IMAGE_LEN + 1);
    let refused = [
        (host("10.0.0.1"), "spec.expose.hosts", "must be a DNS name, not an IP address"),
        (host("010.000.0.1"), "spec.expose.hosts", "must be a DNS name, not an IP address"),
        (host("255.255.255.255"), "spec.expose.hosts", "must be a DNS name, not an IP address"),
        (host("Web.example.com"), "spec.expose.hosts", ""),
        (host(&"a".repeat(254)), "spec.expose.hosts", ""),
        (image(&long), "spec.image", "512"),
        (image("nginx 1.27"), "spec.image", NOT_A_REFERENCE),
        (image("nginx\t"), "spec.image", NOT_A_REFERENCE),
        (image("Nginx"), "spec.image", NOT_A_REFERENCE),
        (image("a//b"), "spec.image", NOT_A_REFERENCE),
        (image(":tag"), "spec.image", NOT_A_REFERENCE),
        (image("nginx\u{1b}]0;PWNED\u{7}\u{1b}[31m:1"), "spec.image", NOT_A_REFERENCE),
        (image("ghcr.io/example/web@sha256:0123"), "spec.image", NOT_A_REFERENCE),
        (image(&format!("web@sha256:{}", "A".repeat(64))), "spec.image", NOT_A_REFERENCE),
        (image(&format!("web:{}", "t".repeat(129))), "spec.image", NOT_A_REFERENCE),
        (image(""), "spec.image", ""),
    ];
    for (s, field, words) in refused {
        let what = format!("{field} {:?} / {:?}", s.expose.hosts, s.image.get(..20));
        let msg = admit(&api, &runner("web", s.clone())).await.expect_err(&what);
        assert!(msg.contains(field) && msg.contains(words), "{what}: {msg}");
        let cli = s.validate().expect_err(&what);
        assert!(cli.starts_with(field) && cli.contains(words), "{what}: {cli}");
    }
    let accepted = [
        host("web.example.com"),
        host("256.0.0.1"),
        host("1.2.3"),
        host(&"a".repeat(253)),
        image(&"a".repeat(MAX_IMAGE_LEN)),
        image(&format!("ghcr.io/example/web:1.0@sha256:{}", "0123456789abcdef".repeat(4))),
        image("localhost:5000/a/b:t"),
        image("Registry.example.com:443/team/web_app__x.y-z:V1.2_rc-3"),
        image("[::1]:5000/web"),
    ];
    for s in accepted {
        let what = format!("{:?} / {:?}", s.expose.hosts, s.image.get(..20));
        admit(&api, &runner("web", s.clone())).await.unwrap_or_else(|m| panic!("{what}: {m}"));
        s.validate().unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

#[tokio::test]
async fn the_host_rule_refuses_exactly_what_the_ingress_api_refuses() {
    let (_lock, ns, _api) = setup("adm-ingress").await;
    let ingresses: Api<Ingress> = ns.api();
    let pp = PostParams { dry_run: true, field_manager: Some(MANAGER.into()) };
    for host in ["10.0.0.1", "010.0.0.1", "1.2.3.0004", "256.0.0.1", "1.2.3", "1.2.3.4.5", "web.example.com"]
    {
        let ing: Ingress = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "web" },
            "spec": { "rules": [{ "host": host }] },
        }))
        .unwrap();
        let ingress_ok = match ingresses.create(&pp, &ing).await {
            Ok(_) => true,
            Err(kube::Error::Api(s)) if s.code == 422 => false,
            Err(e) => panic!("{host}: {e}"),
        };
        assert_eq!(
            rules::check_host("spec.expose.hosts[0]", host).is_ok(),
            ingress_ok,
            "{host}: the Ingress API says {ingress_ok}"
        );
    }
}

/// Applies the CRD of the code without its root rule, as a cluster had it
/// before the rule existed.
async fn apply_crd_without_the_name_rule(client: &Client) {
    let mut crd = serde_json::to_value(kubectl_runner::manifests::runner_crd()).unwrap();
    for version in crd["spec"]["versions"].as_array_mut().unwrap() {
        let root = version["schema"]["openAPIV3Schema"].as_object_mut().unwrap();
        root.remove("x-kubernetes-validations").expect("the CRD has a root rule");
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(CRD_NAME, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&crd)).await.unwrap();
}

#[tokio::test]
async fn a_runner_admitted_before_the_name_rule_can_still_lose_its_finalizer() {
    let (_lock, ns, api) = setup("adm-legacy").await;
    apply_crd_without_the_name_rule(&ns.client).await;
    rules_in_force(&api, false).await;
    let mut old = runner("web.v2", spec());
    old.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    api.create(&PostParams::default(), &old).await.unwrap();
    ensure_crd(&ns.client).await;
    rules_in_force(&api, true).await;
    // Updates of the old Runner are admitted: the rule runs on create only.
    let patch =
        serde_json::json!({ "metadata": { "labels": { "touched": "yes" } }, "spec": { "replicas": 2 } });
    api.patch("web.v2", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let patch = serde_json::json!({ "metadata": { "finalizers": null } });
    api.patch("web.v2", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    api.delete("web.v2", &Default::default()).await.unwrap();
    wait_for("the old Runner to go", Duration::from_secs(30), || {
        let api = api.clone();
        async move { api.get_opt("web.v2").await.ok()?.is_none().then_some(()) }
    })
    .await;
}
