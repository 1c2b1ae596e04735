//! `kubectl runner run-manager` (being written).

use super::Globals;
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct RunManagerArgs {}

pub async fn run(_g: &Globals, _a: RunManagerArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}

impl RunManagerArgs {
    /// True when `--log-format json` was given.
    pub fn log_format_json(&self) -> bool {
        false
    }
}
