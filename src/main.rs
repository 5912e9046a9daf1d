//! The `raygate` command: validate Ray manifests, show the PodGroups they get, print the CRDs.
//!
//! Only wiring lives here: parse, then dispatch to the subcommand's module. Every decision is
//! made by `raygate_api`, the same functions the webhook and the reconciler call.

mod certs;
mod convert;
mod crds;
mod flags;
mod follow;
mod input;
mod logging;
mod manifests;
mod podgroup;
mod reconcile;
mod run;
mod validate;
mod version;
mod webhook;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// JSON trees are allocation-heavy; mimalloc validates large manifests markedly faster than the
/// system allocator (see `cargo bench -p raygate-api --bench throughput`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit code: every object is valid.
const EXIT_VALID: u8 = 0;
/// Exit code: some object is invalid (or could not be sized).
const EXIT_INVALID: u8 = 1;
/// Exit code: some input could not be read or parsed.
const EXIT_UNREADABLE: u8 = 2;

#[derive(Parser)]
#[command(
    name = "raygate",
    version,
    about = "Runs KubeRay RayJobs and RayClusters on the Volcano batch scheduler",
    long_about = "raygate validates Ray workloads the way KubeRay v1.7 does (and more) and sizes \
                  the Volcano PodGroups that gang-schedule them."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Each subcommand's help is the doc comment of its flags' struct, in its module.
#[derive(Subcommand)]
enum Command {
    Validate(validate::Args),
    Podgroup(podgroup::Args),
    Crds(crds::Args),
    Convert(convert::Args),
    Manifests(manifests::Args),
    Webhook(webhook::Args),
    Reconcile(reconcile::Args),
    Run(run::Args),
    Follow(follow::Args),
    /// Print raygate's version and the upstream versions it is compatible with.
    Version,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => ExitCode::from(code),
        // The reader went away (`raygate podgroup -f x.yaml | head`): nothing is wrong.
        Err(e) if is_broken_pipe(&e) => ExitCode::from(EXIT_VALID),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_UNREADABLE)
        }
    }
}

/// Whether writing the output failed because its reader closed the pipe.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Validate(args) => validate::run(args),
        Command::Podgroup(args) => podgroup::run(args),
        Command::Crds(args) => crds::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Manifests(args) => manifests::run(args),
        Command::Webhook(args) => webhook::run(args),
        Command::Reconcile(args) => reconcile::run(args),
        Command::Run(args) => run::run(args),
        Command::Follow(args) => follow::run(args),
        Command::Version => version::run(),
    }
}
