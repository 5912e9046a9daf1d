//! Why a gang is pending: the `GangPending` condition of RayJobs and RayClusters
//! (docs/reconciler.md, "Why a gang is pending").
//!
//! [`gang_state`] reads what Volcano and the queue say about a PodGroup (its phase and
//! conditions, the queue's state, capability and allocation, the gang's Pods) and names the one
//! cause that holds the gang back, with the numbers behind it. [`with_gang_condition`] turns that
//! into the `GangPending` condition of a status, and [`pending_event`] into the Warning Event
//! of a new cause. The facts about Volcano this relies on are in docs/upstream.md, "Volcano: why
//! a PodGroup waits".

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::decision::EventNote;
use crate::feasibility::Infeasibility;
use crate::keys;
use crate::quantity::ResourceQuantity;
use crate::volcano::{PodGroup, PodGroupCondition, Queue, QueueState};

/// Condition type: True while the gang waits for Volcano, with the cause as its reason; False
/// once it is bound (or no longer needed), kept so the time it stopped waiting stays visible.
pub const CONDITION_GANG_PENDING: &str = "GangPending";

/// The PodGroup's queue does not exist.
pub const QUEUE_NOT_FOUND: &str = "QueueNotFound";
/// The queue is not `Open`, so Volcano admits no new gang from it.
pub const QUEUE_CLOSED: &str = "QueueClosed";
/// The gang's `minResources` exceed the queue's `capability`: it is never admitted.
pub const EXCEEDS_QUEUE_CAPABILITY: &str = "ExceedsQueueCapability";
/// The gang fits the queue's capability, but not next to what the queue already holds.
pub const WAITING_FOR_QUEUE_QUOTA: &str = "WaitingForQueueQuota";
/// No node could ever hold one of the gang's Pods, or all of them together, even empty
/// ([`crate::feasibility`]): it waits for a node that can, which only a change of the cluster
/// brings.
pub const INFEASIBLE: &str = "Infeasible";
/// The nodes' free resources cannot take the gang now, though empty nodes could.
pub const INSUFFICIENT_NODE_RESOURCES: &str = "InsufficientNodeResources";
/// Fewer member Pods exist than `minMember` because creating the others failed (and Volcano
/// reports the gang unschedulable).
pub const WAITING_FOR_GANG: &str = "WaitingForGang";
/// Reason of the False condition: the gang is bound.
pub const GANG_SCHEDULED: &str = "GangScheduled";
/// Reason of the False condition: the object holds no gang any more (finished, suspended).
pub const GANG_RELEASED: &str = "GangReleased";

/// Volcano's PodGroup condition type for a gang it cannot place.
const UNSCHEDULABLE: &str = "Unschedulable";
/// Volcano's PodGroup condition type for a gang it has placed.
const SCHEDULED: &str = "Scheduled";
/// Volcano's reason (gang plugin's job validation) for fewer member Pods than `minMember`.
const NOT_ENOUGH_TASKS: &str = "NotEnoughTasks";
/// The longest message a condition carries here (the API allows 32768 bytes).
const MAX_MESSAGE: usize = 2048;

/// The gang's member Pods as the reconciler's cache has them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GangPods {
    /// Members that exist and are not being deleted.
    pub created: i32,
    /// Of those, the ones bound to a node.
    pub bound: i32,
}

impl GangPods {
    /// Counts the Pods annotated as members of PodGroup `pod_group` (terminating ones left
    /// out).
    pub fn of<'p>(pods: impl IntoIterator<Item = &'p Pod>, pod_group: &str) -> Self {
        let mut counted = GangPods::default();
        for pod in pods {
            let member = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys::POD_GROUP_ANNOTATION))
                .is_some_and(|g| g == pod_group);
            if !member || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            counted.created += 1;
            if pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty())
            {
                counted.bound += 1;
            }
        }
        counted
    }
}

/// Where a gang stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GangState {
    /// It waits, for the cause `reason` (one of this module's reasons), explained by `message`.
    Waiting {
        /// CamelCase cause.
        reason: &'static str,
        /// The cause with its numbers.
        message: String,
    },
    /// It does not wait: `reason` is [`GANG_SCHEDULED`] or [`GANG_RELEASED`].
    Clear {
        /// CamelCase reason.
        reason: &'static str,
        /// What happened.
        message: String,
    },
    /// Nothing is known yet (Volcano has not looked at the gang): the condition stays as it is.
    Undetermined,
}

/// Whether [`gang_state`] of `pod_group` can depend on its queue: Volcano has not yet bound the
/// gang (its phase is neither `Running` nor `Completed`). A change of a queue concerns only the
/// owners of such gangs; waking every owner of a PodGroup in the queue on each of Volcano's
/// queue status updates kept a burst's controllers busy with passes that changed nothing.
pub fn waits_on_queue(pod_group: &PodGroup) -> bool {
    !matches!(phase(pod_group), "Running" | "Completed")
}

/// `status.phase` of `pod_group`, `Pending` while Volcano has written none.
fn phase(pod_group: &PodGroup) -> &str {
    pod_group
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .filter(|p| !p.is_empty())
        .unwrap_or("Pending")
}

/// Why the gang of `pod_group` waits, if it does. `queue` is the PodGroup's queue (`None`: it
/// does not exist), `pods` its member Pods, `creation_failure` why the last attempt to create
/// the missing ones failed (the cluster's `ReplicaFailure` condition), if it did, and
/// `infeasible` why the cluster's nodes could never hold the gang (empty: they could, or no
/// node is known).
///
/// Fewer members than `minMember` are a cause only with a creation failure: without one the
/// cluster is still making them (every normal start has a moment with Volcano's
/// `NotEnoughTasks` verdict and Pods on their way), so it is not a wait to warn about.
///
/// Causes the queue or the nodes alone prove (a missing queue, nodes that could never hold the
/// gang, a closed queue, `minResources` beyond the capability or beyond what is left of it) are
/// named at once; the others only once Volcano has
/// said so in a PodGroup condition, so a gang Volcano has not yet looked at is
/// [`GangState::Undetermined`] rather than a false alarm.
pub fn gang_state(
    pod_group: &PodGroup,
    queue: Option<&Queue>,
    pods: GangPods,
    creation_failure: Option<&str>,
    infeasible: &[Infeasibility],
) -> GangState {
    let name = pod_group.metadata.name.as_deref().unwrap_or_default();
    let min_member = pod_group.spec.min_member.unwrap_or(0);
    let queue_name = pod_group.spec.queue.as_deref().unwrap_or("default");
    let phase = phase(pod_group);
    if !waits_on_queue(pod_group) || (min_member > 0 && pods.bound >= min_member) {
        return GangState::Clear {
            reason: GANG_SCHEDULED,
            message: format!(
                "Volcano bound the gang: {} of minMember {min_member} Pods of PodGroup {name} are on nodes (phase {phase})",
                pods.bound
            ),
        };
    }
    let waiting = |reason, message: String| GangState::Waiting {
        reason,
        message: truncate(message),
    };
    let Some(queue) = queue else {
        return waiting(
            QUEUE_NOT_FOUND,
            format!(
                "PodGroup {name} names queue {queue_name}, which does not exist: Volcano schedules none of its {min_member} Pods; create the queue or set the label {} to an existing one",
                keys::QUEUE_LABEL
            ),
        );
    };
    if !infeasible.is_empty() {
        let reasons: Vec<String> = infeasible.iter().map(ToString::to_string).collect();
        return waiting(
            INFEASIBLE,
            format!(
                "no node of this cluster could ever hold PodGroup {name}, even empty: {}; it waits until a node that can joins the cluster",
                reasons.join("; ")
            ),
        );
    }
    let requested = resources(pod_group.spec.min_resources.as_ref());
    if phase != "Inqueue" {
        if queue.state() == QueueState::NotOpen {
            let state = queue
                .status
                .as_ref()
                .and_then(|s| s.state.as_deref())
                .unwrap_or_default();
            return waiting(
                QUEUE_CLOSED,
                format!(
                    "queue {queue_name} is {state}: Volcano admits no new gang from it, so PodGroup {name} ({min_member} Pods, minResources {}) stays Pending until the queue is Open",
                    render(&requested)
                ),
            );
        }
        if let Some(state) = queue_quota(pod_group, queue, &requested) {
            return state;
        }
    }
    let Some(volcano) = volcano_verdict(pod_group) else {
        return GangState::Undetermined;
    };
    let said = |message: &str| {
        if message.is_empty() {
            String::new()
        } else {
            format!(" (Volcano: {message})")
        }
    };
    let volcano_message = volcano.message.as_deref().unwrap_or_default();
    if volcano.reason.as_deref() == Some(NOT_ENOUGH_TASKS) || pods.created < min_member {
        // Volcano counted before the last Pods arrived, or they are still being made: its next
        // cycle, or the creation's outcome, decides.
        let Some(failure) = creation_failure.filter(|_| pods.created < min_member) else {
            return GangState::Undetermined;
        };
        return waiting(
            WAITING_FOR_GANG,
            format!(
                "{} of minMember {min_member} Pods of PodGroup {name} exist ({} bound): Volcano binds none until all {min_member} exist, and creating the others failed: {failure}{}",
                pods.created,
                pods.bound,
                said(volcano_message)
            ),
        );
    }
    if phase != "Inqueue" {
        let inqueue = queue.status.as_ref().and_then(|s| s.inqueue).unwrap_or(0);
        if queue.spec.capability.is_some() && inqueue > 0 {
            return waiting(
                WAITING_FOR_QUEUE_QUOTA,
                format!(
                    "PodGroup {name} requests {} and queue {queue_name} (capability {}, allocated {}) reserves the rest for its {inqueue} admitted gang(s) that are not yet running{}",
                    render(&requested),
                    render(&resources(queue.spec.capability.as_ref())),
                    render(&allocated(queue)),
                    said(volcano_message)
                ),
            );
        }
        return waiting(
            INSUFFICIENT_NODE_RESOURCES,
            format!(
                "Volcano does not admit PodGroup {name} from queue {queue_name}: the cluster's free resources fall short of its minResources {}{}",
                render(&requested),
                said(volcano_message)
            ),
        );
    }
    let short = shortage(volcano_message);
    let short = if short.is_empty() {
        String::new()
    } else {
        format!("; nodes lack {}", short.join(", "))
    };
    waiting(
        INSUFFICIENT_NODE_RESOURCES,
        format!(
            "no nodes can take the whole gang: {} of minMember {min_member} Pods of PodGroup {name} bound, {} exist, minResources {}{short}{}",
            pods.bound,
            pods.created,
            render(&requested),
            said(volcano_message)
        ),
    )
}

/// The state of a gang that no longer exists for the object (it finished or is suspended).
pub fn released(what: &str) -> GangState {
    GangState::Clear {
        reason: GANG_RELEASED,
        message: format!("{what}: it holds no gang"),
    }
}

/// A Pending gang the queue's capability refuses: beyond it ([`EXCEEDS_QUEUE_CAPABILITY`]) or
/// beyond what the queue's allocation leaves of it ([`WAITING_FOR_QUEUE_QUOTA`]).
fn queue_quota(
    pod_group: &PodGroup,
    queue: &Queue,
    requested: &BTreeMap<String, ResourceQuantity>,
) -> Option<GangState> {
    let name = pod_group.metadata.name.as_deref().unwrap_or_default();
    let queue_name = queue.metadata.name.as_deref().unwrap_or_default();
    let capability = resources(queue.spec.capability.as_ref());
    let allocated = allocated(queue);
    let over: Vec<String> = requested
        .iter()
        .filter_map(|(resource, want)| {
            let cap = capability.get(resource)?;
            (want > cap).then(|| format!("{resource} requested {want}, capability {cap}"))
        })
        .collect();
    if !over.is_empty() {
        return Some(GangState::Waiting {
            reason: EXCEEDS_QUEUE_CAPABILITY,
            message: format!(
                "PodGroup {name} needs more than queue {queue_name} may ever hold ({}): Volcano never admits it; lower the gang's resources or raise spec.capability of queue {queue_name}",
                over.join("; ")
            ),
        });
    }
    let short: Vec<String> = requested
        .iter()
        .filter_map(|(resource, want)| {
            let cap = capability.get(resource)?;
            let used = allocated
                .get(resource)
                .copied()
                .unwrap_or(ResourceQuantity::ZERO);
            (*want + used > *cap).then(|| {
                format!("{resource} requested {want}, allocated {used} of capability {cap}")
            })
        })
        .collect();
    if short.is_empty() {
        return None;
    }
    let mut message = format!(
        "queue {queue_name} has too little left for PodGroup {name} ({}): it waits until the queue's running gangs free enough",
        short.join("; ")
    );
    let spec = &queue.spec;
    if let Some(deserved) = spec.deserved.as_ref().filter(|d| !d.is_empty()) {
        message.push_str(&format!(
            "; deserved {}",
            render(&resources(Some(deserved)))
        ));
    }
    if let Some(guarantee) = spec
        .guarantee
        .as_ref()
        .and_then(|g| g.resource.as_ref())
        .filter(|g| !g.is_empty())
    {
        message.push_str(&format!(
            "; guarantee {}",
            render(&resources(Some(guarantee)))
        ));
    }
    Some(GangState::Waiting {
        reason: WAITING_FOR_QUEUE_QUOTA,
        message,
    })
}

/// Volcano's current word on the gang: its `Unschedulable` condition when that is True and
/// newer than its `Scheduled` one (Volcano keeps one condition per type and updates it in place;
/// ties go to the later in the list).
pub(crate) fn volcano_verdict(pod_group: &PodGroup) -> Option<&PodGroupCondition> {
    let latest = pod_group
        .status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .filter(|c| matches!(c.type_.as_deref(), Some(UNSCHEDULABLE | SCHEDULED)))
        .enumerate()
        .max_by_key(|(i, c)| (c.last_transition_time.as_ref().map(|t| t.0), *i))
        .map(|(_, c)| c)?;
    (latest.type_.as_deref() == Some(UNSCHEDULABLE) && latest.status.as_deref() == Some("True"))
        .then_some(latest)
}

/// The resources a fit error of Volcano says nodes lack, with how many nodes lack each, from
/// its `<n> Insufficient <resource>` parts.
fn shortage(message: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let words: Vec<&str> = message
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == ':')
        .filter(|w| !w.is_empty())
        .collect();
    for (i, word) in words.iter().enumerate() {
        if *word != "Insufficient" {
            continue;
        }
        let Some(resource) = words.get(i + 1).map(|r| r.trim_end_matches('.')) else {
            continue;
        };
        let entry = match i.checked_sub(1).and_then(|j| words[j].parse::<u32>().ok()) {
            Some(nodes) => format!("{resource} (on {nodes} node(s))"),
            None => resource.to_string(),
        };
        if !found.contains(&entry) {
            found.push(entry);
        }
    }
    found
}

fn resources(
    map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<String, ResourceQuantity> {
    map.into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), ResourceQuantity::try_from(v).ok()?)))
        .collect()
}

fn allocated(queue: &Queue) -> BTreeMap<String, ResourceQuantity> {
    resources(queue.status.as_ref().and_then(|s| s.allocated.as_ref()))
}

/// `{cpu: 2, memory: 4Gi}`.
fn render(map: &BTreeMap<String, ResourceQuantity>) -> String {
    let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", parts.join(", "))
}

fn truncate(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// `conditions` with the `GangPending` condition set for `state`:
///
/// * waiting: True with the cause; its transition time moves only when the status or the
///   cause changes;
/// * clear: False, but only where the condition was True (a gang that never visibly waited
///   gets none, so a RayJob that starts at once costs no extra status write);
/// * undetermined: unchanged.
pub fn with_gang_condition(
    conditions: &[Condition],
    state: &GangState,
    now: &Time,
) -> Vec<Condition> {
    let current = conditions
        .iter()
        .find(|c| c.type_ == CONDITION_GANG_PENDING);
    let (status, reason, message) = match state {
        GangState::Undetermined => return conditions.to_vec(),
        GangState::Clear { .. } if current.is_none_or(|c| c.status != "True") => {
            return conditions.to_vec();
        }
        GangState::Waiting { reason, message } => ("True", *reason, message),
        GangState::Clear { reason, message } => ("False", *reason, message),
    };
    let last_transition_time = match current {
        Some(c) if c.status == status && c.reason == reason => c.last_transition_time.clone(),
        _ => now.clone(),
    };
    let condition = Condition {
        type_: CONDITION_GANG_PENDING.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.clone(),
        last_transition_time,
        observed_generation: None,
    };
    let mut updated: Vec<Condition> = conditions
        .iter()
        .filter(|c| c.type_ != CONDITION_GANG_PENDING)
        .cloned()
        .collect();
    match conditions
        .iter()
        .position(|c| c.type_ == CONDITION_GANG_PENDING)
    {
        Some(at) => updated.insert(at, condition),
        None => updated.push(condition),
    }
    updated
}

/// The Warning Event of a new cause: the `GangPending` condition of `after` is True and was not,
/// or was True for another cause. Its reason is the cause.
pub fn pending_event(before: &[Condition], after: &[Condition]) -> Option<EventNote> {
    let find = |list: &[Condition]| {
        list.iter()
            .find(|c| c.type_ == CONDITION_GANG_PENDING)
            .cloned()
    };
    let now = find(after).filter(|c| c.status == "True")?;
    let was = find(before).filter(|c| c.status == "True");
    if was.is_some_and(|w| w.reason == now.reason) {
        return None;
    }
    Some(EventNote::warning(&now.reason, now.message))
}

#[cfg(test)]
mod tests;
