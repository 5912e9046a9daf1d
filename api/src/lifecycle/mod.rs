//! The RayJob lifecycle as a pure function: what exists → what to do next.
//!
//! The reconciler observes a [`Snapshot`] (the RayJob, its RayCluster, submitter Job, head Pod,
//! PodGroup and the Ray job's status as the dashboard reports it) and hands it to [`decide`], which
//! returns a [`Decision`]: [`Action`]s to perform in order, stopping at the first failure, and when
//! to look again. KubeRay v1.7's state machine (docs/upstream.md, "KubeRay: RayJob controller") is
//! followed branch by branch, fixing the defects of docs/upstream.md, "KubeRay: known defects".
//!
//! Crash safety comes from three rules every branch keeps:
//!
//! * identity first: the RayCluster name and submission id are written to status (an action of
//!   their own, [`Action::UpdateStatus`]) before anything is created with them;
//! * every action is idempotent by name: creating something that exists, or deleting something
//!   already gone, is success;
//! * status writes carry the observed `resourceVersion`, so a decision taken on a stale view of
//!   the RayJob is refused by the API server instead of overwriting a newer identity.

mod cluster;
mod decide;
mod gang;
mod submitter;
#[cfg(test)]
mod tests;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::cluster::BuildOptions;
use crate::feasibility::NodeKinds;
use crate::features::FeatureGates;
use crate::keys;
use crate::pending::GangPods;
use crate::ray::v1::{RayCluster, RayJob, RayJobStatus};
use crate::validation::{ValidationContext, validate_ray_job};
use crate::volcano::{PodGroup, Queue};

pub use crate::decision::{EventNote, PodGroupSize};
pub use cluster::{
    dashboard_url, job_head_service, job_head_service_name, job_head_service_patch,
    ray_cluster_for_job, ray_cluster_object,
};
pub use decide::decide;
pub use gang::gang_wait_message;
pub use submitter::{SubmitCommandError, submit_command, submitter_job, submitter_job_object};

/// Name of the submitter container (KubeRay).
pub const SUBMITTER_CONTAINER: &str = "ray-job-submitter";
/// KubeRay's default requeue interval.
pub const DEFAULT_REQUEUE: Duration = Duration::from_secs(3);
/// How long a submitter may be finished while Ray still reports a non-terminal job.
pub const SUBMITTER_FINISHED_TIMEOUT_SECONDS: i64 = 30;
/// Default `backoffLimit` of the submitter Job.
pub const DEFAULT_SUBMITTER_BACKOFF_LIMIT: i32 = 2;
/// Alphabet of the random name suffixes (Kubernetes' `rand.String`).
pub const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `status.jobDeploymentStatus`: the controller's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeploymentStatus {
    /// `""`: nothing decided yet.
    New,
    /// The RayCluster is being created and becoming ready.
    Initializing,
    /// InteractiveMode: waiting for the user to set `spec.jobId`.
    Waiting,
    /// The Ray job has been handed to Ray.
    Running,
    /// The job finished (SUCCEEDED or STOPPED).
    Complete,
    /// The job failed for good.
    Failed,
    /// The spec does not validate.
    ValidationFailed,
    /// Deleting the cluster before becoming Suspended.
    Suspending,
    /// No cluster exists while `spec.suspend` is true.
    Suspended,
    /// Deleting the cluster before the next attempt.
    Retrying,
    /// A value this controller does not know.
    Unknown(String),
}

impl DeploymentStatus {
    /// A step of a run on its way: Initializing, Waiting or Running.
    pub fn is_progress(&self) -> bool {
        matches!(self, Self::Initializing | Self::Waiting | Self::Running)
    }

    /// Parses the status field (absent = New).
    pub fn parse(value: Option<&str>) -> Self {
        match value.unwrap_or_default() {
            "" => Self::New,
            "Initializing" => Self::Initializing,
            "Waiting" => Self::Waiting,
            "Running" => Self::Running,
            "Complete" => Self::Complete,
            "Failed" => Self::Failed,
            "ValidationFailed" => Self::ValidationFailed,
            "Suspending" => Self::Suspending,
            "Suspended" => Self::Suspended,
            "Retrying" => Self::Retrying,
            other => Self::Unknown(other.to_string()),
        }
    }

    /// The value written to status.
    pub fn as_str(&self) -> &str {
        match self {
            Self::New => "",
            Self::Initializing => "Initializing",
            Self::Waiting => "Waiting",
            Self::Running => "Running",
            Self::Complete => "Complete",
            Self::Failed => "Failed",
            Self::ValidationFailed => "ValidationFailed",
            Self::Suspending => "Suspending",
            Self::Suspended => "Suspended",
            Self::Retrying => "Retrying",
            Self::Unknown(other) => other,
        }
    }

    /// `Complete` or `Failed` (upstream's "deployment terminal" predicate).
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Complete | Self::Failed)
    }
}

/// `spec.submissionMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmissionMode {
    /// A `batch/v1` Job runs `ray job submit`.
    K8sJob,
    /// raygate POSTs the job to the dashboard.
    Http,
    /// The user submits and then sets `spec.jobId`.
    Interactive,
    /// A submitter container in the head Pod.
    Sidecar,
}

impl SubmissionMode {
    /// The mode of a RayJob (absent = the CRD default, K8sJobMode); `None` for unknown values.
    pub fn of(job: &RayJob) -> Option<Self> {
        match job.spec.submission_mode.as_deref().unwrap_or("K8sJobMode") {
            "K8sJobMode" => Some(Self::K8sJob),
            "HTTPMode" => Some(Self::Http),
            "InteractiveMode" => Some(Self::Interactive),
            "SidecarMode" => Some(Self::Sidecar),
            _ => None,
        }
    }

    /// The value as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::K8sJob => "K8sJobMode",
            Self::Http => "HTTPMode",
            Self::Interactive => "InteractiveMode",
            Self::Sidecar => "SidecarMode",
        }
    }
}

/// Whether a Ray job status is terminal (`STOPPED`, `SUCCEEDED`, `FAILED`).
pub fn is_terminal_job_status(status: &str) -> bool {
    matches!(status, "STOPPED" | "SUCCEEDED" | "FAILED")
}

/// Whether no pass has left a mark on `job` yet: it has no `jobDeploymentStatus`. Its first
/// pass may wait behind the passes of RayJobs on their way (docs/reconciler.md, "First passes
/// wait their turn").
pub fn awaits_first_pass(job: &RayJob) -> bool {
    let status = job.status.as_ref();
    DeploymentStatus::parse(status.and_then(|s| s.job_deployment_status.as_deref()))
        == DeploymentStatus::New
}

/// Operator-wide knobs (KubeRay's environment variables, raygate's flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LifecycleConfig {
    /// How the cluster's objects are built: the Service FQDNs' DNS suffix and whether head
    /// Services keep a ClusterIP (the RayJob head Service follows the cluster's).
    pub build: BuildOptions,
    /// Grace period after the Ray job is terminal, in seconds.
    pub transition_grace_period_seconds: i64,
    /// How long dashboard status checks may keep failing, in seconds.
    pub status_check_timeout_seconds: i64,
    /// `DELETE_RAYJOB_CR_AFTER_JOB_FINISHES`: shutdown deletes the RayJob, not only the cluster.
    pub delete_ray_job_after_finish: bool,
    /// `ENABLE_LOGIN_SHELL`: the submitter runs `bash -cel`.
    pub login_shell: bool,
    /// KubeRay feature gates.
    pub gates: FeatureGates,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            build: BuildOptions::default(),
            transition_grace_period_seconds: 300,
            status_check_timeout_seconds: 300,
            delete_ray_job_after_finish: false,
            login_shell: false,
            gates: FeatureGates::default(),
        }
    }
}

/// A Ray job as the dashboard reports it (`GET /api/jobs/<id>`); unknown fields are ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RayJobDetails {
    /// `PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED` or `STOPPED`.
    #[serde(default)]
    pub status: String,
    /// Ray's message.
    #[serde(default)]
    pub message: Option<String>,
    /// Start, epoch milliseconds.
    #[serde(default)]
    pub start_time: Option<i64>,
    /// End, epoch milliseconds.
    #[serde(default)]
    pub end_time: Option<i64>,
}

/// What the dashboard said about the RayJob's submission id.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum RayJobObservation {
    /// The dashboard was not asked (see [`dashboard_query`]).
    #[default]
    NotQueried,
    /// The dashboard does not know the id (HTTP 404).
    NotFound,
    /// The dashboard could not be reached or answered with an error.
    Unreachable(String),
    /// The job's details.
    Found(RayJobDetails),
}

/// Fresh random name suffixes for this reconcile; used only when a new identity is chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreshSuffixes {
    /// Suffix of a generated RayCluster name.
    pub cluster: String,
    /// Suffix of a generated submission id.
    pub submission: String,
}

impl FreshSuffixes {
    /// Two 5-character suffixes from Kubernetes' alphabet, drawn from `entropy`.
    pub fn from_entropy(mut entropy: u64) -> Self {
        let mut take = || {
            (0..5)
                .map(|_| {
                    let len = SUFFIX_ALPHABET.len() as u64;
                    let c = SUFFIX_ALPHABET[(entropy % len) as usize];
                    entropy /= len;
                    c as char
                })
                .collect::<String>()
        };
        let cluster = take();
        let submission = take();
        FreshSuffixes {
            cluster,
            submission,
        }
    }
}

/// Everything [`decide`] looks at.
#[derive(Clone, Debug)]
pub struct Snapshot<'a> {
    /// The RayJob as last read.
    pub job: &'a RayJob,
    /// The current time.
    pub now: Timestamp,
    /// Operator-wide knobs.
    pub config: &'a LifecycleConfig,
    /// Error messages of validating the RayJob (empty = valid).
    pub validation_errors: Vec<String>,
    /// Whether the namespace is opted into Volcano (`raygate.io/scheduler=volcano`).
    pub volcano: bool,
    /// The RayCluster named in `status.rayClusterName`, if it exists.
    pub cluster: Option<&'a RayCluster>,
    /// The K8sJobMode submitter Job (`<ns>/<rayjob>`), if it exists.
    pub submitter: Option<&'a Job>,
    /// SidecarMode: the head Pod of the cluster, if it exists.
    pub head_pod: Option<&'a Pod>,
    /// The RayJob's PodGroup `ray-<rayjob>-pg`, if it exists.
    pub pod_group: Option<&'a PodGroup>,
    /// Whether the PodGroup CRD has `spec.subGroupPolicy` (Volcano v1.14); without it the
    /// PodGroup holds only `minMember` and `minResources` (see `crate::sizing`).
    pub sub_groups: bool,
    /// The PodGroup's Volcano queue, if it exists (read when the PodGroup is).
    pub queue: Option<&'a Queue>,
    /// The PodGroup's member Pods ([`GangPods::of`]).
    pub gang_pods: GangPods,
    /// The shape of every Node the reconciler knows (empty before its Node watch has listed):
    /// whether they could ever hold the gang ([`crate::feasibility`]).
    pub nodes: &'a NodeKinds,
    /// The RayJob head Service `<rayjob>-head-svc`, if it exists (read while Running, see
    /// [`job_head_service_query`]).
    pub job_head_service: Option<&'a Service>,
    /// The Ray job, when [`dashboard_query`] asked for it.
    pub ray_job: RayJobObservation,
    /// Suffixes for names generated in this pass.
    pub fresh: FreshSuffixes,
}

/// One step of a decision. Each is idempotent by name.
#[derive(Clone, Debug)]
pub enum Action {
    /// Add `ray.io/rayjob-finalizer` to the RayJob.
    AddFinalizer,
    /// Remove `ray.io/rayjob-finalizer` from the RayJob.
    RemoveFinalizer,
    /// Create the PodGroup (already exists = success).
    CreatePodGroup(Box<PodGroup>),
    /// Patch `spec.minMember` and `spec.minResources` of the PodGroup (missing = create
    /// nothing; the next pass creates it where needed).
    ResizePodGroup(PodGroupSize),
    /// Create the RayCluster (already exists = success).
    CreateRayCluster(Box<RayCluster>),
    /// Create the RayJob head Service (already exists = success).
    CreateService(Box<Service>),
    /// Merge-patch a Service (the RayJob head Service switching to the current cluster).
    PatchService {
        /// Service name.
        name: String,
        /// RFC 7386 merge patch.
        patch: Value,
    },
    /// Delete the RayCluster with foreground propagation (gone = success).
    DeleteRayCluster {
        /// Cluster name.
        name: String,
    },
    /// Set `suspend: true` on worker groups `0..groups` of the RayCluster (`DeleteWorkers`).
    SuspendWorkerGroups {
        /// Cluster name.
        name: String,
        /// Indexes of the groups not yet suspended.
        groups: Vec<usize>,
    },
    /// Create the submitter Job (already exists = success).
    CreateSubmitterJob(Box<Job>),
    /// Delete the submitter Job with background propagation (gone = success).
    DeleteSubmitterJob {
        /// Job name.
        name: String,
    },
    /// HTTPMode: `POST /api/jobs/` (an "already exists" answer = success).
    SubmitRayJob {
        /// `status.dashboardURL` of the cluster.
        dashboard_url: String,
        /// Request body.
        request: Value,
    },
    /// `POST /api/jobs/<id>/stop`, best effort and bounded: failures are logged, not fatal.
    StopRayJob {
        /// `status.dashboardURL` of the cluster.
        dashboard_url: String,
        /// Submission id.
        submission_id: String,
    },
    /// Delete the RayJob itself (`DeleteSelf`, or shutdown with `delete_ray_job_after_finish`).
    DeleteRayJob,
    /// Write the whole status (a merge patch from the observed status, with the observed
    /// `resourceVersion` as precondition).
    UpdateStatus(Box<RayJobStatus>),
    /// Record an Event.
    Event(EventNote),
}

/// What to do, and when to look again.
pub type Decision = crate::decision::Decision<Action>;

impl crate::decision::Action for Action {
    fn failure_reason(&self) -> Option<&'static str> {
        match self {
            Action::CreateRayCluster(_) => Some("FailedToCreateRayCluster"),
            Action::CreateService(_) => Some("FailedToCreateService"),
            Action::CreateSubmitterJob(_) => Some("FailedToCreateRayJobSubmitter"),
            _ => None,
        }
    }

    fn event(&self) -> Option<&EventNote> {
        match self {
            Action::Event(note) => Some(note),
            _ => None,
        }
    }
}

/// Where to ask about the Ray job in this pass: `(dashboardURL, submission id)`.
///
/// Only while Running — polling happens there and nowhere else — and only once the dashboard
/// address and the submission id are known.
pub fn dashboard_query(job: &RayJob) -> Option<(String, String)> {
    let status = job.status.as_ref()?;
    if job.metadata.deletion_timestamp.is_some()
        || DeploymentStatus::parse(status.job_deployment_status.as_deref())
            != DeploymentStatus::Running
    {
        return None;
    }
    let url = status.dashboard_url.clone().filter(|u| !u.is_empty())?;
    let id = status.job_id.clone().filter(|i| !i.is_empty())?;
    Some((url, id))
}

/// What one pass of a RayJob must read, decided from the RayJob alone: the shell reads these
/// and nothing else, then builds the [`Snapshot`]. [`Reads::of`] is `None` for a RayJob another
/// controller manages: nothing is read, and [`decide`] would do nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reads {
    /// Whether the RayJob's gang is kept in Volcano this pass: the namespace is opted in and
    /// the RayJob is not being deleted.
    pub volcano: bool,
    /// The RayCluster named in status (none while deleting).
    pub cluster: Option<String>,
    /// K8sJobMode: the submitter Job (none while deleting).
    pub submitter: Option<String>,
    /// The PodGroup, when the gang is kept in Volcano.
    pub pod_group: Option<String>,
    /// SidecarMode: the cluster whose head Pod is read ([`keys::is_head_pod_of`] picks it).
    pub head_pod_of: Option<String>,
    /// The RayJob head Service ([`job_head_service_query`]).
    pub job_head_service: Option<String>,
    /// The Ray job to ask the dashboard about: `(dashboardURL, submission id)`
    /// ([`dashboard_query`]).
    pub ray_job: Option<(String, String)>,
    /// Whether the pass waits for its cluster to become ready (Initializing, no dashboard URL
    /// yet): it then reads the cluster's Pods too, and takes the ready status the cluster's next
    /// pass writes ([`crate::cluster::ready_status_due`]) for the cluster's status.
    pub cluster_readiness: bool,
}

impl Reads {
    /// The reads of a pass over `job`, in a namespace opted into Volcano or not.
    pub fn of(job: &RayJob, opted_in: bool) -> Option<Self> {
        if keys::managed_elsewhere(job.spec.managed_by.as_deref()) {
            return None;
        }
        let deleting = job.metadata.deletion_timestamp.is_some();
        let mode = SubmissionMode::of(job);
        let name = job.metadata.name.clone().unwrap_or_default();
        let cluster = job
            .status
            .as_ref()
            .and_then(|s| s.ray_cluster_name.clone())
            .filter(|n| !n.is_empty());
        let volcano = opted_in && !deleting;
        let cluster_readiness = !deleting
            && cluster.is_some()
            && job.status.as_ref().is_some_and(|s| {
                DeploymentStatus::parse(s.job_deployment_status.as_deref())
                    == DeploymentStatus::Initializing
                    && s.dashboard_url.as_deref().is_none_or(str::is_empty)
            });
        Some(Self {
            volcano,
            head_pod_of: cluster
                .clone()
                .filter(|_| mode == Some(SubmissionMode::Sidecar)),
            cluster: cluster.filter(|_| !deleting),
            submitter: (mode == Some(SubmissionMode::K8sJob) && !deleting).then(|| name.clone()),
            pod_group: volcano.then(|| keys::pod_group_name(&name)),
            job_head_service: job_head_service_query(job).then(|| job_head_service_name(job)),
            ray_job: dashboard_query(job),
            cluster_readiness,
        })
    }
}

/// The validation errors of `job` that stop it, each as `<field>: <message>`.
pub fn validation_errors(job: &RayJob, context: &ValidationContext) -> Vec<String> {
    crate::finding::error_messages(&validate_ray_job(job, context))
}

/// Whether this pass needs the RayJob head Service (`<rayjob>-head-svc`): only while Running
/// with a cluster of its own (not in clusterSelector mode), where [`decide`] keeps it pointed at
/// the current cluster.
pub fn job_head_service_query(job: &RayJob) -> bool {
    let running = job.status.as_ref().is_some_and(|s| {
        DeploymentStatus::parse(s.job_deployment_status.as_deref()) == DeploymentStatus::Running
    });
    let selector_mode = job
        .spec
        .cluster_selector
        .as_ref()
        .is_some_and(|s| !s.is_empty());
    running && !selector_mode && job.metadata.deletion_timestamp.is_none()
}

/// The RFC 7386 merge patch that turns `old` into `new`: changed keys with their new value,
/// removed keys as `null`, nested objects diffed recursively.
pub fn merge_patch(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for (key, value) in new {
                match old.get(key) {
                    Some(before) if before == value => {}
                    Some(before @ Value::Object(_)) if value.is_object() => {
                        patch.insert(key.clone(), merge_patch(before, value));
                    }
                    _ => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            Value::Object(patch)
        }
        _ => new.clone(),
    }
}

/// A RayJob status as KubeRay serialises it: empty strings are omitted (Go's `omitempty`).
pub fn status_json(status: &RayJobStatus) -> Value {
    let mut value = serde_json::to_value(status).unwrap_or(Value::Null);
    if let Value::Object(fields) = &mut value {
        fields.retain(|_, v| v.as_str() != Some(""));
    }
    value
}

/// The merge patch of the status subresource that turns `old` into `new` (`{}`: nothing to do).
pub fn status_patch(old: Option<&RayJobStatus>, new: &RayJobStatus) -> Value {
    let old = old
        .map(status_json)
        .unwrap_or_else(|| Value::Object(Map::new()));
    merge_patch(&old, &status_json(new))
}
