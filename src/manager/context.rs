//! What every reconcile pass shares: the client, the caches of the
//! children, the Event recorder, the metrics, and the small bits of memory
//! between passes (deletes already sent; failures in a row are the work
//! queue's).

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard};

use kube::Client;
use kube::runtime::events::Recorder;

use super::child_cache::ChildCache;
use super::child_write::Writes;
use super::deletion_record_write::Queues;
use super::metrics::Metrics;
use super::own_writes::Recent;
use super::pod_problems::PodProblems;
use super::status_write::{Clock, Clocks};

/// A cache per child kind ([`crate::kinds::visit`] order) and the Pod
/// problem view.
#[derive(Clone)]
pub struct Stores {
    pub children: Arc<[Box<dyn ChildCache>]>,
    pub pods: PodProblems,
    /// The Runners as our status patches returned them, until the Runner
    /// watch delivers them ([`Recent`]).
    pub own_status: Arc<Recent<crate::api::Runner>>,
    /// When each Runner's status was written ([`super::status_write`]);
    /// the child-event debounce reads them too.
    pub status_clocks: Arc<Clocks>,
}

/// A Runner's key in the manager's own per-Runner memory.
pub fn runner_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// What every pass shares.
pub struct Context {
    pub client: Client,
    pub stores: Stores,
    pub recorder: Recorder,
    pub metrics: Metrics,
    /// What the write path of every child kind shares.
    pub writes: Writes,
    /// Deletion records waiting for their namespace's turn.
    pub deletion_records: Queues,
}

impl Context {
    pub fn new(client: Client, stores: Stores, recorder: Recorder, metrics: Metrics) -> Self {
        let writes = Writes::new(client.clone(), metrics.clone());
        Context { client, stores, recorder, metrics, writes, deletion_records: Queues::default() }
    }

    /// The status clocks; a Runner's goes when nothing in it matters any
    /// more, so they hold only Runners written to in the last seconds.
    pub(super) fn status_clocks(&self) -> MutexGuard<'_, HashMap<String, Clock>> {
        self.stores.status_clocks.lock()
    }
}
