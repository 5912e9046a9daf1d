//! The RayJob controller: observe → [`decide`] → execute.
//!
//! Each pass reads what exists with quorum GETs (the RayCluster named in status, the submitter
//! Job, the PodGroup, the namespace's opt-in label, the Ray job while Running), hands the
//! snapshot to the pure [`decide`] of `raygate-api`, and performs the returned actions in
//! order, stopping at the first failure. Every action is idempotent by name, status writes and
//! finalizer changes carry the observed `resourceVersion`, and before the first create of a
//! pass the RayJob is read again: a pass that decided on a stale cached RayJob creates nothing.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::controller::{self, Action as Requeue, Controller};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use raygate_api::finding::Finding;
use raygate_api::keys;
use raygate_api::lifecycle::{
    Action, FreshSuffixes, LifecycleConfig, RayJobObservation, Snapshot, SubmissionMode,
    dashboard_query, decide, job_head_service_name, job_head_service_query, ray_cluster_object,
    status_patch, submitter_job_object,
};
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::validation::validate_ray_job;
use raygate_api::volcano::PodGroup;
use serde_json::{Value, json};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::context::{Context, Error, NamespaceScope, api_error, error_policy, is_status};
use crate::dashboard::{AddressResolver, Dashboard, DashboardError};

/// The controller's name (metrics label, logs).
pub const NAME: &str = "rayjob";

/// How long each dashboard call may take (KubeRay: 2 s direct).
const DASHBOARD_TIMEOUT: Duration = Duration::from_secs(2);

/// `Ok(None)` for 404.
fn optional<T>(result: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if is_status(&e, 404) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What each reconcile gets.
struct Shared {
    ctx: Arc<Context>,
    lifecycle: LifecycleConfig,
    dashboard: Dashboard,
    recorder: Recorder,
}

/// The RayJob controller, for [`crate::controllers`].
pub fn controller() -> crate::Controller {
    crate::Controller {
        name: NAME,
        run: run_all,
    }
}

fn run_all(ctx: Arc<Context>) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let lifecycle = LifecycleConfig {
            cluster_domain: ctx.config.build.cluster_domain.clone(),
            head_cluster_ip: ctx.config.build.head_cluster_ip,
            gates: ctx.config.validation.gates.clone(),
            ..LifecycleConfig::default()
        };
        let resolver = match &ctx.config.ray_dashboard_address {
            Some(address) => AddressResolver::Fixed(address.clone()),
            None => AddressResolver::ClusterDns,
        };
        let shared = Arc::new(Shared {
            recorder: crate::event_recorder(&ctx),
            dashboard: Dashboard::new(resolver, DASHBOARD_TIMEOUT),
            lifecycle,
            ctx: ctx.clone(),
        });
        let ours = format!("{}=RayJob", keys::ORIGINATED_FROM_CRD_LABEL);
        crate::run_in_scopes(&ctx, NAME, |namespace| {
            let ns = namespace.as_deref();
            let client = &ctx.client;
            Controller::new(
                crate::scoped_api::<RayJob>(client, ns),
                watcher::Config::default(),
            )
            .owns(
                crate::scoped_api::<RayCluster>(client, ns),
                watcher::Config::default().labels(&ours),
            )
            .owns(
                crate::scoped_api::<Job>(client, ns),
                watcher::Config::default().labels(&ours),
            )
            .owns(
                crate::scoped_api::<PodGroup>(client, ns),
                watcher::Config::default(),
            )
            .with_config(controller::Config::default().concurrency(ctx.config.concurrency))
            .graceful_shutdown_on(ctx.shutdown.clone().wait())
            .run(reconcile, error_policy, shared.clone())
        })
        .await;
    })
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

fn error_messages(findings: &[Finding]) -> Vec<String> {
    findings
        .iter()
        .filter(|f| f.is_error())
        .map(|f| format!("{}: {}", f.field, f.message))
        .collect()
}

async fn reconcile(job: Arc<RayJob>, shared: Arc<Shared>) -> Result<Requeue, Error> {
    let (Some(namespace), Some(name)) = (job.namespace(), job.metadata.name.clone()) else {
        return Err(Error::Unnamed { kind: "RayJob" });
    };
    let span = info_span!("reconcile", controller = NAME, object = %format!("{namespace}/{name}"));
    let pass = Pass {
        shared: &shared,
        job: &job,
        namespace: &namespace,
        name: &name,
        resource_version: job.resource_version().unwrap_or_default(),
    };
    shared
        .ctx
        .metrics
        .reconcile(NAME, pass.run().instrument(span.clone()))
        .instrument(span)
        .await
}

/// One reconcile pass of one RayJob.
struct Pass<'a> {
    shared: &'a Shared,
    job: &'a RayJob,
    namespace: &'a str,
    name: &'a str,
    /// The RayJob version the pass decided on, advanced by its own metadata writes.
    resource_version: String,
}

impl Pass<'_> {
    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.shared.ctx.client.clone(), self.namespace)
    }

    async fn run(mut self) -> Result<Requeue, Error> {
        let job = self.job;
        let status = job.status.clone().unwrap_or_default();
        let mode = SubmissionMode::of(job);
        let managed_elsewhere = job
            .spec
            .managed_by
            .as_deref()
            .is_some_and(|m| m != keys::KUBERAY_MANAGED_BY);
        if managed_elsewhere {
            return Ok(Requeue::await_change());
        }
        let volcano = match self.shared.ctx.namespace_scope(self.namespace) {
            NamespaceScope::Ignored => {
                debug!("namespace not selected; skipped");
                return Ok(Requeue::await_change());
            }
            NamespaceScope::Plain => false,
            NamespaceScope::Volcano => job.metadata.deletion_timestamp.is_none(),
        };
        let cluster_name = status.ray_cluster_name.clone().unwrap_or_default();
        let cluster = if cluster_name.is_empty() || job.metadata.deletion_timestamp.is_some() {
            None
        } else {
            optional(self.api::<RayCluster>().get(&cluster_name).await)
                .map_err(api_error(format!("get RayCluster {cluster_name}")))?
        };
        let submitter =
            if mode == Some(SubmissionMode::K8sJob) && job.metadata.deletion_timestamp.is_none() {
                optional(self.api::<Job>().get(self.name).await)
                    .map_err(api_error(format!("get Job {}", self.name)))?
            } else {
                None
            };
        let pod_group = if volcano {
            let pg_name = keys::pod_group_name(self.name);
            optional(self.api::<PodGroup>().get(&pg_name).await)
                .map_err(api_error(format!("get PodGroup {pg_name}")))?
        } else {
            None
        };
        let head_pod = if mode == Some(SubmissionMode::Sidecar) && !cluster_name.is_empty() {
            let selector = format!(
                "{}={cluster_name},{}=head",
                keys::RAY_CLUSTER_LABEL,
                keys::RAY_NODE_TYPE_LABEL
            );
            self.api::<Pod>()
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(api_error("list the head Pod"))?
                .items
                .into_iter()
                .next()
        } else {
            None
        };
        let job_head_service = if job_head_service_query(job) {
            let name = job_head_service_name(job);
            self.api::<Service>()
                .get_opt(&name)
                .await
                .map_err(api_error(format!("get Service {name}")))?
        } else {
            None
        };
        let ray_job = match dashboard_query(job) {
            None => RayJobObservation::NotQueried,
            Some((url, id)) => match self.shared.dashboard.job(&url, &id).await {
                Ok(details) => RayJobObservation::Found(details),
                Err(DashboardError::NotFound(_)) => RayJobObservation::NotFound,
                Err(e) => RayJobObservation::Unreachable(e.to_string()),
            },
        };
        let validation_errors =
            error_messages(&validate_ray_job(job, &self.shared.ctx.config.validation));
        let snapshot = Snapshot {
            job,
            now: Timestamp::now(),
            config: &self.shared.lifecycle,
            validation_errors,
            volcano,
            cluster: cluster.as_ref(),
            submitter: submitter.as_ref(),
            head_pod: head_pod.as_ref(),
            pod_group: pod_group.as_ref(),
            job_head_service: job_head_service.as_ref(),
            ray_job,
            fresh: FreshSuffixes::from_entropy(entropy()),
        };
        let decision = decide(&snapshot);
        let mut fresh = None;
        for action in decision.actions {
            self.execute(action, &mut fresh).await?;
        }
        Ok(match decision.requeue_after {
            Some(after) => Requeue::requeue(after),
            None => Requeue::await_change(),
        })
    }

    /// Reads the RayJob again, as stored, before the first create of the pass: acting on a
    /// stale copy could create a cluster or submission for an identity that is no longer
    /// current, and the stored JSON carries the fields raygate's types do not know, which the
    /// RayCluster and submitter copy from it.
    async fn ensure_fresh<'f>(&self, fresh: &'f mut Option<Value>) -> Result<&'f Value, Error> {
        if fresh.is_none() {
            let current = Api::<DynamicObject>::namespaced_with(
                self.shared.ctx.client.clone(),
                self.namespace,
                &ApiResource::erase::<RayJob>(&()),
            )
            .get(self.name)
            .await
            .map_err(api_error("get the RayJob"))?;
            let now = current.resource_version().unwrap_or_default();
            if now != self.resource_version {
                return Err(Error::Stale {
                    kind: "RayJob",
                    seen: self.resource_version.clone(),
                    now,
                });
            }
            *fresh = Some(serde_json::to_value(&current).unwrap_or_default());
        }
        Ok(fresh.get_or_insert_default())
    }

    /// An `Api` over objects of kind `K` as raw JSON, in the RayJob's namespace.
    fn raw_api<K>(&self) -> Api<DynamicObject>
    where
        K: Resource<DynamicType = ()>,
    {
        Api::namespaced_with(
            self.shared.ctx.client.clone(),
            self.namespace,
            &ApiResource::erase::<K>(&()),
        )
    }

    async fn set_finalizers(&mut self, finalizers: Vec<String>) -> Result<(), Error> {
        let patch = json!({"metadata": {
            "resourceVersion": self.resource_version,
            "finalizers": finalizers,
        }});
        let updated = self
            .api::<RayJob>()
            .patch(self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_error("update the RayJob's finalizers"))?;
        self.resource_version = updated.resource_version().unwrap_or_default();
        Ok(())
    }

    async fn execute(&mut self, action: Action, fresh: &mut Option<Value>) -> Result<(), Error> {
        let job = self.job;
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
                info!("finalizer removed");
            }
            Action::CreatePodGroup(pod_group) => {
                let what = format!("PodGroup {}", pod_group.name_any());
                self.create_once(self.api(), &*pod_group, &what, None)
                    .await?;
            }
            Action::ResizePodGroup {
                name,
                min_member,
                min_resources,
            } => {
                let patch = json!([
                    {"op": "add", "path": "/spec/minMember", "value": min_member},
                    {"op": "add", "path": "/spec/minResources", "value": min_resources},
                ]);
                let patch: json_patch::Patch =
                    serde_json::from_value(patch).unwrap_or(json_patch::Patch(Vec::new()));
                ignore(
                    self.api::<PodGroup>()
                        .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
                        .await
                        .map(drop),
                    404,
                )
                .map_err(api_error(format!("resize PodGroup {name}")))?;
                info!(pod_group = %name, min_member, "PodGroup resized");
            }
            Action::CreateRayCluster(cluster) => {
                let raw = self.ensure_fresh(fresh).await?;
                let what = format!("RayCluster {}", cluster.name_any());
                let object = dynamic(ray_cluster_object(raw, job, &cluster), &what)?;
                self.create_once(
                    self.raw_api::<RayCluster>(),
                    &object,
                    &what,
                    Some("FailedToCreateRayCluster"),
                )
                .await?;
            }
            Action::CreateService(service) => {
                let what = format!("Service {}", service.name_any());
                self.create_once(self.api(), &*service, &what, Some("FailedToCreateService"))
                    .await?;
            }
            Action::PatchService { name, patch } => {
                self.api::<Service>()
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(api_error(format!(
                        "point Service {name} at the current cluster"
                    )))?;
                info!(service = %name, "Service points at the current cluster");
            }
            Action::DeleteRayCluster { name } => {
                let params = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Foreground),
                    ..DeleteParams::default()
                };
                ignore(
                    self.api::<RayCluster>()
                        .delete(&name, &params)
                        .await
                        .map(drop),
                    404,
                )
                .map_err(api_error(format!("delete RayCluster {name}")))?;
                info!(cluster = %name, "RayCluster deleted");
            }
            Action::SuspendWorkerGroups { name, groups } => {
                let ops: Vec<_> = groups
                    .iter()
                    .map(|i| json!({"op": "add", "path": format!("/spec/workerGroupSpecs/{i}/suspend"), "value": true}))
                    .collect();
                let patch: json_patch::Patch =
                    serde_json::from_value(json!(ops)).unwrap_or(json_patch::Patch(Vec::new()));
                ignore(
                    self.api::<RayCluster>()
                        .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
                        .await
                        .map(drop),
                    404,
                )
                .map_err(api_error(format!("suspend the worker groups of {name}")))?;
            }
            Action::CreateSubmitterJob(submitter) => {
                let raw = self.ensure_fresh(fresh).await?;
                let what = format!("submitter Job {}", submitter.name_any());
                let object = dynamic(submitter_job_object(raw, job, &submitter), &what)?;
                self.create_once(
                    self.raw_api::<Job>(),
                    &object,
                    &what,
                    Some("FailedToCreateRayJobSubmitter"),
                )
                .await?;
            }
            Action::DeleteSubmitterJob { name } => {
                let params = DeleteParams {
                    propagation_policy: Some(PropagationPolicy::Background),
                    ..DeleteParams::default()
                };
                ignore(
                    self.api::<Job>().delete(&name, &params).await.map(drop),
                    404,
                )
                .map_err(api_error(format!("delete Job {name}")))?;
            }
            Action::SubmitRayJob {
                dashboard_url,
                request,
            } => {
                self.ensure_fresh(fresh).await?;
                self.shared
                    .dashboard
                    .submit(&dashboard_url, &request)
                    .await?;
                info!(submission_id = %request["submission_id"], "Ray job submitted");
            }
            Action::StopRayJob {
                dashboard_url,
                submission_id,
            } => match self
                .shared
                .dashboard
                .stop(&dashboard_url, &submission_id)
                .await
            {
                Ok(stopped) => info!(%submission_id, stopped, "Ray job stop requested"),
                Err(error) => {
                    warn!(%submission_id, %error, "could not stop the Ray job; deleting anyway")
                }
            },
            Action::DeleteRayJob => {
                ignore(
                    self.api::<RayJob>()
                        .delete(self.name, &DeleteParams::default())
                        .await
                        .map(drop),
                    404,
                )
                .map_err(api_error("delete the RayJob"))?;
                info!("RayJob deleted");
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
                let updated = self
                    .api::<RayJob>()
                    .patch_status(self.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(api_error("update the RayJob status"))?;
                self.resource_version = updated.resource_version().unwrap_or_default();
                info!(
                    deployment = status.job_deployment_status.as_deref().unwrap_or_default(),
                    job_status = status.job_status.as_deref().unwrap_or_default(),
                    "status updated"
                );
            }
            Action::Event(note) => self.event(note.warning, &note.reason, note.message).await,
        }
        Ok(())
    }

    /// Creates `object` unless it exists already (AlreadyExists is success: every object is
    /// named by the identity in status, so an existing one is this attempt's own). A failure is
    /// recorded as a Warning Event with `failure_reason` when given, and returned.
    async fn create_once<K>(
        &self,
        api: Api<K>,
        object: &K,
        what: &str,
        failure_reason: Option<&str>,
    ) -> Result<(), Error>
    where
        K: Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
    {
        let created = ignore(
            api.create(&PostParams::default(), object).await.map(drop),
            409,
        );
        if let (Err(e), Some(reason)) = (&created, failure_reason) {
            self.event(true, reason, format!("Failed to create {what}: {e}"))
                .await;
        }
        created.map_err(api_error(format!("create {what}")))?;
        info!("{what} created");
        Ok(())
    }

    async fn event(&self, warning: bool, reason: &str, message: String) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(message),
            action: reason.to_string(),
            secondary: None,
        };
        if let Err(error) = self
            .shared
            .recorder
            .publish(&event, &self.job.object_ref(&()))
            .await
        {
            warn!(%error, reason, "could not record an Event");
        }
    }
}

/// A built object as the `DynamicObject` to create.
fn dynamic(object: Value, what: &str) -> Result<DynamicObject, Error> {
    serde_json::from_value(object).map_err(|e| Error::Build {
        what: what.to_string(),
        reason: e.to_string(),
    })
}

/// Treats the HTTP status `code` (409 on create, 404 on delete) as success.
fn ignore(result: Result<(), kube::Error>, code: u16) -> Result<(), kube::Error> {
    match result {
        Err(e) if is_status(&e, code) => Ok(()),
        other => other,
    }
}
