//! Running: the Ray job, as the dashboard reports it, and its submitter tracked to a terminal
//! state.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::{Flow, Pass, go_time, reason, seconds};
use crate::lifecycle::submitter::submit_request;
use crate::lifecycle::{
    Action, DEFAULT_REQUEUE, DeploymentStatus, RayJobObservation, SUBMITTER_CONTAINER,
    SUBMITTER_FINISHED_TIMEOUT_SECONDS, SubmissionMode, is_terminal_job_status,
};
use crate::ray::v1::RayJobStatusInfo;

/// What the submitter's own state says.
#[derive(Default)]
struct SubmitterState {
    /// When it finished (epoch seconds), if it has.
    finished_at: Option<i64>,
    /// `(reason, message)` when it failed.
    failure: Option<String>,
}

impl<'s, 'a> Pass<'s, 'a> {
    /// Running: suspension and deadlines first, then the cluster and head Service, then the Ray
    /// job's status as the dashboard reports it, read with the submitter's.
    pub(super) fn running(&mut self) -> Flow {
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
        let cluster = match self.gang_and_cluster() {
            Ok(cluster) => cluster,
            Err(flow) => return flow,
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
}

/// A time the dashboard reports (epoch milliseconds, 0 or absent when unknown).
fn time_from_millis(millis: Option<i64>) -> Option<Time> {
    millis
        .filter(|m| *m > 0)
        .and_then(|m| Timestamp::from_millisecond(m).ok())
        .map(Time)
}
