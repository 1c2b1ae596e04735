//! `kubectl runner scale` (being written).

use super::Globals;
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct ScaleArgs {}

pub async fn run(_g: &Globals, _a: ScaleArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}
