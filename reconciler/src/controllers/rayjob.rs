//! The RayJob controller: observe → [`decide`] → carry out ([`crate::exec`]).
//!
//! Each pass reads what exists from the watch caches ([`crate::cache`]: the RayCluster named in
//! status, the submitter Job, the PodGroup, the head Pod and Service where the mode needs them;
//! the namespace's opt-in label) and asks the dashboard about the Ray job while Running, hands
//! the snapshot to the pure [`decide`] of `raygate-api`, and performs the returned actions in
//! order, stopping at the first failure. While Initializing it is woken by the cluster's Pods
//! turning ready and, once all of them are, also reads what the cluster's own pass reads (the
//! cluster's Pods, head Service, PodGroup and queue, [`ClusterReads`]), so it acts on the ready
//! status that pass is about to write (docs/reconciler.md, "Event-driven progress"). A cached
//! RayJob that this reconciler's own writes already replaced is not decided on
//! ([`crate::freshness`]). Every action is idempotent by name, status writes and finalizer
//! changes carry the observed `resourceVersion`, and before the first create of a pass the
//! RayJob is read again: a pass that decided on a stale cached RayJob creates nothing.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, Patch, PropagationPolicy};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use raygate_api::cluster::status as cluster_status;
use raygate_api::keys;
use raygate_api::lifecycle::{
    Action, FreshSuffixes, LifecycleConfig, RayJobObservation, Reads, Snapshot, decide,
    ray_cluster_object, status_patch, submitter_job_object, validation_errors,
};
use raygate_api::pending::GangPods;
use raygate_api::ray::v1::{RayCluster, RayJob};
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use super::raycluster::ClusterReads;
use super::{alongside, drain, owners_in_queue, owners_waiting, queue_of, watching_gated};
use crate::cache::{Caches, FirstLists, cached};
use crate::context::{Context, NamespaceScope, ReconcileError, api_error, error_policy};
use crate::dashboard::{AddressResolver, Dashboard, DashboardError};
use crate::exec::{self, Perform, Writer};
use crate::first_passes::FirstPasses;
use crate::freshness::{CreateAnswers, Expected, SUPERSEDED_RECHECK, Superseded};
use crate::index::Index;
use crate::tokens::Tokens;

/// The controller's name (metrics label, logs).
pub const NAME: &str = "rayjob";

/// How long each dashboard call may take (KubeRay: 2 s direct).
const DASHBOARD_TIMEOUT: Duration = Duration::from_secs(2);

/// What each reconcile gets.
struct Shared {
    ctx: Arc<Context>,
    lifecycle: LifecycleConfig,
    dashboard: Dashboard,
    /// The Ray auth tokens of token-authenticated clusters' dashboards.
    tokens: Tokens,
    clusters: Store<RayCluster>,
    submitters: Store<Job>,
    /// The Pods, Services, PodGroups and queues: the RayJob's own and, for the ready status
    /// its cluster's next pass writes ([`Reads::cluster_readiness`]), the cluster's.
    cluster_reads: ClusterReads,
    pods_by_pod_group: Index<Pod>,
    first_lists: FirstLists,
    first_passes: FirstPasses<RayJob>,
}

/// Runs the RayJob controller on `caches` until the context's shutdown fires.
pub fn run(ctx: &Arc<Context>, caches: &mut Caches) -> BoxFuture<'static, ()> {
    let lifecycle = LifecycleConfig {
        build: ctx.config.build.clone(),
        gates: ctx.config.validation.gates.clone(),
        ..LifecycleConfig::default()
    };
    let resolver = match &ctx.config.ray_dashboard_address {
        Some(address) => AddressResolver::Fixed(address.clone()),
        None => AddressResolver::ClusterDns,
    };
    let gated = watching_gated(
        ctx,
        caches.ray_jobs.subscribe(),
        caches.ray_jobs.store(),
        raygate_api::lifecycle::awaits_first_pass,
    );
    let shared = Arc::new(Shared {
        dashboard: Dashboard::new(resolver, DASHBOARD_TIMEOUT),
        tokens: Tokens::new(ctx.client.clone()),
        lifecycle,
        ctx: ctx.clone(),
        clusters: caches.ray_clusters.store(),
        submitters: caches.jobs.store(),
        cluster_reads: ClusterReads::new(caches),
        pods_by_pod_group: caches.pods_by_pod_group.clone(),
        first_lists: caches.first_lists(),
        first_passes: gated.first_passes,
    });
    let pod_groups = caches.pod_groups.store();
    let waiting_groups = caches.pod_groups.store();
    let governed_groups = caches.pod_groups.store();
    let clusters = caches.ray_clusters.store();
    let results = (gated.controller)
        .owns_stream(caches.ray_clusters.subscribe())
        .owns_stream(caches.jobs.subscribe())
        .owns_stream(caches.pod_groups.subscribe())
        .watches_stream(caches.queues.subscribe(), move |queue| {
            owners_in_queue::<RayJob>(&pod_groups, &queue)
        })
        .watches_stream(caches.nodes.subscribe(), move |_node| {
            owners_waiting::<RayJob>(&waiting_groups)
        })
        .watches_stream(caches.queue_policies.subscribe(), move |_policy| {
            owners_waiting::<RayJob>(&governed_groups)
        })
        .watches_stream(caches.pods.subscribe(), move |pod| {
            rayjob_of_ready_pod(&clusters, &pod)
        })
        .run(reconcile, error_policy, shared);
    alongside(drain(NAME, results), gated.gate)
}

/// The RayJob to wake when `pod` is Running and ready as a Ray node: the one that owns the
/// Pod's RayCluster. Its pass may take the cluster's ready status from the Pods
/// ([`Reads::cluster_readiness`]) instead of waiting for the cluster's own status write.
fn rayjob_of_ready_pod(clusters: &Store<RayCluster>, pod: &Pod) -> Option<ObjectRef<RayJob>> {
    if !cluster_status::is_running_and_ready_as_ray_node(pod) {
        return None;
    }
    let namespace = pod.namespace()?;
    let cluster_name = keys::value_in(pod.metadata.labels.as_ref(), keys::RAY_CLUSTER_LABEL)?;
    let cluster = cached(clusters, &namespace, cluster_name)?;
    let kind = RayJob::kind(&());
    let owner = (cluster.owner_references().iter())
        .find(|o| o.controller == Some(true) && o.kind == kind)?;
    Some(ObjectRef::new(&owner.name).within(&namespace))
}

fn entropy() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish()
}

async fn reconcile(job: Arc<RayJob>, shared: Arc<Shared>) -> Result<Requeue, ReconcileError> {
    let result = exec::reconcile(&shared.ctx, NAME, job.as_ref(), pass(&job, &shared)).await;
    shared.first_passes.ended(&job);
    result
}

/// One reconcile pass of one RayJob: observe, decide, carry out.
async fn pass(job: &RayJob, shared: &Shared) -> Result<Requeue, ReconcileError> {
    shared.first_lists.wait().await;
    let (namespace, name) = exec::namespace_and_name(job, "RayJob")?;
    let opted_in = match shared.ctx.namespace_scope(&namespace) {
        NamespaceScope::Ignored => {
            debug!("namespace not selected; skipped");
            return Ok(Requeue::await_change());
        }
        NamespaceScope::Plain => false,
        NamespaceScope::Volcano => true,
    };
    let Some(reads) = Reads::of(job, opted_in) else {
        debug!("managed by another controller; skipped");
        return Ok(Requeue::await_change());
    };
    let uid = job.uid().unwrap_or_default();
    let resource_version = job.resource_version().unwrap_or_default();
    if shared.ctx.superseded.is_superseded(&uid, &resource_version) {
        debug!(%resource_version, "the cached RayJob predates this reconciler's last write; waiting for the newer version");
        return Ok(Requeue::requeue(SUPERSEDED_RECHECK));
    }
    let ns = namespace.as_str();
    let children = &shared.cluster_reads;
    let in_cache = |kind: &str, child: &str| match kind {
        "RayCluster" => cached(&shared.clusters, ns, child).is_some(),
        "Job" => cached(&shared.submitters, ns, child).is_some(),
        "PodGroup" => cached(&children.pod_groups, ns, child).is_some(),
        "Service" => cached(&children.services, ns, child).is_some(),
        _ => true,
    };
    if let Some(wait) = shared.ctx.expected.wait_for(&uid, in_cache) {
        debug!(
            ?wait,
            "a child this reconciler created is not in the cache yet; waiting for it"
        );
        return Ok(Requeue::requeue(wait));
    }
    let writer = shared.ctx.writer(&namespace, job);
    // Observe: from the watch caches (docs/reconciler.md, "Reads come from watch caches").
    let mut cluster = (reads.cluster.as_deref()).and_then(|n| cached(&shared.clusters, ns, n));
    if reads.cluster_readiness
        && let Some(stored) = cluster.as_deref()
        && let Some(due) = children
            .ready_status_due(&shared.ctx, stored, reads.volcano)
            .await
    {
        debug!("the cluster's Pods are ready; acting on the status its next pass writes");
        cluster = Some(Arc::new(RayCluster {
            status: Some(due),
            ..stored.clone()
        }));
    }
    let submitter = (reads.submitter.as_deref()).and_then(|n| cached(&shared.submitters, ns, n));
    let pod_group = (reads.pod_group.as_deref()).and_then(|n| cached(&children.pod_groups, ns, n));
    let job_head_service =
        (reads.job_head_service.as_deref()).and_then(|n| cached(&children.services, ns, n));
    let head_pod = reads.head_pod_of.as_ref().and_then(|cluster| {
        (children
            .pods_by_cluster
            .objects(&children.pods, ns, cluster))
        .into_iter()
        .find(|pod| keys::is_head_pod_of(pod.metadata.labels.as_ref(), cluster))
    });
    let queue = match pod_group.as_deref() {
        Some(pg) => queue_of(&children.queues, pg).await,
        None => None,
    };
    let gang_pods = pod_group
        .as_deref()
        .map(|pg| {
            let name = pg.metadata.name.as_deref().unwrap_or_default();
            let members = shared.pods_by_pod_group.objects(&children.pods, ns, name);
            GangPods::of(members.iter().map(|p| p.as_ref()), name)
        })
        .unwrap_or_default();
    let nodes = children.judged_nodes(&shared.ctx, ns);
    let token = match cluster.as_deref() {
        Some(cluster) => shared.tokens.of(cluster).await,
        None => Ok(None),
    };
    let ray_job = match (&reads.ray_job, &token) {
        (None, _) => RayJobObservation::NotQueried,
        (Some(_), Err(error)) => RayJobObservation::Unreachable(error.to_string()),
        (Some((url, id)), Ok(token)) => {
            match shared.dashboard.job(url, token.as_deref(), id).await {
                Ok(details) => RayJobObservation::Found(details),
                Err(DashboardError::NotFound(_)) => RayJobObservation::NotFound,
                Err(error) => {
                    if error.is_refused()
                        && let Some(cluster) = cluster.as_deref()
                    {
                        shared.tokens.forget(cluster);
                    }
                    RayJobObservation::Unreachable(error.to_string())
                }
            }
        }
    };
    let snapshot = Snapshot {
        job,
        now: Timestamp::now(),
        config: &shared.lifecycle,
        validation_errors: validation_errors(job, &shared.ctx.config.validation),
        volcano: reads.volcano,
        cluster: cluster.as_deref(),
        submitter: submitter.as_deref(),
        head_pod: head_pod.as_deref(),
        pod_group: pod_group.as_deref(),
        sub_groups: shared.ctx.sub_groups.supported(),
        queue: queue.as_deref(),
        gang_pods,
        nodes: &nodes,
        job_head_service: job_head_service.as_deref(),
        ray_job,
        fresh: FreshSuffixes::from_entropy(entropy()),
    };
    let mut writes = RayJobWrites {
        writer: &writer,
        dashboard: &shared.dashboard,
        token: token.ok().flatten(),
        superseded: &shared.ctx.superseded,
        expected: &shared.ctx.expected,
        create_answers: &shared.ctx.create_answers,
        job,
        name: &name,
        uid,
        resource_version,
        answer: None,
        stored: None,
    };
    Ok(exec::carry_out(&writer, &mut writes, decide(&snapshot)).await?)
}

/// Carries out the RayJob decision's writes.
struct RayJobWrites<'a> {
    writer: &'a Writer,
    dashboard: &'a Dashboard,
    /// The cluster's Ray auth token, when it has one and it could be read.
    token: Option<String>,
    superseded: &'a Superseded,
    expected: &'a Expected,
    create_answers: &'a CreateAnswers,
    job: &'a RayJob,
    name: &'a str,
    uid: String,
    /// The RayJob version the pass decided on, advanced by its own metadata writes.
    resource_version: String,
    /// The API server's answer to the pass's own last write of the RayJob, at
    /// [`Self::resource_version`]; turned into [`Self::stored`] only if a create needs it.
    answer: Option<DynamicObject>,
    /// The RayJob as stored at [`Self::resource_version`]: the last answer, or read before
    /// the first create of a pass that has not written it.
    stored: Option<Value>,
}

impl RayJobWrites<'_> {
    /// The RayJob as stored, before the first create of the pass: acting on a stale copy could
    /// create a cluster or submission for an identity that is no longer current, and the stored
    /// JSON carries the fields raygate's types do not know, which the RayCluster and submitter
    /// copy from it. A pass that has written the RayJob already holds it (the API server's
    /// answer to a write made at the version decided on); any other pass reads it once.
    async fn stored(&mut self) -> Result<&Value, ReconcileError> {
        if let Some(answer) = self.answer.take() {
            self.stored = serde_json::to_value(&answer).ok();
        }
        if self.stored.is_none() {
            let stored = self
                .writer
                .read_stored::<RayJob>("RayJob", self.name, &self.resource_version)
                .await?;
            self.stored = Some(stored);
        }
        Ok(self.stored.get_or_insert_default())
    }

    /// Records that this pass created the `kind` named `name`, so that the next pass waits for
    /// the cache to show it.
    fn created(&self, kind: &'static str, name: &str) {
        self.expected.record(&self.uid, kind, name);
    }

    /// The pass's own write turned the RayJob into `updated`, the API server's answer: later
    /// writes and creates of the pass are based on it, and the version it replaced is no longer
    /// one to decide on.
    fn replaced_by(&mut self, updated: DynamicObject) {
        let after = updated.resource_version().unwrap_or_default();
        self.superseded
            .record(&self.uid, &self.resource_version, &after);
        self.resource_version = after;
        self.answer = Some(updated);
        self.stored = None;
    }

    async fn set_finalizers(&mut self, finalizers: Vec<String>) -> Result<(), ReconcileError> {
        let patch = json!({"metadata": {
            "resourceVersion": self.resource_version,
            "finalizers": finalizers,
        }});
        let updated = self
            .writer
            .raw_api::<RayJob>()
            .patch(self.name, &Writer::patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(api_error("update the RayJob's finalizers"))?;
        self.replaced_by(updated);
        Ok(())
    }

    /// Applies a JSON patch to the RayCluster `name`; a cluster that is gone is left gone.
    async fn patch_cluster(
        &self,
        name: &str,
        ops: Vec<Value>,
        what: &str,
    ) -> Result<(), ReconcileError> {
        let patch: json_patch::Patch =
            serde_json::from_value(Value::Array(ops)).map_err(|e| ReconcileError::Build {
                what: what.to_string(),
                reason: e.to_string(),
            })?;
        match self
            .writer
            .api::<RayCluster>()
            .patch(name, &Writer::patch_params(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if crate::context::is_status(&e, 404) => Ok(()),
            Err(e) => Err(api_error(what)(e)),
        }
    }
}

impl Perform<Action> for RayJobWrites<'_> {
    async fn perform(&mut self, action: Action) -> Result<(), ReconcileError> {
        let job = self.job;
        let writer = self.writer;
        match action {
            Action::AddFinalizer => {
                let mut finalizers = job.metadata.finalizers.clone().unwrap_or_default();
                finalizers.push(keys::RAYJOB_FINALIZER.to_string());
                self.set_finalizers(finalizers).await?;
            }
            Action::RemoveFinalizer => {
                let finalizers = job
                    .finalizers()
                    .iter()
                    .filter(|f| *f != keys::RAYJOB_FINALIZER)
                    .cloned()
                    .collect();
                self.set_finalizers(finalizers).await?;
                // Nothing holds the RayJob any more: it is gone, or going.
                self.superseded.forget(&self.uid);
                self.expected.forget(&self.uid);
                info!("finalizer removed");
            }
            Action::CreatePodGroup(pod_group) => {
                writer.create_pod_group(&pod_group).await?;
                self.created("PodGroup", &pod_group.name_any());
            }
            Action::ResizePodGroup(size) => writer.resize_pod_group(&size).await?,
            Action::CreateRayCluster(cluster) => {
                let what = format!("RayCluster {}", cluster.name_any());
                let object = ray_cluster_object(self.stored().await?, job, &cluster);
                if let Some(created) = writer.create_raw::<RayCluster>(object, &what).await? {
                    self.create_answers.record(&created);
                }
                self.created("RayCluster", &cluster.name_any());
            }
            Action::CreateService(service) => {
                writer.create(&*service).await?;
                self.created("Service", &service.name_any());
            }
            Action::PatchService { name, patch } => {
                writer
                    .api::<Service>()
                    .patch(&name, &Writer::patch_params(), &Patch::Merge(&patch))
                    .await
                    .map_err(api_error(format!(
                        "point Service {name} at the current cluster"
                    )))?;
                info!(service = %name, "Service points at the current cluster");
            }
            Action::DeleteRayCluster { name } => {
                self.expected.deleted(&self.uid, "RayCluster", &name);
                let params = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Foreground),
                    ..DeleteParams::default()
                };
                writer
                    .delete::<RayCluster>(&name, &params, &format!("RayCluster {name}"))
                    .await?;
            }
            Action::SuspendWorkerGroups { name, groups } => {
                let ops = groups
                    .iter()
                    .map(|i| json!({"op": "add", "path": format!("/spec/workerGroupSpecs/{i}/suspend"), "value": true}))
                    .collect();
                self.patch_cluster(&name, ops, &format!("suspend the worker groups of {name}"))
                    .await?;
            }
            Action::CreateSubmitterJob(submitter) => {
                let what = format!("submitter Job {}", submitter.name_any());
                let object = submitter_job_object(self.stored().await?, job, &submitter);
                writer.create_raw::<Job>(object, &what).await?;
                self.created("Job", &submitter.name_any());
            }
            Action::DeleteSubmitterJob { name } => {
                self.expected.deleted(&self.uid, "Job", &name);
                let params = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Background),
                    ..DeleteParams::default()
                };
                writer
                    .delete::<Job>(&name, &params, &format!("Job {name}"))
                    .await?;
            }
            Action::SubmitRayJob {
                dashboard_url,
                request,
            } => {
                self.stored().await?;
                self.dashboard
                    .submit(&dashboard_url, self.token.as_deref(), &request)
                    .await?;
                info!(submission_id = %request["submission_id"], "Ray job submitted");
            }
            Action::StopRayJob {
                dashboard_url,
                submission_id,
            } => match self
                .dashboard
                .stop(&dashboard_url, self.token.as_deref(), &submission_id)
                .await
            {
                Ok(stopped) => info!(%submission_id, stopped, "Ray job stop requested"),
                Err(error) => {
                    warn!(%submission_id, %error, "could not stop the Ray job; deleting anyway")
                }
            },
            Action::DeleteRayJob => {
                writer
                    .delete::<RayJob>(self.name, &DeleteParams::default(), "the RayJob")
                    .await?;
                self.superseded.forget(&self.uid);
            }
            Action::UpdateStatus(status) => {
                let diff = status_patch(job.status.as_ref(), &status);
                if diff.as_object().is_some_and(|o| o.is_empty()) {
                    return Ok(());
                }
                let patch = json!({
                    "metadata": {"resourceVersion": self.resource_version},
                    "status": diff,
                });
                let updated = writer
                    .raw_api::<RayJob>()
                    .patch_status(self.name, &Writer::patch_params(), &Patch::Merge(&patch))
                    .await
                    .map_err(api_error("update the RayJob status"))?;
                self.replaced_by(updated);
                info!(
                    deployment = status.job_deployment_status.as_deref().unwrap_or_default(),
                    job_status = status.job_status.as_deref().unwrap_or_default(),
                    "status updated"
                );
            }
            // Events are published by `exec::carry_out`.
            Action::Event(_) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;

    fn cluster(name: &str, owner_kind: Option<&str>) -> RayCluster {
        let owners = owner_kind.map(|kind| {
            json!([{"apiVersion": "ray.io/v1", "kind": kind, "name": "demo", "uid": "job-uid",
                    "controller": true}])
        });
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": "ml", "ownerReferences": owners},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": []}}}},
        }))
        .expect("a RayCluster")
    }

    fn pod(cluster: &str, ready: &str) -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{cluster}-head"), "namespace": "ml",
                         "labels": {"ray.io/cluster": cluster}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]},
        }))
        .expect("a Pod")
    }

    #[test]
    fn a_pod_turning_ready_wakes_the_rayjob_that_owns_its_cluster() {
        let (clusters, mut writer) = reflector::store::<RayCluster>();
        writer.apply_watcher_event(&Event::Apply(cluster("demo-abcde", Some("RayJob"))));
        writer.apply_watcher_event(&Event::Apply(cluster("standalone", None)));
        writer.apply_watcher_event(&Event::Apply(cluster("adopted", Some("Deployment"))));

        assert_eq!(
            rayjob_of_ready_pod(&clusters, &pod("demo-abcde", "True")),
            Some(ObjectRef::new("demo").within("ml"))
        );
        for (pod, why) in [
            (pod("demo-abcde", "False"), "a Pod not Ready yet"),
            (pod("standalone", "True"), "a cluster no RayJob owns"),
            (pod("adopted", "True"), "a cluster something else owns"),
            (pod("unknown", "True"), "a cluster not in the cache"),
        ] {
            assert_eq!(rayjob_of_ready_pod(&clusters, &pod), None, "{why}");
        }
    }
}
