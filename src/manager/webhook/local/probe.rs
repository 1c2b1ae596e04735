//! Proves the apiserver reaches a local manager before anyone relies on
//! it: a dry-run create of a Runner at a converted version
//! ([`crate::client::webhook_probe`]) goes through both
//! webhooks and stores nothing. A cluster that cannot dial this machine (a remote one) fails
//! here, and the manager hands the registrations back at once instead of
//! leaving every Runner write failing.

use std::time::{Duration, Instant};

use crate::client::webhook_probe::{self, Outcome};

use super::super::serve::Calls;

/// What the probe found.
#[derive(Debug)]
pub enum Probe {
    /// The apiserver called the webhooks and answered, after this long.
    Served(Duration),
    /// The apiserver could not call them: its error.
    Unreachable(String),
    /// The probe itself could not be made (no permission to create Runners
    /// there, no such namespace): says nothing about the webhooks.
    NotProbed(String),
}

/// How long a Runner version the CRD has just begun to serve may still be
/// unknown to the apiserver (it answers 404 until its handler is rebuilt).
const SETTLE: Duration = Duration::from_secs(10);

/// Dry-run creates in `namespace` until one went through both webhooks
/// (`calls` counted a review of each), one says the apiserver cannot call
/// them, or [`SETTLE`] passes: a registration just written takes effect in
/// the apiserver a moment later.
pub async fn probe(client: &kube::Client, namespace: &str, calls: &Calls) -> Probe {
    let started = Instant::now();
    let before = calls.counts();
    // A version other than the storage one: its create needs conversion.
    let version =
        crate::api::VERSIONS.iter().find(|v| **v != crate::api::VERSION).unwrap_or(&crate::api::VERSION);
    loop {
        let settling = started.elapsed() < SETTLE;
        match webhook_probe::probe(client, namespace, version).await {
            Outcome::Unserved if settling => {}
            Outcome::Passed => {
                let (conversions, admissions) = calls.counts();
                if conversions > before.0 && admissions > before.1 {
                    return Probe::Served(started.elapsed());
                }
                if !settling {
                    return Probe::NotProbed(format!(
                        "the dry run went through, but the apiserver called /convert {} and /validate {} times",
                        conversions - before.0,
                        admissions - before.1
                    ));
                }
            }
            Outcome::Failed(f) => return Probe::Unreachable(f.message),
            Outcome::Unserved => {
                return Probe::NotProbed(format!("the apiserver does not serve Runners at {version}"));
            }
            Outcome::NotChecked(why) => return Probe::NotProbed(why),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
