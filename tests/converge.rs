//! Every change converges: edits by users and by other field managers,
//! children written by earlier versions, foreign and stale children,
//! finalizers of others, orphaning deletes, children the apiserver refuses.
//! Each test runs its own manager in its own namespace.

mod oracle;
mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ResourceQuota, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use kubectl_runner::api::{
    Amounts, FIELD_MANAGER, FINALIZER, Phase, PodSecurity, RUNNER_UID_LABEL, Resources, Runner, RunnerSpec,
    condition,
};
use kubectl_runner::kinds::deployment::{CONTAINER, Deployments};
use kubectl_runner::kinds::service::Services;
use kubectl_runner::kinds::{ChildKind, meta};
use serde_json::{Value, json};
use support::{ManagerHandle, TestNs, ensure_crd, wait_for};

const T: Duration = Duration::from_secs(60);

fn spec(port: i32) -> RunnerSpec {
    RunnerSpec::new("nginx:1.27").replicas(2).port(port)
}

async fn start(prefix: &str) -> (TestNs, ManagerHandle) {
    let ns = TestNs::new(prefix).await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    (ns, mgr)
}

async fn create(ns: &TestNs, name: &str, spec: RunnerSpec) -> Runner {
    ns.api::<Runner>().create(&PostParams::default(), &Runner::new(name, spec)).await.expect("create Runner")
}

fn json_patch(ops: Value) -> Patch<()> {
    Patch::Json(serde_json::from_value(ops).unwrap())
}

/// The Runner's status once `pred` holds for it.
async fn wait_status(ns: &TestNs, what: &str, pred: impl Fn(&Runner) -> bool) -> Runner {
    let api = ns.api::<Runner>();
    let pred = &pred;
    wait_for(what, T, || {
        let api = api.clone();
        async move { api.get("web").await.ok().filter(|r| pred(r)) }
    })
    .await
}

fn ready_condition(r: &Runner) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    r.status.as_ref()?.conditions.iter().find(|c| c.type_ == condition::READY)
}

#[tokio::test]
async fn a_port_change_by_merge_patch_leaves_exactly_one_port_on_each_child() {
    let (ns, mgr) = start("cv-port").await;
    create(&ns, "web", spec(80)).await;
    oracle::wait_converged(&ns, "web", true, T, "created").await;
    let api = ns.api::<Runner>();
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "expose": { "port": 8080 } } })),
    )
    .await
    .unwrap();
    oracle::wait_converged(&ns, "web", true, T, "port 80 -> 8080").await;
    // And later changes still reach the children.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "image": "nginx:1.28", "replicas": 3 } })),
    )
    .await
    .unwrap();
    oracle::wait_converged(&ns, "web", true, T, "image and replicas").await;
    // Our field manager owns our fields through one Apply entry only.
    let svc = ns.api::<Service>().get("web").await.unwrap();
    let ours: Vec<_> = svc
        .managed_fields()
        .iter()
        .filter(|e| e.manager.as_deref() == Some(FIELD_MANAGER))
        .map(|e| e.operation.clone().unwrap_or_default())
        .collect();
    assert_eq!(ours, ["Apply"], "one entry of ours, operation Apply");
    mgr.stop_after_cleanup(&ns).await;
}

/// What earlier versions left: children created with POST (operation
/// Update), then a spec change while no manager runs.
#[tokio::test]
async fn children_posted_by_an_earlier_version_are_migrated_and_converge() {
    let ns = TestNs::new("cv-migrate").await;
    ensure_crd(&ns.client).await;
    let mut r = Runner::new("web", spec(80));
    r.metadata.finalizers = Some(vec![FINALIZER.into()]);
    let r = ns.api::<Runner>().create(&PostParams::default(), &r).await.unwrap();
    let pp = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
    ns.api::<Deployment>().create(&pp, &Deployments::desired(&r).unwrap()).await.unwrap();
    ns.api::<Service>().create(&pp, &Services::desired(&r).unwrap()).await.unwrap();
    ns.api::<Runner>()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "expose": { "port": 9090 } } })),
        )
        .await
        .unwrap();
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    oracle::wait_converged(&ns, "web", true, T, "legacy children after a port change").await;
    let d = ns.api::<Deployment>().get("web").await.unwrap();
    assert!(
        !d.managed_fields()
            .iter()
            .any(|e| e.manager.as_deref() == Some(FIELD_MANAGER) && e.operation.as_deref() == Some("Update")),
        "our Update entry was folded into the Apply entry"
    );
    mgr.stop_after_cleanup(&ns).await;
}

/// The create-only apply the manager creates children with. A name taken
/// since the cache looked is answered 409 and the object there is left
/// exactly as it was (no owner, no field of ours); on a free name the child
/// is created with our fields under our Apply entry alone, so an apply that
/// drops one later needs no take-over.
#[tokio::test]
async fn a_create_that_finds_the_name_taken_leaves_the_object_there_untouched() {
    let ns = TestNs::new("cv-create-only").await;
    ensure_crd(&ns.client).await;
    // No manager: the test plays its create.
    let r = ns.api::<Runner>().create(&PostParams::default(), &Runner::new("web", spec(80))).await.unwrap();
    let services = ns.api::<Service>();
    let theirs: Service = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "selector": { "app": "theirs" }, "ports": [{ "port": 8080 }] },
    }))
    .unwrap();
    let theirs = services.create(&PostParams::default(), &theirs).await.unwrap();
    let ours = serde_json::to_value(Services::desired(&r).unwrap()).unwrap();
    let err = kubectl_runner::manager::child_write::create_only(&services, "web", ours.clone())
        .await
        .expect_err("the name is taken");
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 409), "{err:?}");
    let after = services.get("web").await.unwrap();
    assert_eq!(after.resource_version(), theirs.resource_version(), "not written");
    assert!(after.owner_references().is_empty());
    assert!(!after.managed_fields().iter().any(|e| e.manager.as_deref() == Some(FIELD_MANAGER)));

    services.delete("web", &DeleteParams::default()).await.unwrap();
    let created =
        kubectl_runner::manager::child_write::create_only(&services, "web", ours).await.expect("created");
    let entries: Vec<(Option<&str>, Option<&str>)> =
        created.managed_fields().iter().map(|e| (e.manager.as_deref(), e.operation.as_deref())).collect();
    assert_eq!(entries, [(Some(FIELD_MANAGER), Some("Apply"))]);
    assert_eq!(created.owner_references()[0].uid, r.uid().unwrap());
}

/// While the manager is down, someone moves our Service port to 81 under
/// our port's name, and the user changes the Runner's port to 9090. The
/// manager applies the new port directly (the usual case: the user's own
/// change), is refused for the duplicate name, takes the entry over and
/// applies again, in the same pass: the Runner never reports the child
/// rejected.
#[tokio::test]
async fn a_port_change_meeting_our_port_name_moved_by_someone_else_converges_without_a_rejection() {
    let (ns, mgr) = start("cv-renamed").await;
    create(&ns, "web", spec(80)).await;
    oracle::wait_converged(&ns, "web", true, T, "created").await;
    mgr.stop().await;
    let moved = json_patch(json!([{ "op": "replace", "path": "/spec/ports/0/port", "value": 81 }]));
    let pp = PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    ns.api::<Service>().patch("web", &pp, &moved).await.unwrap();
    let port = Patch::Merge(json!({ "spec": { "expose": { "port": 9090 } } }));
    ns.api::<Runner>().patch("web", &PatchParams::default(), &port).await.unwrap();
    // Every Ready reason the Runner shows on the way.
    let reasons = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let watch = tokio::spawn({
        use futures::StreamExt;
        let (reasons, runners) = (reasons.clone(), ns.api::<Runner>());
        async move {
            let mut events = kube::runtime::watcher(runners, Default::default()).boxed();
            while let Some(e) = events.next().await {
                if let Ok(kube::runtime::watcher::Event::Apply(r)) = e
                    && let Some(c) = ready_condition(&r)
                {
                    reasons.lock().unwrap().push(c.reason.clone());
                }
            }
        }
    });
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    oracle::wait_converged(&ns, "web", true, T, "port 9090").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    watch.abort();
    let svc = ns.api::<Service>().get("web").await.unwrap();
    let ports: Vec<(Option<String>, i32)> =
        svc.spec.unwrap().ports.unwrap().into_iter().map(|p| (p.name, p.port)).collect();
    assert_eq!(ports, [(Some("http".to_string()), 9090)]);
    let reasons = reasons.lock().unwrap().clone();
    assert!(reasons.iter().any(|r| r == "Available"), "the watch saw the end: {reasons:?}");
    assert!(!reasons.iter().any(|r| r == condition::REASON_CHILD_REJECTED), "{reasons:?}");
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn what_others_add_to_a_child_is_kept_and_causes_no_writes() {
    let (ns, mgr) = start("cv-others").await;
    create(&ns, "web", spec(80)).await;
    oracle::wait_converged(&ns, "web", true, T, "created").await;
    let (deps, svcs) = (ns.api::<Deployment>(), ns.api::<Service>());
    let other = PatchParams::apply("someone-else").force();
    // A label, an annotation and a sidecar with its own port, by another manager.
    let dep_add = json!({ "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "web", "labels": { "team": "blue" }, "annotations": { "note": "theirs" } },
        "spec": { "template": { "spec": { "containers": [
            { "name": "sidecar", "image": "envoy:1", "ports": [{ "containerPort": 9901, "protocol": "TCP" }] }] } } } });
    deps.patch("web", &other, &Patch::Apply(&dep_add)).await.unwrap();
    let svc_add = json!({ "apiVersion": "v1", "kind": "Service",
        "metadata": { "name": "web", "labels": { "team": "blue" } },
        "spec": { "ports": [{ "name": "metrics", "port": 9901, "protocol": "TCP" }] } });
    svcs.patch("web", &other, &Patch::Apply(&svc_add)).await.unwrap();
    // `kubectl rollout restart`.
    let restart = json!({ "spec": { "template": { "metadata": { "annotations": {
        "kubectl.kubernetes.io/restartedAt": "2026-12-03T00:00:00Z" } } } } });
    deps.patch("web", &PatchParams::default(), &Patch::Strategic(restart)).await.unwrap();
    oracle::wait_converged(&ns, "web", false, T, "after foreign additions").await;

    // Idle: the Service never changes again, the Deployment only through
    // its controller's status.
    let svc_rv = svcs.get("web").await.unwrap().resource_version();
    let dep_gen = deps.get("web").await.unwrap().metadata.generation;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let svc = svcs.get("web").await.unwrap();
    let d = deps.get("web").await.unwrap();
    assert_eq!(svc.resource_version(), svc_rv, "no write loop on the Service");
    assert_eq!(d.metadata.generation, dep_gen, "no spec write loop on the Deployment");
    assert_eq!(svc.labels().get("team").map(String::as_str), Some("blue"));
    assert!(svc.spec.unwrap().ports.unwrap().iter().any(|p| p.port == 9901));
    assert_eq!(d.annotations().get("note").map(String::as_str), Some("theirs"));
    let pod = d.spec.template;
    assert!(pod.metadata.unwrap().annotations.unwrap().contains_key("kubectl.kubernetes.io/restartedAt"));
    let containers = pod.spec.unwrap().containers;
    assert_eq!(containers.len(), 2, "the sidecar stays");
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn fields_we_own_are_reverted_when_someone_changes_them() {
    let (ns, mgr) = start("cv-revert").await;
    let r = create(&ns, "web", spec(80)).await;
    oracle::wait_converged(&ns, "web", true, T, "created").await;
    let (deps, svcs) = (ns.api::<Deployment>(), ns.api::<Service>());
    let edit = PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    deps.patch("web", &edit, &Patch::Merge(json!({ "spec": { "replicas": 3 } }))).await.unwrap();
    svcs.patch("web", &edit, &Patch::Merge(json!({ "spec": { "selector": { "extra": "key" } } })))
        .await
        .unwrap();
    svcs.patch(
        "web",
        &edit,
        &json_patch(json!([{ "op": "replace", "path": "/spec/ports/0/port", "value": 81 }])),
    )
    .await
    .unwrap();
    oracle::wait_converged(&ns, "web", true, T, "after edits of our fields").await;
    let selector = svcs.get("web").await.unwrap().spec.unwrap().selector.unwrap();
    assert_eq!(selector, meta::selector_labels(&r), "the extra selector key is gone");
    mgr.stop_after_cleanup(&ns).await;
}

/// Dropping an optional field removes what it set, even when nothing
/// else changes; a field someone else set there stays theirs, and does
/// not cause a write per pass.
#[tokio::test]
async fn dropping_limits_and_the_restricted_profile_removes_them_and_keeps_what_others_set() {
    let (ns, mgr) = start("cv-drop").await;
    let cpu = Some(Amounts { cpu: Some("500m".into()), memory: None });
    let limited =
        spec(80).resources(Resources { requests: None, limits: cpu }).pod_security(PodSecurity::Restricted);
    create(&ns, "web", limited).await;
    oracle::wait_converged(&ns, "web", true, T, "created with limits").await;
    let deps = ns.api::<Deployment>();
    let container = |d: &Deployment| d.spec.template.spec.clone().unwrap().containers.remove(0);
    let edit = PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    let theirs = json!({ "spec": { "template": { "spec": { "containers": [
        { "name": CONTAINER, "resources": { "limits": { "memory": "256Mi" } } }
    ] } } } });
    deps.patch("web", &edit, &Patch::Strategic(theirs)).await.unwrap();
    let dropped = json!({ "spec": { "resources": null, "podSecurity": null } });
    ns.api::<Runner>().patch("web", &PatchParams::default(), &Patch::Merge(dropped)).await.unwrap();
    let d = wait_for("limits and the security context gone", T, || {
        let deps = deps.clone();
        async move {
            let d = deps.get("web").await.ok()?;
            let c = container(&d);
            let cpu_gone =
                c.resources.as_ref().and_then(|r| r.limits.as_ref()).is_none_or(|l| !l.contains_key("cpu"));
            (cpu_gone && c.security_context.is_none()).then_some(d)
        }
    })
    .await;
    let limits = container(&d).resources.and_then(|r| r.limits).unwrap_or_default();
    assert_eq!(limits.keys().collect::<Vec<_>>(), ["memory"], "their memory limit stays: {limits:?}");
    let pod = d.spec.template.spec.clone().unwrap();
    assert!(
        pod.security_context.unwrap_or_default().run_as_non_root.is_none(),
        "the Pod's restricted context is gone"
    );
    oracle::wait_converged(&ns, "web", true, T, "after the drop").await;
    // Settled: their field left where it is, no apply per pass.
    let generation = deps.get("web").await.unwrap().metadata.generation;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(deps.get("web").await.unwrap().metadata.generation, generation, "no further writes");
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_removed_uid_label_is_put_back_and_the_child_stays_ours() {
    let (ns, mgr) = start("cv-label").await;
    let r = create(&ns, "web", spec(80)).await;
    oracle::wait_converged(&ns, "web", true, T, "created").await;
    let deps = ns.api::<Deployment>();
    let uid = deps.get("web").await.unwrap().uid();
    let key = RUNNER_UID_LABEL.replace('/', "~1");
    deps.patch(
        "web",
        &PatchParams::default(),
        &json_patch(json!([{ "op": "remove", "path": format!("/metadata/labels/{key}") }])),
    )
    .await
    .unwrap();
    let d = wait_for("the UID label back", T, || {
        let deps = deps.clone();
        async move { deps.get("web").await.ok().filter(|d| d.labels().contains_key(RUNNER_UID_LABEL)) }
    })
    .await;
    assert_eq!(d.uid(), uid, "the same Deployment, not a new one");
    assert_eq!(d.labels()[RUNNER_UID_LABEL], r.uid().unwrap());
    let r = oracle::wait_converged(&ns, "web", true, T, "label restored").await;
    let owned =
        r.status.unwrap().conditions.into_iter().find(|c| c.type_ == condition::CHILDREN_OWNED).unwrap();
    assert_eq!(owned.status, "True");
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn a_foreign_service_makes_the_runner_not_ready_with_a_reason_and_an_event() {
    let ns = TestNs::new("cv-foreign-svc").await;
    ensure_crd(&ns.client).await;
    let squatter: Service = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "selector": { "app": "other" }, "ports": [{ "port": 80 }] } }))
    .unwrap();
    ns.api::<Service>().create(&PostParams::default(), &squatter).await.unwrap();
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    create(&ns, "web", spec(80)).await;
    let r = wait_status(&ns, "Ready=False AdoptionRefused", |r| {
        ready_condition(r)
            .is_some_and(|c| c.status == "False" && c.reason == condition::REASON_ADOPTION_REFUSED)
    })
    .await;
    let st = r.status.unwrap();
    assert_eq!(st.phase, Phase::Failed);
    assert!(st.message.unwrap().contains(&format!("Service {}/web", ns.name)));
    let svc = ns.api::<Service>().get("web").await.unwrap();
    assert_eq!(svc.spec.unwrap().selector.unwrap()["app"], "other", "left untouched");
    let events = ns.api::<Event>().list(&ListParams::default()).await.unwrap();
    assert!(events.items.iter().any(|e| e.reason.as_deref() == Some(condition::REASON_ADOPTION_REFUSED)
        && e.note.as_deref().is_some_and(|n| n.contains("Service"))));
    mgr.stop_after_cleanup(&ns).await;
}

/// The old Runner had no finalizer yet (deleted before any manager saw
/// it); its Service is held by a finalizer of someone else's while the
/// garbage collector deletes it. The new Runner of the same name waits, and
/// is woken by that Service's delete event, not by a resync.
#[tokio::test]
async fn a_runner_created_again_while_the_old_children_go_away_converges_to_new_children() {
    let ns = TestNs::new("cv-recreate").await;
    ensure_crd(&ns.client).await;
    let old = create(&ns, "web", spec(80)).await;
    let mut held = Services::desired(&old).unwrap();
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    ns.api::<Service>().create(&PostParams::default(), &held).await.unwrap();
    ns.api::<Runner>().delete("web", &DeleteParams::background()).await.unwrap();
    wait_for("the old Runner gone", T, || {
        let api = ns.api::<Runner>();
        async move { api.get_opt("web").await.ok().filter(Option::is_none).map(|_| ()) }
    })
    .await;
    let svcs = ns.api::<Service>();
    wait_for("the garbage collector to delete the old Service", T, || {
        let svcs = svcs.clone();
        async move { svcs.get("web").await.ok().filter(|s| s.metadata.deletion_timestamp.is_some()) }
    })
    .await;
    let new = create(&ns, "web", spec(80)).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    wait_status(&ns, "the stale Service reported", |r| {
        r.status.as_ref().and_then(|s| s.message.as_deref()).is_some_and(|m| m.contains("earlier Runner"))
    })
    .await;
    let release = json_patch(json!([{ "op": "remove", "path": "/metadata/finalizers" }]));
    svcs.patch("web", &PatchParams::default(), &release).await.unwrap();
    // Well inside the 60 s recheck of refused children.
    let r =
        oracle::wait_converged(&ns, "web", true, Duration::from_secs(30), "after the old Service went").await;
    assert_eq!(r.uid(), new.uid());
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn finalizers_of_others_are_kept_and_only_ours_is_removed() {
    let (ns, mgr) = start("cv-finalizers").await;
    let mut r = Runner::new("web", spec(80));
    r.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    ns.api::<Runner>().create(&PostParams::default(), &r).await.unwrap();
    let r = oracle::wait_converged(&ns, "web", true, T, "created").await;
    assert_eq!(r.finalizers(), ["example.com/keep", FINALIZER]);
    let api = ns.api::<Runner>();
    api.delete("web", &DeleteParams::default()).await.unwrap();
    let r =
        wait_status(&ns, "our finalizer removed", |r| !r.finalizers().iter().any(|f| f == FINALIZER)).await;
    assert_eq!(r.finalizers(), ["example.com/keep"]);
    assert!(
        ns.api::<Deployment>()
            .get_opt("web")
            .await
            .unwrap()
            .is_none_or(|d| d.meta().deletion_timestamp.is_some())
    );
    // The test's own finalizer, released by the test that set it.
    api.patch(
        "web",
        &PatchParams::default(),
        &json_patch(json!([{ "op": "remove", "path": "/metadata/finalizers" }])),
    )
    .await
    .unwrap();
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn delete_with_cascade_orphan_keeps_the_children() {
    let (ns, mgr) = start("cv-orphan").await;
    let r = create(&ns, "web", spec(80)).await;
    oracle::wait_converged(&ns, "web", true, T, "created").await;
    let dp =
        DeleteParams { propagation_policy: Some(kube::api::PropagationPolicy::Orphan), ..Default::default() };
    ns.api::<Runner>().delete("web", &dp).await.unwrap();
    wait_for("the Runner gone", T, || {
        let api = ns.api::<Runner>();
        async move { api.get_opt("web").await.ok().filter(Option::is_none).map(|_| ()) }
    })
    .await;
    let uid = r.uid().unwrap();
    let d = ns.api::<Deployment>().get("web").await.expect("the Deployment is kept");
    let s = ns.api::<Service>().get("web").await.expect("the Service is kept");
    for refs in [d.owner_references(), s.owner_references()] {
        assert!(!refs.iter().any(|o| o.uid == uid), "orphaned: no reference to the deleted Runner");
    }
    assert!(d.metadata.deletion_timestamp.is_none() && s.metadata.deletion_timestamp.is_none());
    mgr.stop().await;
}

/// A quota that forbids Services: the apiserver refuses the child, the
/// Runner says so, and lifting the quota heals it without a restart.
#[tokio::test]
async fn a_child_the_apiserver_refuses_makes_the_runner_not_ready_with_its_message() {
    let (ns, mgr) = start("cv-rejected").await;
    let quota: ResourceQuota = serde_json::from_value(
        json!({ "metadata": { "name": "no-services" }, "spec": { "hard": { "services": "0" } } }),
    )
    .unwrap();
    ns.api::<ResourceQuota>().create(&PostParams::default(), &quota).await.unwrap();
    // The quota controller must have counted usage before admission enforces it.
    wait_for("the quota to be counted", T, || {
        let api = ns.api::<ResourceQuota>();
        async move { api.get("no-services").await.ok()?.status?.used.map(|_| ()) }
    })
    .await;
    create(&ns, "web", spec(80)).await;
    let r = wait_status(&ns, "Ready=False ChildRejected", |r| {
        ready_condition(r)
            .is_some_and(|c| c.status == "False" && c.reason == condition::REASON_CHILD_REJECTED)
    })
    .await;
    assert!(r.status.unwrap().message.unwrap().contains("exceeded quota"), "the apiserver's own words");
    ns.api::<ResourceQuota>().delete("no-services", &DeleteParams::default()).await.unwrap();
    oracle::wait_converged(&ns, "web", true, T, "after the quota was lifted").await;
    mgr.stop_after_cleanup(&ns).await;
}
