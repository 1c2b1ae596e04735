//! `kubectl runner install` / `uninstall` (being written).

use super::Globals;
use crate::error::{Error, Result};

#[derive(Debug, clap::Args)]
pub struct InstallArgs {}

#[derive(Debug, clap::Args)]
pub struct UninstallArgs {}

pub async fn run_install(_g: &Globals, _a: InstallArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}

pub async fn run_uninstall(_g: &Globals, _a: UninstallArgs) -> Result<u8> {
    Err(Error::Other("not implemented yet".into()))
}
