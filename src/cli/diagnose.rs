//! `kubectl runner diagnose` (being written).

use super::Globals;
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct DiagnoseArgs {}

pub async fn run(_g: &Globals, _a: DiagnoseArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}
