//! New, Initializing and Waiting: the attempt's identity, then its cluster and submitter.

use super::{Flow, Pass};
use crate::lifecycle::cluster::dashboard_url;
use crate::lifecycle::submitter::submitter_job;
use crate::lifecycle::{Action, DeploymentStatus, SubmissionMode};

impl<'s, 'a> Pass<'s, 'a> {
    /// New: the attempt's identity is written first, then the same pass goes on as
    /// Initializing (its PodGroup and RayCluster), so a RayJob gets its cluster one pass
    /// sooner, not after its own status write has come back through the watch and the queue of
    /// every other RayJob. The order keeps a crash harmless: nothing is created before the
    /// identity it is named by is stored, and a pass that stops after the status write is
    /// continued by the next, as Initializing. In clusterSelector mode the pass stops after the
    /// identity: the selected cluster was not among what it read.
    pub(super) fn start_attempt(&mut self) -> Flow {
        let flow = self.new_attempt();
        if self.selector_mode() {
            return flow;
        }
        self.counters_and_retry();
        self.actions
            .push(Action::UpdateStatus(Box::new(self.st.clone())));
        self.old = self.st.clone();
        self.initializing()
    }

    /// Chooses this attempt's identity, to be written before anything is created with it.
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

    /// Initializing: suspension and deadlines first, then the PodGroup and the cluster; once the
    /// cluster is ready, its dashboard URL and the submitter, then Running (Waiting in
    /// InteractiveMode).
    pub(super) fn initializing(&mut self) -> Flow {
        if self.s.job.spec.suspend == Some(true) {
            self.set_state(DeploymentStatus::Suspending);
            return Flow::Break;
        }
        if self.active_deadline_exceeded() || self.pre_running_deadline_exceeded() {
            return Flow::Break;
        }
        let cluster = match self.gang_and_cluster() {
            Ok(cluster) => cluster,
            Err(flow) => return flow,
        };
        // KubeRay mirrors the cluster's status with every write of the RayJob's, the ready one
        // included. A cluster without a status yet has nothing to mirror: copying an empty one
        // would cost a write that says nothing.
        if let Some(status) = &cluster.status {
            self.st.ray_cluster_status = Some(status.clone());
        }
        if self.st.dashboard_url.as_deref().is_none_or(str::is_empty) {
            let state = cluster.status.as_ref().and_then(|s| s.state.as_deref());
            if state != Some("ready") {
                self.explain_gang_wait();
                return Flow::Break;
            }
            self.st.dashboard_url =
                Some(dashboard_url(cluster, &self.s.config.build.cluster_domain));
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

    /// Waiting (InteractiveMode): Running once `spec.jobId` names the job the user submitted.
    pub(super) fn waiting(&mut self) -> Flow {
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
}
