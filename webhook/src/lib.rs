//! raygate's admission webhook server: axum over tokio-rustls.
//!
//! * `POST /mutate/pods`: Ray Pods created in namespaces labelled `raygate.io/scheduler=volcano`
//!   get `schedulerName: volcano`, their PodGroup and task annotations and their owner's queue
//!   and priority labels, as a JSON patch (see `raygate_api::onboarding`).
//! * `POST /mutate/ray`: RayJobs and RayClusters created in opted-in namespaces without a queue
//!   label get the namespace's (or a QueuePolicy's) default queue.
//! * `POST /validate/ray`: RayJobs and RayClusters are checked by `raygate_api::admission`
//!   (the `raygate validate` rules, Volcano queue and QueuePolicy rules, UPDATE rules); errors
//!   deny with the field path, warnings go back to the client.
//! * `POST /validate/queuepolicy`: QueuePolicies are checked before they are stored.
//! * `POST /validate/namespace`, `/validate/volcano-pod`, `/validate/podgroup`: QueuePolicies
//!   without escape (`raygate_api::admission::escape`): only the opt-in label's admins change
//!   it on a Namespace, and Volcano Pods without a PodGroup and every PodGroup must pass the
//!   policies of their namespace, opted in or not.
//! * `POST /convert`: `ray.io` v1alpha1 ⇄ v1 ConversionReviews (`raygate_api::conversion`).
//! * `/healthz`, `/readyz` (certificate loaded, every informer cache synced, not shutting
//!   down) and `/metrics` (OpenMetrics), on the TLS port and on a plain-HTTP port for probes
//!   and scraping.
//!
//! Only wiring lives here: every decision is a pure `raygate_api` function, fed from the
//! AdmissionReview and the informer caches. The router is constructible in-process
//! ([`router`] with [`Caches::preloaded`]) for tests and benchmarks; the `test-support` feature
//! adds the `test_support` module (a preloaded world, realistic reviews and the oracle the
//! fuzz targets and the property test check answers with).

pub mod cache;
mod connections;
pub mod escape;
pub mod metrics;
pub mod pods;
pub mod ray;
pub mod review;
pub mod server;
#[cfg(feature = "test-support")]
pub mod test_support;

pub use cache::{Caches, Preloaded};
pub use metrics::Metrics;
pub use server::{
    AppState, Draining, Limits, MetricsSource, ServeOptions, ops_router, router, serve,
    serve_plain, tls_config,
};
