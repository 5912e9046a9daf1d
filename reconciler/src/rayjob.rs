//! The RayJob controller: observe → [`decide`] → execute.
//!
//! Each pass reads what exists with quorum GETs (the RayCluster named in status, the submitter
//! Job, the PodGroup, the namespace's opt-in label, the Ray job while Running), hands the
//! snapshot to the pure [`decide`] of `raygate-api`, and performs the returned actions in
//! order, stopping at the first failure. Every action is idempotent by name, status writes and
//! finalizer changes carry the observed `resourceVersion`, and before the first create of a
//! pass the RayJob is read again: a pass that decided on a stale cached RayJob creates nothing.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::controller::{self, Action as Requeue, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use raygate_api::finding::Finding;
use raygate_api::keys;
use raygate_api::lifecycle::{
    Action, FreshSuffixes, LifecycleConfig, RayJobObservation, Snapshot, SubmissionMode,
    dashboard_query, decide, status_patch,
};
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::validation::{ValidationContext, validate_ray_job};
use raygate_api::volcano::PodGroup;
use serde_json::json;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::dashboard::{AddressResolver, Dashboard, DashboardError};

/// Name the controller reports in Events.
pub const CONTROLLER_NAME: &str = "raygate-rayjob-controller";

/// Knobs of the RayJob controller.
#[derive(Clone, Debug)]
pub struct RayJobControllerConfig {
    /// KubeRay's operator-wide settings.
    pub lifecycle: LifecycleConfig,
    /// Validation rules applied before every pass.
    pub validation: ValidationContext,
    /// Where the dashboards are reached.
    pub dashboard: AddressResolver,
    /// Timeout of each dashboard call.
    pub dashboard_timeout: Duration,
    /// Ray token (token auth), sent to every dashboard.
    pub dashboard_token: Option<String>,
    /// Reconciles running at once (0: unbounded).
    pub concurrency: u16,
    /// Only this namespace (`None`: all).
    pub namespace: Option<String>,
    /// Identity reported in Events (e.g. the Pod name).
    pub instance: Option<String>,
}

impl Default for RayJobControllerConfig {
    fn default() -> Self {
        RayJobControllerConfig {
            lifecycle: LifecycleConfig::default(),
            validation: ValidationContext {
                reconciler: raygate_api::validation::ReconcilerKind::Raygate,
                ..ValidationContext::default()
            },
            dashboard: AddressResolver::default(),
            dashboard_timeout: Duration::from_secs(2),
            dashboard_token: None,
            concurrency: 16,
            namespace: None,
            instance: None,
        }
    }
}

/// Why a pass failed; the controller retries it.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The API error.
        source: kube::Error,
    },
    /// The RayJob changed since it was read; the pass is retried on the new version.
    #[error("the RayJob changed while it was being reconciled (resourceVersion {seen} → {now})")]
    Stale {
        /// The version decided on.
        seen: String,
        /// The current version.
        now: String,
    },
    /// A dashboard call failed.
    #[error(transparent)]
    Dashboard(#[from] DashboardError),
    /// The object has no namespace or name.
    #[error("RayJob without namespace or name")]
    Unnamed,
}

impl ReconcileError {
    fn is_conflict(&self) -> bool {
        match self {
            ReconcileError::Stale { .. } => true,
            ReconcileError::Kube {
                source: kube::Error::Api(status),
                ..
            } => status.code == 409,
            _ => false,
        }
    }
}

fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> ReconcileError {
    let action = action.into();
    move |source| ReconcileError::Kube { action, source }
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

/// `Ok(None)` for 404.
fn optional<T>(result: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if is_status(&e, 404) => Ok(None),
        Err(e) => Err(e),
    }
}

struct Context {
    client: Client,
    config: RayJobControllerConfig,
    dashboard: Dashboard,
    recorder: Recorder,
}

/// Runs the RayJob controller until `shutdown` resolves.
pub async fn run(
    client: Client,
    config: RayJobControllerConfig,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (jobs, clusters, submitters, pod_groups): (
        Api<RayJob>,
        Api<RayCluster>,
        Api<Job>,
        Api<PodGroup>,
    ) = match &config.namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
        ),
    };
    let ours = format!("{}=RayJob", keys::ORIGINATED_FROM_CRD_LABEL);
    let reporter = Reporter {
        controller: CONTROLLER_NAME.to_string(),
        instance: config.instance.clone(),
    };
    let context = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        dashboard: Dashboard::new(
            config.dashboard.clone(),
            config.dashboard_timeout,
            config.dashboard_token.clone(),
        ),
        client,
        config: config.clone(),
    });
    Controller::new(jobs, watcher::Config::default())
        .owns(clusters, watcher::Config::default().labels(&ours))
        .owns(submitters, watcher::Config::default().labels(&ours))
        .owns(pod_groups, watcher::Config::default())
        .with_config(controller::Config::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                debug!(%error, "RayJob reconcile ended with an error");
            }
        })
        .await;
}

fn error_policy(job: Arc<RayJob>, error: &ReconcileError, _: Arc<Context>) -> Requeue {
    let key = format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any());
    if error.is_conflict() {
        debug!(rayjob = %key, %error, "retrying on a newer version");
        Requeue::requeue(Duration::from_millis(500))
    } else {
        warn!(rayjob = %key, %error, "reconcile failed");
        Requeue::requeue(Duration::from_secs(5))
    }
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

async fn reconcile(job: Arc<RayJob>, ctx: Arc<Context>) -> Result<Requeue, ReconcileError> {
    let (Some(namespace), Some(name)) = (job.namespace(), job.metadata.name.clone()) else {
        return Err(ReconcileError::Unnamed);
    };
    let span = info_span!("reconcile", rayjob = %format!("{namespace}/{name}"));
    Pass {
        ctx: &ctx,
        job: &job,
        namespace: &namespace,
        name: &name,
        resource_version: job.resource_version().unwrap_or_default(),
    }
    .run()
    .instrument(span)
    .await
}

/// One reconcile pass of one RayJob.
struct Pass<'a> {
    ctx: &'a Context,
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
        Api::namespaced(self.ctx.client.clone(), self.namespace)
    }

    async fn run(mut self) -> Result<Requeue, ReconcileError> {
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
        let volcano = if job.metadata.deletion_timestamp.is_some() {
            false
        } else {
            let ns: Api<Namespace> = Api::all(self.ctx.client.clone());
            let labels = ns
                .get(self.namespace)
                .await
                .map_err(kube_err("get the namespace"))?
                .metadata
                .labels
                .unwrap_or_default();
            labels.get(keys::NAMESPACE_OPT_IN_LABEL).map(String::as_str)
                == Some(keys::NAMESPACE_OPT_IN_VALUE)
        };
        let cluster_name = status.ray_cluster_name.clone().unwrap_or_default();
        let cluster = if cluster_name.is_empty() || job.metadata.deletion_timestamp.is_some() {
            None
        } else {
            optional(self.api::<RayCluster>().get(&cluster_name).await)
                .map_err(kube_err(format!("get RayCluster {cluster_name}")))?
        };
        let submitter =
            if mode == Some(SubmissionMode::K8sJob) && job.metadata.deletion_timestamp.is_none() {
                optional(self.api::<Job>().get(self.name).await)
                    .map_err(kube_err(format!("get Job {}", self.name)))?
            } else {
                None
            };
        let pod_group = if volcano {
            let pg_name = keys::pod_group_name(self.name);
            optional(self.api::<PodGroup>().get(&pg_name).await)
                .map_err(kube_err(format!("get PodGroup {pg_name}")))?
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
                .map_err(kube_err("list the head Pod"))?
                .items
                .into_iter()
                .next()
        } else {
            None
        };
        let ray_job = match dashboard_query(job) {
            None => RayJobObservation::NotQueried,
            Some((url, id)) => match self.ctx.dashboard.job(&url, &id).await {
                Ok(details) => RayJobObservation::Found(details),
                Err(DashboardError::NotFound(_)) => RayJobObservation::NotFound,
                Err(e) => RayJobObservation::Unreachable(e.to_string()),
            },
        };
        let validation_errors = error_messages(&validate_ray_job(job, &self.ctx.config.validation));
        let snapshot = Snapshot {
            job,
            now: Timestamp::now(),
            config: &self.ctx.config.lifecycle,
            validation_errors,
            volcano,
            cluster: cluster.as_ref(),
            submitter: submitter.as_ref(),
            head_pod: head_pod.as_ref(),
            pod_group: pod_group.as_ref(),
            ray_job,
            fresh: FreshSuffixes::from_entropy(entropy()),
        };
        let decision = decide(&snapshot);
        let mut fresh = false;
        for action in decision.actions {
            self.execute(action, &mut fresh).await?;
        }
        Ok(match decision.requeue_after {
            Some(after) => Requeue::requeue(after),
            None => Requeue::await_change(),
        })
    }

    /// Reads the RayJob again before the first create of the pass: acting on a stale copy
    /// could create a cluster or submission for an identity that is no longer current.
    async fn ensure_fresh(&self, fresh: &mut bool) -> Result<(), ReconcileError> {
        if *fresh {
            return Ok(());
        }
        let current = self
            .api::<RayJob>()
            .get(self.name)
            .await
            .map_err(kube_err("get the RayJob"))?;
        let now = current.resource_version().unwrap_or_default();
        if now != self.resource_version {
            return Err(ReconcileError::Stale {
                seen: self.resource_version.clone(),
                now,
            });
        }
        *fresh = true;
        Ok(())
    }

    async fn set_finalizers(&mut self, finalizers: Vec<String>) -> Result<(), ReconcileError> {
        let patch = json!({"metadata": {
            "resourceVersion": self.resource_version,
            "finalizers": finalizers,
        }});
        let updated = self
            .api::<RayJob>()
            .patch(self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(kube_err("update the RayJob's finalizers"))?;
        self.resource_version = updated.resource_version().unwrap_or_default();
        Ok(())
    }

    async fn execute(&mut self, action: Action, fresh: &mut bool) -> Result<(), ReconcileError> {
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
                let name = pod_group.name_any();
                ignore(
                    self.api::<PodGroup>()
                        .create(&PostParams::default(), &pod_group)
                        .await
                        .map(drop),
                    409,
                )
                .map_err(kube_err(format!("create PodGroup {name}")))?;
                info!(pod_group = %name, "PodGroup created");
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
                .map_err(kube_err(format!("resize PodGroup {name}")))?;
                info!(pod_group = %name, min_member, "PodGroup resized");
            }
            Action::CreateRayCluster(cluster) => {
                self.ensure_fresh(fresh).await?;
                let name = cluster.name_any();
                let created = ignore(
                    self.api::<RayCluster>()
                        .create(&PostParams::default(), &cluster)
                        .await
                        .map(drop),
                    409,
                );
                if let Err(e) = &created {
                    self.event(
                        true,
                        "FailedToCreateRayCluster",
                        format!("Failed to create RayCluster {name}: {e}"),
                    )
                    .await;
                }
                created.map_err(kube_err(format!("create RayCluster {name}")))?;
                info!(cluster = %name, "RayCluster created");
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
                .map_err(kube_err(format!("delete RayCluster {name}")))?;
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
                .map_err(kube_err(format!("suspend the worker groups of {name}")))?;
            }
            Action::CreateSubmitterJob(submitter) => {
                self.ensure_fresh(fresh).await?;
                let name = submitter.name_any();
                let created = ignore(
                    self.api::<Job>()
                        .create(&PostParams::default(), &submitter)
                        .await
                        .map(drop),
                    409,
                );
                if let Err(e) = &created {
                    self.event(
                        true,
                        "FailedToCreateRayJobSubmitter",
                        format!("Failed to create submitter Job {name}: {e}"),
                    )
                    .await;
                }
                created.map_err(kube_err(format!("create Job {name}")))?;
                info!(submitter = %name, "submitter Job created");
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
                .map_err(kube_err(format!("delete Job {name}")))?;
            }
            Action::SubmitRayJob {
                dashboard_url,
                request,
            } => {
                self.ensure_fresh(fresh).await?;
                self.ctx.dashboard.submit(&dashboard_url, &request).await?;
                info!(submission_id = %request["submission_id"], "Ray job submitted");
            }
            Action::StopRayJob {
                dashboard_url,
                submission_id,
            } => match self
                .ctx
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
                .map_err(kube_err("delete the RayJob"))?;
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
                    .map_err(kube_err("update the RayJob status"))?;
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
            .ctx
            .recorder
            .publish(&event, &self.job.object_ref(&()))
            .await
        {
            warn!(%error, reason, "could not record an Event");
        }
    }
}

/// Treats the HTTP status `code` (409 on create, 404 on delete) as success.
fn ignore(result: Result<(), kube::Error>, code: u16) -> Result<(), kube::Error> {
    match result {
        Err(e) if is_status(&e, code) => Ok(()),
        other => other,
    }
}
