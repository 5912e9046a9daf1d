//! The RayJob's children: its RayCluster and its head Service.

use super::{Flow, Pass, SLOW_REQUEUE};
use crate::lifecycle::Action;
use crate::lifecycle::cluster::{
    job_head_service, job_head_service_name, job_head_service_patch, ray_cluster_for_job,
};
use crate::ray::v1::RayCluster;

impl<'s, 'a> Pass<'s, 'a> {
    /// Whether `cluster` has an owner reference to this RayJob.
    pub(super) fn owns(&self, cluster: &RayCluster) -> bool {
        let uid = self.s.job.metadata.uid.as_deref().unwrap_or_default();
        cluster
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == uid && o.kind == "RayJob")
    }

    /// The RayCluster of this attempt, creating it when missing. `None`: not usable yet.
    /// Deletes the current attempt's RayCluster, recording why after its name (`note`).
    pub(super) fn delete_cluster(&mut self, note: &str) {
        let name = self.cluster_name();
        self.actions
            .push(Action::DeleteRayCluster { name: name.clone() });
        self.event(
            false,
            "DeletedRayCluster",
            format!("Deleted RayCluster {name}{note}"),
        );
    }

    /// The gang sized for the spec, then the current attempt's RayCluster (`Err`: how the pass
    /// goes on when there is none to work with yet, or the gang cannot be sized).
    pub(super) fn gang_and_cluster(&mut self) -> Result<&'a RayCluster, Flow> {
        if let Err(message) = self.sync_desired_gang() {
            self.validation_failed(message);
            return Err(Flow::Break);
        }
        self.cluster_or_create().ok_or(Flow::Return)
    }

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
    pub(super) fn sync_job_head_service(&mut self, cluster: &RayCluster) {
        let desired = job_head_service(self.s.job, cluster, &self.s.config.build);
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
}
