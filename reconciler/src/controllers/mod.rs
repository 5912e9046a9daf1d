//! The reconciler's controllers, one shape for all: each watches its kind (and what it owns)
//! in every namespace scope of the configuration, observes with live reads, asks
//! `raygate_api` for a decision and carries it out through [`crate::exec`]; failures go to
//! [`crate::context::error_policy`].

pub mod coexist;
pub mod queue_policy;
pub mod raycluster;
pub mod rayjob;

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use kube::runtime::controller::Config as ControllerConfig;
use kube::runtime::{Controller as KubeController, watcher};
use kube::{Api, Client, Resource};

use crate::context::Context;

/// A controller: a name (the `controller` metrics label) and a function that runs it until
/// the context's shutdown signal fires.
pub struct Controller {
    /// Name, as in controller-runtime (lower-case kind).
    pub name: &'static str,
    /// Runs the controller; returns once it has stopped.
    pub run: fn(Arc<Context>) -> BoxFuture<'static, ()>,
}

/// Every controller the reconciler runs.
pub fn all() -> Vec<Controller> {
    vec![
        raycluster::controller(),
        rayjob::controller(),
        queue_policy::controller(),
        coexist::rayjob_controller(),
        coexist::raycluster_controller(),
    ]
}

/// An `Api` over `K` in `namespace`, or in every namespace for `None`.
pub(crate) fn scoped_api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// A kube-runtime controller of `K` in `namespace` (every namespace for `None`) with the
/// configuration's concurrency, stopping on the context's shutdown; the caller adds what it
/// owns and runs it.
pub(crate) fn watching<K>(ctx: &Context, namespace: Option<&str>) -> KubeController<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    <K as Resource>::DynamicType: Default + Clone + std::fmt::Debug + Eq + std::hash::Hash + Unpin,
{
    KubeController::new(
        scoped_api::<K>(&ctx.client, namespace),
        watcher::Config::default(),
    )
    .with_config(ControllerConfig::default().concurrency(ctx.config.concurrency))
    .graceful_shutdown_on(ctx.shutdown.clone().wait())
}

/// Runs one kube-runtime controller per namespace scope of the configuration (every
/// namespace, or each watched one): `controller_in(namespace)` builds the controller's result
/// stream; each is drained (failed reconciles are already logged by the error policy) until it
/// ends with the context's shutdown.
pub(crate) async fn run_in_scopes<S, T, E>(
    ctx: &Context,
    name: &'static str,
    controller_in: impl Fn(Option<&str>) -> S,
) where
    S: Stream<Item = Result<T, E>>,
    E: std::fmt::Display,
{
    let running = ctx.config.scopes().into_iter().map(|namespace| {
        let results = controller_in(namespace.as_deref());
        async move {
            results
                .for_each(|result| async move {
                    if let Err(error) = result {
                        tracing::debug!(controller = name, %error, "controller event");
                    }
                })
                .await;
            tracing::info!(controller = name, namespace = ?namespace, "controller stopped");
        }
    });
    futures::future::join_all(running).await;
}
