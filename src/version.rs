//! `raygate version`: raygate's version and the upstream versions it is compatible with.

use std::io::{self, Write};

use anyhow::Result;

use crate::EXIT_VALID;

/// Prints the version line.
pub fn run() -> Result<u8> {
    writeln!(
        io::stdout().lock(),
        "raygate {} (ray.io/v1 compatible with KubeRay v1.7, Volcano scheduling.volcano.sh/v1beta1)",
        env!("CARGO_PKG_VERSION")
    )?;
    Ok(EXIT_VALID)
}
