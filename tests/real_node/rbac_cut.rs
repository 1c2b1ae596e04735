//! The source material's failure, in the cluster: the manager Ready, its
//! ServiceAccount without the Deployment rules.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;
use kube::{Client, ResourceExt};
use kubectl_runner::api::{Runner, RunnerSpec};
use kubectl_runner::cli::create;
use kubectl_runner::manifests::{MANAGER_NAME, MANAGER_NAMESPACE, MANAGER_ROLE};

use crate::fixture::*;
use crate::support::{TestNs, cli, client, wait_for};

/// Whether the manager's ServiceAccount may `verb` Deployments in `ns`.
async fn manager_may(client: &Client, verb: &str, ns: &str) -> bool {
    let review: SubjectAccessReview = serde_json::from_value(serde_json::json!({
        "spec": {
            "user": format!("system:serviceaccount:{MANAGER_NAMESPACE}:{MANAGER_NAME}"),
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{MANAGER_NAMESPACE}"), "system:authenticated"],
            "resourceAttributes": { "group": "apps", "resource": "deployments", "verb": verb, "namespace": ns },
        }
    }))
    .expect("a SubjectAccessReview");
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let done = api.create(&Default::default(), &review).await.expect("create SubjectAccessReview");
    done.status.is_some_and(|s| s.allowed)
}

/// Restart count of the manager Pod's one container.
fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .map_or(0, |c| c.restart_count)
}

/// The source material's failure, for real: the manager runs in the cluster
/// with its ServiceAccount, the Deployment rules are cut from its
/// ClusterRole, a Runner gets no Deployment, `diagnose` names the missing
/// verbs, and putting the RBAC back heals it with the same Pod, no restart.
/// (Cut before the manager starts, the manager refuses to start instead: its
/// preflight lists the missing permissions and exits, CrashLoopBackOff.)
#[tokio::test]
#[ignore = "needs the real node: tests/run.sh runs it when the cluster has one"]
async fn without_its_deployment_rules_the_ready_manager_creates_no_children_diagnose_names_the_verbs_and_restoring_them_heals_it_without_a_restart()
 {
    let image = image(IMAGE_ENV);
    let client = client().await;
    let node = real_node(&client).await;
    let ns = TestNs::new("realrbac").await;
    let _cleanup = InstalledManager { runners_ns: ns.name.clone() };
    let (manager_pod, _) = install_manager(&client, &image, &node, &ns).await;

    // Cut every Deployment rule from the ClusterRole install made.
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let mut role = roles.get(MANAGER_ROLE).await.expect("the manager's ClusterRole");
    let rules = role.rules.take().unwrap_or_default();
    let kept: Vec<_> = rules
        .into_iter()
        .filter(|r| !r.resources.as_ref().is_some_and(|rs| rs.iter().any(|x| x == "deployments")))
        .collect();
    role.rules = Some(kept);
    role.metadata.managed_fields = None;
    roles.replace(MANAGER_ROLE, &Default::default(), &role).await.expect("replace the ClusterRole");
    wait_for("RBAC to deny the manager Deployments", Duration::from_secs(30), || {
        let client = client.clone();
        let ns = ns.name.clone();
        async move { (!manager_may(&client, "create", &ns).await).then_some(()) }
    })
    .await;

    let spec = RunnerSpec::new(WEB_IMAGE).port(WEB_PORT);
    let runner = create::from_flags("web", &ns.name, spec).expect("valid Runner");
    let runners: Api<Runner> = ns.api();
    runners.create(&Default::default(), &runner).await.expect("create Runner");
    let message = wait_for("the Runner's status to report the refusal", Duration::from_secs(60), || {
        let runners = runners.clone();
        async move {
            let m = runners.get("web").await.ok()?.status?.message?;
            m.contains("forbidden").then_some(m)
        }
    })
    .await;
    assert!(message.contains("deployments"), "{message}");
    let deployments: Api<Deployment> = ns.api();
    assert!(
        deployments.list(&Default::default()).await.expect("list").items.is_empty(),
        "no Deployment was created"
    );
    let manager: Api<Deployment> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let ready =
        manager.get(MANAGER_NAME).await.expect("manager Deployment").status.and_then(|s| s.ready_replicas);
    assert_eq!(ready, Some(1), "the manager stays Ready");

    let out = cli(&["diagnose", "-n", &ns.name]).await;
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "diagnose exits with findings:\n{report}");
    assert!(report.contains(&format!("ServiceAccount {MANAGER_NAMESPACE}/{MANAGER_NAME}")), "{report}");
    for verb in ["get", "list", "watch", "create", "patch", "delete"] {
        assert!(
            report.contains(&format!("can't {verb} deployments.apps")),
            "diagnose names {verb}:\n{report}"
        );
    }

    // Put the RBAC back the way users would, and watch the same Pod heal.
    let healed_from = Instant::now();
    let out = cli(&["install", "--with-manager", "--image", &image, "--wait", "--timeout", "2m"]).await;
    assert!(out.status.success(), "install: {}", String::from_utf8_lossy(&out.stderr));
    wait_for("the Runner to have 1 ready replica after the RBAC is back", Duration::from_secs(120), || {
        let runners = runners.clone();
        async move { (runners.get("web").await.ok()?.status?.ready_replicas == 1).then_some(()) }
    })
    .await;
    eprintln!("healed {:.1} s after the RBAC was restored", healed_from.elapsed().as_secs_f64());
    let pods: Api<Pod> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let now = pods.get(&manager_pod.name_any()).await.expect("the same manager Pod");
    assert_eq!(restarts(&now), restarts(&manager_pod), "the manager did not restart");
}
