//! Complete and Failed: the gang settled, then TTL and the deletion policies (`deletionStrategy`,
//! or `shutdownAfterJobFinishes`).

use super::{Flow, Pass, seconds};
use crate::features::Feature;
use crate::lifecycle::Action;
use crate::ray::v1::{DeletionPolicyType, DeletionRule, RayCluster};
use crate::sizing;

impl<'s, 'a> Pass<'s, 'a> {
    /// Complete / Failed: keep the gang honest, then apply the cleanup policy.
    pub(super) fn finished(&mut self) -> Flow {
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

    fn deletion_rules(&mut self, rules: &[DeletionRule]) {
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
                    self.delete_cluster(" (policy DeleteCluster)");
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
