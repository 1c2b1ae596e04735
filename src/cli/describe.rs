//! `kubectl runner describe` (being written).

use super::Globals;
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct DescribeArgs {}

pub async fn run(_g: &Globals, _a: DescribeArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}
