//! The RayCluster controller: observe the cluster's Pods, head Service and PodGroup, let
//! [`raygate_api::cluster::decide()`] choose, then carry out its actions (writes, Events, the
//! status) through [`crate::exec`].
//!
//! Fed by the watch caches of RayClusters and of the Pods, Services and PodGroups they own
//! ([`crate::cache`]), so a Pod turning Ready or disappearing triggers a reconcile at once and
//! the pass reads them from the caches; a steady cluster is looked at again every five
//! minutes, as KubeRay does.
//!
//! Only RayClusters whose `spec.managedBy` is unset or `ray.io/kuberay-operator` (the value of
//! the operator raygate stands in for, [`raygate_api::keys::KUBERAY_MANAGED_BY`]) are
//! reconciled; any other value (e.g. Kueue's MultiKueue) hands the cluster to that manager.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, Preconditions};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::Store;
use raygate_api::cluster::status as cluster_status;
use raygate_api::cluster::{self, Action, FailedWrite, Snapshot};
use raygate_api::feasibility::{NodeKinds, NodeShapes};
use raygate_api::keys;
use raygate_api::queue_policy::QueuePolicy;
use raygate_api::ray::v1::{RayCluster, RayClusterStatus};
use raygate_api::volcano::{PodGroup, Queue};
use serde_json::Value;

use super::{alongside, drain, owners_in_queue, owners_waiting, queue_of, watching_gated};
use crate::cache::{Caches, FirstLists, cached};
use crate::context::{Context, NamespaceScope, ReconcileError, api_error, error_policy};
use crate::exec::{self, Failed, Perform, PodMetadataMap, Writer};
use crate::first_passes::FirstPasses;
use crate::freshness::{CreateAnswers, Expected, LABELLED_POD, SUPERSEDED_RECHECK, Superseded};
use crate::index::Index;

/// The controller's name (metrics label, logs).
pub const NAME: &str = "raycluster";

/// What each reconcile gets.
struct Shared {
    ctx: Arc<Context>,
    children: ClusterReads,
    first_lists: FirstLists,
    first_passes: FirstPasses<RayCluster>,
}

/// The watch caches a RayCluster's pass reads: the children it owns and the Volcano queues.
/// The RayJob controller reads its own children of these kinds through them too.
pub(crate) struct ClusterReads {
    /// Every Pod of the watched namespaces.
    pub(super) pods: Store<Pod>,
    /// [`Self::pods`] by their `ray.io/cluster` label.
    pub(super) pods_by_cluster: Index<Pod>,
    pub(super) services: Store<Service>,
    pub(super) pod_groups: Store<PodGroup>,
    pub(super) queues: Store<Queue>,
    pub(super) queue_policies: Store<QueuePolicy>,
    pub(super) nodes: NodeShapes,
}

/// What one pass of a RayCluster observes in [`ClusterReads`].
struct Observed {
    /// The Pods the cluster controls (terminating ones too).
    pods: Vec<Pod>,
    head_service: Option<Arc<Service>>,
    worker_service: Option<Arc<Service>>,
    pod_group: Option<Arc<PodGroup>>,
    queue: Option<Arc<Queue>>,
    nodes: Arc<NodeKinds>,
}

impl Observed {
    /// The core's view of it, at `now`.
    fn snapshot<'a>(
        &'a self,
        volcano: bool,
        sub_groups: bool,
        now: &'a Time,
        failed_write: Option<FailedWrite<'a>>,
    ) -> Snapshot<'a> {
        Snapshot {
            pods: &self.pods,
            head_service: self.head_service.as_deref(),
            worker_service: self.worker_service.as_deref(),
            pod_group: self.pod_group.as_deref(),
            queue: self.queue.as_deref(),
            nodes: &self.nodes,
            volcano,
            sub_groups,
            now,
            failed_write,
        }
    }
}

impl ClusterReads {
    /// The caches' handles.
    pub(crate) fn new(caches: &Caches) -> Self {
        ClusterReads {
            pods: caches.pods.store(),
            pods_by_cluster: caches.pods_by_cluster.clone(),
            services: caches.services.store(),
            pod_groups: caches.pod_groups.store(),
            queues: caches.queues.store(),
            queue_policies: caches.queue_policies.store(),
            nodes: caches.nodes.shapes(),
        }
    }

    /// The nodes feasibility judges the gangs of `namespace` against: the Node shapes, with the
    /// node templates of the QueuePolicies that govern the namespace ([`Context::judged_nodes`]).
    pub(super) fn judged_nodes(&self, ctx: &Context, namespace: &str) -> Arc<NodeKinds> {
        let shapes = self.nodes.snapshot();
        let with_templates =
            match ctx.judged_nodes(namespace, &self.queue_policies.state(), &shapes) {
                Cow::Owned(all) => Some(all),
                Cow::Borrowed(_) => None,
            };
        with_templates.map_or(shapes, Arc::new)
    }

    /// The Pods the RayCluster `namespace`/`name` (UID `uid`) controls, terminating ones too.
    fn controlled_pods(&self, namespace: &str, name: &str, uid: &str) -> Vec<Arc<Pod>> {
        // Only the Pods it controls: a Pod of a deleted same-named predecessor, or one copied
        // with the label, is not one of this cluster's replicas.
        let mut pods = (self.pods_by_cluster).objects(&self.pods, namespace, name);
        pods.retain(|pod| {
            pod.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        });
        pods
    }

    /// What a pass of `cluster` (`namespace`/`name`) observes: `pods`, the Pods it controls
    /// ([`Self::controlled_pods`]), its head Service (and headless worker Service, with a
    /// multi-host group) and, in a namespace opted into Volcano, its
    /// own PodGroup and that PodGroup's queue.
    async fn observe(
        &self,
        ctx: &Context,
        cluster: &RayCluster,
        namespace: &str,
        name: &str,
        pods: &[Arc<Pod>],
        volcano: bool,
    ) -> Observed {
        let head_service = cached(
            &self.services,
            namespace,
            &cluster::head_service_name(cluster),
        );
        let worker_service = cluster::has_multi_host_group(cluster)
            .then(|| {
                cached(
                    &self.services,
                    namespace,
                    &cluster::headless_worker_service_name(cluster),
                )
            })
            .flatten();
        let pod_group = volcano
            .then(|| cached(&self.pod_groups, namespace, &keys::pod_group_name(name)))
            .flatten();
        let queue = match pod_group.as_deref() {
            Some(pg) => queue_of(&self.queues, pg).await,
            None => None,
        };
        Observed {
            pods: pods.iter().map(|pod| Pod::clone(pod)).collect(),
            head_service,
            worker_service,
            pod_group,
            queue,
            nodes: self.judged_nodes(ctx, namespace),
        }
    }

    /// The status that makes `cluster` ready, when the cluster's own next pass writes it
    /// ([`cluster::ready_status_due`]): what a RayJob waiting for the cluster acts on. The
    /// cluster is in the RayJob's namespace, `volcano` when that is opted into Volcano.
    ///
    /// The core's cheap gate ([`cluster::ready_may_be_due`]) runs on the cached Pods first: a
    /// RayJob pass asks this on every Pod event of its cluster, and while the Pods come up the
    /// answer is `None` without copying them or reading anything else.
    pub(crate) async fn ready_status_due(
        &self,
        ctx: &Context,
        cluster: &RayCluster,
        volcano: bool,
    ) -> Option<RayClusterStatus> {
        let (namespace, name) = exec::namespace_and_name(cluster, "RayCluster").ok()?;
        let pods = self.controlled_pods(&namespace, &name, &cluster.uid().unwrap_or_default());
        if !cluster::ready_may_be_due(cluster, pods.iter().map(AsRef::as_ref)) {
            return None;
        }
        let observed = self
            .observe(ctx, cluster, &namespace, &name, &pods, volcano)
            .await;
        let now = Time(Timestamp::now());
        cluster::ready_status_due(
            cluster,
            &observed.snapshot(volcano, ctx.sub_groups.supported(), &now, None),
            &ctx.config.validation,
            &ctx.config.build,
        )
    }

    /// How long a pass of the RayCluster `uid` in `namespace` still waits for the caches to
    /// show the writes [`Expected`] recorded for it, or `None` to go ahead.
    fn wait_for_expected(
        &self,
        expected: &Expected,
        uid: &str,
        namespace: &str,
    ) -> Option<Duration> {
        expected.wait_for(uid, |kind, child| self.show(namespace, kind, child))
    }

    /// Whether the caches show the write a pass made to the child `child` in `namespace`, as
    /// [`Expected`] recorded it under `kind`: a created child is there; a Pod labelled into a
    /// replica ([`LABELLED_POD`]) carries a replica label, or is gone.
    fn show(&self, namespace: &str, kind: &str, child: &str) -> bool {
        match kind {
            "Pod" => cached(&self.pods, namespace, child).is_some(),
            LABELLED_POD => cached(&self.pods, namespace, child)
                .is_none_or(|pod| pod.labels().contains_key(keys::REPLICA_NAME_LABEL)),
            "Service" => cached(&self.services, namespace, child).is_some(),
            "PodGroup" => cached(&self.pod_groups, namespace, child).is_some(),
            _ => true,
        }
    }
}

/// Runs the RayCluster controller on `caches` until the context's shutdown fires.
pub fn run(ctx: &Arc<Context>, caches: &mut Caches) -> BoxFuture<'static, ()> {
    let gated = watching_gated(
        ctx,
        caches.ray_clusters.subscribe(),
        caches.ray_clusters.store(),
        cluster::awaits_first_pass,
    );
    let shared = Arc::new(Shared {
        ctx: ctx.clone(),
        children: ClusterReads::new(caches),
        first_lists: caches.first_lists(),
        first_passes: gated.first_passes,
    });
    let pod_groups = caches.pod_groups.store();
    let waiting_groups = caches.pod_groups.store();
    let governed_groups = caches.pod_groups.store();
    let results = (gated.controller)
        .owns_stream(caches.pods.subscribe())
        .owns_stream(caches.services.subscribe())
        .owns_stream(caches.pod_groups.subscribe())
        .watches_stream(caches.queues.subscribe(), move |queue| {
            owners_in_queue::<RayCluster>(&pod_groups, &queue)
        })
        .watches_stream(caches.nodes.subscribe(), move |_node| {
            owners_waiting::<RayCluster>(&waiting_groups)
        })
        .watches_stream(caches.queue_policies.subscribe(), move |_policy| {
            owners_waiting::<RayCluster>(&governed_groups)
        })
        .run(reconcile, error_policy, shared);
    alongside(drain(NAME, results), gated.gate)
}

async fn reconcile(
    cluster: Arc<RayCluster>,
    shared: Arc<Shared>,
) -> Result<Requeue, ReconcileError> {
    let result =
        exec::reconcile(&shared.ctx, NAME, cluster.as_ref(), pass(&cluster, &shared)).await;
    shared.first_passes.ended(&cluster);
    result
}

async fn pass(cluster: &RayCluster, shared: &Shared) -> Result<Requeue, ReconcileError> {
    shared.first_lists.wait().await;
    let ctx = &shared.ctx;
    let (namespace, name) = exec::namespace_and_name(cluster, "RayCluster")?;
    if cluster.metadata.deletion_timestamp.is_some() {
        // Children go with the cluster through their ownerReferences.
        ctx.expected.forget(&cluster.uid().unwrap_or_default());
        return Ok(Requeue::await_change());
    }
    if keys::managed_elsewhere(cluster.spec.managed_by.as_deref()) {
        tracing::debug!("managed by another controller; skipped");
        return Ok(Requeue::await_change());
    }
    let volcano = match ctx.namespace_scope(&namespace) {
        NamespaceScope::Ignored => {
            tracing::debug!("namespace not selected; skipped");
            return Ok(Requeue::await_change());
        }
        NamespaceScope::Plain => false,
        NamespaceScope::Volcano => true,
    };
    let uid = cluster.uid().unwrap_or_default();
    let resource_version = cluster.resource_version().unwrap_or_default();
    if ctx.superseded.is_superseded(&uid, &resource_version) {
        tracing::debug!(%resource_version, "the cached RayCluster predates this reconciler's last write; waiting for the newer version");
        return Ok(Requeue::requeue(SUPERSEDED_RECHECK));
    }
    let children = &shared.children;
    if let Some(wait) = children.wait_for_expected(&ctx.expected, &uid, &namespace) {
        tracing::debug!(
            ?wait,
            "a child this reconciler created is not in the cache yet; waiting for it"
        );
        return Ok(Requeue::requeue(wait));
    }
    let writer = ctx.writer(&namespace, cluster);

    // Observe: from the watch caches (docs/reconciler.md, "Reads come from watch caches"). Pod
    // names are deterministic, so a cache that has not yet delivered a Pod this controller
    // created leads to a create answered AlreadyExists, never to a second Pod.
    let pods = children.controlled_pods(&namespace, &name, &uid);
    let observed = children
        .observe(ctx, cluster, &namespace, &name, &pods, volcano)
        .await;
    let now = Time(Timestamp::now());
    let sub_groups = ctx.sub_groups.supported();
    let decide = |failed_write| {
        cluster::decide(
            cluster,
            &observed.snapshot(volcano, sub_groups, &now, failed_write),
            &ctx.config.validation,
            &ctx.config.build,
        )
    };
    let mut performer = Performer {
        writer: &writer,
        superseded: &ctx.superseded,
        expected: &ctx.expected,
        create_answers: &ctx.create_answers,
        cluster,
        name: &name,
        stored: None,
        found_existing: false,
    };
    match exec::carry_out(&writer, &mut performer, decide(None)).await {
        Ok(requeue) => Ok(requeue),
        Err(Failed {
            reason: Some(reason),
            error,
        }) if !error.is_conflict() => {
            // The failure shows in the status, as KubeRay's ReplicaFailure condition.
            let message = error.to_string();
            let failed = decide(Some(FailedWrite {
                reason,
                message: &message,
            }));
            // Only the status write is left, and it has no failure reason of its own.
            let _ = exec::carry_out(&writer, &mut performer, failed).await;
            Err(error)
        }
        Err(Failed { error, .. }) => Err(error),
    }
}

/// A fresh Ray auth token for Secret `secret`: random bytes from the operating system, in
/// standard base64 (as KubeRay's).
fn new_token(secret: &str) -> Result<String, ReconcileError> {
    let mut bytes = [0u8; cluster::auth::TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|source| ReconcileError::Token {
        secret: secret.to_string(),
        source,
    })?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Carries out the RayCluster decision's writes.
struct Performer<'a> {
    writer: &'a Writer,
    superseded: &'a Superseded,
    expected: &'a Expected,
    create_answers: &'a CreateAnswers,
    cluster: &'a RayCluster,
    name: &'a str,
    /// The RayCluster as stored, read before the first Pod is created.
    stored: Option<Value>,
    /// Whether the last write was a create that found its object there already.
    found_existing: bool,
}

impl Performer<'_> {
    /// The RayCluster as stored (its JSON, unknown fields included), at the version decided
    /// on: Pods are made from the templates as the user wrote them. A cluster this process
    /// created and nobody changed since is taken from the answer to its create; any other is
    /// read.
    async fn stored(&mut self) -> Result<&Value, ReconcileError> {
        if self.stored.is_none() {
            self.stored = self.create_answers.take(
                &self.cluster.uid().unwrap_or_default(),
                &self.cluster.resource_version().unwrap_or_default(),
            );
        }
        if self.stored.is_none() {
            let decided = self.cluster.resource_version().unwrap_or_default();
            let stored = self
                .writer
                .read_stored::<RayCluster>("RayCluster", self.name, &decided)
                .await?;
            self.stored = Some(stored);
        }
        Ok(self.stored.get_or_insert_default())
    }

    /// Records a child this pass created (`kind` is its kind) or labelled into a replica (`kind`
    /// is [`LABELLED_POD`]), so that the next pass waits for the cache to show the write.
    fn expect_in_cache(&self, kind: &'static str, name: &str) {
        self.expected
            .record(&self.cluster.uid().unwrap_or_default(), kind, name);
    }
}

impl Perform<Action> for Performer<'_> {
    async fn perform(&mut self, action: Action) -> Result<(), ReconcileError> {
        let writer = self.writer;
        match action {
            Action::CreateService(service) => {
                writer.create(&*service).await?;
                self.expect_in_cache("Service", &service.name_any());
                Ok(())
            }
            Action::CreateAuthSecret { name } => {
                let token = new_token(&name)?;
                let secret = cluster::auth::build_secret(self.cluster, &token);
                self.found_existing = !writer.create_new(&secret).await?;
                Ok(())
            }
            Action::CreateIngress(ingress) => {
                self.found_existing = !writer.create_new(&*ingress).await?;
                Ok(())
            }
            Action::CreateServiceAccount(account) => {
                self.found_existing = !writer.create_new(&*account).await?;
                Ok(())
            }
            Action::CreateRole(role) => {
                self.found_existing = !writer.create_new(&*role).await?;
                Ok(())
            }
            Action::CreateRoleBinding(binding) => {
                self.found_existing = !writer.create_new(&*binding).await?;
                Ok(())
            }
            Action::CreatePodGroup(pg) => {
                writer.create_pod_group(&pg).await?;
                self.expect_in_cache("PodGroup", &pg.name_any());
                Ok(())
            }
            Action::ResizePodGroup(size) => writer.resize_pod_group(&size).await,
            Action::CreatePod(pod) => {
                let name = pod.name_any();
                let what = format!("Pod {name}");
                let cluster = self.cluster;
                let object = cluster::pod_object(self.stored().await?, cluster, &pod);
                writer.create_raw::<Pod>(object, &what).await?;
                self.expect_in_cache("Pod", &name);
                Ok(())
            }
            Action::DeletePod { name, uid, reason } => {
                tracing::info!(pod = %name, %reason, "deleting Pod");
                self.expected
                    .deleted(&self.cluster.uid().unwrap_or_default(), "Pod", &name);
                let params = DeleteParams {
                    // A same-named successor (its UID differs) is never removed.
                    preconditions: uid.map(|uid| Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match writer
                    .delete::<Pod>(&name, &params, &format!("Pod {name}"))
                    .await
                {
                    Err(error) if error.is_conflict() => Ok(()),
                    other => other,
                }
            }
            Action::LabelPod { name, uid, labels } => {
                writer
                    .merge_pod_metadata(&name, uid.as_deref(), PodMetadataMap::Labels, &labels)
                    .await?;
                self.expect_in_cache(LABELLED_POD, &name);
                Ok(())
            }
            Action::AnnotatePod {
                name,
                uid,
                annotations,
            } => {
                writer
                    .merge_pod_metadata(
                        &name,
                        uid.as_deref(),
                        PodMetadataMap::Annotations,
                        &annotations,
                    )
                    .await
            }
            Action::UpdateStatus(status) => {
                let updated = writer
                    .api::<RayCluster>()
                    .patch_status(
                        self.name,
                        &Writer::patch_params(),
                        &Patch::Merge(cluster_status::merge_patch(&status)),
                    )
                    .await
                    .map_err(api_error("patch RayCluster status"))?;
                // The status write replaced the version decided on.
                self.superseded.record(
                    &self.cluster.uid().unwrap_or_default(),
                    &self.cluster.resource_version().unwrap_or_default(),
                    &updated.resource_version().unwrap_or_default(),
                );
                Ok(())
            }
            // Events are published by `exec::carry_out`.
            Action::Event(_) => Ok(()),
        }
    }

    fn found_existing(&mut self) -> bool {
        std::mem::take(&mut self.found_existing)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::runtime::reflector::{self, store::Writer as StoreWriter};
    use kube::runtime::watcher::Event;

    use super::*;

    const NAMESPACE: &str = "ml";
    const CLUSTER_UID: &str = "cluster-uid";

    fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(NAMESPACE.to_string()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    /// How long a pass of the test cluster waits, as the controller's pass asks.
    fn wait(caches: &ClusterReads, expected: &Expected) -> Option<Duration> {
        caches.wait_for_expected(expected, CLUSTER_UID, NAMESPACE)
    }

    /// Child caches with every first list in, and the writer of their Pod cache.
    fn child_caches() -> (ClusterReads, StoreWriter<Pod>) {
        let (pods, mut pod_writer) = reflector::store::<Pod>();
        pod_writer.apply_watcher_event(&Event::Init);
        pod_writer.apply_watcher_event(&Event::InitDone);
        let caches = ClusterReads {
            pods,
            pods_by_cluster: Index::new(|pod| {
                keys::value_in(pod.metadata.labels.as_ref(), keys::RAY_CLUSTER_LABEL)
            }),
            services: reflector::store::<Service>().0,
            pod_groups: reflector::store::<PodGroup>().0,
            queues: reflector::store::<Queue>().0,
            queue_policies: reflector::store::<QueuePolicy>().0,
            nodes: NodeShapes::default(),
        };
        (caches, pod_writer)
    }

    #[test]
    fn a_pass_waits_until_the_cache_shows_the_pods_it_labelled_into_replicas() {
        let (caches, mut pods) = child_caches();
        let expected = Expected::default();
        pods.apply_watcher_event(&Event::Apply(pod("worker-a", &[])));
        pods.apply_watcher_event(&Event::Apply(pod("worker-b", &[])));
        expected.record(CLUSTER_UID, LABELLED_POD, "worker-a");
        expected.record(CLUSTER_UID, LABELLED_POD, "worker-b");
        assert!(
            wait(&caches, &expected).is_some(),
            "neither label is in the cache yet"
        );

        pods.apply_watcher_event(&Event::Apply(pod(
            "worker-a",
            &[(keys::REPLICA_NAME_LABEL, "group-0")],
        )));
        assert!(
            wait(&caches, &expected).is_some(),
            "worker-b still shows without its replica label: a pass now would take it for a \
             Pod with no replica"
        );

        pods.apply_watcher_event(&Event::Delete(pod("worker-b", &[])));
        assert_eq!(
            wait(&caches, &expected),
            None,
            "worker-a is labelled and worker-b is gone"
        );
    }

    #[test]
    fn a_pass_waits_until_the_cache_shows_the_children_it_created() {
        let (caches, mut pods) = child_caches();
        let expected = Expected::default();
        expected.record(CLUSTER_UID, "Pod", "head");
        assert!(
            wait(&caches, &expected).is_some(),
            "the head Pod is not in the cache yet"
        );
        pods.apply_watcher_event(&Event::Apply(pod("head", &[])));
        assert_eq!(
            wait(&caches, &expected),
            None,
            "the head Pod is in the cache, labelled or not"
        );

        expected.record(CLUSTER_UID, "Service", "head-svc");
        assert!(
            wait(&caches, &expected).is_some(),
            "the Service cache never shows it"
        );
        expected.record(CLUSTER_UID, "PodGroup", "ray-ml-pg");
        expected.deleted(CLUSTER_UID, "Service", "head-svc");
        assert!(
            wait(&caches, &expected).is_some(),
            "the PodGroup cache never shows it"
        );
    }
}
