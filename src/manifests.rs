//! Generated manifests (being written).
