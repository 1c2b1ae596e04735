//! `kubectl runner get` (being written).

use super::Globals;
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct GetArgs {}

pub async fn run(_g: &Globals, _a: GetArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}
