//! `scheduling.volcano.sh/v1beta1` PodGroup and Queue (the parts raygate reads and writes).
//!
//! Volcano installs these CRDs itself; raygate only uses the types. PodGroup has no status
//! subresource, so its spec must always be changed with patches that leave `status` alone.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A gang: `minMember` Pods annotated with the group's name are bound together or not at all.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "PodGroup",
    namespaced,
    status = "PodGroupStatus",
    shortname = "pg"
)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// Gang size: no member starts until this many can run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_member: Option<i32>,
    /// Per-task minimum, keyed by the `volcano.sh/task-spec` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_task_member: Option<BTreeMap<String, i32>>,
    /// Queue the gang is admitted through (CRD default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Priority class of the gang.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Resources the queue must reserve before the gang is admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// Network-topology constraint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
    /// Sub-gangs inside the gang (Volcano v1.14; older PodGroup CRDs prune the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_policy: Option<Vec<SubGroupPolicySpec>>,
}

/// One entry of a PodGroup's `spec.subGroupPolicy` (Volcano v1.14).
///
/// Volcano puts each member Pod into the first policy whose `labelSelector` it matches and
/// that finds every `matchLabelKeys` label on it, non-empty; Pods with equal values of those
/// labels form one sub-group. A sub-group binds only when `subGroupSize` of its Pods can, and
/// the whole gang only when at least `minSubGroups` of the policy's sub-groups can (see
/// docs/upstream.md, "Volcano: sub-groups").
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubGroupPolicySpec {
    /// Name of the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Which member Pods the policy covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Labels whose values split the covered Pods into sub-groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_label_keys: Option<Vec<String>>,
    /// Pods each sub-group needs bound together (CRD default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_size: Option<i32>,
    /// Sub-groups that must be able to bind before any Pod of the gang does (CRD default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_sub_groups: Option<i32>,
    /// Network-topology constraint of each sub-group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
}

/// Network-topology constraint of a PodGroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopologySpec {
    /// `hard` or `soft`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Highest tier the gang may span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_tier_allowed: Option<i32>,
}

/// Observed state of a PodGroup, written by Volcano.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// `Pending`, `Inqueue`, `Running`, `Unknown` or `Completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `Scheduled` / `Unschedulable` conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PodGroupCondition>>,
    /// Running members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<i32>,
    /// Succeeded members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,
    /// Failed members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
}

/// A PodGroup condition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupCondition {
    /// `Scheduled` or `Unschedulable`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// `True`, `False` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Scheduling cycle that set the condition.
    #[serde(
        default,
        rename = "transitionID",
        skip_serializing_if = "Option::is_none"
    )]
    pub transition_id: Option<String>,
    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A Volcano queue (cluster-scoped).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "Queue",
    status = "QueueStatus",
    shortname = "q"
)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    /// Share weight (1–65535).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Hard upper bound of what the queue may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<BTreeMap<String, Quantity>>,
    /// Whether other queues may reclaim from this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimable: Option<bool>,
    /// Reclaimable entitlement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deserved: Option<BTreeMap<String, Quantity>>,
    /// Reserved resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<Guarantee>,
    /// Parent queue in the hierarchy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Scheduling priority of the queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Queue type.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// `fifo` or `traverse`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dequeue_strategy: Option<String>,
}

/// Reserved resources of a queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Guarantee {
    /// The reserved resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<BTreeMap<String, Quantity>>,
}

/// Observed state of a queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// `Open`, `Closed`, `Closing` or `Unknown`; empty counts as `Open`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Resources allocated to the queue's Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<BTreeMap<String, Quantity>>,
    /// PodGroups of the queue in phase `Inqueue` (admitted, not yet running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inqueue: Option<i32>,
}

/// State of a queue as raygate reasons about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueState {
    /// Accepts new work.
    Open,
    /// The queue controller has not written a state yet; Volcano treats it as open.
    Unset,
    /// Closed, closing or unknown: accepts no new work.
    NotOpen,
}

impl Queue {
    /// The queue's state; an empty state counts as [`QueueState::Unset`].
    pub fn state(&self) -> QueueState {
        match self.status.as_ref().and_then(|s| s.state.as_deref()) {
            None | Some("") => QueueState::Unset,
            Some("Open") => QueueState::Open,
            Some(_) => QueueState::NotOpen,
        }
    }
}
