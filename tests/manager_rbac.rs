//! The commonest operator failure is "manager Ready, no children": its
//! ServiceAccount cannot list Deployments. Here the manager runs *as its ServiceAccount*
//! (impersonated), with only the generated RBAC, and must still do its job.

mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, PostParams};
use kubectl_runner::api::{Phase, Runner, RunnerSpec};
use kubectl_runner::manifests::{LEADER_LEASE, MANAGER_NAMESPACE};
use support::{TestNs, apply_generated_rbac, as_manager_service_account, ensure_crd, wait_for};

const T: Duration = Duration::from_secs(60);

#[tokio::test]
async fn the_manager_does_its_job_with_only_the_generated_rbac() {
    let ns = TestNs::new("rbac").await;
    ensure_crd(&ns.client).await;
    apply_generated_rbac(&ns.client).await;
    let sa = as_manager_service_account().await;

    // Every permission in the list is granted, in the watched namespace,
    // for the Lease in the manager's namespace, and the cluster-wide reviews
    // behind /metrics' access check.
    let missing = wait_for("RBAC to settle", T, || {
        let (sa, ns) = (sa.clone(), ns.name.clone());
        async move {
            let m = kubectl_runner::manager::preflight::missing_permissions(
                &sa,
                Some(&ns),
                Some(MANAGER_NAMESPACE),
                true,
                Some(MANAGER_NAMESPACE),
            )
            .await
            .ok()?;
            m.is_empty().then_some(m)
        }
    })
    .await;
    assert!(missing.is_empty());

    let mut cfg = kubectl_runner::manager::Config::namespaced(&ns.name);
    cfg.leader_elect = true;
    cfg.identity = format!("rbac-test-{}", ns.name);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mgr = tokio::spawn(kubectl_runner::manager::run(sa.clone(), cfg.clone(), async move {
        let _ = rx.await;
    }));

    let runners = ns.api::<Runner>();
    let spec = RunnerSpec::new("nginx").replicas(2).host("rbac.example.test");
    runners.create(&PostParams::default(), &Runner::new("web", spec)).await.unwrap();
    wait_for("Runner Available via the ServiceAccount", T, || {
        let runners = runners.clone();
        async move {
            let r = runners.get("web").await.ok()?;
            (r.status?.phase == Phase::Available).then_some(())
        }
    })
    .await;
    let lease =
        Api::<Lease>::namespaced(ns.client.clone(), MANAGER_NAMESPACE).get(LEADER_LEASE).await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some(cfg.identity.as_str()));

    runners.delete("web", &DeleteParams::default()).await.unwrap();
    let deps = ns.api::<Deployment>();
    wait_for("Runner and Deployment gone", T, || {
        let (runners, deps) = (runners.clone(), deps.clone());
        async move {
            let gone =
                runners.get_opt("web").await.ok()?.is_none() && deps.get_opt("web").await.ok()?.is_none();
            gone.then_some(())
        }
    })
    .await;
    let _ = tx.send(());
    mgr.await.unwrap().expect("manager ran without error as its ServiceAccount");
    // On shutdown the Lease is released for the next manager, and stays
    // released: renewals stop first (one more would take it back, and a
    // standby would wait out the lease duration).
    let leases = Api::<Lease>::namespaced(ns.client.clone(), MANAGER_NAMESPACE);
    assert_eq!(leases.get(LEADER_LEASE).await.unwrap().spec.unwrap().holder_identity, None);
    tokio::time::sleep(Duration::from_secs(3)).await; // > the 2 s retry period
    assert_eq!(leases.get(LEADER_LEASE).await.unwrap().spec.unwrap().holder_identity, None);
}
