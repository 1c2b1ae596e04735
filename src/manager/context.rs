//! What every reconcile pass shares: the client, the reflector stores of
//! the children, the Event recorder, the metrics, and the small bits of
//! memory between passes (deletes already sent, failures in a row).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use k8s_openapi::api::networking::v1::Ingress;
use kube::Client;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;

use super::child_view::{DeploymentView, ServiceView};
use super::metrics::Metrics;
use super::pod_problems::PodProblems;

/// Reflector stores of the children (filtered by the UID label; views of
/// Deployments and Services, trimmed Ingresses) and the Pod problem view.
#[derive(Clone)]
pub struct Stores {
    pub deployments: Store<DeploymentView>,
    pub services: Store<ServiceView>,
    pub ingresses: Store<Ingress>,
    pub pods: PodProblems,
}

/// What every pass shares.
pub struct Context {
    pub client: Client,
    pub stores: Stores,
    pub recorder: Recorder,
    pub metrics: Metrics,
    /// Children this manager has sent a DELETE for, by Runner UID then child
    /// UID: true once the apiserver answered "gone", false while the child
    /// waits on finalizers of its own. The stores learn of a deletion a
    /// moment later; this keeps a pass in that moment from deleting twice.
    /// A Runner's entry goes with its finalizer (an Ingress removed from a
    /// live Runner leaves one small entry until then).
    pub deleted: Mutex<HashMap<String, HashMap<String, bool>>>,
    /// Failed passes in a row, per Runner (`namespace/name`): the backoff.
    pub failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    pub fn new(client: Client, stores: Stores, recorder: Recorder, metrics: Metrics) -> Self {
        Context { client, stores, recorder, metrics, deleted: Mutex::default(), failures: Mutex::default() }
    }

    pub(super) fn deleted(&self) -> MutexGuard<'_, HashMap<String, HashMap<String, bool>>> {
        self.deleted.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn failures(&self) -> MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }
}
