//! `kubectl runner create` (being written).

use super::Globals;
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct CreateArgs {}

pub async fn run(_g: &Globals, _a: CreateArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}
