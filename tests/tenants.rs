//! Teams in a namespace, on the real local control plane: users bound to
//! the built-in `edit` and `view` ClusterRoles (which the tenant roles
//! aggregate into) reach Runners; a user who may not read one child kind
//! (each kind of the registry in turn) still gets describe, get -o wide,
//! delete --wait and diagnose; get and describe take several names; and
//! diagnose reports a missing child at once when the status says it was made;
//! install applies the tenant roles and uninstall finds them.
//! Users are impersonated (`--as`) by the test's admin identity.

mod support;

use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kubectl_runner::api::{Runner, RunnerSpec};
use kubectl_runner::kinds::{self, Kind};
use kubectl_runner::manifests;
use support::{ManagerHandle, TestNs, cli, ensure_crd, err, ok, out, wait_for};

const T: Duration = Duration::from_secs(90);

/// `kubectl runner --as USER -n NS ARGS...`.
async fn as_user(user: &str, ns: &TestNs, args: &[&str]) -> Output {
    let mut all = vec!["--as", user, "-n", ns.name.as_str()];
    all.extend_from_slice(args);
    cli(&all).await
}

/// Applies the generated tenant roles, as `install` does.
async fn apply_tenant_roles(ns: &TestNs) {
    for m in manifests::tenant_roles() {
        let name = m.object.metadata.name.clone().unwrap();
        let api: Api<DynamicObject> = Api::all_with(ns.client.clone(), &m.resource);
        api.patch(&name, &PatchParams::apply("kubectl-runner-tests").force(), &Patch::Apply(&m.object))
            .await
            .unwrap_or_else(|e| panic!("apply {}: {e}", m.describe()));
    }
}

/// Binds `user` to the role `kind`/`role` in the test namespace.
async fn bind(ns: &TestNs, user: &str, kind: &str, role: &str) {
    let rb: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": format!("{user}-{role}") },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))
    .unwrap();
    ns.api::<RoleBinding>().create(&PostParams::default(), &rb).await.expect("create RoleBinding");
}

/// Waits until `user` may `verb` Runners in the namespace (RBAC and the
/// aggregation controller settle within moments).
async fn wait_allowed(ns: &TestNs, user: &str, args: &[&str]) {
    wait_for(&format!("{user} to be allowed {args:?}"), T, || async move {
        (as_user(user, ns, args).await.status.code() == Some(0)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_bound_to_edit_create_scale_and_delete_wait_and_users_bound_to_view_list_but_not_create() {
    let ns = TestNs::new("tenant-edit").await;
    ensure_crd(&ns.client).await;
    apply_tenant_roles(&ns).await;
    bind(&ns, "alice", "ClusterRole", "edit").await;
    bind(&ns, "bob", "ClusterRole", "view").await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    wait_allowed(&ns, "alice", &["create", "probe", "--image", "nginx", "--dry-run=server"]).await;
    wait_allowed(&ns, "bob", &["get"]).await;

    let o = as_user("alice", &ns, &["create", "web", "--image", "nginx:1.27", "--wait", "--timeout", "90s"])
        .await;
    ok(&o, "create --wait as an edit user");
    let o = as_user("alice", &ns, &["scale", "web", "--replicas", "2", "--wait", "--timeout", "90s"]).await;
    ok(&o, "scale --wait as an edit user");
    assert_eq!(ns.api::<Runner>().get("web").await.unwrap().spec.replicas, 2);

    let o = as_user("bob", &ns, &["get", "-o", "name"]).await;
    ok(&o, "get as a view user");
    assert_eq!(out(&o), "runner.lab.cloudlab.training/web\n");
    let o = as_user("bob", &ns, &["describe", "web"]).await;
    ok(&o, "describe as a view user");
    assert!(!err(&o).contains("not readable"), "view reads every child kind: {}", err(&o));
    let o = as_user("bob", &ns, &["create", "other", "--image", "nginx"]).await;
    assert_eq!(o.status.code(), Some(1), "a view user created a Runner: {}", out(&o));
    assert!(err(&o).contains("forbidden") || err(&o).contains("bob"), "{}", err(&o));
    let o = as_user("bob", &ns, &["scale", "web", "--replicas", "1"]).await;
    assert_eq!(o.status.code(), Some(1), "a view user scaled a Runner: {}", out(&o));

    let o = as_user("alice", &ns, &["delete", "web", "--wait", "--timeout", "90s"]).await;
    ok(&o, "delete --wait as an edit user");
    assert!(ns.api::<Runner>().get_opt("web").await.unwrap().is_none());
    // The record of the deletion is readable by whoever reads Runners.
    let o = as_user("bob", &ns, &["history"]).await;
    ok(&o, "history as a view user");
    assert!(out(&o).contains("web"), "{}", out(&o));
    mgr.stop_after_cleanup(&ns).await;
}

/// A Role that reads Runners (and deletes them), Pods, Events and every
/// child kind but `without`.
async fn role_without(ns: &TestNs, without: &dyn Kind) -> String {
    let name = format!("no-{}", without.plural());
    let mut rules = vec![
        serde_json::json!({ "apiGroups": [kubectl_runner::api::GROUP], "resources": ["runners"],
                            "verbs": ["get", "list", "watch", "delete"] }),
        serde_json::json!({ "apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"] }),
    ];
    for k in kinds::all().iter().filter(|k| k.kind() != without.kind()) {
        rules.push(serde_json::json!({ "apiGroups": [k.group()], "resources": [k.plural()],
                                       "verbs": ["get", "list", "watch"] }));
    }
    let role: Role =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": name }, "rules": rules })).unwrap();
    ns.api::<Role>().create(&PostParams::default(), &role).await.expect("create Role");
    name
}

/// A Runner that wants every child kind (a host, 2 replicas), with them all.
async fn runner_with_every_kind(ns: &TestNs, name: &str) {
    let spec = RunnerSpec::new("nginx:1.27").replicas(2).host(format!("{name}.example.test"));
    ns.api::<Runner>().create(&PostParams::default(), &Runner::new(name, spec)).await.unwrap();
    wait_for("every child kind to exist", T, || async move {
        for k in kinds::all() {
            let api: Api<DynamicObject> =
                Api::namespaced_with(ns.client.clone(), &ns.name, &k.api_resource());
            api.get_opt(name).await.ok()??;
        }
        Some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_who_may_not_read_one_kind_still_gets_describe_get_wide_delete_wait_and_diagnose() {
    let ns = TestNs::new("tenant-kind").await;
    ensure_crd(&ns.client).await;
    let mgr = ManagerHandle::start(&ns.client, &ns.name);
    runner_with_every_kind(&ns, "web").await;
    for &kind in kinds::all() {
        let user = format!("no-{}", kind.plural());
        let role = role_without(&ns, kind).await;
        bind(&ns, &user, "Role", &role).await;
        wait_allowed(&ns, &user, &["get"]).await;
        let refused = format!("not shown: {};", kind.kind());

        let o = as_user(&user, &ns, &["describe", "web"]).await;
        ok(&o, &format!("describe without {}", kind.plural()));
        assert!(out(&o).contains("Name:") && out(&o).contains("Children:"), "{}", out(&o));
        assert_eq!(err(&o).matches(&refused).count(), 1, "{}", err(&o));
        let shown = out(&o);
        let children = shown.split("Children:").nth(1).unwrap_or_default().split("Events:").next().unwrap();
        assert!(!children.contains("missing"), "{} called missing:\n{shown}", kind.kind());
        for other in kinds::all().iter().filter(|k| k.kind() != kind.kind()) {
            assert!(children.contains(other.kind()), "{} not shown:\n{shown}", other.kind());
        }

        let o = as_user(&user, &ns, &["get", "-o", "wide"]).await;
        ok(&o, &format!("get -o wide without {}", kind.plural()));
        assert!(out(&o).lines().nth(1).is_some_and(|l| l.starts_with("web ")), "{}", out(&o));
        assert_eq!(err(&o).matches(&refused).count(), 1, "{}", err(&o));
        assert!(err(&o).contains(&format!(
            "list {}",
            kubectl_runner::client::children::NotReadable::of(kind, "list").resource
        )));

        let o = as_user(&user, &ns, &["diagnose", "web", "--churn-window", "0s"]).await;
        assert!(matches!(o.status.code(), Some(0) | Some(3)), "{}{}", out(&o), err(&o));
        let text = out(&o);
        assert!(text.contains("not-readable") && text.contains(kind.kind()), "{text}");
        assert!(!text.contains("child-missing"), "an unreadable kind was called missing:\n{text}");

        let gone = format!("gone-{}", kind.short());
        runner_with_every_kind(&ns, &gone).await;
        let o = as_user(&user, &ns, &["delete", &gone, "--wait", "--timeout", "90s"]).await;
        ok(&o, &format!("delete --wait without {}", kind.plural()));
        assert!(ns.api::<Runner>().get_opt(&gone).await.unwrap().is_none());
        let api: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &kind.api_resource());
        let left = api.get_opt(&gone).await.unwrap();
        assert!(
            left.is_none_or(|o| o.metadata.deletion_timestamp.is_some()),
            "delete --wait returned before the {} was deleted",
            kind.kind()
        );
    }
    mgr.stop_after_cleanup(&ns).await;
}

#[tokio::test]
async fn get_and_describe_take_several_names_and_name_the_missing_ones() {
    let ns = TestNs::new("tenant-names").await;
    ensure_crd(&ns.client).await;
    for name in ["a", "b"] {
        ns.api::<Runner>()
            .create(&PostParams::default(), &Runner::new(name, RunnerSpec::new("nginx")))
            .await
            .unwrap();
    }
    let n = ns.name.as_str();
    let o = cli(&["-n", n, "get", "b", "a", "-o", "name"]).await;
    ok(&o, "get b a");
    assert_eq!(out(&o), "runner.lab.cloudlab.training/b\nrunner.lab.cloudlab.training/a\n");
    let o = cli(&["-n", n, "get", "a", "b", "-o", "json"]).await;
    ok(&o, "get a b -o json");
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["kind"], "List", "several names print a list, as kubectl");
    let o = cli(&["-n", n, "describe", "a", "b"]).await;
    ok(&o, "describe a b");
    assert_eq!(
        out(&o).matches("\nName:").count() + usize::from(out(&o).starts_with("Name:")),
        2,
        "{}",
        out(&o)
    );
    let o = cli(&["-n", n, "get", "a", "ghost"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(out(&o).lines().nth(1).is_some_and(|l| l.starts_with("a ")), "{}", out(&o));
    assert!(err(&o).contains("ghost"), "{}", err(&o));
    let o = cli(&["-n", n, "describe", "ghost", "b"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(out(&o).contains("b") && err(&o).contains("ghost"), "{}{}", out(&o), err(&o));
}

#[tokio::test]
async fn diagnose_reports_a_missing_child_at_once_when_the_status_says_it_was_made() {
    let ns = TestNs::new("tenant-missing").await;
    ensure_crd(&ns.client).await;
    let api = ns.api::<Runner>();
    let r = api.create(&PostParams::default(), &Runner::new("web", RunnerSpec::new("nginx"))).await.unwrap();
    // The status of a converged Runner, for this generation; its children
    // were deleted since (none was ever made: no manager runs).
    let status = serde_json::json!({ "status": { "observedGeneration": r.metadata.generation, "phase": "Available" } });
    api.patch_status("web", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let o = cli(&["-n", &ns.name, "diagnose", "web", "--churn-window", "0s"]).await;
    assert_eq!(o.status.code(), Some(3), "{}{}", out(&o), err(&o));
    assert!(out(&o).contains("child-missing") && out(&o).contains("Service"), "{}", out(&o));
}

#[tokio::test]
async fn install_applies_the_tenant_roles_and_uninstall_finds_them_to_remove() {
    let ns = TestNs::new("tenant-install").await;
    ensure_crd(&ns.client).await;
    let o = cli(&["install", "--dry-run=server"]).await;
    ok(&o, "install --dry-run=server");
    for name in manifests::tenant_role_names() {
        let line = format!("ClusterRole/{name} applied (server dry run)");
        assert!(out(&o).contains(&line), "{line} not in:\n{}", out(&o));
    }
    apply_tenant_roles(&ns).await;
    let ctx = kubectl_runner::cli::Ctx {
        client: ns.client.clone(),
        namespace: ns.name.clone(),
        all_namespaces: false,
    };
    let targets = kubectl_runner::cli::uninstall::plan_uninstall(&ctx).await.unwrap();
    let planned: Vec<String> = targets.iter().map(|t| t.describe()).collect();
    for name in manifests::tenant_role_names() {
        assert!(planned.contains(&format!("ClusterRole/{name}")), "{name} not in {planned:?}");
    }
}
