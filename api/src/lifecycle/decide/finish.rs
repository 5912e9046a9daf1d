//! The common tail of a pass: counters, retries, the status write and its Event.

use super::{Flow, Pass, reason};
use crate::lifecycle::{Action, Decision, DeploymentStatus};

impl<'s, 'a> Pass<'s, 'a> {
    /// Ends the pass: the common tail after [`Flow::Break`], then the status write (with the end
    /// time of a terminal state) and the Event of a state change.
    pub(super) fn finish(mut self, flow: Flow) -> Decision {
        if let Flow::Break = flow {
            self.counters_and_retry();
        }
        self.track_gang();
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
