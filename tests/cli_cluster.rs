//! `kubectl runner` against the real local control plane
//! (`tests/cluster/up.sh`, then the KUBECONFIG it prints). Each test has its
//! own temporary namespace; tests that need Runners reconciled start the
//! manager in-process, watching only that namespace.
//!
//! These tests never delete the CRD or anything in runner-system: the
//! cluster is shared, so `uninstall` is tested only for its refusal.

mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kubectl_runner::api::{CRD_NAME, FINALIZER, Runner, RunnerSpec};
use kubectl_runner::cli::{Ctx, create, delete, uninstall};
use kubectl_runner::client::runners;
use support::{TestNs, cli, ensure_crd, err, ok, out, wait_for};

fn ctx(ns: &TestNs) -> Ctx {
    Ctx { client: ns.client.clone(), namespace: ns.name.clone(), all_namespaces: false }
}

fn runner(ns: &TestNs, name: &str) -> Runner {
    let spec = RunnerSpec::new("nginx:1.27");
    create::from_flags(name, &ns.name, spec).unwrap()
}

/// The in-process manager for one namespace, stopped when dropped.
struct Manager(tokio::task::JoinHandle<kubectl_runner::manager::Result<()>>);

impl Manager {
    fn start(ns: &TestNs) -> Manager {
        let cfg = kubectl_runner::manager::Config::namespaced(&ns.name);
        Manager(tokio::spawn(kubectl_runner::manager::run(ns.client.clone(), cfg, std::future::pending())))
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_scale_describe_and_delete_wait_through_the_binary() {
    let ns = TestNs::new("cli-life").await;
    ensure_crd(&ns.client).await;
    let _mgr = Manager::start(&ns);
    let n = ns.name.as_str();

    let o = cli(&[
        "-n",
        n,
        "create",
        "web",
        "--image",
        "nginx:1.27",
        "--replicas",
        "2",
        "--wait",
        "--timeout",
        "90s",
    ])
    .await;
    ok(&o, "create --wait");
    assert!(out(&o).starts_with("runner.lab.cloudlab.training/web created\n"), "{}", out(&o));

    let o = cli(&["-n", n, "get", "-o", "json"]).await;
    ok(&o, "get -o json");
    let v: serde_json::Value = serde_json::from_str(&out(&o)).expect("get -o json parses");
    assert_eq!(v["items"][0]["status"]["phase"], "Available", "{v}");
    assert_eq!(v["items"][0]["status"]["readyReplicas"], 2);

    let o = cli(&["-n", n, "get"]).await;
    ok(&o, "get");
    let row = out(&o).lines().nth(1).unwrap_or_default().to_string();
    assert!(row.starts_with("web ") && row.contains("2/2") && row.contains("Available"), "{}", out(&o));

    let o = cli(&["-n", n, "scale", "web", "--replicas", "3", "--wait", "--timeout", "90s"]).await;
    ok(&o, "scale --wait");
    let d: Deployment = ns.api().get("web").await.unwrap();
    assert_eq!(d.spec.replicas, Some(3));

    let o = cli(&["-n", n, "describe", "web"]).await;
    ok(&o, "describe");
    let text = out(&o);
    for want in ["Name:                   web", "Phase:                Available", "Events:"] {
        assert!(text.contains(want), "describe lacks {want:?}:\n{text}");
    }
    let deploy = text.lines().find(|l| l.trim_start().starts_with("Deployment ")).unwrap_or_default();
    assert!(
        deploy.contains(" yes ") && deploy.contains("3/3 ready"),
        "Deployment not owned and ready:\n{text}"
    );
    let ready = text.lines().find(|l| l.trim_start().starts_with("Ready ")).unwrap_or_default();
    assert!(ready.contains("True"), "no Ready=True condition line:\n{text}");

    let o = cli(&["-n", n, "get", "-o", "wide"]).await;
    ok(&o, "get -o wide");
    assert!(out(&o).contains("deploy 3/3,svc"), "{}", out(&o));

    let o = cli(&["-n", n, "delete", "web", "--wait", "--timeout", "90s"]).await;
    ok(&o, "delete --wait");
    assert_eq!(out(&o), "runner.lab.cloudlab.training/web deleted\n");
    assert!(ns.api::<Runner>().get_opt("web").await.unwrap().is_none());
    assert!(
        ns.api::<Deployment>().get_opt("web").await.unwrap().is_none(),
        "delete --wait returned before the Deployment was gone"
    );
}

#[tokio::test]
async fn get_lists_one_namespace_with_n_and_every_namespace_with_a() {
    let a = TestNs::new("cli-ns-a").await;
    let b = TestNs::new("cli-ns-b").await;
    ensure_crd(&a.client).await;
    create::create_runner(&ctx(&a), &runner(&a, "one"), false).await.unwrap();
    create::create_runner(&ctx(&b), &runner(&b, "two"), false).await.unwrap();

    let o = cli(&["-n", &a.name, "get", "-o", "name"]).await;
    ok(&o, "get -n");
    assert_eq!(out(&o), "runner.lab.cloudlab.training/one\n");

    let o = cli(&["get", "-A", "-o", "json"]).await;
    ok(&o, "get -A");
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    let ours: Vec<String> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| {
            [a.name.as_str(), b.name.as_str()].contains(&i["metadata"]["namespace"].as_str().unwrap_or(""))
        })
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ours.len(), 2, "{ours:?}");

    let o = cli(&["get", "-A"]).await;
    ok(&o, "get -A table");
    assert!(out(&o).starts_with("NAMESPACE   "), "{}", out(&o));
    assert!(out(&o).lines().any(|l| l.starts_with(&b.name) && l.contains(" two ")), "{}", out(&o));

    let listed = runners::list(&ctx(&a).client, Some(&a.name), None).await.unwrap();
    assert_eq!(listed.len(), 1);
}

#[tokio::test]
async fn dry_runs_on_the_client_and_the_server_create_nothing() {
    let ns = TestNs::new("cli-dry").await;
    ensure_crd(&ns.client).await;
    let n = ns.name.as_str();
    let o = cli(&["-n", n, "create", "web", "--image", "nginx", "--dry-run=server"]).await;
    ok(&o, "create --dry-run=server");
    assert_eq!(out(&o), "runner.lab.cloudlab.training/web created (server dry run)\n");
    let o = cli(&["-n", n, "create", "web", "--image", "nginx", "--dry-run=client", "-o", "yaml"]).await;
    ok(&o, "create --dry-run=client");
    assert!(out(&o).contains("kind: Runner"));
    let o = cli(&["install", "--dry-run=server"]).await;
    ok(&o, "install --dry-run=server");
    assert!(
        out(&o).contains("CustomResourceDefinition/runners.lab.cloudlab.training applied (server dry run)"),
        "{}",
        out(&o)
    );
    assert!(
        runners::list(&ctx(&ns).client, Some(n), None).await.unwrap().is_empty(),
        "a dry run created a Runner"
    );
}

#[tokio::test]
async fn uninstall_refuses_while_runners_exist_and_lists_them() {
    let ns = TestNs::new("cli-uninst").await;
    ensure_crd(&ns.client).await;
    create::create_runner(&ctx(&ns), &runner(&ns, "keep"), false).await.unwrap();
    // --yes, so that the Runners are the only reason left to refuse.
    let o = cli(&["uninstall", "--yes"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("refusing to uninstall") && err(&o).contains(&format!("{}/keep", ns.name)),
        "{}",
        err(&o)
    );
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    assert!(crds.get_opt(CRD_NAME).await.unwrap().is_some());
}

#[tokio::test]
async fn delete_wait_times_out_naming_the_finalizer_and_suggesting_diagnose() {
    let ns = TestNs::new("cli-stuck").await;
    ensure_crd(&ns.client).await;
    let mut r = runner(&ns, "stuck");
    r.metadata.finalizers = Some(vec![FINALIZER.into()]);
    create::create_runner(&ctx(&ns), &r, false).await.unwrap();
    // No manager runs, so nothing removes the finalizer.
    let o = cli(&["-n", &ns.name, "delete", "stuck", "--wait", "--timeout", "2s"]).await;
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    assert!(e.contains(FINALIZER) && e.contains("kubectl runner diagnose stuck"), "{e}");
    // Let the namespace go.
    let patch = serde_json::json!({ "metadata": { "finalizers": null } });
    ns.api::<Runner>().patch("stuck", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    wait_for("the Runner to go", Duration::from_secs(30), || {
        let api = ns.api::<Runner>();
        async move { api.get_opt("stuck").await.ok()?.is_none().then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn errors_from_the_server_are_one_readable_line() {
    let ns = TestNs::new("cli-err").await;
    ensure_crd(&ns.client).await;
    let o = cli(&["-n", &ns.name, "scale", "ghost", "--replicas", "2"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
    assert!(err(&o).contains("ghost") && err(&o).contains("not found"), "{}", err(&o));
    let o = cli(&["-n", &ns.name, "delete", "ghost"]).await;
    assert_eq!(o.status.code(), Some(1));
    let o = cli(&["-n", &ns.name, "delete", "ghost", "--ignore-not-found"]).await;
    ok(&o, "delete --ignore-not-found");
}

#[tokio::test]
async fn delete_never_deletes_a_same_name_successor_of_the_runner_it_read() {
    let ns = TestNs::new("cli-succ").await;
    ensure_crd(&ns.client).await;
    let api = ns.api::<Runner>();
    let first = create::create_runner(&ctx(&ns), &runner(&ns, "web"), false).await.unwrap();
    // No manager and no finalizer: the delete is immediate.
    api.delete("web", &Default::default()).await.unwrap();
    let second = create::create_runner(&ctx(&ns), &runner(&ns, "web"), false).await.unwrap();
    assert_ne!(first.uid(), second.uid());

    let e = delete::delete_incarnation(&api, &ns.name, "web", first.uid()).await.unwrap_err().to_string();
    assert!(e.contains("replaced by a new one") && e.contains(&format!("{}/web", ns.name)), "{e}");
    assert_eq!(api.get("web").await.unwrap().uid(), second.uid(), "the successor was deleted");

    let d = delete::delete_incarnation(&api, &ns.name, "web", second.uid()).await.unwrap();
    assert_eq!(d, delete::Deleted::Accepted { name: "web".into(), uid: second.uid() });
    assert!(api.get_opt("web").await.unwrap().is_none());
}

#[tokio::test]
async fn uninstall_force_removes_only_our_finalizer() {
    let ns = TestNs::new("cli-fin").await;
    ensure_crd(&ns.client).await;
    let api = ns.api::<Runner>();
    let mut r = runner(&ns, "held");
    let others = ["example.com/first", "example.com/last"];
    r.metadata.finalizers = Some(vec![others[0].into(), FINALIZER.into(), others[1].into()]);
    create::create_runner(&ctx(&ns), &r, false).await.unwrap();
    // Deleted with no manager running: held by every finalizer, as
    // `uninstall --force` finds Runners after its timeout.
    api.delete("held", &Default::default()).await.unwrap();
    let left = api.get("held").await.unwrap();

    let notes = uninstall::strip_finalizers(&ctx(&ns), std::slice::from_ref(&left)).await.unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let after = api.get("held").await.unwrap();
    assert_eq!(after.finalizers(), others, "another controller's finalizer was lost");
    assert!(after.metadata.deletion_timestamp.is_some());
    // A second pass finds nothing of ours and changes nothing.
    assert!(uninstall::strip_finalizers(&ctx(&ns), std::slice::from_ref(&after)).await.unwrap().is_empty());
    assert_eq!(api.get("held").await.unwrap().resource_version(), after.resource_version());

    // Let the namespace go.
    let patch = serde_json::json!({ "metadata": { "finalizers": null } });
    api.patch("held", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}
