//! The reconciler process: its configuration, the Kubernetes client, leader election and the
//! controllers' lifetime.
//!
//! [`run`] waits for leadership (a `coordination.k8s.io` Lease through `kube-lease-manager`,
//! when enabled), then runs every controller of [`crate::controllers`] until SIGTERM/SIGINT or
//! until leadership is lost:
//!
//! * on a signal the controllers stop taking new work, finish the reconciles in flight, the
//!   Lease is released and `run` returns `Ok` (a standby still waits for the Lease it last
//!   read to expire: kube-lease-manager does not re-read a Lease it believes held);
//! * on lost leadership the controllers are stopped (each reconcile in flight is finished or
//!   cut off, as on a signal) before `run` goes back to waiting for the Lease. A leader learns
//!   of the loss at its next renewal, so after a missed renewal two replicas can reconcile at
//!   once until then (writes are idempotent by name, docs/reconciler.md); each replica's own
//!   Lease field manager (`lease_field_manager`) keeps two standbys from both taking a
//!   released Lease. Unlike controller-runtime, which exits, the process stays: in
//!   `raygate run` the same process serves the webhook, and exiting would cut the API server's
//!   reviews in flight on it and refuse those sent before its endpoint leaves the Service. The
//!   next term starts from new caches, as a restarted process would;
//! * only when the election itself stops ([`Error::ElectionEnded`]) does `run` return an
//!   error, for the supervisor to restart the process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, FusedFuture};
use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use raygate_api::cluster::BuildOptions;
use raygate_api::settings::OptInLabel;
use raygate_api::validation::{ReconcilerKind, ValidationContext};

use crate::context::{Context, Shutdown};
use crate::metrics::Metrics;
use crate::{MANAGER_NAME, controllers, http};

/// How long in-flight reconciles may take to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);
/// How long any request may wait for the API server's response headers (a watch gets them at
/// once): a request sent while the API server is starting up fails and is retried instead of
/// hanging (docs/reconciler.md, "API server outages").
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a response body may stay silent: longer than a watch request lasts
/// ([`crate::cache::WATCH_TIMEOUT_SECONDS`]) so that an idle watch is not cut, short enough that
/// a dead connection is dropped within about a minute.
pub const READ_TIMEOUT: Duration =
    Duration::from_secs(crate::cache::WATCH_TIMEOUT_SECONDS as u64 + 15);

/// Leader election settings.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// This replica's identity in the Lease (`holderIdentity`).
    pub identity: String,
    /// Seconds a Lease stays valid without renewal: the fail-over time after a crash.
    pub lease_duration_seconds: u64,
    /// Seconds before expiry at which the holder renews.
    pub renew_grace_seconds: u64,
}

/// The reconciler's configuration (built by `raygate reconcile` from flags and environment).
#[derive(Clone, Debug)]
pub struct Config {
    /// Namespaces to watch; empty means all.
    pub watch_namespaces: Vec<String>,
    /// Label selector on Namespaces: objects in other namespaces are left alone.
    pub namespace_selector: Option<String>,
    /// The namespace label that opts a namespace into Volcano.
    pub opt_in_label: OptInLabel,
    /// Reconciles run at once per controller (0: unbounded).
    pub concurrency: u16,
    /// Which controller runs the Ray objects of namespaces without the
    /// `raygate.io/reconciler` label: raygate's own controllers, or a KubeRay operator (then
    /// raygate only keeps their PodGroups, see [`crate::controllers::coexist`]).
    pub default_reconciler: ReconcilerKind,
    /// Validation rules (feature gates; always with raygate's reconciler).
    pub validation: ValidationContext,
    /// Settings of the Service and Pod builders.
    pub build: BuildOptions,
    /// Leader election; `None` runs the controllers at once (a single replica).
    pub leader_election: Option<LeaderElection>,
    /// Kubeconfig file; `None` uses `KUBECONFIG`, `~/.kube/config` or the in-cluster config.
    pub kubeconfig: Option<PathBuf>,
    /// `host:port` of one Ray dashboard that every RayJob talks to instead of its cluster's
    /// head Service (a local Ray head in tests); `None` uses `status.dashboardURL`.
    pub ray_dashboard_address: Option<String>,
}

impl Config {
    /// The namespaces to run each controller in: `None` is every namespace.
    pub fn scopes(&self) -> Vec<Option<String>> {
        if self.watch_namespaces.is_empty() {
            vec![None]
        } else {
            self.watch_namespaces.iter().cloned().map(Some).collect()
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            watch_namespaces: Vec::new(),
            namespace_selector: None,
            opt_in_label: OptInLabel::default(),
            concurrency: 4,
            default_reconciler: ReconcilerKind::Raygate,
            validation: ValidationContext {
                reconciler: ReconcilerKind::Raygate,
                ..ValidationContext::default()
            },
            build: BuildOptions::default(),
            leader_election: None,
            kubeconfig: None,
            ray_dashboard_address: None,
        }
    }
}

/// Why the reconciler stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The health/metrics address could not be bound.
    #[error("cannot listen on {addr} for health and metrics: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// No Kubernetes client could be built.
    #[error("cannot build a Kubernetes client (KUBECONFIG or in-cluster config): {0}")]
    Client(#[source] kube::Error),
    /// The kubeconfig file could not be used.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// The Lease could not be set up.
    #[error("leader election through Lease {lease}: {source}")]
    Lease {
        /// `<namespace>/<name>` of the Lease.
        lease: String,
        /// Why.
        source: kube_lease_manager::LeaseManagerError,
    },
    /// The leader election stopped (its Lease task ended), so leadership can no longer be
    /// proven or taken.
    #[error("the leader election through Lease {0} stopped; exiting so that a restart rejoins it")]
    ElectionEnded(String),
    /// `--namespace-selector` was rejected.
    #[error("--namespace-selector {selector:?}: {source}")]
    NamespaceSelector {
        /// The selector.
        selector: String,
        /// The API server's answer.
        source: kube::Error,
    },
    /// The Namespace cache never synced.
    #[error("the Namespace cache could not be started")]
    NamespaceCache,
    /// The process could not listen for signals.
    #[error("cannot listen for termination signals: {0}")]
    Signals(#[source] std::io::Error),
}

/// Runs the reconciler until SIGTERM/SIGINT (`Ok`) or a fatal error, serving its own
/// `/healthz`, `/readyz` and `/metrics` on `metrics_address`.
///
/// # Errors
/// See [`Error`].
pub async fn run_serving_metrics(config: Config, metrics_address: SocketAddr) -> Result<(), Error> {
    let metrics = Arc::new(Metrics::new());
    let listener = http::bind(metrics_address).await?;
    let (stop_http, http_shutdown) = Shutdown::new();
    let server = tokio::spawn(http::serve(listener, metrics.clone(), http_shutdown));
    tracing::info!(%metrics_address, "serving /healthz, /readyz and /metrics");
    let result = run(config, metrics).await;
    stop_http.fire();
    let _ = server.await;
    result
}

/// Runs the reconciler until SIGTERM/SIGINT (`Ok`) or a fatal error, recording into
/// `metrics`, which the caller serves (`raygate run` serves them on the webhook's listener).
///
/// # Errors
/// See [`Error`].
pub async fn run(config: Config, metrics: Arc<Metrics>) -> Result<(), Error> {
    let client = client(config.kubeconfig.as_deref(), &metrics).await?;
    lead_and_run(client, config, metrics).await
}

/// The Kubernetes client, with [`REQUEST_TIMEOUT`] and [`READ_TIMEOUT`], its requests (timed out
/// ones too) counted in `metrics`.
async fn client(kubeconfig: Option<&std::path::Path>, metrics: &Metrics) -> Result<Client, Error> {
    let mut config = client_config(kubeconfig).await?;
    config.read_timeout = Some(READ_TIMEOUT);
    let builder = kube::client::ClientBuilder::try_from(config).map_err(Error::Client)?;
    Ok(builder
        .with_layer(&tower::timeout::TimeoutLayer::new(REQUEST_TIMEOUT))
        .with_layer(&metrics.request_counter())
        .build())
}

async fn client_config(kubeconfig: Option<&std::path::Path>) -> Result<kube::Config, Error> {
    let Some(path) = kubeconfig else {
        return kube::Config::infer()
            .await
            .map_err(|e| Error::Client(kube::Error::InferConfig(e)));
    };
    let error = |source| Error::Kubeconfig {
        path: path.to_path_buf(),
        source,
    };
    let file = kube::config::Kubeconfig::read_from(path).map_err(error)?;
    kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(error)
}

async fn lead_and_run(client: Client, config: Config, metrics: Arc<Metrics>) -> Result<(), Error> {
    let mut terminate = termination().map_err(Error::Signals)?;
    let Some(election) = config.leader_election.clone() else {
        let (trigger, shutdown) = Shutdown::new();
        let controllers = run_controllers(client, config, metrics, shutdown);
        tokio::pin!(controllers);
        tokio::select! {
            result = &mut controllers => return result,
            () = &mut terminate => {}
        }
        tracing::info!("termination signal: finishing reconciles in flight");
        trigger.fire();
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, controllers).await;
        return Ok(());
    };

    let lease = format!("{}/{}", election.lease_namespace, election.lease_name);
    let manager = LeaseManagerBuilder::new(client.clone(), &election.lease_name)
        .with_namespace(&election.lease_namespace)
        .with_identity(&election.identity)
        .with_duration(election.lease_duration_seconds)
        .with_grace(election.renew_grace_seconds)
        .with_field_manager(lease_field_manager(&election.identity))
        .build()
        .await
        .map_err(|source| Error::Lease {
            lease: lease.clone(),
            source,
        })?;
    let (mut leading, lease_task) = manager.watch().await;
    metrics.set_leader(&election.lease_name, false);
    let outcome = loop {
        tracing::info!(%lease, identity = %election.identity, "waiting for leadership");
        let acquired = tokio::select! {
            changed = leading.wait_for(|leader| *leader) => changed.is_ok(),
            () = &mut terminate => break Ok(()),
        };
        if !acquired {
            break Err(Error::ElectionEnded(lease.clone()));
        }
        metrics.set_leader(&election.lease_name, true);
        tracing::info!(%lease, identity = %election.identity, "became leader; starting controllers");
        let (trigger, shutdown) = Shutdown::new();
        let mut controllers = Box::pin(
            run_controllers(client.clone(), config.clone(), metrics.clone(), shutdown).fuse(),
        );
        let ended = tokio::select! {
            result = &mut controllers => Some(result),
            () = &mut terminate => {
                tracing::info!("termination signal: finishing reconciles in flight, then releasing the Lease");
                Some(Ok(()))
            }
            lost = leading.wait_for(|leader| !*leader) => match lost {
                Ok(_) => {
                    // Only the new leader may act from now on. The process stays: its webhook
                    // keeps serving, and this replica stands by to lead again.
                    tracing::warn!(%lease, "lost leadership; stopping controllers and standing by");
                    None
                }
                // The Lease task ended: leadership can no longer be proven.
                Err(_) => Some(Err(Error::ElectionEnded(lease.clone()))),
            },
        };
        trigger.fire();
        if !controllers.is_terminated() {
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, controllers).await;
        }
        metrics.set_leader(&election.lease_name, false);
        if let Some(outcome) = ended {
            break outcome;
        }
    };
    // Dropping the channel makes the Lease task release the Lease before it returns.
    drop(leading);
    let _ = lease_task.await;
    outcome
}

/// The field manager of this replica's writes to the Lease: its own, never shared.
///
/// kube-lease-manager takes a free Lease with a server-side apply of `holderIdentity` and relies
/// on the API server's field-ownership conflict to turn away the second of two replicas taking
/// it at once. Under one shared manager name there is no conflict: the second apply silently
/// overwrites the first, and the first replica leads, believing it holds the Lease, until its
/// next renewal shows otherwise (10 s by default). Replicas race like that whenever a leader
/// releases the Lease with more than one standby, as in every rolling upgrade.
fn lease_field_manager(identity: &str) -> String {
    // The API server refuses field manager names longer than 128 characters.
    format!("{MANAGER_NAME}-{identity}")
        .chars()
        .take(128)
        .collect()
}

async fn run_controllers(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    shutdown: Shutdown,
) -> Result<(), Error> {
    let ctx = Context::start(client, config, metrics, shutdown.clone()).await?;
    if shutdown.fired() {
        return Ok(());
    }
    let event_publisher = ctx.take_event_publisher();
    controllers::run(ctx).await;
    if let Some(publisher) = event_publisher
        && tokio::time::timeout(crate::events::FLUSH_TIMEOUT, publisher)
            .await
            .is_err()
    {
        tracing::warn!(
            "the Events queued at shutdown were not all published within {:?}",
            crate::events::FLUSH_TIMEOUT
        );
    }
    Ok(())
}

/// Resolves on SIGTERM or SIGINT.
fn termination() -> std::io::Result<BoxFuture<'static, ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(Box::pin(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::lease_field_manager;

    #[test]
    fn every_replica_writes_the_lease_under_a_field_manager_of_its_own() {
        let a = lease_field_manager("raygate-7b46b65ffb-56pgx-1");
        let b = lease_field_manager("raygate-7b46b65ffb-x2kq9-1");
        assert_eq!(a, "raygate-reconciler-raygate-7b46b65ffb-56pgx-1");
        assert_ne!(a, b);
        assert_eq!(lease_field_manager(&"x".repeat(300)).chars().count(), 128);
    }
}
