//! kubectl-runner: a kubectl plugin and reconcile manager for the `Runner`.
//!
//! ```text
//!   main ─► cli (args ► validated request ► call ► data) ─► cli::output ─► stdout
//!            │                                              exit ─► the exit code
//!            ├─► manager   watch ► desired ► apply ► status
//!            ├─► diagnose  gather ► view ► checks ► report
//!            └─► e2e       steps; the manager in-process, diagnose as the oracle
//!                  │
//!                  ▼
//!   client (User-Agent, scoped Api, Runner reads, CRD wait) ─► apiserver
//!                  │
//!                  ▼
//!   children (ownership, Pod problems, labels), rollout ─► api (types, bounds)
//!
//!   rbac (permission list) ─► manifests (CRD, RBAC, manager YAML) ─► manifests/
//!        └─► the manager's preflight and diagnose's SubjectAccessReviews
//! ```
//!
//! Arrows point down: the manager, diagnose and e2e never import the CLI,
//! and only the CLI renders (`cli::output`) and maps results to exit codes
//! (`exit`).
#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod client;
pub mod diagnose;
pub mod e2e;
pub mod error;
pub mod exit;
pub mod kinds;
pub mod manager;
pub mod manifests;
pub mod ownership;
pub mod pod_admission;
pub mod rbac;
pub mod rollout;
pub mod service_account;
