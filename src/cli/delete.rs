//! `kubectl runner delete` (being written).

use super::Globals;
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct DeleteArgs {}

pub async fn run(_g: &Globals, _a: DeleteArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}
