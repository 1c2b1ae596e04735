//! What the write path needs of the manager: the client, the metrics, and
//! the memory of the deletes it sent.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use kube::Client;

use crate::manager::metrics::Metrics;

/// The client and metrics every child write uses, and the DELETEs sent.
pub struct Writes {
    pub client: Client,
    pub metrics: Metrics,
    /// Children this manager has sent a DELETE for, by Runner UID then child
    /// UID. The caches learn of a deletion a moment later; this keeps a pass
    /// in that moment from deleting twice, and tells the deletion Event
    /// which kinds went. A Runner's entry goes with its finalizer (a child
    /// removed from a live Runner leaves one small entry until then).
    deleted: Mutex<HashMap<String, HashMap<String, Sent>>>,
}

/// What the apiserver answered to one DELETE we sent.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sent {
    kind: &'static str,
    /// True once gone; false while it waits on finalizers of its own.
    gone: bool,
}

impl Writes {
    pub fn new(client: Client, metrics: Metrics) -> Self {
        Writes { client, metrics, deleted: Mutex::default() }
    }

    fn deleted(&self) -> MutexGuard<'_, HashMap<String, HashMap<String, Sent>>> {
        self.deleted.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What our DELETE of child `child_uid` of Runner `runner_uid` was
    /// answered (true: gone), if we sent one.
    pub(super) fn delete_answer(&self, runner_uid: &str, child_uid: &str) -> Option<bool> {
        self.deleted().get(runner_uid)?.get(child_uid).map(|d| d.gone)
    }

    pub(super) fn record_delete(&self, runner_uid: &str, child_uid: String, kind: &'static str, gone: bool) {
        self.deleted().entry(runner_uid.to_string()).or_default().insert(child_uid, Sent { kind, gone });
    }

    /// Forgets the Runner's deletes; returns the kinds we deleted, in
    /// [`crate::kinds::visit`] order.
    pub fn forget_deletes(&self, runner_uid: &str) -> Vec<&'static str> {
        let sent = self.deleted().remove(runner_uid).unwrap_or_default();
        crate::kinds::all()
            .iter()
            .map(|k| k.kind())
            .filter(|kind| sent.values().any(|d| d.kind == *kind))
            .collect()
    }
}
