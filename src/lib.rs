//! kubectl-runner: a kubectl plugin and reconcile manager for the `Runner`.
//!
//! ```text
//!   api (types, bounds) ──► manifests (CRD, RBAC, manager YAML) ──► manifests/
//!        │                      ▲
//!        │                 rbac (permission list) ──► diagnose (SubjectAccessReviews)
//!        ▼
//!   cli ── validated RunnerSpec ──► apiserver ◄── manager (watch ► desired ► apply ► status)
//!                                        ▲
//!                                   diagnose: gather ► checks (pure) ► report
//! ```
#![forbid(unsafe_code)]

pub mod api;
pub mod children;
pub mod cli;
pub mod client;
pub mod diagnose;
pub mod e2e;
pub mod error;
pub mod exit;
pub mod manager;
pub mod manifests;
pub mod rbac;
pub mod service_account;
