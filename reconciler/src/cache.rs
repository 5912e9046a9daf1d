//! The watch caches the controllers read from instead of the API server.
//!
//! Each kind the Ray controllers look at is watched once per namespace scope, into one
//! [`Store`], and every event is handed on to each controller that asked for the kind
//! ([`Cache::subscribe`]): as its own kind (the objects it reconciles) or as a child that
//! wakes its owner. A pass therefore reads what the watch has delivered, with no request; the
//! one thing a cache cannot prove, that it is not behind the controller's own last write, is
//! handled by [`crate::freshness`] and by names that make a repeated create harmless
//! (docs/reconciler.md, "Reads come from watch caches").
//!
//! Watches are kept alive as the API server allows (docs/reconciler.md, "API server outages"):
//! a watch the server ends or breaks is re-established after at most [`WATCH_BACKOFF_MAX`], and
//! one that stays silent longer than its timeout plus a margin is treated as dead and
//! re-established too (kube-runtime's idle check, armed by [`WATCH_TIMEOUT_SECONDS`]).

use std::time::Duration;

use futures::channel::mpsc;
use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, SinkExt, Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event, ExponentialBackoff, watcher};
use kube::runtime::{WatchStreamExt, utils::ResetTimerBackoff};
use kube::{Api, Client, Resource, ResourceExt};
use raygate_api::feasibility::NodeShapes;
use raygate_api::queue_policy::QueuePolicy;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::{PodGroup, Queue};
use raygate_api::{keys, observed};
use serde::de::DeserializeOwned;

use crate::context::Shutdown;
use crate::index::{Index, IndexKey};

/// How long the API server keeps one watch request open. A watch that delivers nothing (not
/// even a bookmark) for this long plus kube-runtime's margin is considered stalled and opened
/// again, so a connection that died without a reset is noticed within about a minute.
pub const WATCH_TIMEOUT_SECONDS: u32 = 50;
/// First wait before re-establishing a failed watch.
pub const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(200);
/// Longest wait before re-establishing a failed watch: once the API server is back, every
/// watch is back within this long.
pub const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(4);
/// A watch that has run this long without failing starts its backoff from the beginning again.
const WATCH_BACKOFF_RESET: Duration = Duration::from_secs(60);
/// Longest time a process's first passes wait for the caches' first lists
/// ([`FirstLists`]). A list that takes longer (its API missing or refused) lets the passes go
/// ahead rather than stop them all.
pub const FIRST_LISTS_WAIT: Duration = Duration::from_secs(10);
/// Events buffered for each subscriber before the watch waits for it.
const SUBSCRIBER_BUFFER: usize = 1024;

/// The watch backoff: exponential from [`WATCH_BACKOFF_MIN`] to [`WATCH_BACKOFF_MAX`], with
/// jitter, reset after [`WATCH_BACKOFF_RESET`] without a failure.
pub(crate) fn watch_backoff() -> ResetTimerBackoff<ExponentialBackoff> {
    ResetTimerBackoff::new(
        backon::ExponentialBuilder::default()
            .with_min_delay(WATCH_BACKOFF_MIN)
            .with_max_delay(WATCH_BACKOFF_MAX)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .into(),
        WATCH_BACKOFF_RESET,
    )
}

/// The watch configuration of every cache: [`WATCH_TIMEOUT_SECONDS`], bookmarks, optionally a
/// label selector.
pub(crate) fn watch_config(labels: Option<&str>) -> watcher::Config {
    let config = watcher::Config::default().timeout(WATCH_TIMEOUT_SECONDS);
    match labels {
        Some(selector) => config.labels(selector),
        None => config,
    }
}

/// One watched kind: its store and the controllers it feeds.
pub struct Cache<K: Resource + Clone + 'static>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    api: Api<K>,
    config: watcher::Config,
    store: Store<K>,
    writer: reflector::store::Writer<K>,
    subscribers: Subscribers<K>,
    /// Drops from each object what no decision reads of its kind, before it is stored: by
    /// default its `managedFields`.
    trim: fn(&mut K),
    /// The indexes kept from the same events as the store.
    indexes: Vec<Index<K>>,
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    fn new(client: &Client, namespace: Option<&str>, labels: Option<&str>) -> Self {
        Self::of(
            crate::controllers::scoped_api(client, namespace),
            watch_config(labels),
        )
    }
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = (), Scope = ClusterResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    /// Every object of a cluster-scoped kind (the same in each namespace scope).
    fn cluster_scoped(client: &Client) -> Self {
        Self::of(Api::all(client.clone()), watch_config(None))
    }
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    fn of(api: Api<K>, config: watcher::Config) -> Self {
        let (store, writer) = reflector::store();
        Self {
            api,
            config,
            store,
            writer,
            subscribers: Subscribers::default(),
            trim: |object| object.managed_fields_mut().clear(),
            indexes: Vec::new(),
        }
    }

    /// Stores each object as `trim` leaves it instead of without its `managedFields`
    /// (docs/reconciler.md, "Memory").
    fn trimmed_by(mut self, trim: fn(&mut K)) -> Self {
        self.trim = trim;
        self
    }

    /// A new index of this cache's objects by `key`, kept up to date by its watch.
    fn index(&mut self, key: IndexKey<K>) -> Index<K> {
        let index = Index::new(key);
        self.indexes.push(index.clone());
        index
    }

    /// The store: every object the watch has delivered (empty until the first list is in).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Resolves once the store holds the watch's first list (at once after that).
    fn listed(&self) -> BoxFuture<'static, ()> {
        listed(self.store())
    }

    /// A stream of every object the watch delivers from now on, changed or deleted, for a
    /// controller's trigger. Subscribe before [`Caches::run`].
    pub fn subscribe(&mut self) -> impl Stream<Item = Result<K, watcher::Error>> + Send + use<K> {
        self.subscribers.subscribe()
    }

    /// Runs the watch until it ends with the process: fills the store, hands each object to
    /// every subscriber.
    async fn run(self) {
        let Cache {
            api,
            config,
            writer,
            mut subscribers,
            trim,
            indexes,
            ..
        } = self;
        let kind = K::kind(&());
        let objects = watcher(api, config)
            .backoff(watch_backoff())
            .modify(trim)
            .map_ok(move |event| {
                for index in &indexes {
                    index.apply(&event);
                }
                event
            })
            .reflect(writer)
            .touched_objects();
        futures::pin_mut!(objects);
        while let Some(event) = objects.next().await {
            match event {
                Ok(object) => subscribers.send(&object).await,
                Err(error) => tracing::warn!(%kind, %error, "watch failed; retrying"),
            }
        }
    }
}

/// The controllers a watch hands its objects to, each through a channel of its own.
struct Subscribers<K>(Vec<mpsc::Sender<Result<K, watcher::Error>>>);

impl<K> Default for Subscribers<K> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<K: Clone> Subscribers<K> {
    /// A stream of every object handed on from now on.
    fn subscribe(&mut self) -> mpsc::Receiver<Result<K, watcher::Error>> {
        let (sender, receiver) = mpsc::channel(SUBSCRIBER_BUFFER);
        self.0.push(sender);
        receiver
    }

    /// Hands `object` to every subscriber, waiting while one's buffer is full.
    async fn send(&mut self, object: &K) {
        for subscriber in &mut self.0 {
            // A subscriber that is gone has stopped with its controller.
            let _ = subscriber.send(Ok(object.clone())).await;
        }
    }
}

/// The shape of every Node ([`NodeShapes`]), kept by a Node watch of its own: feasibility
/// reads the shapes, never the Node objects (docs/feasibility.md, "The Node caches"). Its
/// subscribers are told of each change of a shape, not of each Node update: a kubelet's status
/// updates (conditions, heartbeats, images) change no shape.
pub struct NodeWatch {
    api: Api<Node>,
    shapes: NodeShapes,
    subscribers: Subscribers<Node>,
}

impl NodeWatch {
    fn new(client: &Client) -> Self {
        Self {
            api: Api::all(client.clone()),
            shapes: NodeShapes::default(),
            subscribers: Subscribers::default(),
        }
    }

    /// The shapes, as the watch keeps them (empty until its first list is in).
    pub fn shapes(&self) -> NodeShapes {
        self.shapes.clone()
    }

    /// A stream of the Nodes whose shape changed from now on: added, changed or deleted (a
    /// relist that changed shapes is told as its last Node: controllers take a trigger's name,
    /// so it must be a real one). Subscribe before [`Caches::run`].
    pub fn subscribe(&mut self) -> impl Stream<Item = Result<Node, watcher::Error>> + Send + use<> {
        self.subscribers.subscribe()
    }

    /// Runs the watch until it ends with the process.
    async fn run(self) {
        let NodeWatch {
            api,
            shapes,
            mut subscribers,
        } = self;
        let events = watcher(api, watch_config(None)).backoff(watch_backoff());
        futures::pin_mut!(events);
        let mut last_relisted = None;
        while let Some(event) = events.next().await {
            let changed = match event {
                Ok(Event::Init) => {
                    shapes.begin_relist();
                    None
                }
                Ok(Event::InitApply(node)) => {
                    shapes.relisted(&node);
                    last_relisted = Some(node);
                    None
                }
                Ok(Event::InitDone) => {
                    let changed = shapes.end_relist();
                    // A relist that found no Node makes no gang feasible: nothing to wake.
                    last_relisted.take().filter(|_| changed)
                }
                Ok(Event::Apply(node)) => shapes.apply(&node).then_some(node),
                Ok(Event::Delete(node)) => {
                    let name = node.metadata.name.as_deref().unwrap_or_default();
                    shapes.delete(name).then_some(node)
                }
                Err(error) => {
                    tracing::warn!(kind = "Node", %error, "watch failed; retrying");
                    None
                }
            };
            if let Some(node) = changed {
                subscribers.send(&node).await;
            }
        }
    }
}

/// Resolves once `store` holds its watch's first list (at once after that).
fn listed<K>(store: Store<K>) -> BoxFuture<'static, ()>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    async move {
        // An error is a writer dropped with its watch: nothing more will be listed.
        let _ = store.wait_until_ready().await;
    }
    .boxed()
}

/// The object `name` in `namespace` as `store` last had it delivered, if any.
pub fn cached<K>(store: &Store<K>, namespace: &str, name: &str) -> Option<std::sync::Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store.get(&ObjectRef::new(name).within(namespace))
}

/// The first lists of the caches a pass reads besides its own kind, awaited at the start of
/// every pass of every Ray controller of a scope.
///
/// A cache is empty until its first list is in, and a pass that reads an empty cache takes a
/// child that exists for one that does not: right after a restart, a Retrying RayJob whose
/// cluster was not yet listed forgot that cluster and started a new attempt, leaving the old
/// one behind (caught by the 20-job SIGKILL test); a ready RayCluster whose Pods were not yet
/// listed would write a status with no Pod ready. The wait ends at the last first list, or
/// after [`FIRST_LISTS_WAIT`]; once ended, a pass awaits it without waiting.
#[derive(Clone)]
pub struct FirstLists(Shared<BoxFuture<'static, ()>>);

impl FirstLists {
    /// Waits for every one of `lists`, at most `bound` from the first [`FirstLists::wait`].
    fn of(lists: Vec<BoxFuture<'static, ()>>, bound: Duration) -> Self {
        let wait = async move {
            if tokio::time::timeout(bound, futures::future::join_all(lists))
                .await
                .is_err()
            {
                tracing::warn!(
                    wait = ?bound,
                    "the watch caches have not listed yet; going ahead without them"
                );
            }
        };
        Self(wait.boxed().shared())
    }

    /// Returns once every cache has its first list, or [`FIRST_LISTS_WAIT`] after the first
    /// call.
    pub async fn wait(&self) {
        self.0.clone().await;
    }
}

/// Every kind the Ray controllers read, watched in one namespace scope.
pub struct Caches {
    /// RayJobs.
    pub ray_jobs: Cache<RayJob>,
    /// RayClusters.
    pub ray_clusters: Cache<RayCluster>,
    /// Pods labelled `ray.io/cluster`: Ray's head and worker Pods, as
    /// [`observed::keep_what_decisions_read`] leaves them.
    pub pods: Cache<Pod>,
    /// The Pods of each cluster (their `ray.io/cluster` label).
    pub pods_by_cluster: Index<Pod>,
    /// The Pods of each PodGroup (their `scheduling.k8s.io/group-name` annotation).
    pub pods_by_pod_group: Index<Pod>,
    /// Services labelled `ray.io/node-type` `head` or `worker`: RayCluster and RayJob head
    /// Services and the headless worker Services of multi-host clusters.
    pub services: Cache<Service>,
    /// Jobs labelled `ray.io/originated-from-crd=RayJob`: submitters.
    pub jobs: Cache<Job>,
    /// PodGroups, with the owners of their gang size in their `managedFields`
    /// ([`observed::keep_gang_size_owners`]): the PodGroup-only controllers tell raygate's
    /// writes from KubeRay's by them (`raygate_api::coexist`).
    pub pod_groups: Cache<PodGroup>,
    /// Volcano Queues: a change of a queue wakes the Ray objects whose PodGroup is in it, so
    /// their `GangPending` condition follows (docs/reconciler.md, "Why a gang is pending").
    pub queues: Cache<Queue>,
    /// raygate's QueuePolicies: their node templates join the nodes feasibility judges a
    /// namespace's gangs against, and a change of one wakes the Ray objects whose gang waits.
    pub queue_policies: Cache<QueuePolicy>,
    /// Node shapes: whether the nodes could ever hold a waiting gang, and a change of a shape
    /// wakes the Ray objects whose gang waits (docs/reconciler.md, "Why a gang is pending").
    pub nodes: NodeWatch,
    first_lists: FirstLists,
}

impl Caches {
    /// The caches of `namespace` (every namespace for `None`); nothing is watched until
    /// [`Caches::run`].
    pub fn new(client: &Client, namespace: Option<&str>) -> Self {
        // Head Services, and the headless worker Services of multi-host clusters.
        let ray_services = format!(
            "{} in ({},{})",
            keys::RAY_NODE_TYPE_LABEL,
            keys::HEAD_NODE_TYPE,
            keys::WORKER_NODE_TYPE
        );
        let submitters = format!("{}=RayJob", keys::ORIGINATED_FROM_CRD_LABEL);
        let ray_clusters = Cache::new(client, namespace, None);
        let mut pods = Cache::new(client, namespace, Some(keys::RAY_CLUSTER_LABEL))
            .trimmed_by(observed::keep_what_decisions_read);
        let pods_by_cluster =
            pods.index(|pod| keys::value_in(pod.metadata.labels.as_ref(), keys::RAY_CLUSTER_LABEL));
        let pods_by_pod_group = pods.index(|pod| {
            let annotations = pod.metadata.annotations.as_ref()?;
            annotations
                .get(keys::POD_GROUP_ANNOTATION)
                .map(String::as_str)
        });
        let services = Cache::new(client, namespace, Some(&ray_services));
        let jobs = Cache::new(client, namespace, Some(&submitters));
        let pod_groups =
            Cache::new(client, namespace, None).trimmed_by(observed::keep_gang_size_owners);
        // The kinds the controllers read as children (Queues have their own wait,
        // `controllers::queue_of`).
        let first_lists = FirstLists::of(
            vec![
                ray_clusters.listed(),
                pods.listed(),
                services.listed(),
                jobs.listed(),
                pod_groups.listed(),
            ],
            FIRST_LISTS_WAIT,
        );
        Self {
            ray_jobs: Cache::new(client, namespace, None),
            ray_clusters,
            pods,
            pods_by_cluster,
            pods_by_pod_group,
            services,
            jobs,
            pod_groups,
            queues: Cache::cluster_scoped(client),
            queue_policies: Cache::cluster_scoped(client),
            nodes: NodeWatch::new(client),
            first_lists,
        }
    }

    /// The first lists of the kinds the controllers read as children: RayClusters, Pods,
    /// Services, submitter Jobs and PodGroups; one wait shared by the scope's controllers.
    pub fn first_lists(&self) -> FirstLists {
        self.first_lists.clone()
    }

    /// Runs every watch until `shutdown` fires.
    pub async fn run(self, shutdown: Shutdown) {
        let watches = futures::future::join(
            futures::future::join3(
                self.ray_jobs.run(),
                self.ray_clusters.run(),
                self.pods.run(),
            ),
            futures::future::join5(
                self.services.run(),
                self.jobs.run(),
                self.pod_groups.run(),
                self.queues.run(),
                futures::future::join(self.queue_policies.run(), self.nodes.run()),
            ),
        );
        tokio::select! {
            _ = watches => {}
            () = shutdown.wait() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    /// Long enough for a pending wait to show, short enough for the suite.
    const SHORT: Duration = Duration::from_millis(100);

    #[tokio::test]
    async fn passes_wait_for_every_first_list_and_then_no_more() {
        let (pods, mut pod_writer) = reflector::store::<Pod>();
        let (services, mut service_writer) = reflector::store::<Service>();
        let first_lists = FirstLists::of(
            vec![listed(pods), listed(services)],
            Duration::from_secs(60),
        );
        assert!(
            tokio::time::timeout(SHORT, first_lists.wait())
                .await
                .is_err(),
            "no cache has listed"
        );
        pod_writer.apply_watcher_event(&Event::Init);
        pod_writer.apply_watcher_event(&Event::InitDone);
        assert!(
            tokio::time::timeout(SHORT, first_lists.wait())
                .await
                .is_err(),
            "the Service cache has not listed"
        );
        service_writer.apply_watcher_event(&Event::Init);
        service_writer.apply_watcher_event(&Event::InitDone);
        tokio::time::timeout(SHORT, first_lists.wait())
            .await
            .expect("every cache has listed");
        tokio::time::timeout(SHORT, first_lists.clone().wait())
            .await
            .expect("a later pass does not wait");
    }

    #[tokio::test]
    async fn a_list_that_never_comes_holds_the_passes_only_for_the_bound() {
        let (pods, _writer) = reflector::store::<Pod>();
        let first_lists = FirstLists::of(vec![listed(pods)], SHORT);
        let started = std::time::Instant::now();
        tokio::time::timeout(10 * SHORT, first_lists.wait())
            .await
            .expect("the bound ends the wait");
        assert!(started.elapsed() >= SHORT, "{:?}", started.elapsed());
        tokio::time::timeout(SHORT, first_lists.wait())
            .await
            .expect("a later pass does not wait");
    }
}
