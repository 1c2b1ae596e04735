//! The reconcile manager against the real control plane: each test runs its
//! own manager, watching its own temporary namespace.

mod support;

use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use kubectl_runner::api::{FINALIZER, Phase, RUNNER_UID_LABEL, Runner, RunnerSpec, condition};
use serde_json::json;
use support::{ManagerHandle, TestNs, ensure_crd, wait_for};

const T: Duration = Duration::from_secs(60);

fn spec(image: &str, replicas: i32) -> RunnerSpec {
    RunnerSpec::new(image).replicas(replicas)
}

async fn create(ns: &TestNs, name: &str, spec: RunnerSpec) -> Runner {
    ns.api::<Runner>().create(&PostParams::default(), &Runner::new(name, spec)).await.expect("create Runner")
}

async fn wait_ready(ns: &TestNs, name: &str, replicas: i32) -> Runner {
    let api = ns.api::<Runner>();
    wait_for(&format!("Runner {name} Available with {replicas} ready"), T, || {
        let api = api.clone();
        async move {
            let r = api.get(name).await.ok()?;
            let s = r.status.as_ref()?;
            let gen_ok = s.observed_generation == r.metadata.generation;
            (gen_ok && s.phase == Phase::Available && s.ready_replicas == replicas).then_some(r)
        }
    })
    .await
}

/// Waits until `name` no longer exists.
async fn wait_gone<K>(api: &kube::Api<K>, name: &str, what: &str, timeout: Duration)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_for(what, timeout, || {
        let api = api.clone();
        async move { api.get_opt(name).await.ok().and_then(|o| o.is_none().then_some(())) }
    })
    .await;
}

fn is_controlled_by(obj: &impl Resource, runner: &Runner) -> bool {
    let uid = runner.uid().unwrap();
    obj.meta().owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.uid == uid)
        && obj.labels().get(RUNNER_UID_LABEL) == Some(&uid)
}

#[tokio::test]
async fn a_runner_gets_a_finalizer_and_owned_deployment_and_service() {
    let ns = TestNs::new("mgr-create").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create(&ns, "web", spec("nginx:1.27", 2)).await;
    let r = wait_ready(&ns, "web", 2).await;
    assert!(r.finalizers().iter().any(|f| f == FINALIZER));
    let d = ns.api::<Deployment>().get("web").await.unwrap();
    assert!(is_controlled_by(&d, &r));
    assert_eq!(d.spec.replicas, Some(2));
    let s = ns.api::<Service>().get("web").await.unwrap();
    assert!(is_controlled_by(&s, &r));
    let svc_spec = s.spec.unwrap();
    assert!(svc_spec.cluster_ip.is_some_and(|ip| !ip.is_empty()), "the apiserver allocated a ClusterIP");
    assert_eq!(svc_spec.selector.unwrap()[RUNNER_UID_LABEL], r.uid().unwrap());
    let st = r.status.clone().unwrap();
    assert_eq!(st.url.as_deref(), Some(format!("http://web.{}.svc.cluster.local", ns.name).as_str()));
    assert_eq!(st.selector, Some(format!("{RUNNER_UID_LABEL}={}", r.uid().unwrap())));
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_settled_runner_makes_no_writes() {
    let ns = TestNs::new("mgr-idle").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create(&ns, "idle", spec("nginx", 1)).await;
    wait_ready(&ns, "idle", 1).await;
    // Let the last Pod/Deployment status events arrive, then watch for writes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = ns.api::<Runner>().get("idle").await.unwrap();
    let dep_before = ns.api::<Deployment>().get("idle").await.unwrap();
    let svc_before = ns.api::<Service>().get("idle").await.unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let after = ns.api::<Runner>().get("idle").await.unwrap();
    assert_eq!(before.resource_version(), after.resource_version(), "Runner was written while idle");
    assert_eq!(
        svc_before.resource_version(),
        ns.api::<Service>().get("idle").await.unwrap().resource_version()
    );
    let dep_after = ns.api::<Deployment>().get("idle").await.unwrap();
    assert_eq!(
        dep_before.metadata.generation, dep_after.metadata.generation,
        "Deployment spec was rewritten"
    );
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn ready_is_false_until_the_pods_are_ready_then_true() {
    let ns = TestNs::new("mgr-ready").await;
    ensure_crd(&ns.client).await;
    let api = ns.api::<Runner>();
    // Record every status the Runner goes through, from before it exists.
    let events = watcher(api.clone(), watcher::Config::default()).applied_objects();
    let seen = tokio::spawn(async move {
        let mut readies = Vec::new();
        let mut events = std::pin::pin!(events);
        while let Ok(Some(r)) = events.try_next().await {
            let ready = r
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::READY).cloned());
            if let Some(c) = ready {
                if readies.last() != Some(&c.status) {
                    readies.push(c.status.clone());
                }
                if c.status == "True" {
                    break;
                }
            }
        }
        readies
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create(&ns, "slow", spec("nginx", 3)).await;
    let readies = tokio::time::timeout(T, seen).await.expect("Runner became Ready").unwrap();
    assert_eq!(readies, vec!["False".to_string(), "True".to_string()], "Ready went False -> True");
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn scaling_through_the_spec_and_the_scale_subresource_reaches_the_deployment() {
    let ns = TestNs::new("mgr-scale").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    let api = ns.api::<Runner>();
    create(&ns, "web", spec("nginx", 1)).await;
    wait_ready(&ns, "web", 1).await;
    api.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}}))).await.unwrap();
    wait_ready(&ns, "web", 3).await;
    assert_eq!(ns.api::<Deployment>().get("web").await.unwrap().spec.replicas, Some(3));
    api.patch_scale("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 2}})))
        .await
        .unwrap();
    wait_ready(&ns, "web", 2).await;
    assert_eq!(ns.api::<Deployment>().get("web").await.unwrap().spec.replicas, Some(2));
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.status.unwrap().replicas, 2);
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_same_name_foreign_deployment_is_left_untouched_and_reported() {
    let ns = TestNs::new("mgr-foreign").await;
    ensure_crd(&ns.client).await;
    let squatter: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web", "labels": { "app": "squatter" } },
        "spec": { "replicas": 1, "selector": { "matchLabels": { "app": "squatter" } },
                  "template": { "metadata": { "labels": { "app": "squatter" } },
                                "spec": { "containers": [{ "name": "c", "image": "squatter:1" }] } } }
    }))
    .unwrap();
    let squatter = ns.api::<Deployment>().create(&PostParams::default(), &squatter).await.unwrap();
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create(&ns, "web", spec("nginx", 2)).await;
    let api = ns.api::<Runner>();
    let r = wait_for("AdoptionRefused", T, || {
        let api = api.clone();
        async move {
            let r = api.get("web").await.ok()?;
            let c =
                r.status.as_ref()?.conditions.iter().find(|c| c.type_ == condition::CHILDREN_OWNED)?.clone();
            (c.reason == condition::REASON_ADOPTION_REFUSED).then_some(r)
        }
    })
    .await;
    // The Service is still made; the squatter is exactly as it was.
    let svc = wait_for("Service", T, || {
        let api = ns.api::<Service>();
        async move { api.get_opt("web").await.ok().flatten() }
    })
    .await;
    assert!(is_controlled_by(&svc, &r));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = ns.api::<Deployment>().get("web").await.unwrap();
    assert_eq!(now.metadata.owner_references, squatter.metadata.owner_references);
    assert_eq!(now.spec.replicas, Some(1));
    assert_eq!(now.spec.template.spec.unwrap().containers[0].image.as_deref(), Some("squatter:1"));
    assert_eq!(r.status.unwrap().phase, Phase::Failed);
    let events = ns.api::<Event>().list(&ListParams::default()).await.unwrap();
    assert!(
        events.items.iter().any(|e| e.reason.as_deref() == Some(condition::REASON_ADOPTION_REFUSED)
            && e.type_.as_deref() == Some("Warning")),
        "a Warning Event AdoptionRefused was recorded"
    );
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_deleted_child_comes_back_and_an_edited_field_is_reverted() {
    let ns = TestNs::new("mgr-heal").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create(&ns, "web", spec("nginx", 2)).await;
    wait_ready(&ns, "web", 2).await;
    let deps = ns.api::<Deployment>();
    let old_uid = deps.get("web").await.unwrap().uid();
    deps.delete("web", &DeleteParams::background()).await.unwrap();
    wait_for("the Deployment to be re-created", T, || {
        let deps = deps.clone();
        let old_uid = old_uid.clone();
        async move { deps.get_opt("web").await.ok().flatten().filter(|d| d.uid() != old_uid) }
    })
    .await;
    let svcs = ns.api::<Service>();
    svcs.delete("web", &DeleteParams::default()).await.unwrap();
    wait_for("the Service to be re-created", T, || {
        let svcs = svcs.clone();
        async move { svcs.get_opt("web").await.ok().flatten().filter(|s| s.metadata.deletion_timestamp.is_none()) }
    })
    .await;
    deps.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    wait_for("replicas reverted to 2", T, || {
        let deps = deps.clone();
        async move { deps.get("web").await.ok().filter(|d| d.spec.replicas == Some(2)) }
    })
    .await;
    wait_ready(&ns, "web", 2).await;
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn an_image_change_rolls_out_through_the_same_deployment() {
    let ns = TestNs::new("mgr-image").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    let api = ns.api::<Runner>();
    create(&ns, "web", spec("nginx:1.26", 2)).await;
    wait_ready(&ns, "web", 2).await;
    let uid = ns.api::<Deployment>().get("web").await.unwrap().uid();
    api.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"image": "nginx:1.27"}})))
        .await
        .unwrap();
    let r = wait_ready(&ns, "web", 2).await;
    assert_eq!(r.status.unwrap().updated_replicas, 2);
    let d = ns.api::<Deployment>().get("web").await.unwrap();
    assert_eq!(d.uid(), uid, "the Deployment was updated, not replaced");
    assert_eq!(d.spec.template.spec.unwrap().containers[0].image.as_deref(), Some("nginx:1.27"));
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>().list(&ListParams::default()).await.unwrap();
    let running_new = pods.items.iter().filter(|p| {
        p.metadata.deletion_timestamp.is_none()
            && p.spec.as_ref().is_some_and(|s| s.containers[0].image.as_deref() == Some("nginx:1.27"))
    });
    assert_eq!(running_new.count(), 2);
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_host_makes_an_ingress_and_removing_it_removes_the_ingress() {
    let ns = TestNs::new("mgr-ingress").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    let api = ns.api::<Runner>();
    create(&ns, "web", spec("nginx", 1).host("web.example.test")).await;
    let r = wait_ready(&ns, "web", 1).await;
    let ing = ns.api::<Ingress>().get("web").await.unwrap();
    assert!(is_controlled_by(&ing, &r));
    assert_eq!(r.status.unwrap().url.as_deref(), Some("http://web.example.test"));
    api.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"expose": {"hosts": null}}})))
        .await
        .unwrap();
    let ings = ns.api::<Ingress>();
    wait_gone(&ings, "web", "the Ingress to be deleted", T).await;
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn deleting_a_runner_removes_its_children_before_the_runner_disappears() {
    let ns = TestNs::new("mgr-delete").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    let api = ns.api::<Runner>();
    create(&ns, "web", spec("nginx:1.27", 2)).await;
    wait_ready(&ns, "web", 2).await;
    // Watch the three kinds; remember the order in which they vanish.
    let (deps, svcs) = (ns.api::<Deployment>(), ns.api::<Service>());
    api.delete("web", &DeleteParams::default()).await.unwrap();
    let gone_order = wait_for("the Runner to disappear", T, || {
        let (api, deps, svcs) = (api.clone(), deps.clone(), svcs.clone());
        async move {
            let runner_gone = api.get_opt("web").await.ok()?.is_none();
            if !runner_gone {
                return None;
            }
            // When the Runner is gone, its children must already be gone.
            Some((deps.get_opt("web").await.ok()?.is_none(), svcs.get_opt("web").await.ok()?.is_none()))
        }
    })
    .await;
    assert_eq!(gone_order, (true, true), "children were gone when the Runner disappeared");
    let events = ns.api::<Event>().list(&ListParams::default()).await.unwrap();
    let deleted =
        events.items.iter().find(|e| e.reason.as_deref() == Some("Deleted")).expect("a Deleted Event");
    let note = deleted.note.clone().unwrap_or_default();
    assert!(note.contains("nginx:1.27") && note.contains("2 replicas"), "{note}");
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_child_held_by_another_finalizer_keeps_the_runner_terminating_until_it_is_released() {
    let ns = TestNs::new("mgr-held").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    let api = ns.api::<Runner>();
    create(&ns, "web", spec("nginx:1.27", 1)).await;
    wait_ready(&ns, "web", 1).await;
    let svcs = ns.api::<Service>();
    let hold = json!({ "metadata": { "finalizers": ["example.com/hold"] } });
    svcs.patch("web", &PatchParams::default(), &Patch::Merge(&hold)).await.unwrap();
    api.delete("web", &DeleteParams::default()).await.unwrap();
    // The Service cannot go: the Runner waits, saying so, with one DELETE sent.
    let r = wait_for("the Runner to report Terminating", T, || {
        let api = api.clone();
        async move {
            api.get("web")
                .await
                .ok()
                .filter(|r| r.status.as_ref().is_some_and(|s| s.phase == Phase::Terminating))
        }
    })
    .await;
    assert!(r.finalizers().iter().any(|f| f == FINALIZER));
    assert!(ns.api::<Deployment>().get_opt("web").await.unwrap().is_none(), "the Deployment went at once");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(api.get_opt("web").await.unwrap().is_some(), "the Runner outlived its held Service");
    // Releasing the Service: its delete event alone brings the last pass.
    let release = json!({ "metadata": { "finalizers": null } });
    svcs.patch("web", &PatchParams::default(), &Patch::Merge(&release)).await.unwrap();
    wait_gone(&api, "web", "the Runner to be gone", Duration::from_secs(10)).await;
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_stuck_pods_reason_reaches_the_runner_status_and_clears_when_it_recovers() {
    let ns = TestNs::new("mgr-podview").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    let api = ns.api::<Runner>();
    let r = create(&ns, "web", spec("nginx:1.27", 1)).await;
    wait_ready(&ns, "web", 1).await;
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>();
    let lp = ListParams::default().labels(&format!("{RUNNER_UID_LABEL}={}", r.uid().unwrap()));
    let pod = pods.list(&lp).await.unwrap().items.remove(0);
    // What a kubelet reports for a bad image; the Deployment also stops
    // counting the Pod as available once it is not Ready.
    let stuck = json!({ "status": {
        "conditions": [{ "type": "Ready", "status": "False" }, { "type": "ContainersReady", "status": "False" }],
        "containerStatuses": [{ "name": "runner", "image": "nginx:1.27", "imageID": "", "ready": false,
            "restartCount": 0, "state": { "waiting": { "reason": "ImagePullBackOff", "message": "Back-off pulling image" } } }],
    } });
    pods.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Strategic(&stuck)).await.unwrap();
    let r = wait_for("the Runner to report the Pod's reason", T, || {
        let api = api.clone();
        async move {
            let r = api.get("web").await.ok()?;
            let msg = r.status.as_ref()?.message.clone()?;
            msg.starts_with("ImagePullBackOff").then_some(r)
        }
    })
    .await;
    assert_eq!(r.status.unwrap().phase, Phase::Failed);
    // Deleting the stuck Pod: its replacement is healthy, the Runner Ready again.
    pods.delete(&pod.name_any(), &DeleteParams::default()).await.unwrap();
    wait_ready(&ns, "web", 1).await;
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn without_a_manager_a_deleted_runner_waits_with_its_finalizer_then_completes() {
    let ns = TestNs::new("mgr-offline").await;
    ensure_crd(&ns.client).await;
    let api = ns.api::<Runner>();
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create(&ns, "web", spec("nginx", 1)).await;
    wait_ready(&ns, "web", 1).await;
    mgr.stop().await;
    api.delete("web", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stuck = api.get("web").await.expect("the Runner is still there");
    assert!(stuck.metadata.deletion_timestamp.is_some());
    assert!(stuck.finalizers().iter().any(|f| f == FINALIZER));
    assert!(ns.api::<Deployment>().get_opt("web").await.unwrap().is_some(), "nothing deleted the children");
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    wait_gone(&api, "web", "the Runner to be gone", T).await;
    assert!(ns.api::<Deployment>().get_opt("web").await.unwrap().is_none());
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn invalid_specs_are_rejected_by_the_apiserver_naming_the_field() {
    let ns = TestNs::new("mgr-invalid").await;
    ensure_crd(&ns.client).await;
    let runners = ns.api::<Runner>();
    let cases = [
        (json!({"image": "nginx", "replicas": 4}), "spec.replicas"),
        (json!({"image": "nginx", "replicas": 0}), "spec.replicas"),
        (json!({"image": "nginx", "expose": {"port": 70000}}), "spec.expose.port"),
        (json!({"image": ""}), "spec.image"),
        (json!({"replicas": 1}), "spec.image"),
        (json!({"image": "nginx", "expose": {"hosts": ["Bad_Host"]}}), "spec.expose.hosts[0]"),
        // Server-side apply refuses a repeat in a set before validation runs.
        (json!({"image": "nginx", "expose": {"hosts": ["a.com", "a.com"]}}), "spec.expose.hosts: duplicate"),
        (json!({"image": "nginx", "port": 80}), "port"),
        (json!({"image": "nginx", "colour": "blue"}), "colour"),
    ];
    for (i, (spec, field)) in cases.into_iter().enumerate() {
        let obj = json!({
            "apiVersion": "lab.cloudlab.training/v1beta1", "kind": "Runner",
            "metadata": { "name": format!("bad-{i}") }, "spec": spec,
        });
        // Strict field validation: unknown fields are errors, not warnings.
        let pp = PatchParams::apply("tests").validation_strict();
        let err = runners
            .patch(&format!("bad-{i}"), &pp, &Patch::Apply(&obj))
            .await
            .expect_err(&format!("{spec} must be rejected"));
        let msg = err.to_string();
        assert!(msg.contains(field), "error for {spec} names {field}: {msg}");
    }
    assert!(runners.list(&ListParams::default()).await.unwrap().items.is_empty(), "nothing was created");
}

#[tokio::test]
async fn preflight_names_each_missing_permission_of_a_restricted_identity() {
    let ns = TestNs::new("mgr-preflight").await;
    ensure_crd(&ns.client).await;
    // A ServiceAccount allowed everything in the list except `list services`.
    let mut rules = kubectl_runner::rbac::policy_rules(kubectl_runner::rbac::Scope::Watched);
    for r in &mut rules {
        if r.resources.as_deref() == Some(&["services".to_string()][..]) {
            r.verbs.retain(|v| v != "list");
        }
    }
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "restricted"}});
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "restricted"}, "rules": rules});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "restricted"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "restricted"},
        "subjects": [{"kind": "ServiceAccount", "name": "restricted", "namespace": ns.name}]});
    let pp = PatchParams::apply("tests");
    ns.api::<k8s_openapi::api::core::v1::ServiceAccount>()
        .patch("restricted", &pp, &Patch::Apply(&sa))
        .await
        .unwrap();
    ns.api::<k8s_openapi::api::rbac::v1::Role>()
        .patch("restricted", &pp, &Patch::Apply(&role))
        .await
        .unwrap();
    ns.api::<k8s_openapi::api::rbac::v1::RoleBinding>()
        .patch("restricted", &pp, &Patch::Apply(&binding))
        .await
        .unwrap();
    let mut cfg = kube::Config::infer().await.unwrap();
    cfg.auth_info.impersonate = Some(format!("system:serviceaccount:{}:restricted", ns.name));
    cfg.auth_info.impersonate_groups =
        Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{}", ns.name)]);
    let as_sa = kube::Client::try_from(cfg).unwrap();
    let missing = wait_for("RBAC to settle", T, || {
        let as_sa = as_sa.clone();
        let ns = ns.name.clone();
        async move {
            let m = kubectl_runner::manager::preflight::missing_permissions(&as_sa, Some(&ns), None, false)
                .await
                .ok()?;
            (m.len() == 1).then_some(m)
        }
    })
    .await;
    assert_eq!(missing[0].verb, "list");
    assert_eq!(missing[0].permission.resource_ref(), "services");
    assert!(missing[0].to_string().starts_with(&format!("can't list services in namespace {}", ns.name)));
    let err = kubectl_runner::manager::preflight::check(&as_sa, std::slice::from_ref(&ns.name), None, false)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("can't list services"), "{err}");
}

#[tokio::test]
async fn a_manager_started_among_existing_runners_syncs_reconciles_them_all_and_stops_promptly() {
    let ns = TestNs::new("mgr-restart").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    for i in 0..6 {
        create(&ns, &format!("web-{i}"), spec("nginx:1.27", 1)).await;
    }
    for i in 0..6 {
        wait_ready(&ns, &format!("web-{i}"), 1).await;
    }
    mgr.stop().await;
    // Every worker waits for the caches at once when Runners already exist;
    // a wait that is never woken would hold the graceful stop forever.
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    tokio::time::sleep(Duration::from_secs(3)).await;
    tokio::time::timeout(Duration::from_secs(20), mgr.stop()).await.expect("the manager stops within 20 s");
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    mgr.stop_after_cleanup(&ns).await;
}

/// A stop that comes before the caches have synced must not wait for the
/// reconciles that are waiting for that sync (they would wait for ever:
/// the stop drops the watches). `stop` fails after 30 s.
#[tokio::test]
async fn a_manager_stopped_before_its_caches_sync_stops_promptly() {
    let ns = TestNs::new("mgr-early-stop").await;
    ensure_crd(&ns.client).await;
    for i in 0..3 {
        create(&ns, &format!("r{i}"), spec("nginx", 1)).await;
    }
    for delay_ms in [0, 20, 50, 100, 200] {
        let mgr = ManagerHandle::start(&ns.client, &ns.name);
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        mgr.stop().await;
    }
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    mgr.stop_after_cleanup(&ns).await;
}
