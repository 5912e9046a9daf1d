//! `raygate webhook`: the admission webhook server, wired from flags.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use raygate_api::validation::ValidationContext;
use raygate_certs::{CertResolver, certified_key_from_pem};
use raygate_webhook::server::{self, DEFAULT_MAX_BODY_BYTES};
use raygate_webhook::{AppState, Caches, Limits, Metrics, ServeOptions};
use tokio::sync::watch;

/// Flags of `raygate webhook`.
#[derive(clap::Args)]
pub struct WebhookArgs {
    /// PEM certificate chain the TLS server presents.
    #[arg(long, value_name = "FILE", env = "RAYGATE_TLS_CERT_FILE")]
    tls_cert_file: PathBuf,
    /// PEM private key of the certificate.
    #[arg(long, value_name = "FILE", env = "RAYGATE_TLS_KEY_FILE")]
    tls_key_file: PathBuf,
    /// Address of the TLS server (admission paths, health, metrics).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:9443",
        env = "RAYGATE_WEBHOOK_ADDRESS"
    )]
    address: SocketAddr,
    /// Address of the plain-HTTP server for probes and scraping (`/healthz`, `/readyz`,
    /// `/metrics`).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:9090",
        env = "RAYGATE_METRICS_ADDRESS"
    )]
    metrics_address: SocketAddr,
    /// Largest AdmissionReview body accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    max_request_bytes: usize,
    /// Longest an admission request may take, body upload included, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = server::DEFAULT_REQUEST_TIMEOUT.as_secs_f64())]
    request_timeout: f64,
    /// On SIGTERM, how long in-flight reviews may take to finish, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    drain_timeout: f64,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "RAYGATE_LOG_FORMAT")]
    log_format: LogFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

fn seconds(flag: &str, value: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("--{flag}: {value} is not a positive number of seconds"))
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Runs the webhook server until SIGTERM or SIGINT, then drains in-flight requests.
pub fn run(args: WebhookArgs, validation: ValidationContext) -> Result<()> {
    init_logging(args.log_format);
    let limits = Limits {
        max_body_bytes: args.max_request_bytes,
        request_timeout: seconds("request-timeout", args.request_timeout)?,
    };
    let options = ServeOptions {
        drain_timeout: seconds("drain-timeout", args.drain_timeout)?,
        ..ServeOptions::default()
    };
    let certs = Arc::new(CertResolver::new());
    let cert_pem = std::fs::read(&args.tls_cert_file)
        .with_context(|| format!("reading {}", args.tls_cert_file.display()))?;
    let key_pem = std::fs::read(&args.tls_key_file)
        .with_context(|| format!("reading {}", args.tls_key_file.display()))?;
    certs.set(
        certified_key_from_pem(&cert_pem, &key_pem).with_context(|| {
            format!(
                "loading {} and {}",
                args.tls_cert_file.display(),
                args.tls_key_file.display()
            )
        })?,
    );
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(serve(args, validation, limits, options, certs))
}

async fn serve(
    args: WebhookArgs,
    validation: ValidationContext,
    limits: Limits,
    options: ServeOptions,
    certs: Arc<CertResolver>,
) -> Result<()> {
    let context = validation.clone();
    tokio::task::spawn_blocking(move || raygate_webhook::ray::warm_up(&context))
        .await
        .context("loading the CRD schemas")?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server (KUBECONFIG or in-cluster config)")?;
    let (caches, watches) = Caches::start(client);
    tokio::spawn(watches);
    let state = AppState {
        caches,
        certs: certs.clone(),
        metrics: Arc::new(Metrics::new()),
        validation: Arc::new(validation),
        limits,
    };
    let tls = server::tls_config(certs).context("building the TLS configuration")?;
    let listener = server::bind(args.address).await?;
    let ops_listener = server::bind(args.metrics_address).await?;
    tracing::info!(address = %args.address, metrics_address = %args.metrics_address, "serving");
    let (stop, stopped) = watch::channel(false);
    let signals = tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown signal received");
        let _ = stop.send(true);
    });
    let until_stopped = |mut stopped: watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let ops = tokio::spawn(server::serve_plain(
        ops_listener,
        raygate_webhook::ops_router(state.clone()),
        until_stopped(stopped.clone()),
    ));
    server::serve(
        listener,
        tls,
        raygate_webhook::router(state),
        options,
        until_stopped(stopped),
    )
    .await;
    signals.abort();
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
