//! A manager watches exactly the namespaces it is given (one watch per kind
//! and namespace, one cache), with only the namespace-scoped install's
//! Roles; and every running manager, leader-elected or not, is visible to
//! `diagnose` through its presence Lease.

mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use kubectl_runner::api::{Runner, RunnerSpec};
use kubectl_runner::diagnose::{self, Code};
use kubectl_runner::manager::{self, Config};
use kubectl_runner::manifests::{MANAGER_NAMESPACE, PRESENCE_LABEL, PRESENCE_NAMESPACES};
use kubectl_runner::rbac::{Scope, policy_rules};
use support::{ManagerHandle, TestNs, ensure_crd, wait_for};

const T: Duration = Duration::from_secs(60);

/// Grants `sa` (in `home`) the Watched permissions in `ns`, as the
/// namespace-scoped install's Role does.
async fn grant_watched(client: &Client, ns: &str, home: &str, sa: &str) {
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "runner-manager", "namespace": ns },
        "rules": policy_rules(Scope::Watched),
    }))
    .unwrap();
    Api::<Role>::namespaced(client.clone(), ns).create(&PostParams::default(), &role).await.unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "runner-manager", "namespace": ns },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "runner-manager" },
        "subjects": [{ "kind": "ServiceAccount", "name": sa, "namespace": home }],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// A client acting as ServiceAccount `home/sa` (impersonated).
async fn as_service_account(home: &str, sa: &str) -> Client {
    let mut cfg = kube::Config::infer().await.unwrap();
    cfg.auth_info.impersonate = Some(format!("system:serviceaccount:{home}:{sa}"));
    cfg.auth_info.impersonate_groups =
        Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{home}")]);
    Client::try_from(cfg).unwrap()
}

async fn create_runner(ns: &TestNs, name: &str) {
    let runner = Runner::new(name, RunnerSpec::new("nginx:1.27"));
    ns.api::<Runner>().create(&PostParams::default(), &runner).await.unwrap();
}

async fn deployment_of(ns: &TestNs, name: &str) {
    let deps = ns.api::<Deployment>();
    wait_for(&format!("the Deployment of Runner {}/{name}", ns.name), T, || {
        let deps = deps.clone();
        async move { deps.get_opt(name).await.ok().flatten() }
    })
    .await;
}

#[tokio::test]
async fn a_manager_given_two_namespaces_with_only_roles_there_reconciles_runners_in_both() {
    let (a, b) = (TestNs::new("watch-a").await, TestNs::new("watch-b").await);
    ensure_crd(&a.client).await;
    let sa = ServiceAccount {
        metadata: kube::api::ObjectMeta { name: Some("tenant".into()), ..Default::default() },
        ..Default::default()
    };
    a.api::<ServiceAccount>().create(&PostParams::default(), &sa).await.unwrap();
    grant_watched(&a.client, &a.name, &a.name, "tenant").await;
    let tenant = as_service_account(&a.name, "tenant").await;

    // Granted in a only: the preflight names what b lacks.
    let both = [a.name.clone(), b.name.clone()];
    let in_a = format!("in namespace {} (", a.name);
    let refused = wait_for("RBAC in a to settle", T, || {
        let (tenant, both, in_a) = (tenant.clone(), both.clone(), in_a.clone());
        async move {
            let e =
                manager::preflight::check(&tenant, &both, None, false, None).await.unwrap_err().to_string();
            (!e.contains(&in_a)).then_some(e)
        }
    })
    .await;
    assert!(
        refused.contains(&format!("can't list runners.lab.cloudlab.training in namespace {}", b.name)),
        "{refused}"
    );

    grant_watched(&a.client, &b.name, &a.name, "tenant").await;
    wait_for("RBAC in b to settle", T, || {
        let (tenant, both) = (tenant.clone(), both.clone());
        async move { manager::preflight::check(&tenant, &both, None, false, None).await.ok() }
    })
    .await;

    // No Lease permission anywhere: the presence cannot be written, and the
    // manager reconciles all the same.
    let mut cfg = Config::watching(&[&a.name, &b.name]);
    cfg.lease_namespace = a.name.clone();
    let mgr = ManagerHandle::start_with(&tenant, cfg);
    create_runner(&a, "web").await;
    create_runner(&b, "web").await;
    deployment_of(&a, "web").await;
    deployment_of(&b, "web").await;
    let leases = a.api::<Lease>().list(&ListParams::default().labels(PRESENCE_LABEL)).await.unwrap();
    assert!(leases.items.is_empty(), "the tenant may not write Leases");
    delete_runners(&b).await;
    mgr.stop_after_cleanup(&a).await;
}

/// Deletes the Runners in `ns` and waits until a manager has cleaned them up.
async fn delete_runners(ns: &TestNs) {
    let runners = ns.api::<Runner>();
    runners.delete_collection(&Default::default(), &Default::default()).await.unwrap();
    wait_for("the Runners to be cleaned up", T, || {
        let runners = runners.clone();
        async move { runners.list(&Default::default()).await.ok().filter(|l| l.items.is_empty()).map(|_| ()) }
    })
    .await;
}

/// The manager's own presence Lease among those in `ns`, once written.
async fn presence_of(client: &Client, ns: &str, identity: &str) -> Lease {
    let name = manager::presence::lease_name(identity);
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    wait_for(&format!("presence Lease {ns}/{name}"), T, || {
        let leases = leases.clone();
        let name = name.clone();
        async move { leases.get_opt(&name).await.ok().flatten() }
    })
    .await
}

async fn ensure_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(serde_json::json!({ "metadata": { "name": name } })).unwrap();
    match Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create namespace {name}: {e}"),
    }
}

#[tokio::test]
async fn a_plain_manager_is_seen_by_diagnose_while_it_runs_and_two_on_one_namespace_are_a_warning() {
    let ns = TestNs::new("presence").await;
    ensure_crd(&ns.client).await;
    ensure_namespace(&ns.client, MANAGER_NAMESPACE).await;
    let mut first = Config::namespaced(&ns.name);
    first.identity = format!("{}-first", ns.name);
    let mgr = ManagerHandle::start_with(&ns.client, first.clone());
    let lease = presence_of(&ns.client, MANAGER_NAMESPACE, &first.identity).await;
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone()).unwrap_or_default();
    assert!(holder.ends_with(&format!(" pid {}", std::process::id())), "{holder}");
    assert_eq!(lease.metadata.annotations.unwrap()[PRESENCE_NAMESPACES], ns.name);

    let req = diagnose::Request {
        namespaces: vec![ns.name.clone()],
        name: None,
        service_account: None,
        thresholds: Default::default(),
        churn_window: Duration::ZERO,
        observe: Duration::ZERO,
    };
    let ours = |f: &diagnose::Finding, id: &str| f.object.name == manager::presence::lease_name(id);
    let (_, report) = diagnose::diagnose(&ns.client, &req).await;
    let local: Vec<_> = report.findings.iter().filter(|f| ours(f, &first.identity)).collect();
    assert_eq!(local.len(), 1, "{local:?}");
    assert_eq!(local[0].code, Code::ManagerLocal);
    let who = holder.replacen(" pid ", ", pid ", 1);
    assert!(local[0].message.contains(&format!("a local manager runs on {who}")), "{}", local[0].message);
    assert!(
        report.findings.iter().all(|f| f.code != Code::ManagerAbsent && f.code != Code::ManagerNotVisible)
    );

    let mut second = Config::namespaced(&ns.name);
    second.identity = format!("{}-second", ns.name);
    let other = ManagerHandle::start_with(&ns.client, second.clone());
    presence_of(&ns.client, MANAGER_NAMESPACE, &second.identity).await;
    let (_, report) = diagnose::diagnose(&ns.client, &req).await;
    let overlap: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.code == Code::ManagerOverlap && (ours(f, &first.identity) || ours(f, &second.identity)))
        .collect();
    assert_eq!(overlap.len(), 1, "{:?}", report.findings);
    assert!(overlap[0].message.contains(&ns.name), "{}", overlap[0].message);

    other.stop().await;
    mgr.stop_after_cleanup(&ns).await;
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), MANAGER_NAMESPACE);
    for id in [&first.identity, &second.identity] {
        let name = manager::presence::lease_name(id);
        assert!(leases.get_opt(&name).await.unwrap().is_none(), "{name} deleted on stop");
    }
}
