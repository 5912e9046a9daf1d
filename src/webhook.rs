//! `raygate webhook`: the admission webhook server, wired from flags.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use raygate_api::manifests::LEAVE_SERVICE_SECONDS;
use raygate_api::settings::OptInLabel;
use raygate_api::validation::ValidationContext;
use raygate_certs::CertResolver;
use raygate_certs::CertSource;
use raygate_certs::config::parse_duration;
use raygate_webhook::server::{self, DEFAULT_MAX_BODY_BYTES};
use raygate_webhook::{AppState, Caches, Draining, Limits, Metrics, MetricsSource, ServeOptions};
use tokio::sync::watch;

use crate::EXIT_VALID;
use crate::certs::CertArgs;
use crate::flags::{MetricsArgs, OptInArgs, RuleOptions};
use crate::logging::LogArgs;

/// Run the admission webhook server (TLS): Pod onboarding into Volcano gangs for
/// namespaces labelled `raygate.io/scheduler=volcano`, RayJob/RayCluster validation.
///
/// Runs until SIGTERM or SIGINT, then drains in-flight reviews.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    server: Box<WebhookArgs>,
    #[command(flatten)]
    opt_in: OptInArgs,
    #[command(flatten)]
    metrics: MetricsArgs,
    #[command(flatten)]
    rules: RuleOptions,
    #[command(flatten)]
    log: LogArgs,
}

/// The webhook server's flags, of `raygate webhook` and `raygate run`.
#[derive(clap::Args)]
pub struct WebhookArgs {
    #[command(flatten)]
    certs: CertArgs,
    /// Address of the TLS server (admission paths, health, metrics).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:9443",
        env = "RAYGATE_WEBHOOK_ADDRESS"
    )]
    address: SocketAddr,
    /// Largest AdmissionReview body accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_request_bytes: usize,
    /// Longest an admission request may take, body upload included (e.g. 4s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "4s", value_parser = positive_duration)]
    request_timeout: Duration,
    /// On SIGTERM, how long open connections are kept for their clients to close (requests on
    /// them are still served); longer than the API server's 90 s idle connections, so that
    /// none is closed while it may be sending a review.
    #[arg(long, value_name = "DURATION", default_value = "100s", value_parser = positive_duration)]
    drain_timeout: Duration,
    /// Close a TLS connection that has had no request in flight for this long (right after
    /// its handshake and between keep-alive requests). Longer than the API server's 90 s, so
    /// that the API server closes its kept-alive connections first.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = positive_duration)]
    idle_connection_timeout: Duration,
    /// The most TLS connections open at once; at the bound, each new connection waits for the
    /// connection idle the longest to be closed for it.
    #[arg(
        long,
        value_name = "N",
        default_value_t = server::DEFAULT_MAX_CONNECTIONS,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    max_connections: u32,
}

/// A duration flag's syntax ([`parse_duration`]), above zero: a zero timeout would refuse
/// every request.
fn positive_duration(input: &str) -> Result<Duration, String> {
    match parse_duration(input) {
        Ok(duration) if duration.is_zero() => Err(format!(
            "{input:?} is zero; write a positive duration, e.g. 4s or 500ms"
        )),
        Ok(duration) => Ok(duration),
        Err(error) => Err(error.to_string()),
    }
}

/// What the webhook serves with, besides its own flags: settings shared with the reconciler,
/// and the process's one health and metrics listener.
pub struct Shared {
    /// Feature gates and reconciler choice for Ray object validation.
    pub validation: ValidationContext,
    /// The namespace label that opts a namespace in.
    pub opt_in: OptInLabel,
    /// Address of the plain-HTTP `/healthz`, `/readyz` and `/metrics` listener.
    pub metrics_address: SocketAddr,
    /// Metrics of the process's other part (the reconciler's), served on the same `/metrics`.
    pub more_metrics: Option<MetricsSource>,
}

/// Runs the webhook server until SIGTERM or SIGINT, then drains in-flight requests.
pub fn run(args: Args) -> Result<u8> {
    let Args {
        server,
        opt_in,
        metrics,
        rules,
        log,
    } = args;
    let shared = Shared {
        validation: rules.context(),
        opt_in: opt_in.label(),
        metrics_address: metrics.metrics_address,
        more_metrics: None,
    };
    crate::logging::init(log);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(serve_args(*server, shared, std::future::pending()))?;
    Ok(EXIT_VALID)
}

/// Serves the webhook until SIGTERM or SIGINT, or until `failed` resolves, on the caller's
/// runtime (`raygate run`, whose reconciler resolves `failed` with a fatal error).
///
/// A signal comes after the Pod's `preStop` pause, when the Service no longer sends reviews
/// here: the server drains at once. `failed` has no such pause before it, so the server first
/// reports not ready while serving on for [`LEAVE_SERVICE_SECONDS`], until the Service has
/// dropped this replica, and only then drains: exiting at once would refuse the reviews the
/// API server still sends here, failing their API requests (`failurePolicy: Fail`).
pub async fn serve_args(
    args: WebhookArgs,
    shared: Shared,
    failed: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let limits = Limits {
        max_body_bytes: args.max_request_bytes,
        request_timeout: args.request_timeout,
    };
    let options = ServeOptions {
        drain_timeout: args.drain_timeout,
        idle_connection_timeout: args.idle_connection_timeout,
        max_connections: args.max_connections,
        ..ServeOptions::default()
    };
    let cert_source = args.certs.source()?;
    serve(args, shared, limits, options, cert_source, failed).await
}

async fn serve(
    args: WebhookArgs,
    shared: Shared,
    limits: Limits,
    options: ServeOptions,
    cert_source: CertSource,
    failed: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let Shared {
        validation,
        opt_in,
        metrics_address,
        more_metrics,
    } = shared;
    let context = validation.clone();
    tokio::task::spawn_blocking(move || raygate_webhook::ray::warm_up(&context))
        .await
        .context("loading the CRD schemas")?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server (KUBECONFIG or in-cluster config)")?;
    // Until the source has loaded a certificate, handshakes fail and /readyz says why.
    let certs = Arc::new(CertResolver::new());
    let cert_task = cert_source.spawn(client.clone(), certs.clone());
    let mut registry = prometheus_client::registry::Registry::default();
    certs.metrics().register(&mut registry);
    let (caches, watches) = Caches::start(client);
    tokio::spawn(watches);
    let state = AppState {
        caches,
        certs: certs.clone(),
        metrics: Arc::new(Metrics::with_registry(registry)),
        validation: Arc::new(validation),
        opt_in: Arc::new(opt_in),
        more_metrics,
        limits,
        draining: Draining::default(),
    };
    let tls = server::tls_config(certs).context("building the TLS configuration")?;
    let listener = server::bind(args.address).await?;
    let ops_listener = server::bind(metrics_address).await?;
    tracing::info!(address = %args.address, %metrics_address, "serving");
    let (stop, stopped) = watch::channel(false);
    let draining = state.draining.clone();
    let signals = tokio::spawn(async move {
        tokio::select! {
            () = wait_for_signal() => tracing::info!("shutdown signal received"),
            () = failed => {
                let leave = Duration::from_secs(LEAVE_SERVICE_SECONDS.unsigned_abs());
                tracing::warn!(
                    ?leave,
                    "another part of the process failed: reporting not ready, then draining"
                );
                draining.start();
                tokio::time::sleep(leave).await;
            }
        }
        // A stopping replica writes no more certificate state: through its drain it would
        // otherwise answer an uninstall's deletion of the Secret by creating it again. It
        // serves the certificate it has.
        cert_task.stop();
        let _ = stop.send(true);
    });
    let until_stopped = |mut stopped: watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    // The probe port outlives the drain, so that the kubelet sees `/readyz` fail while
    // in-flight reviews finish, rather than a refused connection.
    let (drained, ops_stop) = watch::channel(false);
    let ops = tokio::spawn(server::serve_plain(
        ops_listener,
        raygate_webhook::ops_router(state.clone()),
        until_stopped(ops_stop),
    ));
    server::serve(
        listener,
        tls,
        raygate_webhook::router(state.clone()),
        options,
        &state,
        until_stopped(stopped),
    )
    .await;
    signals.abort();
    let _ = drained.send(true);
    ops.await
        .context("the health/metrics server task")?
        .context("the health/metrics server")?;
    tracing::info!("stopped");
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGTERM; only SIGINT stops the server");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: WebhookArgs,
    }

    fn parse(argv: &[&str]) -> Result<WebhookArgs, clap::Error> {
        let argv = std::iter::once("webhook").chain(argv.iter().copied());
        Cli::try_parse_from(argv).map(|cli| cli.args)
    }

    #[test]
    fn timeouts_default_to_the_servers_own_and_take_durations() {
        let args = parse(&[]).expect("defaults parse");
        assert_eq!(args.request_timeout, server::DEFAULT_REQUEST_TIMEOUT);
        assert_eq!(
            args.idle_connection_timeout,
            server::DEFAULT_IDLE_CONNECTION_TIMEOUT
        );
        assert_eq!(args.drain_timeout, server::DEFAULT_DRAIN_TIMEOUT);
        let args = parse(&["--request-timeout", "500ms", "--drain-timeout", "1m"]).expect("units");
        assert_eq!(args.request_timeout, Duration::from_millis(500));
        assert_eq!(args.drain_timeout, Duration::from_secs(60));
    }

    #[test]
    fn zero_and_bare_numbers_are_refused_with_what_to_write() {
        let error = parse(&["--request-timeout", "0s"]).err().expect("zero");
        assert!(
            error
                .to_string()
                .contains("write a positive duration, e.g. 4s or 500ms"),
            "{error}"
        );
        let error = parse(&["--drain-timeout", "10"]).err().expect("no unit");
        assert!(
            error.to_string().contains("a bare number has no unit"),
            "{error}"
        );
    }
}
