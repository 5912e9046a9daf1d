//! A test's own `raygate reconcile` process, watching only the test's namespace.
//!
//! The environment runs one reconciler for everybody (`raygate-reconciler` in
//! `tests/env/control-plane`); it ignores namespaces labelled
//! [`PRIVATE_RECONCILER_LABEL`]. A test that wants to watch, count or kill the reconciler it
//! depends on labels its namespace so and starts its own with [`Reconciler::start`].

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Child;

use crate::ray::Dashboard;
use crate::{Env, TestNamespace};

/// Namespace label that keeps the environment's reconciler away (its `--namespace-selector`).
pub const PRIVATE_RECONCILER_LABEL: &str = "e2e.raygate.io/private-reconciler";

/// Leader election settings of a private reconciler.
pub struct Election<'a> {
    /// Lease name (in the test's namespace, so it goes with it).
    pub lease: &'a str,
    /// This replica's identity.
    pub identity: &'a str,
}

/// A running `raygate reconcile`; killed (SIGKILL) when dropped.
pub struct Reconciler {
    child: Child,
    metrics: Dashboard,
    /// Where its log goes (appended to by every reconciler the test starts with the same label).
    pub log: std::path::PathBuf,
}

impl Reconciler {
    /// Starts `raygate reconcile` for `ns` only; with `election`, it elects a leader through a
    /// Lease in `ns`, else it runs the controllers at once. Waits until `/healthz` answers.
    ///
    /// # Panics
    /// When the binary is missing or does not become healthy within 30 s.
    pub async fn start(
        env: &Env,
        ns: &TestNamespace,
        election: Option<Election<'_>>,
    ) -> Reconciler {
        let port = crate::free_port();
        let label = election.as_ref().map(|e| e.identity).unwrap_or("single");
        let log = std::path::Path::new(env.var("RAYGATE_LOGS"))
            .join(format!("reconciler-{}-{label}.log", ns.name()));
        // Appended to: a test that restarts its reconciler keeps every incarnation's log.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap_or_else(|e| panic!("opening {}: {e}", log.display()));
        let stderr = file.try_clone().expect("a second handle on the log file");
        let mut command = tokio::process::Command::new(crate::raygate::binary());
        command
            .args(["reconcile", "--kubeconfig"])
            .arg(env.kubeconfig())
            .args(["--watch-namespaces", ns.name()])
            .args(["--metrics-address", &format!("127.0.0.1:{port}")])
            .args(["--ray-dashboard-address", env.ray_dashboard()])
            .env("RUST_LOG", "info,raygate_reconciler=debug")
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(stderr)
            .kill_on_drop(true);
        match &election {
            Some(e) => command.args([
                "--lease-name",
                e.lease,
                "--lease-namespace",
                ns.name(),
                "--identity",
                e.identity,
            ]),
            None => command.args(["--leader-elect", "false"]),
        };
        let child = command.spawn().expect("starting raygate reconcile");
        let reconciler = Reconciler {
            child,
            metrics: Dashboard::new(&format!("http://127.0.0.1:{port}")),
            log,
        };
        ns.wait_for(
            "the private reconciler's /healthz",
            Duration::from_secs(30),
            || async {
                let response = reconciler.metrics.get("/healthz").await?;
                Ok((response.status == 200).then_some(()))
            },
        )
        .await;
        reconciler
    }

    /// Its `/metrics` text.
    ///
    /// # Errors
    /// When it does not answer.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        Ok(self.metrics.get("/metrics").await?.body)
    }

    /// The value of one sample line (`name{labels}`), 0 when it is absent.
    ///
    /// # Errors
    /// When it does not answer.
    pub async fn sample(&self, series: &str) -> anyhow::Result<f64> {
        let text = self.metrics().await?;
        Ok(text
            .lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0))
    }

    /// Kills it with SIGKILL (no Lease release, no cleanup) and waits for it to be gone.
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// Sends SIGTERM (a graceful stop: reconciles in flight finish, the Lease is released) and
    /// waits up to 30 s for it to exit; returns its exit status.
    ///
    /// # Panics
    /// When the signal cannot be sent or it does not exit in time.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("the reconciler is still running");
        let sent = tokio::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await
            .expect("running kill");
        assert!(sent.success(), "kill -TERM {pid} failed");
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "reconciler {pid} still running 30 s after SIGTERM:\n{}",
                    self.log_text()
                )
            })
            .expect("waiting for the reconciler")
    }

    /// Whether the process is still running (it has not exited).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Its log so far, for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The log of the environment's own reconciler so far, wherever it runs: the host process's
/// log file (`RAYGATE_ENV_INSTALL=process`), or the logs of every raygate Pod of the in-cluster
/// installation (one of them leads). Empty when there is none yet.
pub async fn environment_log(env: &Env) -> String {
    match env.var("RAYGATE_ENV_INSTALL") {
        "process" => std::fs::read_to_string(
            std::path::Path::new(env.var("RAYGATE_LOGS")).join("raygate-reconciler.log"),
        )
        .unwrap_or_default(),
        _ => crate::raygate::installation_logs(env).await,
    }
}
