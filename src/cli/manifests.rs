//! `kubectl runner manifests [crd|rbac|manager|all]` (being written).

use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct ManifestsArgs {}

pub fn run(_a: ManifestsArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}
