//! PodGroup-only controllers for RayJobs and RayClusters that a KubeRay operator runs.
//!
//! In a namespace handed to KubeRay (`raygate.io/reconciler=kuberay`, or `--reconciler
//! kuberay` for namespaces without the label) and opted into Volcano, these controllers keep
//! the PodGroup `ray-<owner>-pg` that raygate's webhook points KubeRay's Pods at, as
//! [`raygate_api::coexist::decide`] says. They create and patch PodGroups and publish Events;
//! they never create, change or delete RayJobs, RayClusters, Pods or Jobs.
//!
//! Each controller is woken by its kind and the PodGroups it owns; the RayJob controller also
//! by the RayClusters its RayJobs own, so a finished job's cluster going away settles the gang
//! at once. Observations come from the watch caches ([`crate::cache`]); a gang sized from a
//! cache that lags is sized again by the next watch event, and a resize carries no
//! precondition that could fail on it.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::{ObjectRef, Store};
use raygate_api::coexist::{self, Action, Owner, Snapshot};
use raygate_api::keys;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::PodGroup;

use super::{drain, watching};
use crate::MANAGER_NAME;
use crate::cache::{Caches, FirstLists, cached};
use crate::context::{Context, NamespaceScope, ReconcileError, error_policy};
use crate::exec::{self, Perform, Writer};
use crate::index::Index;

/// Name of the RayJob PodGroup controller (metrics label, logs).
pub const RAYJOB_NAME: &str = "rayjob-podgroup";
/// Name of the RayCluster PodGroup controller (metrics label, logs).
pub const RAYCLUSTER_NAME: &str = "raycluster-podgroup";

/// What each reconcile gets.
struct Shared {
    ctx: Arc<Context>,
    clusters: Store<RayCluster>,
    pod_groups: Store<PodGroup>,
    pods: Store<Pod>,
    pods_by_cluster: Index<Pod>,
    first_lists: FirstLists,
}

impl Shared {
    fn new(ctx: &Arc<Context>, caches: &Caches) -> Arc<Self> {
        Arc::new(Self {
            ctx: ctx.clone(),
            clusters: caches.ray_clusters.store(),
            pod_groups: caches.pod_groups.store(),
            pods: caches.pods.store(),
            pods_by_cluster: caches.pods_by_cluster.clone(),
            first_lists: caches.first_lists(),
        })
    }

    /// The cached Pods of cluster `cluster` in `namespace`.
    fn cluster_pods(&self, namespace: &str, cluster: &str) -> Vec<Pod> {
        (self.pods_by_cluster.objects(&self.pods, namespace, cluster))
            .iter()
            .map(|pod| Pod::clone(pod))
            .collect()
    }
}

/// Whether a Pod's event may change a gang's sub-groups: a worker without a replica name (see
/// `raygate_api::coexist::Snapshot::pods`) appearing or going.
fn unindexed_worker(pod: &Pod) -> bool {
    let labels = pod.labels();
    labels.get(keys::RAY_NODE_TYPE_LABEL).map(String::as_str) == Some(keys::WORKER_NODE_TYPE)
        && labels
            .get(keys::REPLICA_NAME_LABEL)
            .is_none_or(String::is_empty)
}

/// Runs the RayJob PodGroup controller on `caches` until the context's shutdown fires.
pub fn run_rayjobs(ctx: &Arc<Context>, caches: &mut Caches) -> BoxFuture<'static, ()> {
    let shared = Shared::new(ctx, caches);
    let clusters = caches.ray_clusters.store();
    let results = watching(ctx, caches.ray_jobs.subscribe(), caches.ray_jobs.store())
        .owns_stream(caches.pod_groups.subscribe())
        .owns_stream(caches.ray_clusters.subscribe())
        .watches_stream(caches.pods.subscribe(), move |pod: Pod| {
            // A RayJob's Pods belong to its cluster, so the cluster names the RayJob.
            if !unindexed_worker(&pod) {
                return None;
            }
            let namespace = pod.namespace()?;
            let cluster = cached(
                &clusters,
                &namespace,
                pod.labels().get(keys::RAY_CLUSTER_LABEL)?,
            )?;
            let job = coexist::cluster_ray_job(&cluster)?;
            Some(ObjectRef::new(job).within(&namespace))
        })
        .run(reconcile_rayjob, error_policy, shared);
    drain(RAYJOB_NAME, results)
}

/// Runs the RayCluster PodGroup controller on `caches` until the context's shutdown fires.
pub fn run_rayclusters(ctx: &Arc<Context>, caches: &mut Caches) -> BoxFuture<'static, ()> {
    let shared = Shared::new(ctx, caches);
    let results = watching(
        ctx,
        caches.ray_clusters.subscribe(),
        caches.ray_clusters.store(),
    )
    .owns_stream(caches.pod_groups.subscribe())
    .owns_stream(
        caches
            .pods
            .subscribe()
            .filter(|pod| std::future::ready(pod.as_ref().map_or(true, unindexed_worker))),
    )
    .run(reconcile_raycluster, error_policy, shared);
    drain(RAYCLUSTER_NAME, results)
}

async fn reconcile_rayjob(
    job: Arc<RayJob>,
    shared: Arc<Shared>,
) -> Result<Requeue, ReconcileError> {
    let ctx = &shared.ctx;
    exec::reconcile(ctx, RAYJOB_NAME, job.as_ref(), async {
        shared.first_lists.wait().await;
        let (namespace, name) = exec::namespace_and_name(job.as_ref(), "RayJob")?;
        if !in_scope(ctx, &namespace) {
            return Ok(Requeue::await_change());
        }
        let writer = ctx.writer(&namespace, job.as_ref());
        let cluster = job
            .status
            .as_ref()
            .and_then(|s| s.ray_cluster_name.as_deref())
            .filter(|n| !n.is_empty())
            .and_then(|cluster_name| cached(&shared.clusters, &namespace, cluster_name));
        let pod_group = cached(&shared.pod_groups, &namespace, &keys::pod_group_name(&name));
        let pods = cluster
            .as_deref()
            .and_then(|c| c.metadata.name.as_deref())
            .map(|c| shared.cluster_pods(&namespace, c))
            .unwrap_or_default();
        let decision = coexist::decide(
            Owner::RayJob(&job),
            &Snapshot {
                pod_group: pod_group.as_deref(),
                cluster: cluster.as_deref(),
                own_manager: MANAGER_NAME,
                sub_groups: ctx.sub_groups.supported(),
                pods: &pods,
            },
        );
        Ok(exec::carry_out(&writer, &mut Performer { writer: &writer }, decision).await?)
    })
    .await
}

async fn reconcile_raycluster(
    cluster: Arc<RayCluster>,
    shared: Arc<Shared>,
) -> Result<Requeue, ReconcileError> {
    let ctx = &shared.ctx;
    exec::reconcile(ctx, RAYCLUSTER_NAME, cluster.as_ref(), async {
        shared.first_lists.wait().await;
        let (namespace, name) = exec::namespace_and_name(cluster.as_ref(), "RayCluster")?;
        if !in_scope(ctx, &namespace) || coexist::cluster_ray_job(&cluster).is_some() {
            // A RayJob's cluster joins the RayJob's gang, kept by the RayJob controller.
            return Ok(Requeue::await_change());
        }
        let writer = ctx.writer(&namespace, cluster.as_ref());
        let pod_group = cached(&shared.pod_groups, &namespace, &keys::pod_group_name(&name));
        let pods = shared.cluster_pods(&namespace, &name);
        let decision = coexist::decide(
            Owner::RayCluster(&cluster),
            &Snapshot {
                pod_group: pod_group.as_deref(),
                cluster: None,
                own_manager: MANAGER_NAME,
                sub_groups: ctx.sub_groups.supported(),
                pods: &pods,
            },
        );
        Ok(exec::carry_out(&writer, &mut Performer { writer: &writer }, decision).await?)
    })
    .await
}

/// Only KubeRay-run namespaces opted into Volcano; everything else is not this mode's.
fn in_scope(ctx: &Context, namespace: &str) -> bool {
    match ctx.kuberay_scope(namespace) {
        NamespaceScope::Volcano => true,
        NamespaceScope::Plain | NamespaceScope::Ignored => {
            tracing::debug!("not a KubeRay-run Volcano namespace; skipped");
            false
        }
    }
}

/// Carries out the PodGroup-only decision's writes, under raygate's field manager: the
/// ownership [`coexist::decide`] tells raygate's writes from KubeRay's by.
struct Performer<'a> {
    writer: &'a Writer,
}

impl Perform<Action> for Performer<'_> {
    async fn perform(&mut self, action: Action) -> Result<(), ReconcileError> {
        let writer = self.writer;
        match action {
            Action::CreatePodGroup(pg) => writer.create_pod_group(&pg).await,
            Action::ResizePodGroup(size) => writer.resize_pod_group(&size).await,
            // Events are published by `exec::carry_out`.
            Action::Event(_) => Ok(()),
        }
    }
}
