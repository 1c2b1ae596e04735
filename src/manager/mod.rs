//! The reconcile manager: watches Runners and their children and keeps the
//! children equal to what the Runner declares.
//!
//! ```text
//! watch Runners ──────┐ (trimmed)
//! watch each kind ────┼─► work_queue ─► workers ─► reconcile: runner_step (pure)
//!  (kinds::visit)     │   (FIFO, 2 priorities)  └─► per kind, together: child_step::decide (pure) ─► child_write ─► Facts
//! watch Pods ─────────┘                         └─► status (pure) ─► runner_patch
//!   (only stuck ones kept: pod_problems)
//!                 leader Lease, presence Lease, preflight (CRD + permissions), /metrics /healthz /readyz
//! ```
pub mod child_cache;
pub mod child_step;
pub mod child_write;
pub mod context;
pub mod controller;
pub mod debounce;
pub mod deletion_record_write;
pub mod error;
pub mod leader;
pub mod metrics;
pub mod metrics_auth;
pub mod own_writes;
pub mod pod_problems;
pub mod pod_view;
pub mod preflight;
pub mod presence;
pub mod queue_metrics;
pub mod reconcile;
pub mod relist;
pub mod resync;
pub mod retry;
pub mod revert_attribution;
pub mod runner_patch;
pub mod runner_step;
pub mod server;
pub mod status;
pub mod status_write;
pub mod trigger;
mod wake_rules;
pub mod watches;
pub mod webhook;
pub mod work_queue;
pub mod workers;

pub use controller::{Config, DEFAULT_CONCURRENCY, MAX_CONCURRENCY, run};
pub use error::{Error, Result};

#[cfg(test)]
mod deletion_record_write_tests;
#[cfg(test)]
mod reconcile_tests;
#[cfg(test)]
mod work_queue_tests;
