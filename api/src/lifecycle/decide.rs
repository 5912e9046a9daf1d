//! [`decide`]: KubeRay v1.7's RayJob state machine (docs/upstream.md,
//! "KubeRay: RayJob controller"), branch by branch, as a pure function of a [`Snapshot`].
//!
//! Here: the entry (managedBy, deletion, validation, the dispatch on `jobDeploymentStatus`)
//! and the reconcile pass `Pass` with the helpers every branch uses. In submodules:
//! - `start`: New, Initializing and Waiting — the attempt's identity, cluster and submitter;
//! - `running`: Running — the Ray job and its submitter tracked to a terminal state;
//! - `restart`: Suspending, Retrying, Suspended and ValidationFailed — an attempt torn down and
//!   started over;
//! - `terminal`: Complete and Failed — TTL and the deletion policies;
//! - `deadlines`: the deadlines and timeouts that end an attempt;
//! - `children`: the RayCluster and the RayJob's head Service;
//! - `pod_group`: the RayJob's Volcano PodGroup;
//! - `finish`: the common tail — counters, retries, the status write and its Event.

mod children;
mod deadlines;
mod finish;
mod pod_group;
mod restart;
mod running;
mod start;
mod terminal;

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::{
    Action, Decision, DeploymentStatus, EventNote, Snapshot, SubmissionMode, is_terminal_job_status,
};
use crate::keys;
use crate::ray::v1::RayJobStatus;

/// Reasons written to `status.reason` (KubeRay's `JobFailedReason`).
mod reason {
    pub const SUBMISSION_FAILED: &str = "SubmissionFailed";
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    pub const PRE_RUNNING_DEADLINE_EXCEEDED: &str = "PreRunningDeadlineExceeded";
    pub const APP_FAILED: &str = "AppFailed";
    pub const GRACE_PERIOD_EXCEEDED: &str = "JobDeploymentStatusTransitionGracePeriodExceeded";
    pub const STATUS_CHECK_TIMEOUT: &str = "JobStatusCheckTimeoutExceeded";
    pub const VALIDATION_FAILED: &str = "ValidationFailed";
}

/// How long to wait before looking again at something no watch reports (a missing
/// clusterSelector cluster, a deletion in progress).
const SLOW_REQUEUE: Duration = Duration::from_secs(10);

/// Whether a branch ends the pass directly or falls through to the common tail (counters,
/// retries, status write).
enum Flow {
    Break,
    Return,
}

/// The next step of a RayJob's lifecycle.
pub fn decide(s: &Snapshot<'_>) -> Decision {
    let job = s.job;
    if keys::managed_elsewhere(job.spec.managed_by.as_deref()) {
        return Decision::default();
    }
    let has_finalizer = job
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == keys::RAYJOB_FINALIZER);
    let observed = job.status.clone().unwrap_or_default();
    if job.metadata.deletion_timestamp.is_some() {
        return deleting(has_finalizer, &observed);
    }
    let mut pass = Pass::new(s, observed);
    if !has_finalizer {
        pass.actions.push(Action::AddFinalizer);
    }
    let mut errors = s.validation_errors.clone();
    let mode = SubmissionMode::of(job);
    if mode.is_none() {
        errors.push(format!(
            "spec.submissionMode: Unsupported value: {:?}: supported values: \"K8sJobMode\", \"HTTPMode\", \"InteractiveMode\", \"SidecarMode\"",
            job.spec.submission_mode.as_deref().unwrap_or_default()
        ));
    }
    let Some(mode) = mode.filter(|_| errors.is_empty()) else {
        pass.validation_failed(errors.join("; "));
        return pass.finish(Flow::Return);
    };
    pass.mode = mode;
    let state = DeploymentStatus::parse(pass.old.job_deployment_status.as_deref());
    let identity_missing = pass.cluster_name().is_empty();
    let flow = match state {
        DeploymentStatus::New => pass.start_attempt(),
        DeploymentStatus::Initializing | DeploymentStatus::Waiting | DeploymentStatus::Running
            if identity_missing =>
        {
            pass.start_attempt()
        }
        DeploymentStatus::Initializing => pass.initializing(),
        DeploymentStatus::Waiting => pass.waiting(),
        DeploymentStatus::Running => pass.running(),
        DeploymentStatus::Suspending => pass.tear_down(DeploymentStatus::Suspended),
        DeploymentStatus::Retrying => pass.tear_down(DeploymentStatus::New),
        DeploymentStatus::Suspended => pass.suspended(),
        DeploymentStatus::Complete | DeploymentStatus::Failed => pass.finished(),
        DeploymentStatus::ValidationFailed => pass.revalidated(),
        DeploymentStatus::Unknown(value) => {
            pass.event(
                true,
                "UnknownJobDeploymentStatus",
                format!("status.jobDeploymentStatus {value:?} is not a state raygate knows; the RayJob is left alone"),
            );
            Flow::Return
        }
    };
    pass.finish(flow)
}

/// Deletion in progress: stop the Ray job unless it is already terminal, then let go.
fn deleting(has_finalizer: bool, observed: &RayJobStatus) -> Decision {
    let mut decision = Decision::default();
    if !has_finalizer {
        return decision;
    }
    let non_empty = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    if !is_terminal_job_status(observed.job_status.as_deref().unwrap_or_default())
        && let (Some(dashboard_url), Some(submission_id)) = (
            non_empty(&observed.dashboard_url),
            non_empty(&observed.job_id),
        )
    {
        decision.actions.push(Action::StopRayJob {
            dashboard_url,
            submission_id,
        });
    }
    decision.actions.push(Action::RemoveFinalizer);
    decision
}

/// One reconcile pass: the status being built and the actions chosen so far.
struct Pass<'s, 'a> {
    s: &'s Snapshot<'a>,
    old: RayJobStatus,
    st: RayJobStatus,
    actions: Vec<Action>,
    requeue: Option<Duration>,
    mode: SubmissionMode,
}

fn seconds(time: Option<&Time>) -> Option<i64> {
    time.map(|t| t.0.as_second())
}

fn go_time(seconds: i64) -> String {
    Timestamp::from_second(seconds)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string())
        .unwrap_or_else(|_| seconds.to_string())
}

impl<'s, 'a> Pass<'s, 'a> {
    fn new(s: &'s Snapshot<'a>, old: RayJobStatus) -> Self {
        Pass {
            s,
            st: old.clone(),
            old,
            actions: Vec::new(),
            requeue: None,
            mode: SubmissionMode::K8sJob,
        }
    }

    fn now(&self) -> i64 {
        self.s.now.as_second()
    }

    fn now_time(&self) -> Time {
        Time(self.s.now)
    }

    fn job_name(&self) -> &str {
        self.s.job.metadata.name.as_deref().unwrap_or_default()
    }

    fn cluster_name(&self) -> String {
        self.st.ray_cluster_name.clone().unwrap_or_default()
    }

    fn selector_cluster(&self) -> Option<String> {
        self.s
            .job
            .spec
            .cluster_selector
            .as_ref()
            .and_then(|s| s.get(keys::RAY_CLUSTER_LABEL))
            .filter(|v| !v.is_empty())
            .cloned()
    }

    fn selector_mode(&self) -> bool {
        self.s
            .job
            .spec
            .cluster_selector
            .as_ref()
            .is_some_and(|s| !s.is_empty())
    }

    fn set_state(&mut self, state: DeploymentStatus) {
        self.st.job_deployment_status = Some(state.as_str().to_string());
    }

    fn state(&self) -> DeploymentStatus {
        DeploymentStatus::parse(self.st.job_deployment_status.as_deref())
    }

    fn fail(&mut self, why: &str, message: String) {
        self.set_state(DeploymentStatus::Failed);
        self.st.reason = Some(why.to_string());
        self.st.message = Some(message);
    }

    fn event(&mut self, warning: bool, reason: &str, message: String) {
        self.actions.push(Action::Event(EventNote {
            warning,
            reason: reason.to_string(),
            message,
        }));
    }

    fn requeue_within(&mut self, after: Duration) {
        self.requeue = Some(self.requeue.map_or(after, |r| r.min(after)));
    }

    /// Look again when `deadline` (epoch seconds) passes.
    fn wake_at(&mut self, deadline: i64) {
        self.requeue_within(crate::decision::until_after(deadline, self.now()));
    }

    fn validation_failed(&mut self, message: String) {
        self.set_state(DeploymentStatus::ValidationFailed);
        self.st.reason = Some(reason::VALIDATION_FAILED.to_string());
        self.st.message = Some(message);
        self.st.observed_generation = self.s.job.metadata.generation;
    }

    fn job_id(&self) -> String {
        self.st.job_id.clone().unwrap_or_default()
    }
}
