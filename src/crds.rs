//! `raygate crds`: print the ray.io CustomResourceDefinitions raygate serves, or write them
//! into the chart's directory.

use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use raygate_api::crd;

use crate::EXIT_VALID;

/// Print the ray.io CustomResourceDefinitions raygate serves.
#[derive(clap::Args)]
pub struct Args {
    /// Generate the CRDs from raygate's types and write one file per CRD into this
    /// directory (how `manifests/chart/files/crds/` is refreshed), instead of printing them.
    #[arg(long, value_name = "DIR")]
    write: Option<PathBuf>,
}

/// Prints the CRDs, or writes one file per CRD into `--write`'s directory.
pub fn run(args: Args) -> Result<u8> {
    match args.write {
        None => io::stdout()
            .lock()
            .write_all(crd::render_crds_yaml().as_bytes())?,
        Some(dir) => {
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for (file, yaml) in crd::generate_crd_files() {
                let path = dir.join(file);
                fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    Ok(EXIT_VALID)
}
