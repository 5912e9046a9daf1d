//! The webhook's Prometheus metrics (OpenMetrics text on `/metrics`).
//!
//! Names follow controller-runtime's webhook metrics where one exists
//! (`controller_runtime_webhook_requests_total`, `…_latency_seconds`,
//! `…_requests_in_flight`), with raygate's finer admission breakdown next to them.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::cache::Caches;

/// Labels of one webhook path.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// The path, e.g. `/mutate/pods`.
    pub webhook: String,
}

/// Labels of controller-runtime's request counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    /// The path.
    pub webhook: String,
    /// The HTTP status code answered.
    pub code: String,
}

/// Labels of one admission decision.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionLabels {
    /// The path.
    pub webhook: String,
    /// CREATE, UPDATE, DELETE, CONNECT, or `unknown` for an unreadable review.
    pub operation: String,
    /// The reviewed object's kind, or `unknown`.
    pub kind: String,
    /// `allowed`, `patched`, `denied`, or `malformed` (answered 400).
    pub verdict: String,
    /// Whether the request was a dry run.
    pub dry_run: String,
}

/// Labels of one informer cache.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// `namespaces`, `rayclusters`, `rayjobs`, `queues`, …
    pub cache: String,
}

/// Labels of the connections the TLS server closed of its own accord.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CloseLabels {
    /// `idle` (no request in flight for `--idle-connection-timeout`), `evicted` (the
    /// connection idle the longest, closed at `--max-connections` to make room for a new one)
    /// or `shutdown`.
    pub reason: String,
}

/// Every metric the webhook exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// HTTP requests per path and status code (controller-runtime's name).
    pub requests: Family<CodeLabels, Counter>,
    /// Request latency per path, in seconds (controller-runtime's name).
    pub latency: Family<WebhookLabels, Histogram>,
    /// Requests being served per path (controller-runtime's name).
    pub in_flight: Family<WebhookLabels, Gauge>,
    /// Admission decisions by operation, kind and verdict.
    pub admissions: Family<AdmissionLabels, Counter>,
    /// Size of the JSON patches returned, in bytes (before base64).
    pub patch_bytes: Family<WebhookLabels, Histogram>,
    /// Seconds since each cache last heard from the API server (event or relist).
    pub cache_age: Family<CacheLabels, Gauge<f64, AtomicU64>>,
    /// 1 once a cache has completed its initial list.
    pub cache_synced: Family<CacheLabels, Gauge>,
    /// TLS connections open, handshakes included.
    pub open_connections: Gauge,
    /// The bound on open TLS connections (`--max-connections`).
    pub max_connections: Gauge,
    /// TLS connections the server closed of its own accord, by reason.
    pub connections_closed: Family<CloseLabels, Counter>,
}

fn latency_histogram() -> Histogram {
    // 0.5 ms … ~16 s: admission answers in milliseconds; the tail shows API fallbacks.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

fn patch_histogram() -> Histogram {
    // 16 B … 512 KiB.
    Histogram::new(exponential_buckets(16.0, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh set of metrics in its own registry.
    pub fn new() -> Self {
        Self::with_registry(Registry::default())
    }

    /// The webhook's metrics added to `registry`, which may already hold metrics of other
    /// parts of the process (e.g. the serving certificate's); `/metrics` renders them all.
    pub fn with_registry(mut registry: Registry) -> Self {
        let requests = Family::<CodeLabels, Counter>::default();
        let latency = Family::<WebhookLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let in_flight = Family::<WebhookLabels, Gauge>::default();
        let admissions = Family::<AdmissionLabels, Counter>::default();
        let patch_bytes = Family::<WebhookLabels, Histogram>::new_with_constructor(
            patch_histogram as fn() -> Histogram,
        );
        let cache_age = Family::<CacheLabels, Gauge<f64, AtomicU64>>::default();
        let cache_synced = Family::<CacheLabels, Gauge>::default();
        let open_connections = Gauge::default();
        let max_connections = Gauge::default();
        let connections_closed = Family::<CloseLabels, Counter>::default();
        registry.register(
            "controller_runtime_webhook_requests",
            "Webhook HTTP requests by path and status code",
            requests.clone(),
        );
        registry.register(
            "controller_runtime_webhook_latency_seconds",
            "Webhook request latency by path",
            latency.clone(),
        );
        registry.register(
            "controller_runtime_webhook_requests_in_flight",
            "Webhook requests being served by path",
            in_flight.clone(),
        );
        let raygate = registry.sub_registry_with_prefix("raygate_webhook");
        raygate.register(
            "admission_requests",
            "Admission decisions by path, operation, kind, verdict and dry run",
            admissions.clone(),
        );
        raygate.register(
            "patch_bytes",
            "Size in bytes of the JSON patches returned",
            patch_bytes.clone(),
        );
        raygate.register(
            "cache_age_seconds",
            "Seconds since the informer cache last received an event or list from the API server",
            cache_age.clone(),
        );
        raygate.register(
            "cache_synced",
            "1 once the informer cache has completed its initial list",
            cache_synced.clone(),
        );
        raygate.register(
            "open_connections",
            "TLS connections open, handshakes included",
            open_connections.clone(),
        );
        raygate.register(
            "max_connections",
            "The bound on open TLS connections (--max-connections)",
            max_connections.clone(),
        );
        raygate.register(
            "connections_closed",
            "TLS connections the webhook closed of its own accord, by reason (idle, evicted, shutdown)",
            connections_closed.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            in_flight,
            admissions,
            patch_bytes,
            cache_age,
            cache_synced,
            open_connections,
            max_connections,
            connections_closed,
        }
    }

    /// The OpenMetrics text of every metric, with cache ages taken now.
    pub fn render(&self, caches: &Caches) -> String {
        for status in caches.statuses() {
            let labels = CacheLabels {
                cache: status.name().to_string(),
            };
            self.cache_synced
                .get_or_create(&labels)
                .set(i64::from(status.is_synced()));
            if let Some(age) = status.age() {
                self.cache_age.get_or_create(&labels).set(age.as_secs_f64());
            }
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
