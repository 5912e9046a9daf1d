//! Running raygate's own binary from the tests, and reading the in-cluster installation's logs.
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

/// A test's own `raygate run` on loopback, before its test-specific flags: its webhook on
/// `127.0.0.1:port` with a self-managed certificate (Secret `raygate-run-cert` in `ns`, a SAN
/// for 127.0.0.1), no CRD conversion, probes and metrics on `127.0.0.1:ops_port`, leader
/// election off, its log (standard error) in `log`, killed when dropped. Callers must add
/// `--mutating-webhook-configuration` and `--validating-webhook-configuration` (empty for
/// none): by default raygate would inject its CA into the environment's own `raygate` ones.
///
/// # Panics
/// When the log file cannot be created.
pub fn run_on_loopback(
    env: &crate::Env,
    ns: &str,
    port: u16,
    ops_port: u16,
    log: &std::path::Path,
) -> tokio::process::Command {
    let file = std::fs::File::create(log)
        .unwrap_or_else(|e| panic!("a log file for raygate run, {}: {e}", log.display()));
    let mut command = tokio::process::Command::new(binary());
    command
        .args(["run", "--address", &format!("127.0.0.1:{port}")])
        .args(["--metrics-address", &format!("127.0.0.1:{ops_port}")])
        .args(["--cert-mode", "self-managed", "--webhook-namespace", ns])
        .args(["--webhook-service", "raygate-run"])
        .args(["--cert-secret", "raygate-run-cert"])
        .args(["--cert-extra-san", "127.0.0.1"])
        .args(["--conversion-crd=", "--leader-elect=false"])
        .env("KUBECONFIG", env.kubeconfig())
        .stdin(std::process::Stdio::null())
        .stderr(file)
        .kill_on_drop(true);
    command
}

/// Label selector of the in-cluster installation's Pods (the Deployment's selector).
pub const INSTALLATION_SELECTOR: &str = "app.kubernetes.io/name=raygate";

/// The logs of the running containers of every raygate Pod of the in-cluster installation
/// (`RAYGATE_IN_CLUSTER_NAMESPACE`), webhook and reconciler alike; empty when there is none.
pub async fn installation_logs(env: &crate::Env) -> String {
    let output = crate::kubectl::run(&[
        "logs",
        "--namespace",
        env.var("RAYGATE_IN_CLUSTER_NAMESPACE"),
        "--selector",
        INSTALLATION_SELECTOR,
        "--tail=-1",
    ])
    .await;
    String::from_utf8_lossy(&output.stdout).into_owned()
}
