//! `kubectl runner completion SHELL` (being written).

use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct CompletionArgs {}

pub fn run(_a: CompletionArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}
