//! The reconcile manager: watches Runners and their children and keeps the
//! children equal to what the Runner declares.
//!
//! ```text
//! watch Runners ─┐
//! watch children ┼─► Controller ─► reconcile: desired (pure) ─► create/apply ─► status (pure) ─► patch
//! watch Pods ────┘        ▲
//!                 leader Lease, preflight (CRD + permissions), /metrics /healthz /readyz
//! ```
pub mod controller;
pub mod desired;
pub mod leader;
pub mod metrics;
pub mod preflight;
pub mod reconcile;
pub mod server;
pub mod status;

pub use controller::{Config, run};

#[cfg(test)]
mod reconcile_tests;
