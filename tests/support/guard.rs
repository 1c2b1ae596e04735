//! The guard every test runs before it deletes or replaces something
//! cluster-wide (the Runner CRD, the webhook registrations, the manager's
//! namespace): the tests run in a cluster of their own, and if they are ever
//! pointed at someone's cluster, they refuse rather than take that cluster's
//! Runners with them (deleting the CRD deletes every Runner; an installed
//! manager reconciles every namespace).
//!
//! What the test run made is recognisable: every namespace a test creates
//! carries [`super::TEST_LABEL`], and so does the manager's namespace once a
//! test sends it to the real node. Anything else is foreign.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ListParams};
use kubectl_runner::manifests::MANAGER_NAMESPACE;

use super::TEST_LABEL;

/// What the guard saw in the cluster: facts only, judged by [`foreign`].
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Every Runner, as (namespace, name).
    pub runners: Vec<(String, String)>,
    /// The namespaces that carry the test label.
    pub test_namespaces: Vec<String>,
    /// The namespaces being deleted.
    pub terminating: Vec<String>,
    /// The manager's namespace, when it exists: labelled by a test or not,
    /// and the Deployments in it.
    pub manager_namespace: Option<ManagerNamespace>,
}

#[derive(Debug, Clone)]
pub struct ManagerNamespace {
    pub labelled: bool,
    pub deployments: Vec<String>,
}

/// The objects the test run did not create, named for a refusal: Runners
/// outside the test namespaces, and a manager installed in an unlabelled
/// manager namespace.
pub fn foreign(seen: &Seen) -> Vec<String> {
    let mut found: Vec<String> = seen
        .runners
        .iter()
        .filter(|(ns, _)| !seen.test_namespaces.contains(ns))
        .map(|(ns, name)| format!("Runner {ns}/{name}"))
        .collect();
    if let Some(m) = &seen.manager_namespace
        && !m.labelled
    {
        found.extend(m.deployments.iter().map(|d| format!("Deployment {MANAGER_NAMESPACE}/{d}")));
    }
    found
}

/// Foreign Runners on their way out: in a namespace being deleted (a
/// `kubectl runner e2e` of a test before this one cleaning up). Worth
/// waiting for: deleting the CRD under them would only hang on their
/// finalizers.
pub fn leaving(seen: &Seen) -> usize {
    let foreign = |ns: &String| !seen.test_namespaces.contains(ns);
    seen.runners.iter().filter(|(ns, _)| foreign(ns) && seen.terminating.contains(ns)).count()
}

/// How long the guard waits for foreign Runners that are leaving.
const LEAVING_WAIT: std::time::Duration = std::time::Duration::from_secs(90);

/// Panics, naming them, when the cluster holds objects the test run did not
/// create ([`foreign`]), after waiting for those that are leaving;
/// `action` says what the test was about to do. A cluster that cannot be
/// read is refused too: the guard cannot vouch for it.
pub async fn refuse_foreign(client: &Client, action: &str) {
    let start = std::time::Instant::now();
    let seen = loop {
        let seen = look(client).await.unwrap_or_else(|e| {
            panic!(
                "refusing to {action}: the cluster's Runners could not be listed to check for others' ({e})"
            )
        });
        if leaving(&seen) == 0 || start.elapsed() > LEAVING_WAIT {
            break seen;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    };
    let found = foreign(&seen);
    assert!(
        found.is_empty(),
        "refusing to {action}: this cluster holds objects the tests did not create: {}. \
         The tests run in a cluster of their own (tests/run.sh starts one named \"test\"); \
         point KUBECONFIG there.",
        found.join(", ")
    );
}

async fn look(client: &Client) -> kube::Result<Seen> {
    let namespaces = Api::<Namespace>::all(client.clone()).list(&ListParams::default()).await?;
    let labelled = |n: &Namespace| n.metadata.labels.as_ref().is_some_and(|l| l.contains_key(TEST_LABEL));
    let names = |keep: &dyn Fn(&Namespace) -> bool| -> Vec<String> {
        namespaces.items.iter().filter(|n| keep(n)).filter_map(|n| n.metadata.name.clone()).collect()
    };
    let test_namespaces = names(&labelled);
    let terminating = names(&|n: &Namespace| n.metadata.deletion_timestamp.is_some());
    let manager_namespace =
        match namespaces.items.iter().find(|n| n.metadata.name.as_deref() == Some(MANAGER_NAMESPACE)) {
            None => None,
            Some(ns) => {
                let deployments = Api::<Deployment>::namespaced(client.clone(), MANAGER_NAMESPACE)
                    .list(&ListParams::default())
                    .await?
                    .items
                    .into_iter()
                    .filter_map(|d| d.metadata.name)
                    .collect();
                Some(ManagerNamespace { labelled: labelled(ns), deployments })
            }
        };
    Ok(Seen { runners: runners(client).await?, test_namespaces, terminating, manager_namespace })
}

/// Every Runner at a version the CRD serves (a test may have installed a
/// CRD that serves only v1alpha1); none without the CRD.
async fn runners(client: &Client) -> kube::Result<Vec<(String, String)>> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let Some(crd) = crds.get_opt(kubectl_runner::api::CRD_NAME).await? else {
        return Ok(Vec::new());
    };
    let Some(version) = crd.spec.versions.iter().find(|v| v.served).map(|v| v.name.clone()) else {
        return Ok(Vec::new());
    };
    let list = kubectl_runner::migrate::crd::runners(client, &version).list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|r| (r.metadata.namespace.unwrap_or_default(), r.metadata.name.unwrap_or_default()))
        .collect())
}
