//! The guard of tests/support/guard.rs: what it calls foreign (pure), and on
//! the local control plane that a Runner the tests did not create makes a
//! cluster-wide test refuse, and survives it.

mod migrate_support;
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kubectl_runner::api::{Runner, RunnerSpec};
use support::guard::{ManagerNamespace, Seen, foreign, leaving};
use support::{TEST_LABEL, client, ensure_crd, wait_for};

fn seen(runners: &[(&str, &str)], test_namespaces: &[&str]) -> Seen {
    Seen {
        runners: runners.iter().map(|(ns, n)| (ns.to_string(), n.to_string())).collect(),
        test_namespaces: test_namespaces.iter().map(|s| s.to_string()).collect(),
        terminating: vec![],
        manager_namespace: None,
    }
}

#[test]
fn runners_in_test_namespaces_are_not_foreign() {
    assert!(foreign(&seen(&[("rt-a-1", "web"), ("rt-b-2", "api")], &["rt-a-1", "rt-b-2"])).is_empty());
    assert!(foreign(&seen(&[], &[])).is_empty(), "an empty cluster");
}

#[test]
fn a_runner_outside_the_test_namespaces_is_named() {
    let found = foreign(&seen(&[("rt-a-1", "web"), ("default", "demo"), ("team", "api")], &["rt-a-1"]));
    assert_eq!(found, ["Runner default/demo", "Runner team/api"]);
}

#[test]
fn foreign_runners_in_a_namespace_being_deleted_are_waited_for_and_named_if_they_stay() {
    let mut s = seen(&[("runner-e2e-1", "e2e-web"), ("rt-a-1", "web"), ("team", "api")], &["rt-a-1"]);
    s.terminating = vec!["runner-e2e-1".into(), "rt-a-1".into()];
    assert_eq!(leaving(&s), 1, "the e2e namespace's Runner; the test's own is not waited for");
    assert_eq!(foreign(&s), ["Runner runner-e2e-1/e2e-web", "Runner team/api"], "named if still there");
}

#[test]
fn a_manager_in_an_unlabelled_manager_namespace_is_foreign_and_a_labelled_one_is_not() {
    let mut s = seen(&[], &[]);
    s.manager_namespace =
        Some(ManagerNamespace { labelled: false, deployments: vec!["runner-controller-manager".into()] });
    assert_eq!(foreign(&s), ["Deployment runner-system/runner-controller-manager"]);
    s.manager_namespace =
        Some(ManagerNamespace { labelled: true, deployments: vec!["runner-controller-manager".into()] });
    assert!(foreign(&s).is_empty(), "installed by a test");
    s.manager_namespace = Some(ManagerNamespace { labelled: false, deployments: vec![] });
    assert!(foreign(&s).is_empty(), "an empty namespace (presence Leases) holds nothing to lose");
}

#[tokio::test]
async fn a_runner_the_tests_did_not_create_makes_the_crd_test_refuse_and_survives() {
    let client = client().await;
    ensure_crd(&client).await;
    let name = format!("user-{:06x}", rand::random::<u32>() & 0xffffff);
    let ns: Namespace = serde_json::from_value(serde_json::json!({ "metadata": { "name": name } })).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    // A namespace without the test label, as a user's; the test made it, so
    // it deletes it at the end.
    let _user = support::OnDrop::new({
        let name = name.clone();
        move |c| async move {
            let _ = Api::<Namespace>::all(c).delete(&name, &DeleteParams::background()).await;
        }
    });
    assert!(ns.metadata.labels.as_ref().is_none_or(|l| !l.contains_key(TEST_LABEL)));
    let runners: Api<Runner> = Api::namespaced(client.clone(), &name);
    let created = wait_for("the user's Runner to be created", Duration::from_secs(30), || {
        let runners = runners.clone();
        async move {
            runners
                .create(&PostParams::default(), &Runner::new("demo", RunnerSpec::new("nginx:1.27")))
                .await
                .ok()
        }
    })
    .await;

    // What tests/migrate.rs does first: delete the CRD to install an old one.
    let refused = tokio::spawn({
        let client = client.clone();
        async move { migrate_support::install_old_crd(&client).await }
    })
    .await
    .expect_err("the CRD test refuses");
    let message = refused.into_panic();
    let message = message.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("refusing to delete the Runner CRD"), "{message}");
    assert!(message.contains(&format!("Runner {name}/demo")), "names the Runner: {message}");

    let after = runners.get("demo").await.expect("the user's Runner is still there");
    assert_eq!(after.metadata.uid, created.metadata.uid, "the same Runner, not a new one");
}
