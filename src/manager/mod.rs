//! The reconcile manager: watches Runners and their children and keeps the
//! children equal to what the Runner declares.
//!
//! ```text
//! watch Runners ─┐ (trimmed)
//! watch children ┼─► Controller ─► reconcile: desired (pure) ─► child: drift (pure) ─► create/apply ─► status (pure) ─► patch
//! watch Pods ────┘ (only stuck ones kept: pod_problems)
//!                 leader Lease, preflight (CRD + permissions), /metrics /healthz /readyz
//! ```
pub mod child;
pub mod child_view;
pub mod context;
pub mod controller;
pub mod desired;
pub mod drift;
pub mod leader;
pub mod lean_meta;
pub mod managed_fields;
pub mod metrics;
pub mod metrics_auth;
pub mod pod_problems;
pub mod pod_view;
pub mod preflight;
pub mod reconcile;
pub mod relist;
pub mod retry;
pub mod runner_patch;
pub mod server;
pub mod status;
pub mod trim;
pub mod watches;

pub use controller::{Config, DEFAULT_CONCURRENCY, MAX_CONCURRENCY, run};

#[cfg(test)]
mod reconcile_tests;
#[cfg(test)]
mod served_fixture;
