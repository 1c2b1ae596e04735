//! Diagnose (being written).
