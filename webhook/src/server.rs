//! The HTTP side: the router, TLS serving with graceful shutdown, and the plain-HTTP
//! health/metrics server.

use std::convert::Infallible;
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
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use raygate_api::settings::OptInLabel;
use raygate_api::validation::ValidationContext;
use raygate_certs::CertResolver;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;
use tower_http::timeout::TimeoutLayer;

use crate::cache::Caches;
use crate::connections::{Activity, Close, Connections, InFlightBody};
use crate::metrics::{AdmissionLabels, CloseLabels, CodeLabels, Metrics, WebhookLabels};
use crate::ray::RayWebhook;
use crate::review::{self, AdmissionRequest, ObjectView, Verdict};
use crate::{escape, pods, ray};

// The paths are shared with the install manifests, which must name the same ones.
pub use raygate_api::keys::{
    CONVERT_PATH, MUTATE_PODS_PATH, MUTATE_RAY_PATH, VALIDATE_NAMESPACE_PATH,
    VALIDATE_POD_GROUP_PATH, VALIDATE_QUEUE_POLICY_PATH, VALIDATE_RAY_PATH,
    VALIDATE_VOLCANO_POD_PATH,
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

/// Renders the OpenMetrics text of another part of the process (the reconciler's, in
/// `raygate run`), which the webhook's `/metrics` serves after its own, so that a process has
/// one health and metrics listener.
pub type MetricsSource = Arc<dyn Fn() -> String + Send + Sync>;

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
    /// The namespace label that opts a namespace into Pod onboarding and QueuePolicies.
    pub opt_in: Arc<OptInLabel>,
    /// Metrics of the process's other part, appended to `/metrics`.
    pub more_metrics: Option<MetricsSource>,
    /// Request limits.
    pub limits: Limits,
    /// Set once graceful shutdown begins (by [`serve`], given this state).
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
    let state = Arc::new(state);
    let mut admission = Router::new();
    for path in [
        MUTATE_PODS_PATH,
        MUTATE_RAY_PATH,
        VALIDATE_RAY_PATH,
        VALIDATE_QUEUE_POLICY_PATH,
        VALIDATE_NAMESPACE_PATH,
        VALIDATE_VOLCANO_POD_PATH,
        VALIDATE_POD_GROUP_PATH,
    ] {
        admission = admission.route(
            path,
            post(
                move |State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes| async move {
                    admit(&state, path, headers, body).await
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
    ops_routes().with_state(Arc::new(state))
}

// The routers share one `Arc` of the state: axum clones the state for every extractor of every
// request, and a clone of `AppState` itself (its caches, client and metrics: some twenty
// reference counts) cost about 5 % of the webhook's CPU per review under load.
fn ops_routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
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

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let mut text = state.metrics.render(&state.caches);
    if let Some(more) = &state.more_metrics {
        append_exposition(&mut text, &more());
    }
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        text,
    )
        .into_response()
}

/// Appends the OpenMetrics exposition `more` to `text`, which ends with its own `# EOF`: an
/// exposition has exactly one, at its end.
fn append_exposition(text: &mut String, more: &str) {
    if let Some(body) = text.strip_suffix("# EOF\n") {
        text.truncate(body.len());
    }
    text.push_str(more);
}

/// controller-runtime's per-path request metrics, around everything else (timeouts and body
/// limit answers included).
async fn observe(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
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
        Some("Namespace") => "Namespace",
        Some("PodGroup") => "PodGroup",
        Some(_) => "other",
    }
}

async fn admit(
    state: &AppState,
    webhook: &'static str,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !is_json(&headers) {
        count(state, webhook, None, "malformed");
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json\n",
        )
            .into_response();
    }
    let view = match webhook {
        MUTATE_PODS_PATH | VALIDATE_VOLCANO_POD_PATH => ObjectView::PodOnboarding,
        MUTATE_RAY_PATH | VALIDATE_RAY_PATH => ObjectView::RayObject,
        _ => ObjectView::Whole,
    };
    let mut request = match review::parse_request(&body, view) {
        Ok(request) => request,
        Err(error) => {
            tracing::warn!(webhook, %error, "malformed AdmissionReview");
            count(state, webhook, None, "malformed");
            return (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response();
        }
    };
    let verdict = match webhook {
        MUTATE_PODS_PATH => pods::review_pod(&state.caches, &request, &state.opt_in).await,
        MUTATE_RAY_PATH => {
            ray::review_ray(
                &state.caches,
                &mut request,
                &state.validation,
                &state.opt_in,
                RayWebhook::Mutate,
            )
            .await
        }
        VALIDATE_QUEUE_POLICY_PATH => ray::review_queue_policy(&request),
        VALIDATE_NAMESPACE_PATH => escape::review_namespace(&request, &state.opt_in),
        VALIDATE_VOLCANO_POD_PATH => escape::review_volcano_pod(&state.caches, &request).await,
        VALIDATE_POD_GROUP_PATH => escape::review_pod_group(&state.caches, &request).await,
        _ => {
            ray::review_ray(
                &state.caches,
                &mut request,
                &state.validation,
                &state.opt_in,
                RayWebhook::Validate,
            )
            .await
        }
    };
    log_verdict(webhook, &request, &verdict);
    count(state, webhook, Some(&request), verdict.label());
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

/// How long a connection may have no request in flight before it is closed: right after the
/// TLS handshake and between keep-alive requests, in HTTP/1 and HTTP/2 alike.
///
/// The API server keeps its connections to a webhook alive between reviews and drops them after
/// 90 s unused: its webhook clients are client-go REST clients, whose transport takes
/// `IdleConnTimeout` from Go's `http.DefaultTransport`, 90 s. A server that closes first
/// can close a connection at the moment the API server sends a review on it, and a POST that
/// was written is not retried: the review fails, and with `failurePolicy: Fail` so does the
/// API request. 120 s leaves the closing to the API server, with half a minute to spare for a
/// client whose timer starts late (it starts once the client has read the answer, after ours).
/// Connections that are merely left open by other clients are then closed within two minutes;
/// a flood of them is handled by [`DEFAULT_MAX_CONNECTIONS`], not by this timeout.
pub const DEFAULT_IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(120);

/// The most TLS connections open at once, handshakes included.
///
/// At the bound, a new connection is not refused: it waits for the connection idle the longest
/// to be closed for it (when none is idle, for the first to become idle or to close), and the
/// connections after it wait in the kernel's listen backlog. Refusing would fail the API
/// server's review at once, and with `failurePolicy: Fail` its request; closing an idle
/// connection loses no review, and a flood of idle connections can then neither keep a review
/// out nor hold more than the bound. A connection with a request in flight is never closed for
/// a new one.
///
/// 512 holds the connections two API servers keep, and most of three: the API server talks
/// HTTP/1.1 to webhooks, one request per connection at a time, and keeps at most 25 idle
/// connections per webhook client (client-go's `MaxIdleConnsPerHost`); raygate's eight paths
/// (seven admission, one conversion) are eight clients, so at most 200 idle connections per API
/// server. Three API servers all on one replica could keep 600: past 512 the connection idle the
/// longest is closed for a new one, which costs the API server a reconnect, not a review. (More
/// exist only while more reviews are in flight at once, and those wait for a slot rather than
/// fail.)
///
/// An idle connection costs 9 KiB after a bare TLS handshake and 22 KiB once it has opened
/// HTTP/2 (the idle flood of `webhook/benches/load.rs`). Held at 512, a flood of 2,000 or 6,000
/// of them adds 8 MiB (TLS only) to 16 MiB (HTTP/2) of RSS whatever its size, a small share of
/// the Deployment's 256 MiB (`api/src/manifests.rs`); without the bound, 6,000 added 134 MiB.
/// And 512 stays under the 1,024 open files a container gets by default from containerd 2 (the
/// soft `RLIMIT_NOFILE`, which a Rust program does not raise), with room for the process's
/// other descriptors: past that limit, accepting fails with `EMFILE` instead of waiting.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 512;

/// How long a connection closed for idleness or evicted may take over its goodbye (TLS
/// `close_notify`; for HTTP/2 the GOAWAY and the PING round trip that confirms it) before it is
/// dropped. It has no request in flight, so nothing is cut; a second is hundreds of round trips
/// in a cluster, and an evicted connection's slot is what a new connection waits for.
const IDLE_CLOSE_GRACE: Duration = Duration::from_secs(1);

/// How long a stopping server keeps its connections by default (see
/// [`raygate_api::keys::DRAIN_TIMEOUT_SECONDS`]).
pub const DEFAULT_DRAIN_TIMEOUT: Duration =
    Duration::from_secs(raygate_api::keys::DRAIN_TIMEOUT_SECONDS);

/// Connection-level settings of [`serve`].
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// Longest TLS handshake before the connection is dropped.
    pub handshake_timeout: Duration,
    /// A connection with no request in flight for this long is closed (see
    /// [`DEFAULT_IDLE_CONNECTION_TIMEOUT`]). A request is in flight from its complete head to
    /// its written response, so this also bounds a client that trickles a request head.
    pub idle_connection_timeout: Duration,
    /// The most connections open at once (see [`DEFAULT_MAX_CONNECTIONS`]); at least 1.
    pub max_connections: u32,
    /// After shutdown is signalled, how long connections are kept for their clients to close
    /// them (see [`serve`]); those still open then are closed.
    pub drain_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            handshake_timeout: Duration::from_secs(5),
            idle_connection_timeout: DEFAULT_IDLE_CONNECTION_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }
}

/// Serves `app` over TLS on `listener` until `shutdown` completes, then marks `state.draining`
/// (so `/readyz` reports not ready), stops accepting, drains its connections (up to
/// [`ServeOptions::drain_timeout`]) and returns.
///
/// Draining never closes a connection its client may be sending a request on. The API server
/// keeps its connections to a webhook open after a review and sends the next review on one of
/// them, even to a Pod that is stopping (kubernetes/kubernetes#127335); a connection closed just
/// as it writes fails that admission ("broken pipe") and, with `failurePolicy: Fail`, the API
/// request. HTTP/2 connections are told with GOAWAY, which the client honours before its next
/// request. HTTP/1.1 (what the API server speaks to webhooks) has no such word for an idle
/// connection, so every HTTP/1 response from now on carries `Connection: close` and the client
/// closes the connection after reading it; a connection left idle is closed by its client's own
/// idle timeout (the API server's is 90 s) or by [`ServeOptions::idle_connection_timeout`], and
/// whatever is still open at the drain timeout is closed then.
///
/// At most [`ServeOptions::max_connections`] connections are open at once, and a connection
/// without a request in flight is closed after [`ServeOptions::idle_connection_timeout`];
/// `state.metrics` counts both.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    options: ServeOptions,
    state: &AppState,
    shutdown: impl Future<Output = ()> + Send,
) {
    state
        .metrics
        .max_connections
        .set(i64::from(options.max_connections));
    let connections = Arc::new(Connections::new(
        options.max_connections,
        state.metrics.open_connections.clone(),
    ));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // hyper's HTTP/1 header read timeout (30 s by default when a timer is set) starts whenever
    // a connection becomes idle, so it would close kept-alive connections the API server still
    // means to reuse: it is off, and the idle connection timeout covers HTTP/1 and HTTP/2.
    builder.http1().header_read_timeout(None);
    let shared = Arc::new(Shared {
        acceptor: TlsAcceptor::from(tls),
        app,
        builder,
        options,
        connections: connections.clone(),
        metrics: state.metrics.clone(),
        draining: state.draining.clone(),
    });
    let (phase, phases) = watch::channel(Phase::Serving);
    futures::pin_mut!(shutdown);
    let mut at_bound = false;
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
        let slot = match connections.try_slot() {
            Some(slot) => {
                if std::mem::take(&mut at_bound) {
                    tracing::info!(
                        max_connections = options.max_connections,
                        "below the connection bound again"
                    );
                }
                slot
            }
            None => {
                if !std::mem::replace(&mut at_bound, true) {
                    tracing::warn!(
                        max_connections = options.max_connections,
                        "connection bound reached: each new connection waits for the connection idle the longest to close"
                    );
                }
                tokio::select! {
                    slot = connections.make_room() => match slot {
                        Some(slot) => slot,
                        None => break,
                    },
                    () = &mut shutdown => break,
                }
            }
        };
        let connection = serve_connection(shared.clone(), tcp, peer, phases.clone());
        tokio::spawn(async move {
            connection.await;
            drop(slot);
        });
    }
    state.draining.start();
    drop(listener);
    let _ = phase.send(Phase::Draining);
    tracing::info!(
        connections = connections.open(),
        "shutting down: draining in-flight requests"
    );
    tokio::select! {
        () = connections.all_closed() => {
            tracing::info!("all connections drained");
            return;
        }
        () = tokio::time::sleep(options.drain_timeout) => {
            tracing::warn!(
                timeout = ?options.drain_timeout,
                connections = connections.open(),
                "drain timeout: closing remaining connections"
            );
        }
    }
    let _ = phase.send(Phase::Closing);
    // Idle connections close at once; a request still in flight has had the whole drain.
    let _ = tokio::time::timeout(IDLE_CLOSE_GRACE, connections.all_closed()).await;
}

/// Where [`serve`] is in its life, as its connections see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Accepting and serving.
    Serving,
    /// Shutdown has begun: HTTP/2 connections are closed with GOAWAY, HTTP/1 ones are left
    /// for their clients to close (see [`serve`]).
    Draining,
    /// The drain timeout has passed: every connection is closed.
    Closing,
}

impl Phase {
    /// Whether a connection (HTTP/2 or not) is to be closed now.
    fn closes(self, h2: bool) -> bool {
        match self {
            Phase::Serving => false,
            Phase::Draining => h2,
            Phase::Closing => true,
        }
    }
}

/// What every connection of one [`serve`] shares.
struct Shared {
    acceptor: TlsAcceptor,
    app: Router,
    builder: auto::Builder<TokioExecutor>,
    options: ServeOptions,
    connections: Arc<Connections>,
    metrics: Arc<Metrics>,
    /// Set once shutdown begins: HTTP/1 responses then say `Connection: close`.
    draining: Draining,
}

/// One TLS connection from its handshake to its end: served until the client closes it, it is
/// idle for the idle timeout, it is evicted at the bound, or `phases` says to close it.
async fn serve_connection(
    shared: Arc<Shared>,
    tcp: TcpStream,
    peer: SocketAddr,
    mut phases: watch::Receiver<Phase>,
) {
    let Shared {
        acceptor,
        app,
        builder,
        options,
        connections,
        metrics,
        draining,
    } = &*shared;
    let tls = match tokio::time::timeout(options.handshake_timeout, acceptor.accept(tcp)).await {
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
    // ALPN decides the protocol for every client that offers it (the API server does).
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
    let activity = Activity::default();
    let requests = activity.clone();
    let app = app.clone();
    let draining = draining.clone();
    let service = service_fn(move |request: hyper::Request<Incoming>| {
        let in_flight = requests.request();
        let http1 = matches!(
            request.version(),
            hyper::Version::HTTP_10 | hyper::Version::HTTP_11
        );
        let response = app.clone().oneshot(request);
        let draining = draining.clone();
        async move {
            let mut response: Response = response.await?;
            if http1 && draining.is_draining() {
                // hyper closes the connection once this response is written.
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok::<_, Infallible>(response.map(|body| InFlightBody::new(body, in_flight)))
        }
    });
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
    futures::pin_mut!(connection);
    let reason = tokio::select! {
        ended = connection.as_mut() => {
            if let Err(error) = ended {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
            return;
        }
        reason = connections.until_idle(&activity, options.idle_connection_timeout) => reason,
        // Also when the sender is gone: `serve` has returned.
        _ = phases.wait_for(|phase| phase.closes(h2)) => Close::Shutdown,
    };
    metrics
        .connections_closed
        .get_or_create(&CloseLabels {
            reason: reason.label().to_string(),
        })
        .inc();
    tracing::debug!(%peer, reason = reason.label(), "closing the connection");
    connection.as_mut().graceful_shutdown();
    let ended = match reason {
        // `serve` bounds the drain as a whole.
        Close::Shutdown => connection.await,
        Close::Idle | Close::Evicted => {
            match tokio::time::timeout(IDLE_CLOSE_GRACE, connection).await {
                Ok(ended) => ended,
                Err(_) => {
                    tracing::debug!(%peer, grace = ?IDLE_CLOSE_GRACE, "the connection did not close in time: dropped");
                    return;
                }
            }
        }
    };
    if let Err(error) = ended {
        tracing::debug!(%peer, %error, "connection ended with an error");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_expositions_become_one_with_a_single_eof() {
        let mut text = "# TYPE a counter\na_total 1\n# EOF\n".to_string();
        append_exposition(&mut text, "# TYPE b gauge\nb 2\n# EOF\n");
        assert_eq!(
            text,
            "# TYPE a counter\na_total 1\n# TYPE b gauge\nb 2\n# EOF\n"
        );
    }
}
