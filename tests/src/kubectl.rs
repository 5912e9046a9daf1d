//! The machine's `kubectl`, as a user would run it against the environment (`KUBECONFIG` comes
//! from the env file through `tests/env/control-plane exec`).

use std::process::Output;

/// Runs `kubectl ARGS…` and returns what it did (exit status, standard output and error).
///
/// # Panics
/// When `kubectl` cannot be started.
pub async fn run(args: &[&str]) -> Output {
    tokio::process::Command::new("kubectl")
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|e| panic!("running kubectl {args:?}: {e}"))
}

/// Runs `kubectl ARGS…` and returns its standard output.
///
/// # Panics
/// When it cannot be started or exits non-zero (with its standard error).
pub async fn stdout(args: &[&str]) -> String {
    let output = run(args).await;
    assert!(
        output.status.success(),
        "kubectl {} failed ({}): {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
