//! Prometheus metrics in controller-runtime's vocabulary, so dashboards and alerts written for
//! Go operators (KubeRay's included) work unchanged.
//!
//! | metric | labels |
//! |---|---|
//! | `controller_runtime_reconcile_total` | `controller`, `result` (`success` / `error`) |
//! | `controller_runtime_reconcile_errors_total` | `controller` |
//! | `controller_runtime_reconcile_time_seconds` (histogram) | `controller` |
//! | `controller_runtime_active_workers` | `controller` |
//! | `controller_runtime_max_concurrent_reconciles` | `controller` |
//! | `leader_election_master_status` | `name` (the Lease) |
//! | `rest_client_requests_total` | `method`, `code` (HTTP status, `<error>` when none came back) |
//! | `rest_client_request_duration_seconds` (histogram) | `verb` (the HTTP method): until the response's headers, so a watch counts the time to its first byte |
//! | `raygate_volcano_sub_group_policy_supported` | none: 1 until the API server drops a PodGroup's `spec.subGroupPolicy`, then 0 |
//!
//! kube-runtime keeps its work queue private, so `workqueue_depth` has no honest source and is
//! not exported; `controller_runtime_active_workers` shows how many reconciles run at once.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::future::BoxFuture;
use hyper::{Request, Response};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tower::{Layer, Service};

/// Labels of `controller_runtime_reconcile_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

/// Label set naming a controller.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

/// Label set naming a Lease.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    name: String,
}

/// Labels of `rest_client_requests_total`, as client-go's.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    code: String,
}

/// Labels of `rest_client_request_duration_seconds`, as client-go's (without its `host`: the
/// reconciler talks to one API server).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
}

type HistogramFamily = Family<ControllerLabels, Histogram, fn() -> Histogram>;
type RequestHistogramFamily = Family<VerbLabels, Histogram, fn() -> Histogram>;

/// The reconciler's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    durations: HistogramFamily,
    active: Family<ControllerLabels, Gauge>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    leader: Family<LeaseLabels, Gauge>,
    requests: Family<RequestLabels, Counter>,
    request_durations: RequestHistogramFamily,
    sub_group_policy: Gauge,
}

fn reconcile_histogram() -> Histogram {
    // 5 ms … ~80 s, as controller-runtime's buckets span.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

fn request_histogram() -> Histogram {
    // 1 ms … ~65 s: a write to a quiet API server takes a few milliseconds, one to a saturated
    // server seconds, and a request times out after a minute.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry holding every reconciler metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ResultLabels, Counter>::default();
        let errors = Family::<ControllerLabels, Counter>::default();
        let durations: HistogramFamily = Family::new_with_constructor(reconcile_histogram);
        let active = Family::<ControllerLabels, Gauge>::default();
        let max_concurrent = Family::<ControllerLabels, Gauge>::default();
        let leader = Family::<LeaseLabels, Gauge>::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let request_durations: RequestHistogramFamily =
            Family::new_with_constructor(request_histogram);
        let sub_group_policy = Gauge::default();
        sub_group_policy.set(1);
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            reconciles.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            durations.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            active.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller (0: unbounded)",
            max_concurrent.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Whether this replica holds the leader Lease (1) or not (0)",
            leader.clone(),
        );
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests to the API server, partitioned by method and status code",
            requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency to the API server in seconds, partitioned by verb",
            request_durations.clone(),
        );
        registry.register(
            "raygate_volcano_sub_group_policy_supported",
            "Whether the PodGroup CRD keeps spec.subGroupPolicy (1), or the API server dropped it from a PodGroup raygate wrote (0)",
            sub_group_policy.clone(),
        );
        Metrics {
            registry,
            reconciles,
            errors,
            durations,
            active,
            max_concurrent,
            leader,
            requests,
            request_durations,
            sub_group_policy,
        }
    }

    /// Records that the PodGroup CRD has no `spec.subGroupPolicy`.
    pub fn set_sub_group_policy_unsupported(&self) {
        self.sub_group_policy.set(0);
    }

    /// A tower layer for the Kubernetes client's service stack that counts every request it
    /// sends in `rest_client_requests_total` (a watch counts once, when its response starts)
    /// and times it in `rest_client_request_duration_seconds`.
    pub fn request_counter(&self) -> CountRequests {
        CountRequests {
            requests: self.requests.clone(),
            durations: self.request_durations.clone(),
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Records the configured concurrency of `controller`.
    pub fn set_max_concurrent(&self, controller: &str, concurrency: u16) {
        self.max_concurrent
            .get_or_create(&ControllerLabels {
                controller: controller.to_string(),
            })
            .set(i64::from(concurrency));
    }

    /// Records whether this replica leads through Lease `lease`.
    pub fn set_leader(&self, lease: &str, leader: bool) {
        self.leader
            .get_or_create(&LeaseLabels {
                name: lease.to_string(),
            })
            .set(i64::from(leader));
    }

    /// Runs one reconcile of `controller`, counting it, timing it and tracking active workers.
    pub async fn reconcile<T, E, F>(
        self: &Arc<Self>,
        controller: &str,
        reconcile: F,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        let labels = ControllerLabels {
            controller: controller.to_string(),
        };
        self.active.get_or_create(&labels).inc();
        let start = Instant::now();
        let result = reconcile.await;
        self.active.get_or_create(&labels).dec();
        self.durations
            .get_or_create(&labels)
            .observe(start.elapsed().as_secs_f64());
        let outcome = if result.is_ok() { "success" } else { "error" };
        self.reconciles
            .get_or_create(&ResultLabels {
                controller: controller.to_string(),
                result: outcome.to_string(),
            })
            .inc();
        if result.is_err() {
            self.errors.get_or_create(&labels).inc();
        }
        result
    }
}

/// Layer counting and timing requests; see [`Metrics::request_counter`].
#[derive(Clone)]
pub struct CountRequests {
    requests: Family<RequestLabels, Counter>,
    durations: RequestHistogramFamily,
}

impl<S> Layer<S> for CountRequests {
    type Service = CountedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountedService {
            inner,
            requests: self.requests.clone(),
            durations: self.durations.clone(),
        }
    }
}

/// The service [`CountRequests`] wraps around the client's stack.
#[derive(Clone)]
pub struct CountedService<S> {
    inner: S,
    requests: Family<RequestLabels, Counter>,
    durations: RequestHistogramFamily,
}

impl<S, B, ResponseBody> Service<Request<B>> for CountedService<S>
where
    S: Service<Request<B>, Response = Response<ResponseBody>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResponseBody: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = request.method().to_string();
        tracing::trace!(%method, uri = %request.uri(), "API request");
        // The URI again for the answer's log line, only when that line is written.
        let uri = tracing::enabled!(tracing::Level::TRACE).then(|| request.uri().clone());
        let requests = self.requests.clone();
        let durations = self.durations.clone();
        let sent = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let elapsed = sent.elapsed();
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            if let Some(uri) = uri {
                tracing::trace!(%method, %uri, %code, elapsed_ms = elapsed.as_secs_f64() * 1e3, "API answer");
            }
            durations
                .get_or_create(&VerbLabels {
                    verb: method.clone(),
                })
                .observe(elapsed.as_secs_f64());
            requests
                .get_or_create(&RequestLabels { method, code })
                .inc();
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reconciles_are_counted_timed_and_errors_split_out() {
        let metrics = Arc::new(Metrics::new());
        let ok: Result<(), ()> = metrics.reconcile("raycluster", async { Ok(()) }).await;
        assert!(ok.is_ok());
        let err: Result<(), &str> = metrics.reconcile("raycluster", async { Err("boom") }).await;
        assert_eq!(err, Err("boom"));
        metrics.set_leader("raygate-reconciler", true);
        metrics.set_max_concurrent("raycluster", 4);
        let text = metrics.encode();
        for line in [
            r#"controller_runtime_reconcile_total{controller="raycluster",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="raycluster",result="error"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="raycluster"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="raycluster"} 2"#,
            r#"controller_runtime_active_workers{controller="raycluster"} 0"#,
            r#"controller_runtime_max_concurrent_reconciles{controller="raycluster"} 4"#,
            r#"leader_election_master_status{name="raygate-reconciler"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    #[tokio::test]
    async fn client_requests_are_counted_by_method_and_status_code_and_timed_by_verb() {
        use tower::ServiceExt;
        let metrics = Metrics::new();
        let api_server = tower::service_fn(|request: Request<()>| async move {
            match request.uri().path() {
                "/down" => Err("connection refused"),
                "/missing" => Ok(Response::builder().status(404).body(()).unwrap_or_default()),
                "/slow" => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    Ok(Response::new(()))
                }
                _ => Ok(Response::new(())),
            }
        });
        let client = metrics.request_counter().layer(api_server);
        for (method, path) in [
            ("GET", "/ok"),
            ("GET", "/ok"),
            ("PATCH", "/missing"),
            ("POST", "/down"),
            ("PUT", "/slow"),
        ] {
            let request = Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .unwrap_or_default();
            let _ = client.clone().oneshot(request).await;
        }
        let text = metrics.encode();
        for line in [
            r#"rest_client_requests_total{method="GET",code="200"} 2"#,
            r#"rest_client_requests_total{method="PATCH",code="404"} 1"#,
            r#"rest_client_requests_total{method="POST",code="<error>"} 1"#,
            r#"rest_client_request_duration_seconds_count{verb="GET"} 2"#,
            r#"rest_client_request_duration_seconds_count{verb="PATCH"} 1"#,
            r#"rest_client_request_duration_seconds_count{verb="POST"} 1"#,
            r#"rest_client_request_duration_seconds_bucket{le="0.016",verb="PUT"} 0"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        let slow: f64 = (text.lines())
            .find_map(|l| {
                l.strip_prefix(r#"rest_client_request_duration_seconds_sum{verb="PUT"} "#)
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no PUT duration in\n{text}"));
        assert!(slow >= 0.02, "the 20-ms PUT took {slow} s");
    }
}
