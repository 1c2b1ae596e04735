//! End-to-end lifecycle proof (being written).
