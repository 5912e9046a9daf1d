//! raygate's admission webhook server: axum over tokio-rustls.
//!
//! * `POST /mutate/pods`: Ray Pods created in namespaces labelled `raygate.io/scheduler=volcano`
//!   get `schedulerName: volcano`, their PodGroup and task annotations and their owner's queue
//!   and priority labels, as a JSON patch (see `raygate_api::onboarding`).
//! * `POST /validate/ray`: RayJobs and RayClusters are checked like `raygate validate` does;
//!   errors deny with the field path, warnings go back to the client.
//! * `/healthz`, `/readyz` (certificate loaded and every informer cache synced) and `/metrics`
//!   (OpenMetrics), on the TLS port and on a plain-HTTP port for probes and scraping.
//!
//! Only wiring lives here: every decision is a pure `raygate_api` function, fed from the
//! AdmissionReview and the informer caches. The router is constructible in-process
//! ([`router`] with [`Caches::preloaded`]) for tests and benchmarks.

pub mod cache;
pub mod metrics;
pub mod pods;
pub mod ray;
pub mod review;
pub mod server;

pub use cache::{Caches, Preloaded};
pub use metrics::Metrics;
pub use server::{
    AppState, Limits, ServeOptions, ops_router, router, serve, serve_plain, tls_config,
};
