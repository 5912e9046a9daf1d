//! raygate's lightweight reconciler: the process shell and its controllers.
//!
//! * [`runtime`] runs the process: client, leader election, the controllers' lifetime.
//! * [`context`] is what every controller shares: client, configuration, metrics, the cached
//!   Namespaces, the shutdown signal and the error policy.
//! * [`exec`] carries out a decision of the core: every controller observes, asks
//!   `raygate_api` for a `Decision`, and hands it to [`exec::carry_out`], so all of them write,
//!   record Events and fail the same way.
//! * [`cache`] watches what the Ray controllers read, once per kind and namespace scope, and
//!   feeds the controllers from it: a pass reads the caches, not the API server.
//! * [`first_passes`] lets the first passes of new objects into a controller a few at a time,
//!   so passes of objects on their way do not wait behind a burst of them.
//! * [`index`] finds the cached objects that share a label or annotation without walking them
//!   all.
//! * [`freshness`] keeps a pass from deciding on a cached object its own writes replaced.
//! * [`controllers`] holds the controllers, one file each, all started by [`controllers::run`].
//!
//! Every decision is made by `raygate_api`; this crate only observes and acts.

pub mod cache;
pub mod context;
pub mod controllers;
pub mod dashboard;
pub(crate) mod events;
pub(crate) mod exec;
#[cfg(test)]
pub(crate) mod fake_api;
pub mod first_passes;
pub mod freshness;
pub mod http;
pub mod index;
pub mod metrics;
pub mod runtime;
pub mod tokens;

pub use context::{Context, NamespaceScope, ReconcileError, Shutdown, ShutdownTrigger};
pub use metrics::Metrics;
pub use runtime::{Config, Error, LeaderElection, run, run_serving_metrics};

/// Field manager and event reporter name of the reconciler.
pub const MANAGER_NAME: &str = "raygate-reconciler";
