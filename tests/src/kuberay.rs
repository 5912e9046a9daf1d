//! A test's own KubeRay operator (the real one, built by `tests/env/build kuberay`), watching
//! only the namespaces the test names.
//!
//! `--watch-namespace` keeps it away from every other test's objects; the test labels its
//! namespaces `raygate.io/reconciler=kuberay` so that raygate's reconciler leaves their Ray
//! objects to KubeRay (and, where the namespace is opted into Volcano, keeps only their
//! PodGroups). On kwok nodes its dashboard client reaches the environment's one Ray head
//! through the environment's dashboard proxy (`HTTP_PROXY`, see `tests/env/dashboard-proxy.py`);
//! on the real nodes it reaches each cluster's own head by cluster DNS, as in a cluster
//! ([`Dashboards`]).

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Child;

use crate::ray::Dashboard;
use crate::{Env, TestNamespace};

/// Namespace label value (under `raygate.io/reconciler`) handing Ray objects to KubeRay.
pub const RECONCILER_LABEL: (&str, &str) = ("raygate.io/reconciler", "kuberay");

/// Where the operator's dashboard client goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dashboards {
    /// Every dashboard address to the environment's shared Ray head (Pods on kwok run no Ray).
    SharedHead,
    /// Each cluster's own head Service by its cluster DNS name (Pods on the real nodes).
    ClusterDns,
}

/// A running KubeRay operator; killed (SIGKILL) when dropped.
pub struct KubeRay {
    _child: Child,
    /// Where its log goes.
    pub log: std::path::PathBuf,
    /// Its process id.
    pub pid: u32,
    /// Its controller-runtime metrics endpoint (`/metrics`).
    pub metrics: Dashboard,
}

impl KubeRay {
    /// Starts the KubeRay operator for `namespaces` (the first one's name labels the log and
    /// is where a health failure is dumped), with `--batch-scheduler=<s>` when given, and
    /// waits until its `/healthz` answers.
    ///
    /// # Panics
    /// When the environment has no KubeRay binary (`tests/env/build kuberay`) or the operator
    /// does not become healthy within 60 s.
    pub async fn start(
        env: &Env,
        namespaces: &[&TestNamespace],
        batch_scheduler: Option<&str>,
    ) -> KubeRay {
        KubeRay::start_with(env, namespaces, batch_scheduler, Dashboards::SharedHead).await
    }

    /// [`KubeRay::start`], its dashboard client going where `dashboards` says.
    ///
    /// # Panics
    /// As [`KubeRay::start`].
    pub async fn start_with(
        env: &Env,
        namespaces: &[&TestNamespace],
        batch_scheduler: Option<&str>,
        dashboards: Dashboards,
    ) -> KubeRay {
        KubeRay::start_with_flags(env, namespaces, batch_scheduler, dashboards, &[]).await
    }

    /// [`KubeRay::start`] without a batch scheduler and with `--feature-gates=<gates>`, e.g.
    /// `RayMultiHostIndexing=true` (off by default in v1.5.0, on in v1.6.2).
    ///
    /// # Panics
    /// As [`KubeRay::start`].
    pub async fn start_with_feature_gates(
        env: &Env,
        namespaces: &[&TestNamespace],
        gates: &str,
    ) -> KubeRay {
        let flags = [format!("--feature-gates={gates}")];
        KubeRay::start_with_flags(env, namespaces, None, Dashboards::SharedHead, &flags).await
    }

    /// [`KubeRay::start_with`], with more operator flags (e.g. `--reconcile-concurrency=4`).
    ///
    /// # Panics
    /// As [`KubeRay::start`].
    pub async fn start_with_flags(
        env: &Env,
        namespaces: &[&TestNamespace],
        batch_scheduler: Option<&str>,
        dashboards: Dashboards,
        flags: &[String],
    ) -> KubeRay {
        // Written by `up` only when the binary is built (`tests/env/build kuberay`).
        let binary = env.var("RAYGATE_KUBERAY_OPERATOR").to_string();
        let [probe, metrics] = crate::free_ports();
        let first = namespaces.first().expect("at least one namespace");
        let log = std::path::Path::new(env.var("RAYGATE_LOGS")).join(format!(
            "kuberay-{}-{}.log",
            first.name(),
            batch_scheduler.unwrap_or("none")
        ));
        let file = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let stderr = file.try_clone().expect("a second handle on the log file");
        let watched: Vec<&str> = namespaces.iter().map(|ns| ns.name()).collect();
        let mut command = tokio::process::Command::new(&binary);
        command
            .args(["--watch-namespace", &watched.join(",")])
            .args(["--metrics-addr", &format!("127.0.0.1:{metrics}")])
            .args(["--health-probe-bind-address", &format!("127.0.0.1:{probe}")])
            .args([
                "--enable-leader-election=false",
                "--log-stdout-encoder",
                "console",
            ])
            .env("KUBECONFIG", env.kubeconfig())
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(stderr)
            .kill_on_drop(true);
        if dashboards == Dashboards::SharedHead {
            command
                .env("HTTP_PROXY", env.var("RAYGATE_RAY_DASHBOARD_PROXY"))
                .env("NO_PROXY", "127.0.0.1,localhost");
        }
        if let Some(scheduler) = batch_scheduler {
            command.arg(format!("--batch-scheduler={scheduler}"));
        }
        command.args(flags);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {binary}: {e}"));
        let pid = child.id().expect("the KubeRay operator exited at once");
        let health = Dashboard::new(&format!("http://127.0.0.1:{probe}"));
        first
            .wait_for(
                "the KubeRay operator's /healthz",
                Duration::from_secs(60),
                || async {
                    let response = health.get("/healthz").await?;
                    Ok((response.status == 200).then_some(()))
                },
            )
            .await;
        KubeRay {
            _child: child,
            log,
            pid,
            metrics: Dashboard::new(&format!("http://127.0.0.1:{metrics}")),
        }
    }

    /// Its log so far, for failure messages.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
