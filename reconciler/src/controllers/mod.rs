//! The reconciler's controllers, one shape for all: each is fed by the watch caches of its
//! namespace scope ([`crate::cache`]), reads what it observes from them, asks `raygate_api` for
//! a decision and carries it out through [`crate::exec`]; failures go to
//! [`crate::context::error_policy`].

pub mod coexist;
pub mod queue_policy;
pub mod raycluster;
pub mod rayjob;

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use kube::runtime::controller::Config as ControllerConfig;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller as KubeController, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use raygate_api::pending;
use raygate_api::volcano::{PodGroup, Queue};

use crate::cache::Caches;
use crate::context::Context;
use crate::first_passes::{self, FirstPasses, IsNew};

/// The names of the controllers [`run`] starts (the `controller` metrics label).
pub const NAMES: [&str; 5] = [
    raycluster::NAME,
    rayjob::NAME,
    queue_policy::NAME,
    coexist::RAYJOB_NAME,
    coexist::RAYCLUSTER_NAME,
];

/// Runs every controller until the context's shutdown signal fires: the QueuePolicy status
/// controller, and in each namespace scope of the configuration the Ray controllers on that
/// scope's watch caches.
pub async fn run(ctx: Arc<Context>) {
    for name in NAMES {
        ctx.metrics.set_max_concurrent(name, ctx.config.concurrency);
        tracing::info!(controller = name, "starting controller");
    }
    let scopes = ctx
        .config
        .scopes()
        .into_iter()
        .map(|namespace| run_scope(ctx.clone(), namespace));
    futures::future::join(
        futures::future::join_all(scopes),
        queue_policy::run(ctx.clone()),
    )
    .await;
}

/// The Ray controllers of one namespace scope (every namespace for `None`), on one set of
/// watch caches.
async fn run_scope(ctx: Arc<Context>, namespace: Option<String>) {
    let mut caches = Caches::new(&ctx.client, namespace.as_deref());
    let controllers = [
        raycluster::run(&ctx, &mut caches),
        rayjob::run(&ctx, &mut caches),
        coexist::run_rayjobs(&ctx, &mut caches),
        coexist::run_rayclusters(&ctx, &mut caches),
    ];
    futures::future::join(
        caches.run(ctx.shutdown.clone()),
        futures::future::join_all(controllers),
    )
    .await;
    tracing::info!(namespace = ?namespace, "controllers stopped");
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

/// A kube-runtime controller of the objects of `store`, woken by `trigger` (a subscription of
/// the same cache), with the configuration's concurrency, stopping on the context's shutdown;
/// the caller adds the children that wake it and runs it.
pub(crate) fn watching<K>(
    ctx: &Context,
    trigger: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    store: Store<K>,
) -> KubeController<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    KubeController::for_stream(trigger, store)
        .with_config(ControllerConfig::default().concurrency(ctx.config.concurrency))
        .graceful_shutdown_on(ctx.shutdown.clone().wait())
}

/// A controller made by [`watching_gated`]: its new objects' first passes are let in a few at
/// a time ([`crate::first_passes`]).
pub(crate) struct Gated<K>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + 'static,
{
    /// The controller, to which the caller adds the children that wake it.
    pub controller: KubeController<K>,
    /// What its passes report their end to.
    pub first_passes: FirstPasses<K>,
    /// The gate's loop, to run [`alongside`] the controller.
    pub gate: BoxFuture<'static, ()>,
}

/// [`watching`], with the first passes of the objects `is_new` picks let in the order they came,
/// at most half of `--concurrency` (at least one) queued or running at a time, and every other
/// trigger going straight in: the other half of the slots always serve objects on their way.
pub(crate) fn watching_gated<K>(
    ctx: &Context,
    trigger: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    store: Store<K>,
    is_new: IsNew<K>,
) -> Gated<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let split = first_passes::gate(
        trigger,
        store.clone(),
        is_new,
        usize::from(ctx.config.concurrency / 2),
    );
    Gated {
        controller: watching(ctx, split.trigger, store),
        first_passes: split.first_passes,
        gate: split.run,
    }
}

/// Runs `gate` while `controller` runs; the controller's end ends both.
pub(crate) fn alongside(
    controller: BoxFuture<'static, ()>,
    gate: BoxFuture<'static, ()>,
) -> BoxFuture<'static, ()> {
    async move {
        let mut controller = controller;
        tokio::select! {
            () = &mut controller => {}
            () = gate => controller.await,
        }
    }
    .boxed()
}

/// Drains a controller's result stream until it ends with the context's shutdown (failed
/// reconciles are already logged by the error policy).
pub(crate) fn drain<T, E>(
    name: &'static str,
    results: impl Stream<Item = Result<T, E>> + Send + 'static,
) -> BoxFuture<'static, ()>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    results
        .for_each(move |result| async move {
            if let Err(error) = result {
                tracing::debug!(controller = name, %error, "controller event");
            }
        })
        .map(move |()| tracing::info!(controller = name, "controller stopped"))
        .boxed()
}

/// The objects of kind `K` that own (as controller) a PodGroup in `queue` that Volcano has not
/// yet bound: whom a change of the queue concerns (`raygate_api::pending::waits_on_queue`).
pub(crate) fn owners_in_queue<K>(pod_groups: &Store<PodGroup>, queue: &Queue) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()>,
{
    let name = queue.name_any();
    owners_of(pod_groups, |pg| {
        pg.spec.queue.as_deref().unwrap_or(DEFAULT_QUEUE) == name && pending::waits_on_queue(pg)
    })
}

/// The objects of kind `K` that own (as controller) a PodGroup Volcano has not yet bound, in any
/// queue: whom a change of a Node's shape concerns, as it can make their gang feasible or not.
pub(crate) fn owners_waiting<K>(pod_groups: &Store<PodGroup>) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()>,
{
    owners_of(pod_groups, pending::waits_on_queue)
}

/// The objects of kind `K` that own (as controller) a PodGroup `pick` picks.
fn owners_of<K>(pod_groups: &Store<PodGroup>, pick: impl Fn(&PodGroup) -> bool) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()>,
{
    let kind = K::kind(&());
    pod_groups
        .state()
        .iter()
        .filter(|pg| pick(pg))
        .flat_map(|pg| {
            let namespace = pg.namespace().unwrap_or_default();
            pg.owner_references()
                .iter()
                .filter(|o| o.controller == Some(true) && o.kind == kind)
                .map(move |o| ObjectRef::new(&o.name).within(&namespace))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Volcano's queue of a PodGroup that names none (the CRD's default).
const DEFAULT_QUEUE: &str = "default";

/// How long a pass waits for the queue watch's first list (at start-up) before it reads an
/// empty store.
const QUEUES_READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The queue of `pod_group` from `queues`, once the queue watch has listed (`None`: it does not
/// exist).
pub(crate) async fn queue_of(queues: &Store<Queue>, pod_group: &PodGroup) -> Option<Arc<Queue>> {
    // Before its first list the store is empty, and every queue would look missing; a watch
    // that cannot list (no permission to read queues) must not stall the pass.
    if tokio::time::timeout(QUEUES_READY_TIMEOUT, queues.wait_until_ready())
        .await
        .is_err()
    {
        tracing::warn!("the Volcano queue watch has not listed yet; reading an empty queue cache");
    }
    let name = pod_group.spec.queue.as_deref().unwrap_or(DEFAULT_QUEUE);
    queues.get(&ObjectRef::new(name))
}
