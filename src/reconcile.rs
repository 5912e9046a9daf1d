//! `raygate reconcile`: runs raygate's reconciler (the RayCluster controller and, as they are
//! added, the other controllers) against the cluster of `KUBECONFIG` or the in-cluster config.
//!
//! Only wiring: flags and environment become a [`raygate_reconciler::Config`]; logging is set
//! up; the reconciler's own crate does the rest.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use raygate_api::cluster::BuildOptions;
use raygate_api::keys::DEFAULT_CLUSTER_DOMAIN;
use raygate_api::validation::{ReconcilerKind, ValidationContext};
use raygate_certs::config::parse_duration;
use raygate_reconciler::{Config, LeaderElection};

use crate::EXIT_VALID;
use crate::flags::{MetricsArgs, NamespaceLabelArgs, RuleOptions};
use crate::logging::LogArgs;

/// Run raygate's reconciler: turns RayClusters into a head Service and Pods (with their
/// Volcano PodGroup in opted-in namespaces), with leader election, health and metrics.
///
/// Exit codes: 0 after SIGTERM/SIGINT, 2 on a start-up error or a fatal API error. A
/// leader that loses its Lease stops its controllers and stands by; it does not exit.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    args: Box<ReconcilerArgs>,
    #[command(flatten)]
    metrics: MetricsArgs,
    #[command(flatten)]
    log: LogArgs,
}

/// The reconciler's flags, of `raygate reconcile` and `raygate run` (each with an environment
/// variable of the same meaning).
#[derive(clap::Args, Debug)]
pub struct ReconcilerArgs {
    /// Namespaces to watch, comma-separated; empty watches all namespaces.
    #[arg(
        long,
        value_delimiter = ',',
        env = "RAYGATE_WATCH_NAMESPACES",
        value_name = "NS,..."
    )]
    watch_namespaces: Vec<String>,
    /// Label selector on Namespaces (e.g. `team=ml,!legacy`): Ray objects in namespaces it
    /// does not select are left alone.
    #[arg(long, env = "RAYGATE_NAMESPACE_SELECTOR", value_name = "SELECTOR")]
    namespace_selector: Option<String>,
    #[command(flatten)]
    opt_in: NamespaceLabelArgs,
    #[command(flatten)]
    rules: RuleOptions,
    /// Reconciles that run at once per controller (0: unbounded; one object is never
    /// reconciled twice at once).
    #[arg(
        long,
        env = "RAYGATE_RECONCILE_CONCURRENCY",
        default_value_t = 4,
        value_name = "N"
    )]
    concurrency: u16,
    /// Elect a leader through a Lease so that only one replica reconciles.
    #[arg(long, env = "RAYGATE_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    leader_elect: bool,
    /// Name of the leader Lease.
    #[arg(
        long,
        env = "RAYGATE_LEASE_NAME",
        default_value = raygate_api::manifests::LEASE_NAME,
        value_name = "NAME"
    )]
    lease_name: String,
    /// Namespace of the leader Lease (default: `POD_NAMESPACE`, else `default`).
    #[arg(long, env = "RAYGATE_LEASE_NAMESPACE", value_name = "NS")]
    lease_namespace: Option<String>,
    /// How long the Lease stays valid without renewal (e.g. 15s): the fail-over time after a
    /// crash.
    #[arg(
        long,
        env = "RAYGATE_LEASE_DURATION",
        default_value = "15s",
        value_name = "DURATION",
        value_parser = parse_duration
    )]
    lease_duration: Duration,
    /// How long before the Lease expires the leader renews it (e.g. 5s).
    #[arg(
        long,
        env = "RAYGATE_LEASE_RENEW_GRACE",
        default_value = "5s",
        value_name = "DURATION",
        value_parser = parse_duration
    )]
    lease_renew_grace: Duration,
    /// This replica's identity in the Lease (default: `<hostname>-<pid>`).
    #[arg(long, env = "RAYGATE_IDENTITY", value_name = "ID")]
    identity: Option<String>,
    /// DNS suffix of Service names in the cluster (KubeRay's `CLUSTER_DOMAIN`).
    #[arg(long, env = "CLUSTER_DOMAIN", default_value = DEFAULT_CLUSTER_DOMAIN, value_name = "DOMAIN")]
    cluster_domain: String,
    /// Give the head Service a ClusterIP instead of making it headless (KubeRay's
    /// `ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE`).
    #[arg(long, env = "ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    head_service_cluster_ip: bool,
    /// Hold each worker in a `wait-gcs-ready` init container until its head's GCS answers
    /// (KubeRay's `ENABLE_INIT_CONTAINER_INJECTION`; `false` leaves it to the templates).
    #[arg(long, env = "ENABLE_INIT_CONTAINER_INJECTION", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    wait_gcs_ready: bool,
    /// Kubeconfig file (default: `KUBECONFIG`, `~/.kube/config`, else the in-cluster config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<std::path::PathBuf>,
    /// Ray dashboard `host:port` every RayJob is sent to instead of its head Service (tests,
    /// single-node setups).
    #[arg(long, env = "RAYGATE_RAY_DASHBOARD_ADDRESS", value_name = "HOST:PORT")]
    ray_dashboard_address: Option<String>,
}

impl ReconcilerArgs {
    /// The reconciler's configuration, checked.
    pub fn config(self) -> Result<Config> {
        let (lease_duration, renew_grace) = (
            self.lease_duration.as_secs(),
            self.lease_renew_grace.as_secs(),
        );
        if self.leader_elect
            && (lease_duration == 0 || renew_grace == 0 || renew_grace >= lease_duration)
        {
            bail!(
                "--lease-renew-grace {renew_grace}s must be above 0 and below --lease-duration {lease_duration}s"
            );
        }
        let leader_election = self.leader_elect.then(|| LeaderElection {
            lease_name: self.lease_name.clone(),
            lease_namespace: self
                .lease_namespace
                .clone()
                .or_else(|| std::env::var("POD_NAMESPACE").ok())
                .unwrap_or_else(|| "default".to_string()),
            identity: self.identity.clone().unwrap_or_else(default_identity),
            lease_duration_seconds: lease_duration,
            renew_grace_seconds: renew_grace,
        });
        Ok(Config {
            watch_namespaces: self
                .watch_namespaces
                .into_iter()
                .map(|ns| ns.trim().to_string())
                .filter(|ns| !ns.is_empty())
                .collect(),
            namespace_selector: self.namespace_selector.filter(|s| !s.trim().is_empty()),
            opt_in_label: self.opt_in.namespace_label,
            concurrency: self.concurrency,
            default_reconciler: self.rules.reconciler.into(),
            validation: ValidationContext {
                gates: self.rules.feature_gates,
                reconciler: ReconcilerKind::Raygate,
            },
            build: BuildOptions {
                cluster_domain: self.cluster_domain,
                head_cluster_ip: self.head_service_cluster_ip,
                wait_gcs_ready: self.wait_gcs_ready,
            },
            leader_election,
            kubeconfig: self.kubeconfig,
            ray_dashboard_address: self.ray_dashboard_address.filter(|a| !a.trim().is_empty()),
        })
    }
}

/// `<hostname>-<pid>`: unique per process, readable in the Lease's `holderIdentity`.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "raygate".to_string());
    format!("{host}-{}", std::process::id())
}

/// Runs the reconciler until SIGTERM/SIGINT, with its health and metrics on `--metrics-address`.
pub fn run(args: Args) -> Result<u8> {
    let Args { args, metrics, log } = args;
    crate::logging::init(log);
    let config = args.config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(raygate_reconciler::run_serving_metrics(
        config,
        metrics.metrics_address,
    ))?;
    Ok(EXIT_VALID)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ReconcilerArgs,
    }

    fn config(argv: &[&str]) -> Result<Config> {
        let argv = std::iter::once("reconcile").chain(argv.iter().copied());
        Cli::try_parse_from(argv)?.args.config()
    }

    #[test]
    fn defaults_elect_a_leader_and_watch_everything() {
        let config = config(&["--identity", "me"]).expect("defaults are valid");
        assert!(config.watch_namespaces.is_empty());
        assert_eq!(
            config.opt_in_label.to_string(),
            "raygate.io/scheduler=volcano"
        );
        let election = config.leader_election.expect("leader election is on");
        assert_eq!(election.lease_name, "raygate-reconciler");
        assert_eq!(election.identity, "me");
        assert_eq!(
            (
                election.lease_duration_seconds,
                election.renew_grace_seconds
            ),
            (15, 5)
        );
        assert_eq!(config.validation.reconciler, ReconcilerKind::Raygate);
        assert_eq!(config.default_reconciler, ReconcilerKind::Raygate);
    }

    #[test]
    fn kuberay_can_run_the_unlabelled_namespaces() {
        let kuberay = config(&["--reconciler", "kuberay"]).expect("kuberay is a reconciler");
        assert_eq!(kuberay.default_reconciler, ReconcilerKind::Kuberay);
        // raygate's own controllers still validate for raygate where they run.
        assert_eq!(kuberay.validation.reconciler, ReconcilerKind::Raygate);
        let error = config(&["--reconciler", "volcano"])
            .expect_err("volcano is not a reconciler")
            .to_string();
        assert!(error.contains("--reconciler"), "{error}");
    }

    #[test]
    fn flags_shape_the_config() {
        let config = config(&[
            "--watch-namespaces",
            "a, b,,c",
            "--leader-elect",
            "false",
            "--namespace-label",
            "team.example/gang=yes",
            "--head-service-cluster-ip",
            "true",
            "--wait-gcs-ready",
            "false",
        ])
        .expect("valid flags");
        assert_eq!(config.watch_namespaces, ["a", "b", "c"]);
        assert!(config.leader_election.is_none());
        assert_eq!(config.opt_in_label.to_string(), "team.example/gang=yes");
        assert!(config.build.head_cluster_ip);
        assert!(!config.build.wait_gcs_ready);
        assert!(
            self::config(&[]).expect("no flags").build.wait_gcs_ready,
            "on by default, as in KubeRay"
        );
        assert_eq!(config.scopes().len(), 3);
    }

    #[test]
    fn bad_values_name_the_flag() {
        let error = config(&["--namespace-label", "novalue"]).expect_err("no =");
        assert!(
            error
                .to_string()
                .contains("'--namespace-label <KEY=VALUE>'")
                && error.to_string().contains("write KEY=VALUE"),
            "{error}"
        );
        let error = config(&["--lease-duration", "5s", "--lease-renew-grace", "5s"])
            .expect_err("grace must be below the duration");
        assert!(
            error.to_string().contains("--lease-renew-grace 5s"),
            "{error}"
        );
        let error = config(&["--lease-duration", "15"]).expect_err("a unit is required");
        assert!(error.to_string().contains("invalid duration"), "{error}");
        let timed = config(&["--lease-duration", "1m", "--lease-renew-grace", "20s"])
            .expect("durations with units");
        let election = timed.leader_election.expect("leader election is on");
        assert_eq!(
            (
                election.lease_duration_seconds,
                election.renew_grace_seconds
            ),
            (60, 20)
        );
        assert!(config(&["--feature-gates", "NoSuchGate=true"]).is_err());
    }
}
