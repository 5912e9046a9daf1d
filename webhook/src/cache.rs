//! Informer caches of what admission decisions depend on: Namespaces (opt-in label, default
//! queue), RayClusters and RayJobs (a Pod's gang owner and its queue and priority labels),
//! RayJobs' submitter Jobs (a KubeRay submitter Pod's RayJob), Volcano Queues and raygate's
//! QueuePolicies (Ray object admission rules), and the shapes of the cluster's Nodes
//! (feasibility: [`NodeShapes`] keeps what feasibility reads of each Node, never the Node itself).
//!
//! Lookups read the cache first. A miss falls back to one GET against the API server when a
//! client is configured: a Pod is often created milliseconds after its RayCluster, before the
//! watch event arrives, and guessing the owner from a stale cache would put the Pod in the
//! wrong gang.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{PartialObjectMeta, PartialObjectMetaExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use raygate_api::feasibility::{NodeKinds, NodeShapes};
use raygate_api::keys;
use raygate_api::queue_policy::QueuePolicy;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::Queue;

/// Labels or annotations of an object.
pub type StringMap = BTreeMap<String, String>;

/// How long a fallback GET may take before the lookup fails.
const FALLBACK_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a lookup failed (only fallback GETs can fail).
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The API server answered with an error.
    #[error("cannot read {what} from the API server: {source}")]
    Api {
        /// e.g. `RayCluster ns/name`.
        what: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The API server did not answer in time.
    #[error("cannot read {what} from the API server: no answer within {FALLBACK_TIMEOUT:?}")]
    Timeout {
        /// e.g. `RayCluster ns/name`.
        what: String,
    },
}

/// The health of one informer cache: synced once, and when it last heard from the API server.
#[derive(Debug)]
pub struct CacheStatus {
    name: &'static str,
    synced: AtomicBool,
    last_heard: Mutex<Option<Instant>>,
}

impl CacheStatus {
    fn new(name: &'static str) -> Arc<Self> {
        Arc::new(CacheStatus {
            name,
            synced: AtomicBool::new(false),
            last_heard: Mutex::new(None),
        })
    }

    /// The cache's name, a metric label.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the initial list has completed (stays true across relists).
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Time since the last event or list page; `None` before the first.
    pub fn age(&self) -> Option<Duration> {
        self.last_heard
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .map(|at| at.elapsed())
    }

    fn heard(&self) {
        *self
            .last_heard
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Instant::now());
    }

    fn mark_synced(&self) {
        self.heard();
        self.synced.store(true, Ordering::Release);
    }
}

/// Objects to preload a [`Caches`] with, for in-process use without an API server (tests,
/// benchmarks).
#[derive(Clone, Debug, Default)]
pub struct Preloaded {
    /// Namespaces.
    pub namespaces: Vec<Namespace>,
    /// Metadata of RayClusters.
    pub ray_clusters: Vec<ObjectMeta>,
    /// Metadata of RayJobs.
    pub ray_jobs: Vec<ObjectMeta>,
    /// Metadata of RayJobs' submitter Jobs.
    pub jobs: Vec<ObjectMeta>,
    /// Volcano Queues.
    pub queues: Vec<Queue>,
    /// QueuePolicies.
    pub queue_policies: Vec<QueuePolicy>,
    /// Nodes (only their shapes are kept).
    pub nodes: Vec<Node>,
}

/// Applies one Node watch event to `shapes`; what is left of it is the event's kind.
fn apply_node_event(shapes: &NodeShapes, event: Event<Node>) -> Event<()> {
    match event {
        Event::Init => {
            shapes.begin_relist();
            Event::Init
        }
        Event::InitApply(node) => {
            shapes.relisted(&node);
            Event::InitApply(())
        }
        Event::InitDone => {
            shapes.end_relist();
            Event::InitDone
        }
        Event::Apply(node) => {
            shapes.apply(&node);
            Event::Apply(())
        }
        Event::Delete(node) => {
            shapes.delete(node.metadata.name.as_deref().unwrap_or_default());
            Event::Delete(())
        }
    }
}

/// The informer caches, cheap to clone.
#[derive(Clone)]
pub struct Caches {
    namespaces: Store<Namespace>,
    ray_clusters: Store<PartialObjectMeta<RayCluster>>,
    ray_jobs: Store<PartialObjectMeta<RayJob>>,
    jobs: Store<PartialObjectMeta<Job>>,
    queues: Store<Queue>,
    queue_policies: Store<QueuePolicy>,
    nodes: NodeShapes,
    statuses: Arc<[Arc<CacheStatus>; 7]>,
    client: Option<Client>,
}

/// Index of each cache in `statuses`.
const NAMESPACES: usize = 0;
const RAY_CLUSTERS: usize = 1;
const RAY_JOBS: usize = 2;
const QUEUES: usize = 3;
const QUEUE_POLICIES: usize = 4;
const JOBS: usize = 5;
const NODES: usize = 6;

fn new_statuses() -> Arc<[Arc<CacheStatus>; 7]> {
    Arc::new([
        CacheStatus::new("namespaces"),
        CacheStatus::new("rayclusters"),
        CacheStatus::new("rayjobs"),
        CacheStatus::new("queues"),
        CacheStatus::new("queuepolicies"),
        CacheStatus::new("jobs"),
        CacheStatus::new("nodes"),
    ])
}

/// The label selector of the Jobs cache: KubeRay and raygate label every submitter Job they
/// create `ray.io/originated-from-crd=RayJob`, so only those are held, not every Job in the
/// cluster.
fn submitter_jobs_selector() -> String {
    format!("{}=RayJob", keys::ORIGINATED_FROM_CRD_LABEL)
}

impl Caches {
    /// Caches fed by watches through `client`, and the future that runs the watches (spawn
    /// it; it runs until dropped). Failed watches are retried with backoff and logged.
    pub fn start(client: Client) -> (Caches, impl Future<Output = ()> + Send + 'static) {
        let statuses = new_statuses();
        let (namespaces, watch_namespaces) = watched(
            Api::<Namespace>::all(client.clone()),
            statuses[NAMESPACES].clone(),
        );
        let (ray_clusters, watch_ray_clusters) = watched(
            Api::<PartialObjectMeta<RayCluster>>::all(client.clone()),
            statuses[RAY_CLUSTERS].clone(),
        );
        let (ray_jobs, watch_ray_jobs) = watched(
            Api::<PartialObjectMeta<RayJob>>::all(client.clone()),
            statuses[RAY_JOBS].clone(),
        );
        let (jobs, watch_jobs) = watched_with(
            Api::<PartialObjectMeta<Job>>::all(client.clone()),
            watcher::Config::default().labels(&submitter_jobs_selector()),
            statuses[JOBS].clone(),
        );
        let (queues, watch_queues) =
            watched(Api::<Queue>::all(client.clone()), statuses[QUEUES].clone());
        let (queue_policies, watch_queue_policies) = watched(
            Api::<QueuePolicy>::all(client.clone()),
            statuses[QUEUE_POLICIES].clone(),
        );
        let nodes = NodeShapes::default();
        let writer = nodes.clone();
        let watch_nodes = drive(
            watcher::watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
                .map_ok(move |event| apply_node_event(&writer, event)),
            statuses[NODES].clone(),
        );
        let run = futures::future::join3(
            futures::future::join5(
                watch_namespaces,
                watch_ray_clusters,
                watch_ray_jobs,
                watch_queues,
                watch_queue_policies,
            ),
            watch_jobs,
            watch_nodes,
        );
        let caches = Caches {
            namespaces,
            ray_clusters,
            ray_jobs,
            jobs,
            queues,
            queue_policies,
            nodes,
            statuses,
            client: Some(client),
        };
        (caches, async move {
            run.await;
        })
    }

    /// Synced caches holding exactly `objects`, with no API server behind them.
    pub fn preloaded(objects: Preloaded) -> Caches {
        Caches::preloaded_in_pages([objects])
    }

    /// Synced caches holding the objects of every page, with no API server behind them. Each
    /// page is slimmed and dropped before the next is read, as a watch's initial list reads
    /// the API server's pages, so a large preloaded world never sits in memory whole.
    pub fn preloaded_in_pages(pages: impl IntoIterator<Item = Preloaded>) -> Caches {
        let statuses = new_statuses();
        let mut namespaces = Filling::new();
        let mut ray_clusters = Filling::new();
        let mut ray_jobs = Filling::new();
        let mut jobs = Filling::new();
        let mut queues = Filling::new();
        let mut queue_policies = Filling::new();
        let nodes = NodeShapes::default();
        for page in pages {
            namespaces.add(page.namespaces);
            ray_clusters.add(
                page.ray_clusters
                    .into_iter()
                    .map(|m| m.into_response_partial::<RayCluster>()),
            );
            ray_jobs.add(
                page.ray_jobs
                    .into_iter()
                    .map(|m| m.into_response_partial::<RayJob>()),
            );
            jobs.add(
                page.jobs
                    .into_iter()
                    .map(|m| m.into_response_partial::<Job>()),
            );
            queues.add(page.queues);
            queue_policies.add(page.queue_policies);
            for node in &page.nodes {
                nodes.apply(node);
            }
        }
        for status in statuses.iter() {
            status.mark_synced();
        }
        Caches {
            namespaces: namespaces.done(),
            ray_clusters: ray_clusters.done(),
            ray_jobs: ray_jobs.done(),
            jobs: jobs.done(),
            queues: queues.done(),
            queue_policies: queue_policies.done(),
            nodes,
            statuses,
            client: None,
        }
    }

    /// The health of every cache.
    pub fn statuses(&self) -> impl Iterator<Item = &CacheStatus> {
        self.statuses.iter().map(Arc::as_ref)
    }

    /// Names of the caches that have not completed their initial list.
    pub fn unsynced(&self) -> Vec<&'static str> {
        self.statuses()
            .filter(|s| !s.is_synced())
            .map(CacheStatus::name)
            .collect()
    }

    /// A Namespace's labels and annotations; `None` when it does not exist.
    pub async fn namespace(&self, name: &str) -> Result<Option<Arc<Namespace>>, LookupError> {
        if let Some(found) = self.namespaces.get(&ObjectRef::new(name)) {
            return Ok(Some(found));
        }
        let Some(client) = &self.client else {
            return Ok(None);
        };
        let api = Api::<Namespace>::all(client.clone());
        fallback(format!("Namespace {name}"), api.get_opt(name))
            .await
            .map(|found| found.map(Arc::new))
    }

    /// A RayCluster's metadata; `None` when it does not exist.
    pub async fn ray_cluster(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, LookupError> {
        self.metadata(&self.ray_clusters, namespace, name).await
    }

    /// A RayJob's metadata; `None` when it does not exist.
    pub async fn ray_job(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, LookupError> {
        self.metadata(&self.ray_jobs, namespace, name).await
    }

    /// A RayJob's metadata from the cache only (no fallback GET); `None` when it is not cached.
    ///
    /// For a Pod that may be a KubeRay submitter ([`raygate_api::onboarding::controlling_job`]):
    /// KubeRay creates the submitter Job only once the RayJob's cluster is ready, long after
    /// the RayJob reached the cache, so a miss means an ordinary Job, and ordinary Job Pods
    /// cost no API request.
    pub fn cached_ray_job(&self, namespace: &str, name: &str) -> Option<ObjectMeta> {
        self.ray_jobs
            .get(&ObjectRef::new(name).within(namespace))
            .map(|found| found.metadata.clone())
    }

    /// A submitter Job's metadata; `None` when it does not exist. Jobs without the
    /// `ray.io/originated-from-crd=RayJob` label are not cached and are read from the API
    /// server (the Job of a RayJob's name that is not its submitter, a rare case).
    pub async fn job(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, LookupError> {
        self.metadata(&self.jobs, namespace, name).await
    }

    /// A Volcano Queue from the cache (no fallback: Queues are created long before the
    /// workloads that name them).
    pub fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        self.queues.get(&ObjectRef::new(name))
    }

    /// Every cached QueuePolicy.
    pub fn queue_policies(&self) -> Vec<Arc<QueuePolicy>> {
        self.queue_policies.state()
    }

    /// The shape of every cached Node, by kind (empty before the Node cache has synced).
    pub fn nodes(&self) -> Arc<NodeKinds> {
        self.nodes.snapshot()
    }

    async fn metadata<K>(
        &self,
        store: &Store<PartialObjectMeta<K>>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, LookupError>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + Debug
            + serde::de::DeserializeOwned,
    {
        if let Some(found) = store.get(&ObjectRef::new(name).within(namespace)) {
            return Ok(Some(found.metadata.clone()));
        }
        let Some(client) = &self.client else {
            return Ok(None);
        };
        let api = Api::<K>::namespaced(client.clone(), namespace);
        fallback(
            format!("{} {namespace}/{name}", K::kind(&())),
            api.get_metadata_opt(name),
        )
        .await
        .map(|found| found.map(|partial| partial.metadata))
    }
}

async fn fallback<T>(
    what: String,
    request: impl Future<Output = Result<Option<T>, kube::Error>>,
) -> Result<Option<T>, LookupError> {
    tracing::debug!(%what, "cache miss; reading from the API server");
    match tokio::time::timeout(FALLBACK_TIMEOUT, request).await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(source)) => Err(LookupError::Api { what, source }),
        Err(_) => Err(LookupError::Timeout { what }),
    }
}

/// A store of every object `api` lists, kept up to date by the returned future (which runs
/// until dropped, retrying failed watches with backoff and recording its health in `status`).
fn watched<K>(
    api: Api<K>,
    status: Arc<CacheStatus>,
) -> (Store<K>, impl Future<Output = ()> + Send + 'static)
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    watched_with(api, watcher::Config::default(), status)
}

/// [`watched`] with a watch configuration (e.g. a label selector).
fn watched_with<K>(
    api: Api<K>,
    config: watcher::Config,
    status: Arc<CacheStatus>,
) -> (Store<K>, impl Future<Output = ()> + Send + 'static)
where
    K: Resource + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store();
    let events = reflector::reflector(writer, watcher::watcher(api, config).modify(slim));
    (store, drive(events, status))
}

/// kubectl's client-side apply annotation: a copy of the whole applied object.
const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops, before an object is cached, what no admission decision reads but the API server
/// sends with every object: `managedFields` (an entry per field manager, often larger than the
/// rest of the metadata) and the last-applied annotation. The caches hold every Namespace,
/// RayCluster, RayJob, Queue and QueuePolicy of the cluster for the life of the process.
fn slim<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = &mut meta.annotations {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
}

/// A store in its initial list: objects are slimmed as the watches slim them and added until
/// [`Filling::done`] completes the list.
struct Filling<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    store: Store<K>,
    writer: reflector::store::Writer<K>,
}

impl<K> Filling<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    fn new() -> Self {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&Event::Init);
        Filling { store, writer }
    }

    fn add(&mut self, objects: impl IntoIterator<Item = K>) {
        for mut object in objects {
            slim(&mut object);
            self.writer.apply_watcher_event(&Event::InitApply(object));
        }
    }

    fn done(mut self) -> Store<K> {
        self.writer.apply_watcher_event(&Event::InitDone);
        self.store
    }
}

async fn drive<K>(
    events: impl Stream<Item = Result<Event<K>, watcher::Error>>,
    status: Arc<CacheStatus>,
) {
    let events = events.default_backoff();
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::InitDone) => {
                if !status.is_synced() {
                    tracing::info!(cache = status.name(), "cache synced");
                }
                status.mark_synced();
            }
            Ok(_) => status.heard(),
            Err(error) => {
                tracing::warn!(cache = status.name(), %error, "watch failed; retrying with backoff");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn cached_objects_keep_labels_owners_and_annotations_but_not_managed_fields() {
        let meta = |name: &str| -> ObjectMeta {
            serde_json::from_value(json!({
                "name": name, "namespace": "ml", "uid": format!("u-{name}"),
                "labels": {"volcano.sh/queue-name": "batch"},
                "annotations": {LAST_APPLIED_ANNOTATION: "{\"apiVersion\":\"ray.io/v1\"}", "team": "ml"},
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train",
                                     "uid": "j-1", "controller": true}],
                "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                                   "apiVersion": "ray.io/v1", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:metadata": {"f:labels": {}}}}]
            }))
            .expect("metadata")
        };
        let caches = Caches::preloaded(Preloaded {
            namespaces: vec![Namespace {
                metadata: ObjectMeta {
                    namespace: None,
                    ..meta("ml")
                },
                ..Namespace::default()
            }],
            ray_clusters: vec![meta("demo")],
            ray_jobs: vec![meta("train")],
            ..Preloaded::default()
        });
        let namespace = caches
            .namespace("ml")
            .await
            .expect("cached")
            .expect("found");
        let cluster = caches
            .ray_cluster("ml", "demo")
            .await
            .expect("cached")
            .expect("found");
        let job = caches
            .ray_job("ml", "train")
            .await
            .expect("cached")
            .expect("found");
        for kept in [&namespace.metadata, &cluster, &job] {
            assert_eq!(kept.managed_fields, None);
            let annotations = kept.annotations.clone().unwrap_or_default();
            assert!(
                !annotations.contains_key(LAST_APPLIED_ANNOTATION),
                "{annotations:?}"
            );
            assert_eq!(annotations.get("team").map(String::as_str), Some("ml"));
            assert_eq!(
                kept.labels
                    .clone()
                    .unwrap_or_default()
                    .get("volcano.sh/queue-name")
                    .map(String::as_str),
                Some("batch")
            );
        }
        assert_eq!(cluster.owner_references.expect("owners")[0].name, "train");
    }

    fn node(name: &str, cpu: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu}, "images": [{"names": ["rayproject/ray"]}]}}))
        .expect("a Node")
    }

    #[tokio::test]
    async fn preloaded_nodes_are_kept_as_shapes() {
        let caches = Caches::preloaded_in_pages([
            Preloaded {
                nodes: vec![node("b", "4")],
                ..Preloaded::default()
            },
            Preloaded {
                nodes: vec![node("a", "2")],
                ..Preloaded::default()
            },
        ]);
        assert_eq!(caches.nodes().names(), ["a", "b"]);
        assert!(caches.unsynced().is_empty());
    }

    #[tokio::test]
    async fn pages_add_up_to_one_synced_world() {
        let meta = |name: &str| -> ObjectMeta {
            serde_json::from_value(json!({"name": name, "namespace": "ml",
                "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {}}]}))
            .expect("metadata")
        };
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some("ml".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let caches = Caches::preloaded_in_pages([
            Preloaded {
                namespaces: vec![namespace],
                ray_clusters: vec![meta("a"), meta("b")],
                ..Preloaded::default()
            },
            Preloaded {
                ray_clusters: vec![meta("c")],
                ray_jobs: vec![meta("train")],
                ..Preloaded::default()
            },
        ]);
        assert!(caches.unsynced().is_empty(), "{:?}", caches.unsynced());
        assert!(caches.namespace("ml").await.expect("cached").is_some());
        for name in ["a", "b", "c"] {
            let cluster = caches.ray_cluster("ml", name).await.expect("cached");
            assert_eq!(cluster.expect(name).managed_fields, None, "{name}");
        }
        assert!(
            caches
                .ray_job("ml", "train")
                .await
                .expect("cached")
                .is_some()
        );
        assert!(caches.ray_job("ml", "a").await.expect("cached").is_none());
    }
}
