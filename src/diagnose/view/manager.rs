//! Pure: what can be seen of the manager (its in-cluster Deployment, the
//! leader Lease, its Pods, the namespaces it watches, and every running
//! manager's presence Lease, a local one without leader election too). The manager check,
//! the per-Runner checks (a stuck finalizer, missing children) and gather
//! (which namespaces to ask permissions in) all read it.

use std::time::Duration;

use super::super::snapshot::Snapshot;
use super::lease::Renewal;
use super::{age, human};
use crate::manifests::{
    LEADER_LEASE, MANAGER_NAME, MANAGER_NAMESPACE, PRESENCE_LEADER_ELECT, PRESENCE_NAMESPACES,
    PRESENCE_QUEUE, presence_lease_name,
};
use crate::queue_note::QueueNote;

/// What can be seen of the manager.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// `None`: no in-cluster Deployment. `Some(ready)` otherwise.
    pub deployment_ready: Option<bool>,
    pub lease: Option<LeaseView>,
    /// Namespaces the in-cluster manager is limited to (`--namespace`);
    /// `None`: all namespaces, or unknown (no in-cluster Deployment).
    pub watched: Option<Vec<String>>,
    /// Manager Pods that exist, in any state (one may be starting).
    pub pods: usize,
    /// Managers whose presence Lease is fresh: running now.
    pub present: Vec<Presence>,
}

/// A running manager, from its presence Lease.
#[derive(Debug, Clone, PartialEq)]
pub struct Presence {
    /// The Lease's name (one per manager).
    pub lease: String,
    /// "HOST pid N".
    pub holder: String,
    /// The namespaces it watches; `None`: all.
    pub watches: Option<Vec<String>>,
    /// It reconciles only while it holds the leader Lease.
    pub leader_elect: bool,
    /// Its work queue at the last renewal, when it says (older managers do not).
    pub queue: Option<QueueNote>,
}

impl Presence {
    /// "HOST, pid N".
    pub fn who(&self) -> String {
        self.holder.replacen(" pid ", ", pid ", 1)
    }

    /// "namespaces a, b" or "all namespaces".
    pub fn scope(&self) -> String {
        match &self.watches {
            None => "all namespaces".into(),
            Some(ns) => format!("namespace(s) {}", ns.join(", ")),
        }
    }

    /// The namespaces both reconcile (`None` on either side: all of the
    /// other's); empty when they share none.
    pub fn shared_with(&self, other: &Presence) -> Option<Vec<String>> {
        match (&self.watches, &other.watches) {
            (None, None) => None,
            (Some(a), None) | (None, Some(a)) => Some(a.clone()),
            (Some(a), Some(b)) => Some(a.iter().filter(|n| b.contains(n)).cloned().collect()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LeaseView {
    pub holder: String,
    pub renewed_ago: Option<Duration>,
    pub fresh: bool,
}

impl View {
    /// No ready in-cluster manager, no recently renewed leader Lease, and
    /// no fresh presence Lease.
    pub fn absent(&self) -> bool {
        self.deployment_ready != Some(true)
            && !self.lease.as_ref().is_some_and(|l| l.fresh)
            && self.present.is_empty()
    }

    /// Nothing can be reconciling: no ready in-cluster manager, no fresh
    /// leader Lease (which a local `run-manager --leader-elect` renews), and
    /// no manager Pod that might be about to start. Then waiting out a grace
    /// period only delays the report: nothing will remove a finalizer.
    pub fn none_running(&self) -> bool {
        self.absent() && self.pods == 0
    }

    /// The evidence line per-Runner findings use; the manager-absent finding
    /// carries the details once.
    pub const ABSENT_SHORT: &str = "manager absent: no ready in-cluster manager and no fresh leader or presence Lease (see manager-absent)";

    /// One line explaining [`View::absent`].
    pub fn absent_evidence(&self) -> String {
        let dep = match self.deployment_ready {
            None => format!("no Deployment {MANAGER_NAMESPACE}/{MANAGER_NAME}"),
            Some(_) => format!("Deployment {MANAGER_NAMESPACE}/{MANAGER_NAME} has no ready Pod"),
        };
        let lease = match &self.lease {
            None => format!("no Lease {MANAGER_NAMESPACE}/{LEADER_LEASE}"),
            Some(l) => match l.renewed_ago {
                Some(a) => format!("Lease last renewed {} ago by {}", human(a), l.holder),
                None => format!("Lease held by {} never renewed", l.holder),
            },
        };
        format!(
            "manager absent: {dep}, {lease}, no fresh presence Lease in {MANAGER_NAMESPACE} (every running manager renews one, a local `kubectl runner run-manager` too)"
        )
    }

    /// The leader's work queue: its presence Lease is named after the
    /// leader Lease's holder.
    pub fn leader_queue(&self) -> Option<QueueNote> {
        let name = presence_lease_name(&self.lease.as_ref()?.holder);
        self.present.iter().find(|p| p.lease == name)?.queue
    }

    /// True when the in-cluster manager is known not to watch `ns`.
    pub fn ignores(&self, ns: &str) -> bool {
        self.watched.as_ref().is_some_and(|w| !w.iter().any(|x| x == ns))
    }
}

/// Derives the [`View`] from the snapshot.
pub fn view(s: &Snapshot) -> View {
    let deployment_ready = s.manager.deployment.as_ref().map(|d| {
        let st = d.status.as_ref();
        st.and_then(|st| st.ready_replicas).unwrap_or(0) >= 1
    });
    let lease = s.manager.lease.as_ref().filter(|l| l.spec.is_some()).and_then(|l| {
        let r = Renewal::of(l);
        let renewed_ago = r.renewed.map(|t| age(s.now, t));
        Some(LeaseView { fresh: r.fresh(s.now), holder: r.holder?, renewed_ago })
    });
    let watched = s.manager.deployment.as_ref().and_then(|d| {
        let args = d.spec.template.spec.as_ref()?.containers.iter().flat_map(|c| {
            c.args.iter().flatten().chain(c.command.iter().flatten()).cloned().collect::<Vec<_>>()
        });
        let ns = namespace_args(args);
        (!ns.is_empty()).then_some(ns)
    });
    let present = s.manager.presences.iter().filter_map(|l| presence(s, l)).collect();
    View { deployment_ready, lease, watched, pods: s.manager.pods.len(), present }
}

/// A presence Lease renewed within its duration (plus slack), read.
fn presence(s: &Snapshot, l: &k8s_openapi::api::coordination::v1::Lease) -> Option<Presence> {
    let spec = l.spec.as_ref()?;
    if !Renewal::of(l).fresh(s.now) {
        return None;
    }
    let annotations = l.metadata.annotations.as_ref();
    let note = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
    let watches: Vec<String> = note(PRESENCE_NAMESPACES)
        .unwrap_or_default()
        .split(',')
        .filter(|n| !n.is_empty())
        .map(String::from)
        .collect();
    Some(Presence {
        lease: l.metadata.name.clone().unwrap_or_default(),
        holder: spec.holder_identity.clone().unwrap_or_default(),
        watches: (!watches.is_empty()).then_some(watches),
        leader_elect: note(PRESENCE_LEADER_ELECT) == Some("true"),
        queue: note(PRESENCE_QUEUE).and_then(QueueNote::parse),
    })
}

/// The values of `--watch-namespace=A,B`, `--watch-namespace A,B`,
/// `--namespace=X`, `--namespace X`, `-n X` in a command line.
pub(crate) fn namespace_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = vec![];
    let mut next = false;
    let mut add = |v: &str| out.extend(v.split(',').filter(|s| !s.is_empty()).map(String::from));
    for a in args {
        if next {
            add(&a);
            next = false;
        } else if let Some(v) =
            a.strip_prefix("--namespace=").or_else(|| a.strip_prefix("--watch-namespace="))
        {
            add(v);
        } else if a == "--namespace" || a == "-n" || a == "--watch-namespace" {
            next = true;
        }
    }
    out
}
