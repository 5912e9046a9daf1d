//! `raygate manifests`: print everything needed to install raygate.

use anyhow::Result;
use raygate_api::manifests::{InstallOptions, render_yaml};

use crate::EXIT_VALID;

/// Prints the installation for `namespace` and `image` as multi-document YAML.
pub fn run(namespace: String, image: String) -> Result<u8> {
    print!("{}", render_yaml(&InstallOptions { namespace, image }));
    Ok(EXIT_VALID)
}
