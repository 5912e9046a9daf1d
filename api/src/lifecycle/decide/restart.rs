//! Suspending, Retrying, Suspended and ValidationFailed: an attempt torn down and started over.

use super::{Flow, Pass, SLOW_REQUEUE};
use crate::lifecycle::{Action, DeploymentStatus};
use crate::ray::v1::{RayClusterStatus, RayJobStatusInfo};

impl<'s, 'a> Pass<'s, 'a> {
    /// Suspending / Retrying: delete what this attempt created, then reset the attempt.
    pub(super) fn tear_down(&mut self, next: DeploymentStatus) -> Flow {
        let mut waiting = false;
        if !self.selector_mode()
            && let Some(cluster) = self.s.cluster
            && self.owns(cluster)
        {
            waiting = true;
            if cluster.metadata.deletion_timestamp.is_none() {
                self.delete_cluster("");
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

    /// Suspended: stays until `spec.suspend` is cleared, then starts over as New.
    pub(super) fn suspended(&mut self) -> Flow {
        if self.s.job.spec.suspend == Some(true) {
            return Flow::Return;
        }
        self.st.job_status = Some(String::new());
        self.set_state(DeploymentStatus::New);
        Flow::Break
    }

    /// A ValidationFailed RayJob whose spec validates again starts over (upstream never leaves
    /// the state, docs/upstream.md, "KubeRay: known defects", 1).
    pub(super) fn revalidated(&mut self) -> Flow {
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
}
