//! The only diagnose code that calls the API: reads the installation, the
//! manager, the ServiceAccount's access and the Runners in scope into a
//! [`Snapshot`]. Read-only, except for creating SubjectAccessReviews and
//! dry-run Runners (`dryRun=All`, to ask whether the apiserver can call the
//! webhooks), which store nothing.
//!
//! Gathering never fails: an unreachable cluster is `Snapshot::cluster`, any
//! other failed read is a [`Gap`], so the user still gets every finding that
//! could be computed.
//!
//! ```text
//! version ─► CRD, manager (Deployment, Pods, Lease), ─► ServiceAccount, SARs, bindings
//!            ValidatingWebhookConfiguration          └─► Runners ─► children, Pods, Events
//!                                                  └─► conversion webhook: Service, EndpointSlices, Secret
//!                                                  └─► the Lease of each local manager an annotation names
//!                                                  └─► a dry-run create per version: can the apiserver call the webhooks?
//!                                                      ... churn window ... Runners again
//!                                                      ... --observe: watch them meanwhile
//! ```

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};

use super::snapshot::*;
use super::view::registrations as registrations_view;
use crate::api::CRD_NAME;
use crate::client::webhook_probe;
use crate::manifests::{LEADER_LEASE, MANAGER_NAME, MANAGER_NAMESPACE, PRESENCE_LABEL};

mod access;
mod conversion;
mod observe;
mod registrations;
mod runners;

/// Where the webhooks are probed with `-A`: a namespace every cluster has.
/// With namespaces asked about, the first of them (a tenant may create
/// Runners there only).
const PROBE_NAMESPACE: &str = "default";

/// What to diagnose.
#[derive(Debug, Clone)]
pub struct Request {
    /// Namespaces whose Runners to read; empty means all namespaces.
    pub namespaces: Vec<String>,
    /// One Runner by name (needs exactly one namespace).
    pub name: Option<String>,
    /// Whose permissions to check; `None`: the in-cluster manager's
    /// ServiceAccount (from its Deployment), else the installed default.
    pub service_account: Option<ServiceAccountRef>,
    pub thresholds: Thresholds,
    /// How long to wait before reading the Runners a second time to detect
    /// churn; zero skips the second read.
    pub churn_window: Duration,
    /// How long to watch the Runners, their children and Pods for fights
    /// and write storms ([`crate::diagnose::writes`]); zero does not watch.
    pub observe: Duration,
}

/// Collects failed reads as [`Gap`]s.
#[derive(Debug, Default)]
pub(crate) struct Gaps(pub Vec<Gap>);

impl Gaps {
    /// The value, or `None` after recording why `what` failed.
    pub fn take<T>(&mut self, what: impl Into<String>, r: kube::Result<T>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.0.push(Gap { what: what.into(), error: crate::error::describe_kube(&e) });
                None
            }
        }
    }
}

/// Reads everything the checks need. See the module docs for the order.
pub async fn gather(client: &Client, req: &Request) -> Snapshot {
    let now = Timestamp::now();
    let scope = Scope { namespaces: req.namespaces.clone(), name: req.name.clone() };
    let mut s = Snapshot {
        now,
        scope,
        thresholds: req.thresholds,
        cluster: Err(String::new()),
        crd: None,
        expected_crd: crate::manifests::crd(),
        manager: ManagerState::default(),
        service_account: req.service_account.clone().unwrap_or_else(default_service_account),
        service_account_exists: None,
        access: vec![],
        grants: vec![],
        runners: vec![],
        runners_not_read: vec![],
        conversion: ConversionState::default(),
        registrations: RegistrationsState::default(),
        gaps: vec![],
    };
    match client.apiserver_version().await {
        Ok(v) => s.cluster = Ok(v.git_version),
        Err(e) => {
            s.cluster = Err(crate::error::describe_kube(&e));
            return s;
        }
    }
    let mut gaps = Gaps::default();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let (crd, manager, (validating, validating_gaps)) =
        tokio::join!(crds.get_opt(CRD_NAME), read_manager(client), registrations::read_validating(client));
    // A user who may not read the CRD (a tenant: it is cluster-scoped) may
    // still read Runners; only a CRD known to be absent skips them.
    let crd_absent = matches!(crd, Ok(None));
    s.crd = gaps.take(format!("get CustomResourceDefinition {CRD_NAME}"), crd).flatten();
    s.registrations.validating = validating;
    gaps.0.extend(validating_gaps.0);
    let (manager, manager_gaps) = manager;
    s.manager = manager;
    gaps.0.extend(manager_gaps.0);
    if req.service_account.is_none()
        && let Some(sa) = deployment_service_account(s.manager.deployment.as_ref())
    {
        s.service_account = sa;
    }

    let watched = watched_namespaces(&s, req);
    let sa_api: Api<ServiceAccount> = Api::namespaced(client.clone(), &s.service_account.namespace);
    let t0 = Instant::now();
    let (sa, (access, grants, access_gaps), runners) = tokio::join!(
        sa_api.get_opt(&s.service_account.name),
        access::read(client, &s.service_account, &watched),
        runners::read(client, req, !crd_absent),
    );
    s.service_account_exists =
        gaps.take(format!("get ServiceAccount {}", s.service_account), sa).map(|sa| sa.is_some());
    if s.service_account_exists != Some(false) {
        s.access = access;
        s.grants = grants;
        gaps.0.extend(access_gaps.0);
    }
    let runners::Read { runners, gaps: runner_gaps, unconverted, not_read } = runners;
    s.runners = runners;
    s.runners_not_read = not_read;
    gaps.0.extend(runner_gaps.0);
    let validating = s.registrations.validating.get().and_then(Option::as_ref);
    let admission_via_service =
        validating.is_some_and(|v| v.webhooks.iter().flatten().any(|w| w.client_config.service.is_some()));
    let lease_namespaces = registrations_view::lease_namespaces(s.crd.as_ref(), validating);
    let probe_namespace = req.namespaces.first().cloned().unwrap_or_else(|| PROBE_NAMESPACE.into());
    let probes = async {
        let versions = if crd_absent { vec![] } else { webhook_probe::versions(s.crd.as_ref()) };
        let calls = versions.iter().map(|v| webhook_probe::probe(client, &probe_namespace, v));
        futures::future::join_all(calls).await
    };
    let ((conversion, conversion_gaps), (leases, lease_gaps), probes) = tokio::join!(
        conversion::read(client, s.crd.as_ref(), !unconverted.is_empty() || admission_via_service),
        registrations::read_leases(client, lease_namespaces),
        probes,
    );
    s.conversion = ConversionState { failed_reads: unconverted, ..conversion };
    s.registrations.leases = leases;
    s.registrations.probes = probes;
    s.registrations.probe_namespace = probe_namespace;
    gaps.0.extend(conversion_gaps.0);
    gaps.0.extend(lease_gaps.0);
    let targets = observe::targets(&s.runners);
    let churn = async {
        if !req.churn_window.is_zero() && !s.runners.is_empty() {
            tokio::time::sleep(req.churn_window.saturating_sub(t0.elapsed())).await;
            let elapsed = t0.elapsed();
            runners::resample(client, req, &mut s.runners, elapsed).await;
        }
    };
    let ((), (mut observed, observe_gaps)) = tokio::join!(churn, observe::watch(client, req, &targets));
    for (rs, t) in s.runners.iter_mut().zip(&targets) {
        rs.observed = observed.remove(&t.key);
    }
    gaps.0.extend(observe_gaps.0);
    s.gaps = gaps.0;
    s
}

/// `runner-system/runner-controller-manager`.
pub fn default_service_account() -> ServiceAccountRef {
    ServiceAccountRef { namespace: MANAGER_NAMESPACE.into(), name: MANAGER_NAME.into() }
}

/// The ServiceAccount the in-cluster manager's Pods run as.
fn deployment_service_account(d: Option<&Deployment>) -> Option<ServiceAccountRef> {
    let spec = d?.spec.template.spec.as_ref()?;
    let name = spec.service_account_name.clone().filter(|n| !n.is_empty())?;
    Some(ServiceAccountRef { namespace: MANAGER_NAMESPACE.into(), name })
}

/// Namespaces to check the Watched permissions in: the ones asked about;
/// with `-A`, the in-cluster manager's `--namespace`s if it has any (a
/// namespace-scoped install has no cluster-wide grants), else "" (all).
fn watched_namespaces(s: &Snapshot, req: &Request) -> Vec<String> {
    if !req.namespaces.is_empty() {
        return req.namespaces.clone();
    }
    match super::view::manager::view(s).watched {
        Some(ns) => ns,
        None => vec![String::new()],
    }
}

/// The manager's Deployment, its Pods, the leader Lease and every
/// manager's presence Lease.
async fn read_manager(client: &Client) -> (ManagerState, Gaps) {
    let mut gaps = Gaps::default();
    let deps: Api<Deployment> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let leases: Api<Lease> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let present = ListParams::default().labels(PRESENCE_LABEL);
    let (dep, lease, presences) =
        tokio::join!(deps.get_opt(MANAGER_NAME), leases.get_opt(LEADER_LEASE), leases.list(&present));
    let deployment = gaps.take(format!("get Deployment {MANAGER_NAMESPACE}/{MANAGER_NAME}"), dep).flatten();
    let lease = gaps.take(format!("get Lease {MANAGER_NAMESPACE}/{LEADER_LEASE}"), lease).flatten();
    let presences = gaps
        .take(format!("list presence Leases in {MANAGER_NAMESPACE}"), presences)
        .map(|l| l.items)
        .unwrap_or_default();
    let selector = deployment.as_ref().and_then(|d| {
        let labels = d.spec.selector.match_labels.clone()?;
        Some(labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","))
    });
    let mut pods = vec![];
    if let Some(sel) = selector.filter(|s| !s.is_empty()) {
        let api: Api<Pod> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
        let listed = api.list(&ListParams::default().labels(&sel)).await;
        pods = gaps
            .take(format!("list manager Pods in {MANAGER_NAMESPACE}"), listed)
            .map(|l| l.items)
            .unwrap_or_default();
    }
    (ManagerState { deployment, pods, lease, presences }, gaps)
}
