//! The HTTP side: the router, TLS serving with graceful shutdown, and the plain-HTTP
//! health/metrics server.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use raygate_api::validation::ValidationContext;
use raygate_certs::CertResolver;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower_http::timeout::TimeoutLayer;

use crate::cache::Caches;
use crate::metrics::{AdmissionLabels, CodeLabels, Metrics, WebhookLabels};
use crate::ray::RayWebhook;
use crate::review::{self, AdmissionRequest, ObjectView, Verdict};
use crate::{pods, ray};

// The paths are shared with the install manifests, which must name the same ones.
pub use raygate_api::keys::{
    CONVERT_PATH, MUTATE_PODS_PATH, MUTATE_RAY_PATH, VALIDATE_QUEUE_POLICY_PATH, VALIDATE_RAY_PATH,
};

/// The API server's own request-body limit (3 MiB): no AdmissionReview it sends for an object
/// it would store is larger.
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// The longest an admission request may take, body upload included. The webhook
/// configurations give the API server 5 s; answering well before that leaves it time to
/// report our error rather than its own timeout.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(4);

/// Request limits of the admission paths.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest accepted request body, in bytes (413 above).
    pub max_body_bytes: usize,
    /// Longest request, body upload included (408 after).
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// Whether graceful shutdown has begun, shared by the TLS server that sets it ([`serve`]) and
/// every `/readyz` that reports it: a draining replica must leave the Service's endpoints while
/// it finishes the reviews in flight.
#[derive(Clone, Debug, Default)]
pub struct Draining(Arc<AtomicBool>);

impl Draining {
    /// Marks shutdown as begun; `/readyz` answers 503 from now on.
    pub fn start(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether shutdown has begun.
    pub fn is_draining(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Everything a request handler needs, cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// Informer caches.
    pub caches: Caches,
    /// The serving certificate (readiness).
    pub certs: Arc<CertResolver>,
    /// Exported metrics.
    pub metrics: Arc<Metrics>,
    /// Feature gates and reconciler choice for Ray object validation.
    pub validation: Arc<ValidationContext>,
    /// Request limits.
    pub limits: Limits,
    /// Set once graceful shutdown begins (pass the same handle to [`serve`]).
    pub draining: Draining,
}

impl AppState {
    /// Why the webhook is not ready; empty when it is.
    pub fn not_ready_reasons(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        if self.draining.is_draining() {
            reasons.push("shutting down: draining in-flight requests".to_string());
        }
        if !self.certs.is_loaded() {
            reasons.push("serving certificate not loaded".to_string());
        }
        reasons.extend(
            self.caches
                .unsynced()
                .into_iter()
                .map(|cache| format!("cache {cache} not synced")),
        );
        reasons
    }
}

/// The TLS router: admission paths plus `/healthz`, `/readyz` and `/metrics`.
pub fn router(state: AppState) -> Router {
    let limits = state.limits;
    let mut admission = Router::new();
    for path in [
        MUTATE_PODS_PATH,
        MUTATE_RAY_PATH,
        VALIDATE_RAY_PATH,
        VALIDATE_QUEUE_POLICY_PATH,
    ] {
        admission = admission.route(
            path,
            post(
                move |State(state): State<AppState>, headers: HeaderMap, body: Bytes| async move {
                    admit(state, path, headers, body).await
                },
            ),
        );
    }
    let admission = admission
        .route(CONVERT_PATH, post(convert))
        .route_layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .route_layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), observe));
    admission.merge(ops_routes()).with_state(state)
}

/// The plain-HTTP router: `/healthz`, `/readyz` and `/metrics` only.
pub fn ops_router(state: AppState) -> Router {
    ops_routes().with_state(state)
}

fn ops_routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

async fn readyz(State(state): State<AppState>) -> Response {
    let reasons = state.not_ready_reasons();
    if reasons.is_empty() {
        "ok".into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", reasons.join("; ")),
        )
            .into_response()
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    let text = state.metrics.render(&state.caches);
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        text,
    )
        .into_response()
}

/// controller-runtime's per-path request metrics, around everything else (timeouts and body
/// limit answers included).
async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let webhook = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| request.uri().path().to_string());
    let labels = WebhookLabels {
        webhook: webhook.clone(),
    };
    let started = Instant::now();
    state.metrics.in_flight.get_or_create(&labels).inc();
    let response = next.run(request).await;
    state.metrics.in_flight.get_or_create(&labels).dec();
    state
        .metrics
        .latency
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    state
        .metrics
        .requests
        .get_or_create(&CodeLabels {
            webhook,
            code: response.status().as_u16().to_string(),
        })
        .inc();
    response
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

fn count(state: &AppState, webhook: &str, request: Option<&AdmissionRequest>, verdict: &str) {
    state
        .metrics
        .admissions
        .get_or_create(&AdmissionLabels {
            webhook: webhook.to_string(),
            operation: request
                .map(|r| r.operation.as_str())
                .unwrap_or("unknown")
                .to_string(),
            kind: metric_kind(request).to_string(),
            verdict: verdict.to_string(),
            dry_run: request
                .is_some_and(AdmissionRequest::is_dry_run)
                .to_string(),
        })
        .inc();
}

/// The `kind` label of a review: one of the kinds the webhook configurations send, so that a
/// malformed or hostile review cannot grow the metric's label set without bound.
fn metric_kind(request: Option<&AdmissionRequest>) -> &'static str {
    match request.map(|r| r.kind.kind.as_str()) {
        None | Some("") => "unknown",
        Some("Pod") => "Pod",
        Some("RayJob") => "RayJob",
        Some("RayCluster") => "RayCluster",
        Some("QueuePolicy") => "QueuePolicy",
        Some(_) => "other",
    }
}

async fn admit(
    state: AppState,
    webhook: &'static str,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !is_json(&headers) {
        count(&state, webhook, None, "malformed");
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json\n",
        )
            .into_response();
    }
    let view = if webhook == MUTATE_PODS_PATH {
        ObjectView::PodOnboarding
    } else {
        ObjectView::Whole
    };
    let request = match review::parse_request(&body, view) {
        Ok(request) => request,
        Err(error) => {
            tracing::warn!(webhook, %error, "malformed AdmissionReview");
            count(&state, webhook, None, "malformed");
            return (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response();
        }
    };
    let verdict = match webhook {
        MUTATE_PODS_PATH => pods::review_pod(&state.caches, &request).await,
        MUTATE_RAY_PATH => {
            ray::review_ray(
                &state.caches,
                &request,
                &state.validation,
                RayWebhook::Mutate,
            )
            .await
        }
        VALIDATE_QUEUE_POLICY_PATH => ray::review_queue_policy(&request),
        _ => {
            ray::review_ray(
                &state.caches,
                &request,
                &state.validation,
                RayWebhook::Validate,
            )
            .await
        }
    };
    log_verdict(webhook, &request, &verdict);
    count(&state, webhook, Some(&request), verdict.label());
    let (answer, patch_bytes) = review::respond(&request.uid, verdict);
    if patch_bytes > 0 {
        state
            .metrics
            .patch_bytes
            .get_or_create(&WebhookLabels {
                webhook: webhook.to_string(),
            })
            .observe(patch_bytes as f64);
    }
    axum::Json(answer).into_response()
}

/// `ray.io` CRD conversion: `raygate_api::conversion` answers every ConversionReview, a
/// malformed one with a `Failure` result naming the problem.
async fn convert(headers: HeaderMap, body: Bytes) -> Response {
    if !is_json(&headers) {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json\n",
        )
            .into_response();
    }
    axum::Json(raygate_api::conversion::convert_review_json(&body)).into_response()
}

/// Logs a verdict; the object key is only formatted when the event is enabled (an admitted
/// review is a debug event).
fn log_verdict(webhook: &str, request: &AdmissionRequest, verdict: &Verdict) {
    let kind = request.kind.kind.as_str();
    let operation = request.operation.as_str();
    let dry_run = request.is_dry_run();
    match &verdict.denial {
        Some(denial) => tracing::info!(
            webhook, object = %request.object_key(), kind, operation, dry_run, uid = %request.uid,
            code = denial.code, message = %denial.message, "denied"
        ),
        None => tracing::debug!(
            webhook, object = %request.object_key(), kind, operation, dry_run, uid = %request.uid,
            patch_ops = verdict.patch.0.len(), warnings = verdict.warnings.len(), verdict = verdict.label(),
            "admitted"
        ),
    }
}

/// A rustls server configuration (ring, TLS 1.2 and 1.3, ALPN `h2` and `http/1.1`) whose
/// certificate comes from `certs` on every handshake.
pub fn tls_config(certs: Arc<CertResolver>) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(raygate_certs::ring_provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Connection-level settings of [`serve`].
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// Longest TLS handshake before the connection is dropped.
    pub handshake_timeout: Duration,
    /// Longest wait for an HTTP/1 request's headers (slow clients).
    pub header_read_timeout: Duration,
    /// After shutdown is signalled, how long in-flight requests may take to finish.
    pub drain_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            handshake_timeout: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `app` over TLS on `listener` until `shutdown` completes, then marks `draining` (so
/// `/readyz` reports not ready), stops accepting, lets in-flight requests finish (up to
/// [`ServeOptions::drain_timeout`]) and returns.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    options: ServeOptions,
    draining: &Draining,
    shutdown: impl Future<Output = ()> + Send,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    futures::pin_mut!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: pause instead of spinning.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Reviews are small request/response exchanges: with Nagle's algorithm a response
        // segment written while an earlier one (an h2 WINDOW_UPDATE or SETTINGS ack, say) is
        // unacknowledged waits for the client's delayed ACK.
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot disable Nagle's algorithm");
        }
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(app.clone());
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls =
                match tokio::time::timeout(options.handshake_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, %error, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
            if let Err(error) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
    draining.start();
    drop(listener);
    tracing::info!(
        connections = graceful.count(),
        "shutting down: draining in-flight requests"
    );
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections drained"),
        () = tokio::time::sleep(options.drain_timeout) => {
            tracing::warn!(timeout = ?options.drain_timeout, "drain timeout: closing remaining connections");
        }
    }
}

/// Serves `app` over plain HTTP on `listener` until `shutdown` completes.
pub async fn serve_plain(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// Binds a TCP listener, naming the address on failure.
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await.map_err(|error| {
        std::io::Error::new(error.kind(), format!("cannot listen on {address}: {error}"))
    })
}
