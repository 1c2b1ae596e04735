//! Reconcile manager (being written).
