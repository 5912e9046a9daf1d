//! The RayJob's Volcano PodGroup: created with the spec's gang, resized as the attempt ends,
//! and what Volcano says about it while the cluster waits.

use std::collections::BTreeMap;

use super::Pass;
use crate::cluster;
use crate::feasibility::{self, RayObject};
use crate::lifecycle::gang::gang_wait_message;
use crate::lifecycle::{Action, DeploymentStatus, PodGroupSize};
use crate::pending::{self, GangState};
use crate::sizing::{self, GangSize};
use crate::volcano::PodGroup;

impl<'s, 'a> Pass<'s, 'a> {
    /// Initializing / Running: the RayJob's PodGroup exists with the spec's gang (re-synced on
    /// drift). Only in Volcano namespaces, and not in clusterSelector mode.
    pub(super) fn sync_desired_gang(&mut self) -> Result<(), String> {
        if !self.s.volcano || self.selector_mode() {
            return Ok(());
        }
        let mut pod_group = sizing::ray_job_pod_group(self.s.job).map_err(|e| e.to_string())?;
        if !self.s.sub_groups {
            pod_group.spec.sub_group_policy = None;
        }
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
                let sub_groups = (self.s.sub_groups)
                    .then(|| pod_group.spec.sub_group_policy.unwrap_or_default());
                if !sizing::pod_group_holds_gang(
                    &live.spec,
                    min_member,
                    &min_resources,
                    sub_groups.as_deref(),
                ) {
                    self.actions.push(Action::ResizePodGroup(PodGroupSize {
                        name: live.metadata.name.clone().unwrap_or_default(),
                        min_member,
                        min_resources,
                        sub_group_policy: sub_groups,
                    }));
                }
            }
        }
        Ok(())
    }

    /// Initializing with a cluster that is not ready: once the gang waits for a cause
    /// ([`pending::gang_state`]), `status.message` says what Volcano reports about it, until
    /// Volcano reports nothing or the gang is bound. The `GangPending` condition's Warning Event records each new cause
    /// ([`Self::track_gang`]), so this adds none.
    pub(super) fn explain_gang_wait(&mut self) {
        let message = match self.s.pod_group {
            Some(pod_group) if self.holds_gang() => match self.gang_state(pod_group) {
                GangState::Waiting { .. } => gang_wait_message(pod_group),
                // A gang on its way (Pods still being made) gets no word; one that has one
                // follows Volcano's.
                GangState::Undetermined => self
                    .st
                    .message
                    .as_ref()
                    .and_then(|_| gang_wait_message(pod_group)),
                GangState::Clear { .. } => None,
            },
            _ => None,
        };
        self.st.message = message;
    }

    /// Complete / Failed / Suspending / Retrying: the PodGroup, if it exists, holds what is
    /// actually left (`None`: nothing).
    pub(super) fn settle_gang(&mut self, gang: Option<GangSize>) {
        let Some(live) = self.s.pod_group.filter(|_| self.s.volcano) else {
            return;
        };
        let (min_member, min_resources, sub_groups) = match gang {
            Some(g) => (
                g.min_member,
                g.min_resources
                    .into_iter()
                    .map(|(k, v)| (k, v.to_quantity()))
                    .collect(),
                g.sub_groups,
            ),
            None => (0, BTreeMap::new(), Vec::new()),
        };
        let sub_groups = self.s.sub_groups.then_some(sub_groups);
        if !sizing::pod_group_holds_gang(
            &live.spec,
            min_member,
            &min_resources,
            sub_groups.as_deref(),
        ) {
            let name = live.metadata.name.clone().unwrap_or_default();
            self.actions.push(Action::ResizePodGroup(PodGroupSize {
                name: name.clone(),
                min_member,
                min_resources,
                sub_group_policy: sub_groups,
            }));
            self.event(
                false,
                "BatchSchedulerCleanedUp",
                format!("PodGroup {name} resized to minMember {min_member}"),
            );
        }
    }

    /// The `GangPending` condition (docs/reconciler.md, "Why a gang is pending"): while the
    /// RayJob holds a gang (Initializing, Waiting, Running, in a Volcano namespace, not in
    /// clusterSelector mode), why Volcano has not bound it, from the PodGroup, its queue and its
    /// Pods; in any other state a waiting condition is cleared. A Warning Event marks each new
    /// cause.
    pub(super) fn track_gang(&mut self) {
        let state = self.state();
        let gang = if self.holds_gang() {
            match self.s.pod_group {
                Some(pod_group) => self.gang_state(pod_group),
                None => GangState::Undetermined,
            }
        } else {
            let shown = match state.as_str() {
                "" => "New",
                other => other,
            };
            pending::released(&format!("RayJob is {shown}"))
        };
        let before = self.st.conditions.clone().unwrap_or_default();
        let after = pending::with_gang_condition(&before, &gang, &self.now_time());
        if after == before {
            return;
        }
        if let Some(event) = pending::pending_event(&before, &after) {
            self.actions.push(Action::Event(event));
        }
        self.st.conditions = Some(after);
    }

    /// Whether the RayJob holds a gang now: Initializing, Waiting or Running, in a Volcano
    /// namespace, not in clusterSelector mode.
    fn holds_gang(&self) -> bool {
        matches!(
            self.state(),
            DeploymentStatus::Initializing | DeploymentStatus::Waiting | DeploymentStatus::Running
        ) && self.s.volcano
            && !self.selector_mode()
    }

    /// Why `pod_group` waits, if it does, with the cluster's Pod creation failure and what the
    /// nodes could never hold (judged only while Volcano has not bound the gang).
    fn gang_state(&self, pod_group: &PodGroup) -> GangState {
        let infeasible = if pending::waits_on_queue(pod_group) {
            feasibility::infeasibilities(RayObject::RayJob(self.s.job), self.s.nodes)
        } else {
            Vec::new()
        };
        pending::gang_state(
            pod_group,
            self.s.queue,
            self.s.gang_pods,
            self.s
                .cluster
                .and_then(|c| cluster::status::replica_failure(c.status.as_ref())),
            &infeasible,
        )
    }
}
