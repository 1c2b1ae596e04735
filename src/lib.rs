//! kubectl-runner: a kubectl plugin and reconcile manager for the `Runner`.
//!
//! ```text
//!   main ─► cli (args ► validated request ► call ► data) ─► cli::output ─► stdout
//!            │                        (the only renderer; escapes cluster text)
//!            │                                              exit ─► the exit code
//!            ├─► manager   watch ► runner_step ► per kind: child_step ► child_write ► status ► patch
//!            ├─► diagnose  gather ► view ► checks ► report
//!            └─► e2e       steps; the manager in-process, diagnose as the oracle
//!                  │
//!                  ▼
//!   client (connection, User-Agent, scoped Api, Runner reads, children reader) ─► apiserver
//!                  │
//!                  ▼
//!   kinds (one module per child kind; kinds::visit is the one list) ─► ownership, rollout ─► api
//!
//!   admission (pure: host conflicts, image warnings) ◄─ manager::webhook's /validate
//!
//!   rbac (permission list, a rule per kind) ─► manifests (CRD, RBAC, manager YAML) ─► manifests/
//!        └─► the manager's preflight and diagnose's SubjectAccessReviews
//! ```
//!
//! Arrows point down: the manager, diagnose and e2e never import the CLI,
//! and only the CLI renders (`cli::output`) and maps results to exit codes
//! (`exit`). Errors follow the same arrows: `error` holds what all share
//! (the failed API call, the client's errors), the manager, diagnose and e2e
//! each have their own, and `cli::Error` converts them at its edge and is
//! the only one that gives advice. `docs/design.md` says where to add a
//! child kind or a field.
#![forbid(unsafe_code)]

pub mod admission;
pub mod api;
pub mod cli;
pub mod client;
pub mod deletion_record;
pub mod diagnose;
pub mod e2e;
pub mod error;
pub mod exit;
pub mod kinds;
pub mod manager;
pub mod manifests;
pub mod migrate;
pub mod ownership;
pub mod pods_refused;
pub mod queue_note;
pub mod rbac;
pub mod revert;
pub mod rollout;
pub mod service_account;
pub mod webhook;
