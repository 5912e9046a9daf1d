//! The status of a RayCluster computed from what exists (docs/upstream.md,
//! "KubeRay: RayCluster controller").

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::Value;

use crate::keys;
use crate::keys::{HEAD_NODE_TYPE, WORKER_NODE_TYPE};
use crate::quantity::ResourceQuantity;
use crate::ray::v1::{HeadInfo, RayCluster, RayClusterStatus, WorkerGroupSpec};
use crate::sizing;

/// `status.state` once every Pod is Running and Ready.
pub const STATE_READY: &str = "ready";
/// `status.state` while suspended with no Pod left.
pub const STATE_SUSPENDED: &str = "suspended";
/// `status.state` of a cluster raygate cannot run (invalid spec).
pub const STATE_FAILED: &str = "failed";

/// Condition: every Pod has been Running and Ready once.
pub const CONDITION_PROVISIONED: &str = "RayClusterProvisioned";
/// Condition: mirrors the head Pod's `Ready` condition.
pub const CONDITION_HEAD_POD_READY: &str = "HeadPodReady";
/// Condition: a Pod could not be created or deleted.
pub const CONDITION_REPLICA_FAILURE: &str = "ReplicaFailure";
/// Condition: `spec.suspend` is true and Pods remain.
pub const CONDITION_SUSPENDING: &str = "RayClusterSuspending";
/// Condition: `spec.suspend` is true and no Pod remains.
pub const CONDITION_SUSPENDED: &str = "RayClusterSuspended";

/// Status fields the controller owns; a merge patch writes `null` for those it leaves unset,
/// so a value computed earlier (a head Pod IP, a state) does not linger.
const OWNED_FIELDS: &[&str] = &[
    "state",
    "readyWorkerReplicas",
    "availableWorkerReplicas",
    "desiredWorkerReplicas",
    "minWorkerReplicas",
    "maxWorkerReplicas",
    "desiredCPU",
    "desiredMemory",
    "desiredGPU",
    "desiredTPU",
    "lastUpdateTime",
    "stateTransitionTimes",
    "endpoints",
    "head",
    "reason",
    "conditions",
    "observedGeneration",
];

/// Whether a Pod is being deleted.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// The Pod's phase.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Whether the Pod is Running and its `Ready` condition is True.
pub fn is_running_and_ready(pod: &Pod) -> bool {
    phase(pod) == "Running" && ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// Whether the Pod is Running and ready as a Ray node: its `Ready` condition is True, or the
/// only container keeping it False is a SidecarMode submitter that has finished. A job shorter
/// than the head's first readiness pass ends its sidecar before the Pod was ever Ready, and the
/// Pod then never becomes Ready: judged by the `Ready` condition alone (as KubeRay does) its
/// cluster never turns `ready` and the RayJob waits in `Initializing` forever.
pub fn is_running_and_ready_as_ray_node(pod: &Pod) -> bool {
    if is_running_and_ready(pod) {
        return true;
    }
    let Some(statuses) = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
    else {
        return false;
    };
    let finished_submitter = statuses.iter().any(|c| {
        c.name == crate::lifecycle::SUBMITTER_CONTAINER
            && c.state.as_ref().is_some_and(|s| s.terminated.is_some())
    });
    phase(pod) == "Running"
        && finished_submitter
        && statuses
            .iter()
            .filter(|c| c.name != crate::lifecycle::SUBMITTER_CONTAINER)
            .all(|c| c.ready)
}

fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// A Pod's `ray.io/node-type` label.
pub fn node_type(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(keys::RAY_NODE_TYPE_LABEL)
        .map(String::as_str)
}

/// A Pod's `ray.io/group` label.
pub fn group(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(keys::RAY_GROUP_LABEL)
        .map(String::as_str)
}

/// Desired worker Pods of a group: 0 when suspended, else `replicas` (unset: `minReplicas`)
/// clamped into `[minReplicas, maxReplicas]`, times `numOfHosts`.
pub fn desired_pods(group: &WorkerGroupSpec) -> i64 {
    if group.suspend == Some(true) {
        return 0;
    }
    let min = group.min_replicas.unwrap_or(0).max(0);
    let max = group.max_replicas.unwrap_or(i32::MAX).max(0);
    let replicas = group.replicas.unwrap_or(min).clamp(min.min(max), max);
    i64::from(replicas) * i64::from(sizing::group_hosts(group))
}

fn saturate(n: i64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn condition(type_: &str, ok: bool, reason: &str, message: &str, now: &Time) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        last_transition_time: now.clone(),
        observed_generation: None,
    }
}

/// What the status computation needs besides the cluster.
pub struct StatusInput<'a> {
    /// The cluster's Pods (including terminating ones).
    pub pods: &'a [Pod],
    /// The head Service, when it exists.
    pub head_service: Option<&'a Service>,
    /// Why the cluster cannot be run (validation or sizing failure), if it cannot.
    pub failure: Option<String>,
    /// The current time.
    pub now: &'a Time,
}

/// The status the cluster should have now. `lastUpdateTime` is left as it was; see
/// [`finish`] for stamping it when something changed.
pub fn compute(cluster: &RayCluster, input: &StatusInput<'_>) -> RayClusterStatus {
    let old = cluster.status.clone().unwrap_or_default();
    let now = input.now;
    let groups = cluster
        .spec
        .worker_group_specs
        .as_deref()
        .unwrap_or_default();
    let active: Vec<&Pod> = input.pods.iter().filter(|p| !is_terminating(p)).collect();
    let workers: Vec<&&Pod> = active
        .iter()
        .filter(|p| node_type(p) == Some(WORKER_NODE_TYPE))
        .collect();
    let head = active.iter().find(|p| node_type(p) == Some(HEAD_NODE_TYPE));
    let desired_workers: i64 = groups.iter().map(desired_pods).sum();
    let per_group = |f: fn(&WorkerGroupSpec) -> i32| -> i64 {
        groups
            .iter()
            .filter(|g| g.suspend != Some(true))
            .map(|g| i64::from(f(g).max(0)) * i64::from(sizing::group_hosts(g)))
            .sum()
    };
    let min_workers = per_group(|g| g.min_replicas.unwrap_or(0));
    let max_workers = per_group(|g| g.max_replicas.unwrap_or(i32::MAX));

    let mut status = RayClusterStatus {
        ready_worker_replicas: Some(saturate(
            workers.iter().filter(|p| is_running_and_ready(p)).count() as i64,
        )),
        available_worker_replicas: Some(saturate(
            workers.iter().filter(|p| phase(p) == "Running").count() as i64,
        )),
        desired_worker_replicas: Some(saturate(desired_workers)),
        min_worker_replicas: Some(saturate(min_workers)),
        max_worker_replicas: Some(saturate(max_workers)),
        last_update_time: old.last_update_time.clone(),
        state_transition_times: old.state_transition_times.clone(),
        observed_generation: cluster.metadata.generation,
        ..RayClusterStatus::default()
    };
    set_desired_resources(cluster, &mut status);

    let service_name = input.head_service.and_then(|s| s.metadata.name.clone());
    let pod_ip = head
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.pod_ip.clone());
    let service_ip = input
        .head_service
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None")
        .or_else(|| pod_ip.clone());
    let head_info = HeadInfo {
        pod_ip: pod_ip.clone(),
        service_ip: service_name.as_ref().and(service_ip),
        pod_name: head.and_then(|p| p.metadata.name.clone()),
        service_name,
    };
    status.head = (head_info != HeadInfo::default()).then_some(head_info);
    let endpoints: BTreeMap<String, String> = input
        .head_service
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p.name.clone()?, p.port.to_string())))
        .collect();
    status.endpoints = (!endpoints.is_empty()).then_some(endpoints);

    let suspend = cluster.spec.suspend == Some(true);
    let all_ready = !active.is_empty()
        && active.len() as i64 == desired_workers + 1
        && active.iter().all(|p| is_running_and_ready_as_ray_node(p));
    let old_conditions = old.conditions.clone().unwrap_or_default();
    let was = |type_: &str| {
        old_conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    let had = |type_: &str| old_conditions.iter().any(|c| c.type_ == type_);

    let mut conditions = Vec::new();
    let (head_ready, head_reason) = match head {
        None => (false, "HeadPodNotFound".to_string()),
        Some(pod) if is_running_and_ready_as_ray_node(pod) => {
            (true, "HeadPodRunningAndReady".to_string())
        }
        Some(pod) => (false, head_not_ready_reason(pod)),
    };
    conditions.push(condition(
        CONDITION_HEAD_POD_READY,
        head_ready,
        &head_reason,
        "",
        now,
    ));
    let provisioned = if suspend {
        false
    } else {
        all_ready || was(CONDITION_PROVISIONED)
    };
    conditions.push(condition(
        CONDITION_PROVISIONED,
        provisioned,
        if provisioned {
            "AllPodRunningAndReadyFirstTime"
        } else {
            "RayClusterPodsProvisioning"
        },
        if provisioned {
            "All Ray Pods are ready for the first time"
        } else {
            "RayCluster Pods are being provisioned for first time"
        },
        now,
    ));
    let suspended = suspend && input.pods.is_empty();
    if suspend || had(CONDITION_SUSPENDED) || had(CONDITION_SUSPENDING) {
        conditions.push(condition(
            CONDITION_SUSPENDING,
            suspend && !suspended,
            "RayClusterSuspending",
            "",
            now,
        ));
        conditions.push(condition(
            CONDITION_SUSPENDED,
            suspended,
            "RayClusterSuspended",
            "",
            now,
        ));
    }
    // The gang's condition is decided with the PodGroup (`crate::pending`); it is carried over.
    conditions.extend(
        old_conditions
            .iter()
            .filter(|c| c.type_ == crate::pending::CONDITION_GANG_PENDING)
            .cloned(),
    );
    // A transition time only moves when the condition's status or reason changes.
    for c in &mut conditions {
        if let Some(previous) = old_conditions.iter().find(|o| o.type_ == c.type_)
            && previous.status == c.status
            && previous.reason == c.reason
        {
            c.last_transition_time = previous.last_transition_time.clone();
        }
    }
    status.conditions = Some(conditions);

    status.state = if input.failure.is_some() {
        Some(STATE_FAILED.to_string())
    } else if suspended {
        Some(STATE_SUSPENDED.to_string())
    } else if all_ready || (old.state.as_deref() == Some(STATE_READY) && !suspend) {
        // `ready` is sticky, as in KubeRay: a later Pod failure does not reset it.
        Some(STATE_READY.to_string())
    } else if suspend {
        old.state.clone()
    } else {
        None
    };
    status.reason = input.failure.clone();
    if status.state != old.state
        && let Some(state) = &status.state
    {
        status
            .state_transition_times
            .get_or_insert_with(BTreeMap::new)
            .insert(state.clone(), now.clone());
    }
    status
}

/// The reason a head Pod is not ready: its Ready condition's reason, with KubeRay's
/// `ContainersNotReady` replaced by the first waiting or terminated container's reason.
fn head_not_ready_reason(pod: &Pod) -> String {
    let reason = ready_condition(pod)
        .and_then(|c| c.reason.clone())
        .unwrap_or_else(|| "Unknown".to_string());
    if reason != "ContainersNotReady" {
        return reason;
    }
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| c.state.as_ref())
        .find_map(|state| {
            state
                .waiting
                .as_ref()
                .and_then(|w| w.reason.clone())
                .or_else(|| state.terminated.as_ref().and_then(|t| t.reason.clone()))
        })
        .unwrap_or(reason)
}

fn set_desired_resources(cluster: &RayCluster, status: &mut RayClusterStatus) {
    let total = sizing::cluster_gang(&cluster.spec, "spec")
        .map(|g| g.min_resources)
        .unwrap_or_default();
    let sum = |pick: &dyn Fn(&str) -> bool| -> Quantity {
        total
            .iter()
            .filter(|(name, _)| pick(name))
            .fold(ResourceQuantity::ZERO, |acc, (_, q)| acc + *q)
            .to_quantity()
    };
    status.desired_cpu = Some(sum(&|n| n == "cpu"));
    status.desired_memory = Some(sum(&|n| n == "memory"));
    status.desired_gpu = Some(sum(&|n| n.ends_with("gpu")));
    status.desired_tpu = Some(sum(&|n| n == "google.com/tpu"));
}

/// Whether `new` differs from the cluster's current status in anything but `lastUpdateTime`.
pub fn changed(cluster: &RayCluster, new: &RayClusterStatus) -> bool {
    let mut old = cluster.status.clone().unwrap_or_default();
    old.last_update_time = new.last_update_time.clone();
    old != *new
}

/// Stamps `lastUpdateTime`.
pub fn finish(mut status: RayClusterStatus, now: &Time) -> RayClusterStatus {
    status.last_update_time = Some(now.clone());
    status
}

/// The message of a cluster's `ReplicaFailure` condition while it is True: why its last create
/// or delete of a Pod failed.
pub fn replica_failure(status: Option<&RayClusterStatus>) -> Option<&str> {
    status?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == CONDITION_REPLICA_FAILURE && c.status == "True")
        .map(|c| c.message.as_str())
}

/// Adds (or replaces) the `ReplicaFailure` condition after a failed create or delete.
pub fn with_replica_failure(
    mut status: RayClusterStatus,
    reason: &str,
    message: &str,
    now: &Time,
) -> RayClusterStatus {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != CONDITION_REPLICA_FAILURE);
    conditions.push(condition(
        CONDITION_REPLICA_FAILURE,
        true,
        reason,
        message,
        now,
    ));
    status
}

/// The merge patch that writes `status` over the status subresource: the status itself, with
/// `null` for every field the controller owns and left unset.
pub fn merge_patch(status: &RayClusterStatus) -> Value {
    let mut value =
        serde_json::to_value(status).unwrap_or_else(|_| Value::Object(Default::default()));
    if let Value::Object(map) = &mut value {
        for field in OWNED_FIELDS {
            map.entry(field.to_string()).or_insert(Value::Null);
        }
    }
    serde_json::json!({ "status": value })
}
