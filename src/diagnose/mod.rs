//! `kubectl runner diagnose`: explains why a Runner or the manager is not
//! working, in seconds, from what the cluster already says.
//!
//! ```text
//!   gather (API reads, SubjectAccessReviews) ──► Snapshot
//!   checks (pure, one module per rule group)  ──► Vec<Finding>
//!   report (counts by severity, findings)     ──► the CLI renders it and exits 0 / 3
//!   fix    (--fix: our finalizer, when the children are gone)
//!   restore (--fix: registrations a local manager left pointing at itself)
//! ```
//!
//! Only `gather`, `fix` and `restore` talk to the API; `view`, `checks`, `writes` and
//! `report` are pure and unit-tested rule by rule. `view` holds the readings
//! of a snapshot that both `gather` and `checks` need; `writes` attributes
//! the writes `gather` watches with `--observe` and tallies them into
//! fights and storms for `checks`.

pub mod checks;
pub mod finding;
pub mod fix;
pub mod gather;
pub mod report;
pub mod restore;
pub mod snapshot;
pub mod view;
pub mod writes;

pub use finding::{Code, Finding, ObjectRef, Severity};
pub use gather::Request;
pub use report::Report;
pub use snapshot::Snapshot;

/// Gathers, checks and builds the report: the whole read-only diagnose.
pub async fn diagnose(client: &kube::Client, req: &Request) -> (Snapshot, Report) {
    let snapshot = gather::gather(client, req).await;
    let report = report_for(&snapshot);
    (snapshot, report)
}

/// The report for an already gathered snapshot.
pub fn report_for(s: &Snapshot) -> Report {
    Report::new(&s.scope, s.runners.len(), s.runners_not_read.clone(), checks::run(s))
}
