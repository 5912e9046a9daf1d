//! `raygate convert`: migrate `ray.io` manifests between `v1alpha1` and `v1` offline.

use std::io::{self, Write};

use anyhow::Result;
use clap::ValueEnum;
use raygate_api::conversion::{self, RayVersion};
use raygate_api::input;

use crate::flags::Files;
use crate::input::read_inputs;
use crate::{EXIT_INVALID, EXIT_VALID};

/// Convert ray.io RayJobs and RayClusters between v1alpha1 and v1, offline.
///
/// Prints every document as YAML; other kinds pass through untouched. Fields only v1 has
/// are kept in the `raygate.io/v1-fields` annotation in v1alpha1 and restored in v1.
/// Exit codes: 0 converted, 1 some object cannot be converted, 2 unreadable input.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    files: Files,
    /// The version to convert to.
    #[arg(long, value_enum)]
    to: Target,
}

/// The version to convert to.
#[derive(Clone, Copy, ValueEnum)]
pub enum Target {
    /// `ray.io/v1` (stored; what KubeRay and raygate reconcile).
    #[value(name = "ray.io/v1")]
    V1,
    /// `ray.io/v1alpha1` (deprecated; v1-only fields are kept in an annotation).
    #[value(name = "ray.io/v1alpha1")]
    V1alpha1,
}

/// Converts every RayJob and RayCluster of the inputs to `--to` and prints all documents as
/// YAML, other kinds untouched. Nothing is printed when any document cannot be converted.
pub fn run(args: Args) -> Result<u8> {
    let documents = match read_inputs(&args.files.files) {
        Ok(documents) => documents,
        Err(code) => return Ok(code),
    };
    let desired = match args.to {
        Target::V1 => RayVersion::V1,
        Target::V1alpha1 => RayVersion::V1alpha1,
    };
    let mut converted = Vec::with_capacity(documents.len());
    let mut failed = false;
    for (source, document) in documents {
        match conversion::convert_documents(vec![document.value], desired) {
            Ok(values) => converted.extend(values),
            Err(errors) => {
                failed = true;
                for (_, e) in errors {
                    eprintln!("error: {source}: document {}: {e}", document.index + 1);
                }
            }
        }
    }
    if failed {
        return Ok(EXIT_INVALID);
    }
    io::stdout()
        .lock()
        .write_all(input::documents_to_yaml(&converted).as_bytes())?;
    Ok(EXIT_VALID)
}
