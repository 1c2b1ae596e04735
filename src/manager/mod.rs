//! The reconcile manager: watches Runners and their children and keeps the
//! children equal to what the Runner declares.
//!
//! ```text
//! watch Runners ─┐
//! watch children ┼─► Controller ─► reconcile: desired (pure) ─► apply ─► status (pure) ─► patch
//! watch Pods ────┘
//! ```
pub mod desired;
pub mod status;
