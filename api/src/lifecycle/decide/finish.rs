//! The common tail of a pass: counters, retries, the status write and its Event.

use super::{Flow, Pass, reason, seconds};
use crate::lifecycle::{Action, Decision, DeploymentStatus};

/// How many seconds a change of the mirrored `rayClusterStatus` alone may wait, while the
/// cluster comes up, to be written with the next one (docs/reconciler.md, "The requests of one
/// RayJob").
const MIRROR_INTERVAL_SECONDS: i64 = 2;

impl<'s, 'a> Pass<'s, 'a> {
    /// Ends the pass: the common tail after [`Flow::Break`], then the status write (with the end
    /// time of a terminal state) and the Event of a state change.
    pub(super) fn finish(mut self, flow: Flow) -> Decision {
        if let Flow::Break = flow {
            self.counters_and_retry();
        }
        self.track_gang();
        self.hold_back_mirror_only_change();
        if self.st != self.old {
            let before = DeploymentStatus::parse(self.old.job_deployment_status.as_deref());
            let after = self.state();
            if after.is_terminal() && before != after {
                self.st.end_time = Some(self.now_time());
            }
            self.actions
                .push(Action::UpdateStatus(Box::new(self.st.clone())));
            // Progress (Initializing, Waiting, Running) is the status's to show, as KubeRay
            // shows it: an Event per step would cost every RayJob three more writes
            // (docs/reconciler.md, "The requests of one RayJob"). A run that ends, stops or
            // starts over gets one.
            if before != after && !after.is_progress() {
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

    /// While Initializing, a pass whose only change is the mirrored `rayClusterStatus` writes
    /// nothing if the stored copy (or, with none, the attempt's start) is less than
    /// [`MIRROR_INTERVAL_SECONDS`] old: it looks again when that interval is up, and a state
    /// change or any other field written before then carries the newest copy with it. A cluster
    /// coming up changes its status several times within a second; the RayJob's copy is at most
    /// that interval behind, and every transition is still written at once.
    fn hold_back_mirror_only_change(&mut self) {
        if self.state() != DeploymentStatus::Initializing
            || self.old.job_deployment_status != self.st.job_deployment_status
            || self.st.ray_cluster_status == self.old.ray_cluster_status
        {
            return;
        }
        let mut without_mirror = self.st.clone();
        without_mirror
            .ray_cluster_status
            .clone_from(&self.old.ray_cluster_status);
        if without_mirror != self.old {
            return;
        }
        let copied = self
            .old
            .ray_cluster_status
            .as_ref()
            .and_then(|s| seconds(s.last_update_time.as_ref()))
            .or_else(|| seconds(self.old.start_time.as_ref()));
        let Some(copied) = copied else {
            return;
        };
        let due = copied + MIRROR_INTERVAL_SECONDS;
        if self.now() < due {
            self.st = without_mirror;
            self.wake_at(due);
        }
    }

    /// KubeRay's counters and retry rule (docs/upstream.md, "KubeRay: RayJob controller").
    pub(super) fn counters_and_retry(&mut self) {
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
