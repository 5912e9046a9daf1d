//! [`decide`]: KubeRay v1.7's RayJob state machine (docs/upstream.md,
//! "KubeRay: RayJob controller"), branch by branch, as a pure function of a [`Snapshot`].

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::cluster::{
    dashboard_url, job_head_service, job_head_service_name, job_head_service_patch,
    ray_cluster_for_job,
};
use super::gang::gang_wait_message;
use super::submitter::{submit_request, submitter_job};
use super::{
    Action, DEFAULT_REQUEUE, Decision, DeploymentStatus, EventNote, PodGroupSize,
    RayJobObservation, SUBMITTER_CONTAINER, SUBMITTER_FINISHED_TIMEOUT_SECONDS, Snapshot,
    SubmissionMode, is_terminal_job_status,
};
use crate::cluster::BuildOptions;
use crate::features::Feature;
use crate::keys;
use crate::ray::v1::{
    DeletionPolicyType, RayCluster, RayClusterStatus, RayJobStatus, RayJobStatusInfo,
};
use crate::sizing::{self, GangSize};

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
    if job
        .spec
        .managed_by
        .as_deref()
        .is_some_and(|m| m != keys::KUBERAY_MANAGED_BY)
    {
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
        DeploymentStatus::New => pass.new_attempt(),
        DeploymentStatus::Initializing | DeploymentStatus::Waiting | DeploymentStatus::Running
            if identity_missing =>
        {
            pass.new_attempt()
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

/// What the submitter's own state says.
#[derive(Default)]
struct SubmitterState {
    /// When it finished (epoch seconds), if it has.
    finished_at: Option<i64>,
    /// `(reason, message)` when it failed.
    failure: Option<String>,
}

fn seconds(time: Option<&Time>) -> Option<i64> {
    time.map(|t| t.0.as_second())
}

fn go_time(seconds: i64) -> String {
    Timestamp::from_second(seconds)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string())
        .unwrap_or_else(|_| seconds.to_string())
}

fn time_from_millis(millis: Option<i64>) -> Option<Time> {
    millis
        .filter(|m| *m > 0)
        .and_then(|m| Timestamp::from_millisecond(m).ok())
        .map(Time)
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
        let wait = (deadline - self.now()).max(0) as u64 + 1;
        self.requeue_within(Duration::from_secs(wait));
    }

    fn validation_failed(&mut self, message: String) {
        self.set_state(DeploymentStatus::ValidationFailed);
        self.st.reason = Some(reason::VALIDATION_FAILED.to_string());
        self.st.message = Some(message);
        self.st.observed_generation = self.s.job.metadata.generation;
    }

    // ---- branches -------------------------------------------------------------------------

    /// New: choose this attempt's identity and write it before anything is created with it.
    fn new_attempt(&mut self) -> Flow {
        let name = self.job_name().to_string();
        if self.mode != SubmissionMode::Interactive
            && self.st.job_id.as_deref().is_none_or(str::is_empty)
        {
            let id = self
                .s
                .job
                .spec
                .job_id
                .clone()
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("{name}-{}", self.s.fresh.submission));
            self.st.job_id = Some(id);
        }
        if self
            .st
            .ray_cluster_name
            .as_deref()
            .is_none_or(str::is_empty)
        {
            let cluster = self
                .selector_cluster()
                .unwrap_or_else(|| format!("{name}-{}", self.s.fresh.cluster));
            self.st.ray_cluster_name = Some(cluster);
        }
        self.st.job_status = Some(String::new());
        self.set_state(DeploymentStatus::Initializing);
        self.st.start_time = Some(self.now_time());
        if self.s.volcano && self.selector_mode() {
            self.event(
                true,
                "GangSchedulingSkipped",
                format!(
                    "RayJob runs on the existing RayCluster {} (spec.clusterSelector); it gets no PodGroup of its own",
                    self.cluster_name()
                ),
            );
        }
        Flow::Break
    }

    fn initializing(&mut self) -> Flow {
        if self.s.job.spec.suspend == Some(true) {
            self.set_state(DeploymentStatus::Suspending);
            return Flow::Break;
        }
        if self.active_deadline_exceeded() || self.pre_running_deadline_exceeded() {
            return Flow::Break;
        }
        if let Err(message) = self.sync_desired_gang() {
            self.validation_failed(message);
            return Flow::Break;
        }
        let Some(cluster) = self.cluster_or_create() else {
            return Flow::Return;
        };
        if self.st.dashboard_url.as_deref().is_none_or(str::is_empty) {
            let state = cluster.status.as_ref().and_then(|s| s.state.as_deref());
            if state != Some("ready") {
                self.st.ray_cluster_status = Some(cluster.status.clone().unwrap_or_default());
                self.explain_gang_wait();
                return Flow::Break;
            }
            self.st.dashboard_url = Some(dashboard_url(cluster, &self.s.config.cluster_domain));
            // A gang-wait explanation is stale once the cluster is ready.
            self.st.message = None;
        }
        if self.mode == SubmissionMode::Interactive {
            self.set_state(DeploymentStatus::Waiting);
            return Flow::Break;
        }
        if self.mode == SubmissionMode::K8sJob && self.s.submitter.is_none() {
            let built = submitter_job(
                self.s.job,
                &cluster.spec,
                self.st.dashboard_url.as_deref().unwrap_or_default(),
                self.st.job_id.as_deref().unwrap_or_default(),
                self.s.volcano,
                self.s.config.login_shell,
            );
            match built {
                Ok(submitter) => {
                    self.actions
                        .push(Action::CreateSubmitterJob(Box::new(submitter)));
                    let name = self.job_name().to_string();
                    self.event(
                        false,
                        "CreatedRayJobSubmitter",
                        format!("Created Kubernetes Job {name}"),
                    );
                }
                Err(e) => {
                    self.validation_failed(e.to_string());
                    return Flow::Break;
                }
            }
        }
        self.set_state(DeploymentStatus::Running);
        Flow::Break
    }

    fn waiting(&mut self) -> Flow {
        if self.pre_running_deadline_exceeded() {
            return Flow::Break;
        }
        match self.s.job.spec.job_id.clone().filter(|id| !id.is_empty()) {
            Some(id) => {
                self.st.job_id = Some(id);
                self.set_state(DeploymentStatus::Running);
                Flow::Break
            }
            None => Flow::Return,
        }
    }

    fn running(&mut self) -> Flow {
        if self.s.job.spec.suspend == Some(true) {
            self.set_state(DeploymentStatus::Suspending);
            return Flow::Break;
        }
        if self.active_deadline_exceeded()
            || self.grace_period_exceeded()
            || self.status_check_timed_out()
        {
            return Flow::Break;
        }
        if let Err(message) = self.sync_desired_gang() {
            self.validation_failed(message);
            return Flow::Break;
        }
        let Some(cluster) = self.cluster_or_create() else {
            return Flow::Return;
        };
        if !self.selector_mode() {
            self.sync_job_head_service(cluster);
        }
        let submitter = self.submitter_state();
        let dashboard = self.st.dashboard_url.clone().unwrap_or_default();
        match &self.s.ray_job {
            RayJobObservation::NotQueried => {
                self.requeue_within(DEFAULT_REQUEUE);
                Flow::Return
            }
            RayJobObservation::NotFound => self.ray_job_not_found(&submitter, dashboard),
            RayJobObservation::Unreachable(error) => {
                if let Some(failure) = submitter.failure {
                    self.fail(reason::SUBMISSION_FAILED, failure);
                    return Flow::Break;
                }
                if self.st.job_status_check_failure_start_time.is_none() {
                    self.st.job_status_check_failure_start_time = Some(self.now_time());
                    self.event(
                        true,
                        "FailedToGetJobStatus",
                        format!(
                            "Failed to get the status of Ray job {}: {error}",
                            self.job_id()
                        ),
                    );
                }
                self.requeue_within(DEFAULT_REQUEUE);
                Flow::Break
            }
            RayJobObservation::Found(details) => {
                self.st.job_status_check_failure_start_time = None;
                let terminal = is_terminal_job_status(&details.status);
                let needs_submitter =
                    matches!(self.mode, SubmissionMode::K8sJob | SubmissionMode::Sidecar);
                let submitter_done = submitter.finished_at.is_some() || submitter.failure.is_some();
                self.st.ray_cluster_status = Some(cluster.status.clone().unwrap_or_default());
                self.st.job_status = Some(details.status.clone());
                self.st.message = details.message.clone();
                self.st.reason = None;
                let info = RayJobStatusInfo {
                    start_time: time_from_millis(details.start_time),
                    end_time: time_from_millis(details.end_time),
                };
                self.st.ray_job_info = Some(info);
                if terminal && (!needs_submitter || submitter_done) {
                    if details.status == "FAILED" {
                        self.set_state(DeploymentStatus::Failed);
                        self.st.reason = Some(reason::APP_FAILED.to_string());
                    } else {
                        self.set_state(DeploymentStatus::Complete);
                    }
                    return Flow::Break;
                }
                if !terminal && let Some(failure) = submitter.failure {
                    self.fail(reason::SUBMISSION_FAILED, failure);
                    return Flow::Break;
                }
                if !terminal && let Some(finished) = submitter.finished_at {
                    let deadline = finished + SUBMITTER_FINISHED_TIMEOUT_SECONDS;
                    if self.now() >= deadline {
                        self.st.job_status = Some("FAILED".to_string());
                        self.fail(
                            reason::GRACE_PERIOD_EXCEEDED,
                            format!(
                                "The RayJob submitter finished at {} but the ray job did not reach terminal state within {SUBMITTER_FINISHED_TIMEOUT_SECONDS}s",
                                go_time(finished)
                            ),
                        );
                        return Flow::Break;
                    }
                    self.wake_at(deadline);
                }
                self.requeue_within(DEFAULT_REQUEUE);
                Flow::Break
            }
        }
    }

    fn job_id(&self) -> String {
        self.st.job_id.clone().unwrap_or_default()
    }

    fn ray_job_not_found(&mut self, submitter: &SubmitterState, dashboard: String) -> Flow {
        match self.mode {
            SubmissionMode::Http => match submit_request(self.s.job, &self.job_id()) {
                Ok(request) => {
                    self.actions.push(Action::SubmitRayJob {
                        dashboard_url: dashboard,
                        request,
                    });
                    let id = self.job_id();
                    self.event(
                        false,
                        "SubmittedRayJob",
                        format!("Submitted Ray job {id} over HTTP"),
                    );
                    self.st.job_status_check_failure_start_time = None;
                    self.requeue_within(DEFAULT_REQUEUE);
                    Flow::Break
                }
                Err(e) => {
                    self.validation_failed(e.to_string());
                    Flow::Break
                }
            },
            SubmissionMode::K8sJob | SubmissionMode::Sidecar => {
                if let Some(failure) = &submitter.failure {
                    self.fail(reason::SUBMISSION_FAILED, failure.clone());
                    return Flow::Break;
                }
                if submitter.finished_at.is_some() {
                    self.fail(
                        reason::APP_FAILED,
                        "Submitter completed but Ray job not found in RayCluster.".to_string(),
                    );
                    return Flow::Break;
                }
                self.requeue_within(DEFAULT_REQUEUE);
                Flow::Return
            }
            SubmissionMode::Interactive => {
                self.requeue_within(DEFAULT_REQUEUE);
                Flow::Return
            }
        }
    }

    /// Suspending / Retrying: delete what this attempt created, then reset the attempt.
    fn tear_down(&mut self, next: DeploymentStatus) -> Flow {
        let mut waiting = false;
        if !self.selector_mode()
            && let Some(cluster) = self.s.cluster
            && self.owns(cluster)
        {
            waiting = true;
            if cluster.metadata.deletion_timestamp.is_none() {
                let name = self.cluster_name();
                self.actions
                    .push(Action::DeleteRayCluster { name: name.clone() });
                self.event(
                    false,
                    "DeletedRayCluster",
                    format!("Deleted RayCluster {name}"),
                );
            }
        }
        if let Some(submitter) = self.s.submitter {
            waiting = true;
            if submitter.metadata.deletion_timestamp.is_none() {
                let name = self.job_name().to_string();
                self.actions
                    .push(Action::DeleteSubmitterJob { name: name.clone() });
                self.event(
                    false,
                    "DeletedRayJobSubmitter",
                    format!("Deleted submitter Job {name}"),
                );
            }
        }
        if waiting {
            self.requeue_within(SLOW_REQUEUE);
            return Flow::Return;
        }
        self.settle_gang(None);
        self.st.ray_cluster_status = Some(RayClusterStatus::default());
        self.st.ray_cluster_name = None;
        self.st.dashboard_url = None;
        self.st.job_id = None;
        self.st.message = None;
        self.st.reason = None;
        self.st.ray_job_info = Some(RayJobStatusInfo::default());
        self.st.job_status_check_failure_start_time = None;
        self.st.job_status = Some(String::new());
        self.set_state(next);
        Flow::Break
    }

    fn suspended(&mut self) -> Flow {
        if self.s.job.spec.suspend == Some(true) {
            return Flow::Return;
        }
        self.st.job_status = Some(String::new());
        self.set_state(DeploymentStatus::New);
        Flow::Break
    }

    /// A ValidationFailed RayJob whose spec validates again starts over (upstream never leaves
    /// the state, docs/upstream.md, "KubeRay: known defects", 1).
    fn revalidated(&mut self) -> Flow {
        self.st.reason = None;
        self.st.message = None;
        self.set_state(DeploymentStatus::New);
        self.event(
            false,
            "ValidationSucceeded",
            "The RayJob spec is valid again; starting over".to_string(),
        );
        Flow::Break
    }

    /// Complete / Failed: keep the gang honest, then apply the cleanup policy.
    fn finished(&mut self) -> Flow {
        if !self.selector_mode() {
            let live = self
                .s
                .cluster
                .filter(|c| c.metadata.deletion_timestamp.is_none());
            let gang = live.map(|c| sizing::cluster_gang(&c.spec, "spec"));
            match gang {
                Some(Ok(gang)) => self.settle_gang(Some(gang)),
                Some(Err(_)) | None => self.settle_gang(None),
            }
        }
        if self.selector_mode() {
            return Flow::Return;
        }
        let strategy = self.s.job.spec.deletion_strategy.as_ref();
        if self.s.config.gates.enabled(Feature::RayJobDeletionPolicy)
            && let Some(strategy) = strategy
        {
            if let Some(rules) = &strategy.deletion_rules {
                self.deletion_rules(rules);
            } else {
                let policy = match self.st.job_status.as_deref() {
                    Some("SUCCEEDED") => strategy.on_success.as_ref(),
                    Some("FAILED") => strategy.on_failure.as_ref(),
                    _ => None,
                }
                .and_then(|p| p.policy);
                if let Some(policy) = policy {
                    let ttl = self.s.job.spec.ttl_seconds_after_finished.unwrap_or(0);
                    let due = self.end_time() + i64::from(ttl);
                    if self.now() < due {
                        self.wake_at(due + 1);
                    } else if !self.achieved(policy) {
                        self.apply_policy(policy);
                    }
                }
            }
        } else if self.s.job.spec.shutdown_after_job_finishes == Some(true) {
            let ttl = self.s.job.spec.ttl_seconds_after_finished.unwrap_or(0);
            let due = self.end_time() + i64::from(ttl);
            if self.now() < due {
                self.wake_at(due + 1);
            } else if self.s.config.delete_ray_job_after_finish {
                self.apply_policy(DeletionPolicyType::DeleteSelf);
            } else if !self.achieved(DeletionPolicyType::DeleteCluster) {
                self.apply_policy(DeletionPolicyType::DeleteCluster);
            }
        }
        Flow::Return
    }

    fn end_time(&self) -> i64 {
        seconds(self.st.end_time.as_ref()).unwrap_or_else(|| self.now())
    }

    fn deletion_rules(&mut self, rules: &[crate::ray::v1::DeletionRule]) {
        let job_status = self.st.job_status.clone().unwrap_or_default();
        let deployment = self.st.job_deployment_status.clone().unwrap_or_default();
        let mut overdue: Option<DeletionPolicyType> = None;
        for rule in rules {
            let condition = &rule.condition;
            let matches = condition.job_status.as_deref() == Some(job_status.as_str())
                || condition.job_deployment_status.as_deref() == Some(deployment.as_str());
            if !matches {
                continue;
            }
            let due = self.end_time() + i64::from(condition.ttl_seconds.unwrap_or(0));
            if self.now() < due {
                self.wake_at(due + 1);
            } else if !self.achieved(rule.policy)
                && overdue.is_none_or(|o| impact(rule.policy) > impact(o))
            {
                overdue = Some(rule.policy);
            }
        }
        if let Some(policy) = overdue {
            self.apply_policy(policy);
        }
    }

    fn live_cluster(&self) -> Option<&'a RayCluster> {
        self.s
            .cluster
            .filter(|c| c.metadata.deletion_timestamp.is_none() && self.owns(c))
    }

    fn achieved(&self, policy: DeletionPolicyType) -> bool {
        match policy {
            DeletionPolicyType::DeleteNone => true,
            DeletionPolicyType::DeleteSelf => false,
            DeletionPolicyType::DeleteCluster => self.live_cluster().is_none(),
            DeletionPolicyType::DeleteWorkers => self.live_cluster().is_none_or(|c| {
                c.spec
                    .worker_group_specs
                    .iter()
                    .flatten()
                    .all(|g| g.suspend == Some(true))
            }),
        }
    }

    fn apply_policy(&mut self, policy: DeletionPolicyType) {
        match policy {
            DeletionPolicyType::DeleteNone => {}
            DeletionPolicyType::DeleteSelf => {
                self.actions.push(Action::DeleteRayJob);
            }
            DeletionPolicyType::DeleteCluster => {
                if self.live_cluster().is_some() {
                    let name = self.cluster_name();
                    self.actions
                        .push(Action::DeleteRayCluster { name: name.clone() });
                    self.event(
                        false,
                        "DeletedRayCluster",
                        format!("Deleted RayCluster {name} (policy DeleteCluster)"),
                    );
                }
            }
            DeletionPolicyType::DeleteWorkers => {
                if let Some(cluster) = self.live_cluster() {
                    let groups: Vec<usize> = cluster
                        .spec
                        .worker_group_specs
                        .iter()
                        .flatten()
                        .enumerate()
                        .filter(|(_, g)| g.suspend != Some(true))
                        .map(|(i, _)| i)
                        .collect();
                    let name = self.cluster_name();
                    self.actions.push(Action::SuspendWorkerGroups {
                        name: name.clone(),
                        groups,
                    });
                    self.event(
                        false,
                        "SuspendedWorkerGroups",
                        format!("Suspended the worker groups of RayCluster {name} (policy DeleteWorkers)"),
                    );
                }
            }
        }
    }

    // ---- checks -------------------------------------------------------------------------

    fn start_time(&self) -> i64 {
        seconds(self.st.start_time.as_ref()).unwrap_or_else(|| self.now())
    }

    fn active_deadline_exceeded(&mut self) -> bool {
        let Some(limit) = self.s.job.spec.active_deadline_seconds.filter(|l| *l > 0) else {
            return false;
        };
        let start = self.start_time();
        let due = start + i64::from(limit);
        if self.now() < due {
            self.wake_at(due);
            return false;
        }
        self.fail(
            reason::DEADLINE_EXCEEDED,
            format!(
                "The RayJob has passed the activeDeadlineSeconds. StartTime: {}. ActiveDeadlineSeconds: {limit}",
                go_time(start)
            ),
        );
        true
    }

    fn pre_running_deadline_exceeded(&mut self) -> bool {
        let Some(limit) = self
            .s
            .job
            .spec
            .pre_running_deadline_seconds
            .filter(|l| *l > 0)
        else {
            return false;
        };
        let start = self.start_time();
        let due = start + i64::from(limit);
        if self.now() < due {
            self.wake_at(due);
            return false;
        }
        self.fail(
            reason::PRE_RUNNING_DEADLINE_EXCEEDED,
            format!(
                "The RayJob has passed the preRunningDeadlineSeconds. StartTime: {}. PreRunningDeadlineSeconds: {limit}",
                go_time(start)
            ),
        );
        true
    }

    fn grace_period_exceeded(&mut self) -> bool {
        let job_status = self.st.job_status.clone().unwrap_or_default();
        if !is_terminal_job_status(&job_status) {
            return false;
        }
        let Some(end) = seconds(
            self.st
                .ray_job_info
                .as_ref()
                .and_then(|i| i.end_time.as_ref()),
        ) else {
            return false;
        };
        let due = end + self.s.config.transition_grace_period_seconds;
        if self.now() < due {
            self.wake_at(due);
            return false;
        }
        if job_status == "FAILED" {
            self.set_state(DeploymentStatus::Failed);
        } else {
            self.set_state(DeploymentStatus::Complete);
        }
        self.st.reason = Some(reason::GRACE_PERIOD_EXCEEDED.to_string());
        self.st.message = Some("JobDeploymentStatus does not transition to Complete or Failed within the grace period after JobStatus reaches a terminal state.".to_string());
        true
    }

    fn status_check_timed_out(&mut self) -> bool {
        let Some(since) = seconds(self.st.job_status_check_failure_start_time.as_ref()) else {
            return false;
        };
        let timeout = self.s.config.status_check_timeout_seconds;
        if self.now() < since + timeout {
            self.wake_at(since + timeout);
            return false;
        }
        self.fail(
            reason::STATUS_CHECK_TIMEOUT,
            format!(
                "Job status checks have been failing since {}; exceeded timeout of {timeout}s",
                go_time(since)
            ),
        );
        true
    }

    // ---- children -------------------------------------------------------------------------

    fn owns(&self, cluster: &RayCluster) -> bool {
        let uid = self.s.job.metadata.uid.as_deref().unwrap_or_default();
        cluster
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == uid && o.kind == "RayJob")
    }

    /// The RayCluster of this attempt, creating it when missing. `None`: not usable yet.
    fn cluster_or_create(&mut self) -> Option<&'a RayCluster> {
        let name = self.cluster_name();
        match self.s.cluster {
            Some(cluster) if cluster.metadata.deletion_timestamp.is_some() => {
                self.requeue_within(SLOW_REQUEUE);
                None
            }
            Some(cluster) => Some(cluster),
            None if self.selector_mode() => {
                let ns = self.s.job.metadata.namespace.clone().unwrap_or_default();
                self.event(
                    true,
                    "RayClusterNotFound",
                    format!("RayCluster {ns}/{name} set in the clusterSelector is not found. It must be created manually"),
                );
                self.requeue_within(SLOW_REQUEUE);
                None
            }
            None => {
                let cluster = ray_cluster_for_job(
                    self.s.job,
                    &name,
                    &self.job_id(),
                    self.s.volcano,
                    self.s.config.login_shell,
                )?;
                self.actions
                    .push(Action::CreateRayCluster(Box::new(cluster)));
                self.event(
                    false,
                    "CreatedRayCluster",
                    format!("Created RayCluster {name}"),
                );
                None
            }
        }
    }

    /// Running: `<rayjob>-head-svc` exists and selects the head of the current cluster
    /// (docs/upstream.md, "KubeRay: RayJob head Service").
    fn sync_job_head_service(&mut self, cluster: &RayCluster) {
        let options = BuildOptions {
            cluster_domain: self.s.config.cluster_domain.clone(),
            head_cluster_ip: self.s.config.head_cluster_ip,
        };
        let desired = job_head_service(self.s.job, cluster, &options);
        let name = job_head_service_name(self.s.job);
        match self.s.job_head_service {
            None => {
                self.actions.push(Action::CreateService(Box::new(desired)));
                let ns = self.s.job.metadata.namespace.clone().unwrap_or_default();
                self.event(
                    false,
                    "CreatedService",
                    format!("Created service {ns}/{name}"),
                );
            }
            Some(live) => {
                if let Some(patch) = job_head_service_patch(live, &desired) {
                    self.actions.push(Action::PatchService { name, patch });
                }
            }
        }
    }

    fn submitter_state(&self) -> SubmitterState {
        match self.mode {
            SubmissionMode::K8sJob => self.k8s_submitter_state(),
            SubmissionMode::Sidecar => self.sidecar_submitter_state(),
            SubmissionMode::Http | SubmissionMode::Interactive => SubmitterState::default(),
        }
    }

    fn k8s_submitter_state(&self) -> SubmitterState {
        let mut state = SubmitterState::default();
        let conditions = self
            .s
            .submitter
            .and_then(|j| j.status.as_ref())
            .and_then(|s| s.conditions.as_ref());
        for condition in conditions.into_iter().flatten() {
            if condition.status != "True" {
                continue;
            }
            match condition.type_.as_str() {
                "Complete" => {
                    state.finished_at = state
                        .finished_at
                        .or_else(|| seconds(condition.last_transition_time.as_ref()))
                        .or(Some(self.now()));
                }
                "Failed" => {
                    state.finished_at = state
                        .finished_at
                        .or_else(|| seconds(condition.last_transition_time.as_ref()))
                        .or(Some(self.now()));
                    state.failure = Some(format!(
                        "Job submission has failed. Reason: {}. Message: {}",
                        condition.reason.as_deref().unwrap_or_default(),
                        condition.message.as_deref().unwrap_or_default()
                    ));
                }
                _ => {}
            }
        }
        state
    }

    fn sidecar_submitter_state(&self) -> SubmitterState {
        let mut state = SubmitterState::default();
        let Some(pod) = self.s.head_pod else {
            state.failure = Some("Ray head pod not found.".to_string());
            return state;
        };
        let terminated = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.name == SUBMITTER_CONTAINER))
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.terminated.as_ref());
        if let Some(terminated) = terminated {
            state.finished_at = seconds(terminated.finished_at.as_ref()).or(Some(self.now()));
            if terminated.exit_code != 0 {
                state.failure = Some(format!(
                    "Ray head pod container {SUBMITTER_CONTAINER} terminated with exit code {}: {}",
                    terminated.exit_code,
                    terminated.reason.as_deref().unwrap_or_default()
                ));
            }
        }
        state
    }

    /// Initializing / Running: the RayJob's PodGroup exists with the spec's gang (re-synced on
    /// drift). Only in Volcano namespaces, and not in clusterSelector mode.
    fn sync_desired_gang(&mut self) -> Result<(), String> {
        if !self.s.volcano || self.selector_mode() {
            return Ok(());
        }
        let pod_group = sizing::ray_job_pod_group(self.s.job).map_err(|e| e.to_string())?;
        match self.s.pod_group {
            None => {
                let name = pod_group.metadata.name.clone().unwrap_or_default();
                self.actions
                    .push(Action::CreatePodGroup(Box::new(pod_group)));
                self.event(false, "CreatedPodGroup", format!("Created PodGroup {name}"));
            }
            Some(live) => {
                let min_member = pod_group.spec.min_member.unwrap_or(0);
                let min_resources = pod_group.spec.min_resources.unwrap_or_default();
                if !sizing::pod_group_holds_gang(&live.spec, min_member, &min_resources) {
                    self.actions.push(Action::ResizePodGroup(PodGroupSize {
                        name: live.metadata.name.clone().unwrap_or_default(),
                        min_member,
                        min_resources,
                    }));
                }
            }
        }
        Ok(())
    }

    /// Initializing with a cluster that is not ready: `status.message` says what Volcano reports
    /// about the gang (cleared when it reports nothing), and a Warning Event records each new
    /// explanation.
    fn explain_gang_wait(&mut self) {
        let message = self
            .s
            .pod_group
            .filter(|_| self.s.volcano && !self.selector_mode())
            .and_then(gang_wait_message);
        if message == self.st.message {
            return;
        }
        if let Some(text) = &message {
            self.event(true, "GangUnschedulable", text.clone());
        }
        self.st.message = message;
    }

    /// Complete / Failed / Suspending / Retrying: the PodGroup, if it exists, holds what is
    /// actually left (`None`: nothing).
    fn settle_gang(&mut self, gang: Option<GangSize>) {
        let Some(live) = self.s.pod_group.filter(|_| self.s.volcano) else {
            return;
        };
        let (min_member, min_resources) = match gang {
            Some(g) => (
                g.min_member,
                g.min_resources
                    .into_iter()
                    .map(|(k, v)| (k, v.to_quantity()))
                    .collect(),
            ),
            None => (0, BTreeMap::new()),
        };
        if !sizing::pod_group_holds_gang(&live.spec, min_member, &min_resources) {
            let name = live.metadata.name.clone().unwrap_or_default();
            self.actions.push(Action::ResizePodGroup(PodGroupSize {
                name: name.clone(),
                min_member,
                min_resources,
            }));
            self.event(
                false,
                "BatchSchedulerCleanedUp",
                format!("PodGroup {name} resized to minMember {min_member}"),
            );
        }
    }

    // ---- the common tail ------------------------------------------------------------------

    fn finish(mut self, flow: Flow) -> Decision {
        if let Flow::Break = flow {
            self.counters_and_retry();
        }
        if self.st != self.old {
            let before = DeploymentStatus::parse(self.old.job_deployment_status.as_deref());
            let after = self.state();
            if after.is_terminal() && before != after {
                self.st.end_time = Some(self.now_time());
            }
            self.actions
                .push(Action::UpdateStatus(Box::new(self.st.clone())));
            if before != after {
                let from = match before.as_str() {
                    "" => "New",
                    other => other,
                };
                let to = match after.as_str() {
                    "" => "New",
                    other => other,
                };
                let mut message = format!("RayJob deployment status changed from {from} to {to}");
                if let (Some(why), Some(detail)) = (&self.st.reason, &self.st.message)
                    && !why.is_empty()
                {
                    message.push_str(&format!(": {why}: {detail}"));
                }
                let warning = matches!(
                    after,
                    DeploymentStatus::Failed | DeploymentStatus::ValidationFailed
                ) || (after == DeploymentStatus::Retrying);
                self.event(warning, to, message);
            }
        }
        Decision {
            actions: self.actions,
            requeue_after: self.requeue,
        }
    }

    /// KubeRay's counters and retry rule (docs/upstream.md, "KubeRay: RayJob controller").
    fn counters_and_retry(&mut self) {
        let state = self.state();
        let mut failed = self.st.failed.unwrap_or(0);
        let mut succeeded = self.st.succeeded.unwrap_or(0);
        if state == DeploymentStatus::Failed {
            failed += 1;
        }
        if state == DeploymentStatus::Complete && self.st.job_status.as_deref() == Some("SUCCEEDED")
        {
            succeeded += 1;
        }
        self.st.failed = Some(failed);
        self.st.succeeded = Some(succeeded);
        let retryable = !matches!(
            self.st.reason.as_deref(),
            Some(reason::DEADLINE_EXCEEDED | reason::STATUS_CHECK_TIMEOUT)
        );
        if state == DeploymentStatus::Failed
            && retryable
            && let Some(limit) = self.s.job.spec.backoff_limit
            && failed < limit.saturating_add(1)
        {
            self.set_state(DeploymentStatus::Retrying);
        }
    }
}

/// DeleteSelf > DeleteCluster > DeleteWorkers > DeleteNone.
fn impact(policy: DeletionPolicyType) -> u8 {
    match policy {
        DeletionPolicyType::DeleteSelf => 4,
        DeletionPolicyType::DeleteCluster => 3,
        DeletionPolicyType::DeleteWorkers => 2,
        DeletionPolicyType::DeleteNone => 1,
    }
}
