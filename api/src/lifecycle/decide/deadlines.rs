//! The deadlines and timeouts that end an attempt: `activeDeadlineSeconds`,
//! `preRunningDeadlineSeconds`, the transition grace period and the status-check timeout.

use super::{Pass, go_time, reason, seconds};
use crate::lifecycle::{DeploymentStatus, is_terminal_job_status};

impl<'s, 'a> Pass<'s, 'a> {
    fn start_time(&self) -> i64 {
        seconds(self.st.start_time.as_ref()).unwrap_or_else(|| self.now())
    }

    /// `activeDeadlineSeconds` has passed since the start: the attempt fails (`true`); until then,
    /// a wake-up at the deadline.
    pub(super) fn active_deadline_exceeded(&mut self) -> bool {
        let limit = self.s.job.spec.active_deadline_seconds;
        self.deadline_exceeded(limit, "activeDeadlineSeconds", reason::DEADLINE_EXCEEDED)
    }

    /// `preRunningDeadlineSeconds` has passed since the start: the attempt fails (`true`); until
    /// then, a wake-up at the deadline.
    pub(super) fn pre_running_deadline_exceeded(&mut self) -> bool {
        let limit = self.s.job.spec.pre_running_deadline_seconds;
        self.deadline_exceeded(
            limit,
            "preRunningDeadlineSeconds",
            reason::PRE_RUNNING_DEADLINE_EXCEEDED,
        )
    }

    /// A deadline of `limit` seconds (`field` of the spec; unset or 0: none) has passed since
    /// the start: the attempt fails with `failure` and KubeRay's message (`true`); until then, a
    /// wake-up at the deadline.
    fn deadline_exceeded(&mut self, limit: Option<i32>, field: &str, failure: &str) -> bool {
        let Some(limit) = limit.filter(|l| *l > 0) else {
            return false;
        };
        let start = self.start_time();
        let due = start + i64::from(limit);
        if self.now() < due {
            self.wake_at(due);
            return false;
        }
        // KubeRay names the field again, capitalised, before the limit.
        let mut capitalised = field.to_string();
        capitalised[..1].make_ascii_uppercase();
        self.fail(
            failure,
            format!(
                "The RayJob has passed the {field}. StartTime: {}. {capitalised}: {limit}",
                go_time(start)
            ),
        );
        true
    }

    /// The Ray job is terminal but the deployment status has not followed within the transition
    /// grace period: it follows now (`true`).
    pub(super) fn grace_period_exceeded(&mut self) -> bool {
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

    /// Status checks have failed for longer than the status-check timeout: the attempt fails
    /// (`true`).
    pub(super) fn status_check_timed_out(&mut self) -> bool {
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
}
