//! Running raygate's own binary from the tests.
//!
//! `env!("CARGO_BIN_EXE_raygate")` exists only in the raygate package's own tests, so the binary
//! is found next to this executable: `<target>/<profile>/deps/<test>` (a test) or
//! `<target>/<profile>/<bin>` (a program such as `rayjob-bench`) → `<target>/<profile>/raygate`.
//! That follows `CARGO_TARGET_DIR` and the profile by itself.
//! Tests never build it: `tests/run` runs `cargo build --workspace` first (and
//! `cargo test --workspace` builds it too, since the raygate package has integration tests).

use std::path::PathBuf;
use std::process::Output;

/// Path of the `raygate` binary of this build (the same profile as this executable).
///
/// # Panics
/// When it has not been built.
pub fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe
        .parent()
        .unwrap_or_else(|| panic!("executable {} has no parent directory", exe.display()));
    let profile_dir = match dir.file_name() {
        Some(name) if name == "deps" => dir.parent().unwrap_or(dir),
        _ => dir,
    };
    let raygate = profile_dir.join("raygate");
    assert!(
        raygate.is_file(),
        "{} not found: build it first with `cargo build --workspace` (tests/run does)",
        raygate.display()
    );
    raygate
}

/// Runs `raygate ARGS...` to completion (inside the namespace, with the test's environment,
/// KUBECONFIG included) and returns its output.
///
/// # Panics
/// When the binary is missing or cannot be started.
pub async fn run(args: &[&str]) -> Output {
    let raygate = binary();
    tokio::process::Command::new(&raygate)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|e| panic!("running {} {args:?}: {e}", raygate.display()))
}
