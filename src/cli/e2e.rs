//! `kubectl runner e2e` (being written).

use super::Globals;
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct E2eArgs {}

pub async fn run(_g: &Globals, _a: E2eArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}
