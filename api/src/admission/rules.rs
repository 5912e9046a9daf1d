//! The admission rules for Ray objects beyond the foundation rules: Volcano-aware rules,
//! QueuePolicy rules and UPDATE rules. Each constant is a stable rule name; its doc comment says
//! whether the rule is an error or a warning and why it exists.

use std::collections::{BTreeMap, BTreeSet};

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, ReplaceOperation};
use serde_json::Value;

use super::QueueLookup;
use crate::check::{RayKind, Typed, check_object};
use crate::feasibility::{self, Feasibility, NodeKinds};
use crate::finding::{Compat, Finding};
use crate::keys;
use crate::quantity::ResourceQuantity;
use crate::queue_policy::{self, Enforcement, InfeasibleAction, QueuePolicy};
use crate::sizing::GangSize;
use crate::validation::ValidationContext;
use crate::volcano::{Queue, QueueState};

/// **Error.** The reviewed object is not a `ray.io` RayJob or RayCluster (a webhook
/// configuration that routes other kinds here is wrong).
pub const NOT_A_RAY_OBJECT: &str = "admission-not-a-ray-object";

/// **Error.** A RayJob with `clusterSelector` in an opted-in namespace: it runs on an existing
/// cluster, so it has no gang of its own, and KubeRay's Volcano adapter retries it forever
/// (docs/upstream.md, "KubeRay: Volcano adapter"; defect 3).
pub const VOLCANO_CLUSTER_SELECTOR: &str = "volcano-cluster-selector";
/// **Error.** The queue does not exist: Volcano ignores a PodGroup whose queue is missing, so
/// the gang would wait forever (docs/upstream.md, "Volcano: Pods without a PodGroup").
pub const VOLCANO_QUEUE_MISSING: &str = "volcano-queue-missing";
/// **Error.** The queue is `Closed`, `Closing` or `Unknown`: Volcano admits no new PodGroup to
/// it (docs/upstream.md, "Volcano: PodGroup and Queue").
pub const VOLCANO_QUEUE_NOT_OPEN: &str = "volcano-queue-not-open";
/// **Warning.** The queue's controller has not written a state yet. Volcano's queue controller
/// treats that as `Open`; its PodGroup webhook, if enabled, may still refuse the PodGroup until
/// the state is written (docs/upstream.md, "Volcano: PodGroup and Queue").
pub const VOLCANO_QUEUE_STATE_UNSET: &str = "volcano-queue-state-unset";
/// **Error.** The gang's `minResources` exceed the queue's `capability` in some resource: the
/// PodGroup can never be enqueued (docs/upstream.md, "Volcano: gang scheduling"). One finding per
/// resource.
pub const VOLCANO_GANG_EXCEEDS_CAPABILITY: &str = "volcano-gang-exceeds-capability";
/// **Warning.** The gang's `minResources` exceed the `capability` of an ancestor of its queue
/// (`spec.parent`, and its parent, …) in some resource: where Volcano enforces the queue
/// hierarchy (its capacity plugin with `enableHierarchy`) a child queue holds at most what its
/// ancestors may, so the PodGroup can never be enqueued; elsewhere Volcano ignores `parent`, so
/// it is not an error. One finding per resource, for the nearest such ancestor.
pub const VOLCANO_GANG_EXCEEDS_PARENT_CAPABILITY: &str = "volcano-gang-exceeds-parent-capability";

/// **Error, or warning under `enforcement: Warn`.** The queue is not in a matching policy's
/// `allowedQueues`.
pub const POLICY_QUEUE_NOT_ALLOWED: &str = "queue-policy-queue-not-allowed";
/// **Error, or warning under `enforcement: Warn`.** A matching policy has `requireQueue` and the
/// object names no queue (and no default applies).
pub const POLICY_QUEUE_REQUIRED: &str = "queue-policy-queue-required";
/// **Error, or warning under `enforcement: Warn`.** The priority class label is not in a
/// matching policy's `allowedPriorityClasses`.
pub const POLICY_PRIORITY_CLASS_NOT_ALLOWED: &str = "queue-policy-priority-class-not-allowed";
/// **Error, or warning under `enforcement: Warn`.** The gang's `minMember` exceeds a matching
/// policy's `maxMinMember`.
pub const POLICY_MAX_MIN_MEMBER: &str = "queue-policy-max-min-member";
/// **Error, or warning under `enforcement: Warn`.** The gang's `minResources` exceed a
/// matching policy's `maxMinResources` in some resource. One finding per resource.
pub const POLICY_MAX_MIN_RESOURCES: &str = "queue-policy-max-min-resources";
/// **Warning.** Several matching policies name different default queues; the first by name is
/// used.
pub const POLICY_DEFAULT_QUEUE_CONFLICT: &str = "queue-policy-default-queue-conflict";

/// **Warning, or error where a matching policy says `infeasible: Deny`.** A Pod of the object,
/// a group's Pods or the whole gang can never be scheduled on the cluster's nodes, even empty
/// (docs/feasibility.md). One finding per reason.
pub const RAY_OBJECT_INFEASIBLE: &str = "ray-object-infeasible";
/// **Warning.** No schedulable node is known: feasibility was not checked (never denies).
pub const FEASIBILITY_NOT_CHECKED: &str = "feasibility-not-checked";

/// **Error.** The queue label changed (or was added or removed) while the object's PodGroup exists:
/// a RayJob with a [`live_cluster`], or a standalone RayCluster. Neither KubeRay nor Volcano moves
/// an existing PodGroup to another queue (docs/upstream.md, "KubeRay: known defects", 4).
pub const QUEUE_LABEL_IMMUTABLE: &str = "queue-label-immutable";
/// **Error.** The priority class label changed while the object's PodGroup exists (same reason
/// as [`QUEUE_LABEL_IMMUTABLE`]).
pub const PRIORITY_LABEL_IMMUTABLE: &str = "priority-label-immutable";
/// **Warning.** `spec.rayClusterSpec` changed after the RayJob started: the reconciler keeps
/// the cluster it created, as KubeRay does (docs/upstream.md, "KubeRay: known defects", 18).
pub const RAYJOB_CLUSTER_SPEC_CHANGE_IGNORED: &str = "rayjob-cluster-spec-change-ignored";

/// Every rule name of this module, in catalogue order.
pub const ALL: [&str; 18] = [
    NOT_A_RAY_OBJECT,
    VOLCANO_CLUSTER_SELECTOR,
    VOLCANO_QUEUE_MISSING,
    VOLCANO_QUEUE_NOT_OPEN,
    VOLCANO_QUEUE_STATE_UNSET,
    VOLCANO_GANG_EXCEEDS_CAPABILITY,
    VOLCANO_GANG_EXCEEDS_PARENT_CAPABILITY,
    POLICY_QUEUE_NOT_ALLOWED,
    POLICY_QUEUE_REQUIRED,
    POLICY_PRIORITY_CLASS_NOT_ALLOWED,
    POLICY_MAX_MIN_MEMBER,
    POLICY_MAX_MIN_RESOURCES,
    POLICY_DEFAULT_QUEUE_CONFLICT,
    RAY_OBJECT_INFEASIBLE,
    FEASIBILITY_NOT_CHECKED,
    QUEUE_LABEL_IMMUTABLE,
    PRIORITY_LABEL_IMMUTABLE,
    RAYJOB_CLUSTER_SPEC_CHANGE_IGNORED,
];

/// Field path of the queue label.
pub const QUEUE_LABEL_FIELD: &str = "metadata.labels[volcano.sh/queue-name]";
/// Field path of the priority class label.
pub const PRIORITY_LABEL_FIELD: &str = "metadata.labels[ray.io/priority-class-name]";

/// What the review knows besides the object.
pub(super) struct Scope<'a> {
    pub kind: RayKind,
    /// Opted-in namespace, and not a RayCluster that belongs to a RayJob's gang: the Volcano
    /// rules and the UPDATE rules apply.
    pub governed: bool,
    pub namespace: &'a str,
    pub queues: &'a dyn QueueLookup,
    /// Matching policies, sorted by name: empty when neither governed nor naming a Volcano
    /// queue outside an opted-in namespace (`review_ray_object`).
    pub policies: Vec<&'a QueuePolicy>,
    /// The cluster's nodes, for feasibility.
    pub nodes: &'a NodeKinds,
    pub context: &'a ValidationContext,
}

/// Where the object's queue comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum QueueChoice {
    /// The object's own label.
    Label(String),
    /// Defaulted from the namespace annotation.
    Namespace(String),
    /// Defaulted from a QueuePolicy's `defaultQueue`.
    Policy { queue: String, policy: String },
    /// None: Volcano's `default` queue will be used.
    Unset,
}

impl QueueChoice {
    /// The queue raygate writes or keeps; `None` when the object has none.
    pub fn name(&self) -> Option<&str> {
        match self {
            QueueChoice::Label(q) | QueueChoice::Namespace(q) => Some(q),
            QueueChoice::Policy { queue, .. } => Some(queue),
            QueueChoice::Unset => None,
        }
    }

    /// The queue the PodGroup will use.
    fn effective(&self) -> &str {
        self.name().unwrap_or(keys::DEFAULT_QUEUE)
    }

    /// Where a defaulted queue came from, for messages.
    fn origin(&self) -> String {
        self.origin_of(&RAY_OBJECT_FIELDS)
    }

    /// Where a defaulted queue came from, for messages about an object whose queue is set as
    /// `fields` says.
    pub(crate) fn origin_of(&self, fields: &PolicyFields<'_>) -> String {
        match self {
            QueueChoice::Label(_) => String::new(),
            QueueChoice::Namespace(_) => format!(
                " (defaulted from the namespace annotation {})",
                keys::NAMESPACE_QUEUE_ANNOTATION
            ),
            QueueChoice::Policy { policy, .. } => {
                format!(" (defaulted from QueuePolicy {policy:?})")
            }
            QueueChoice::Unset => {
                format!(" (no {}: Volcano's default queue)", fields.queue_setting)
            }
        }
    }
}

/// Where an object governed by QueuePolicies keeps what the policy rules check, for their
/// findings and messages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PolicyFields<'a> {
    /// Field path of the queue, e.g. [`QUEUE_LABEL_FIELD`].
    pub queue: &'a str,
    /// How a user sets the queue, as a message names it: `volcano.sh/queue-name label`.
    pub queue_setting: &'a str,
    /// Field path of the gang's size, e.g. `spec.rayClusterSpec`.
    pub gang: &'a str,
    /// Field path of the priority class, e.g. [`PRIORITY_LABEL_FIELD`].
    pub priority: &'a str,
}

/// The fields of a RayJob or RayCluster (the gang field is chosen by kind).
const RAY_OBJECT_FIELDS: PolicyFields<'static> = PolicyFields {
    queue: QUEUE_LABEL_FIELD,
    queue_setting: "volcano.sh/queue-name label",
    gang: "spec",
    priority: PRIORITY_LABEL_FIELD,
};

/// The string labels of an object (`metadata.labels`), ignoring non-string values.
pub(super) fn labels(object: &Value) -> BTreeMap<String, String> {
    string_entries(object, "/metadata/labels")
}

/// The string entries of the map at `pointer` (`/metadata/labels`, `/metadata/annotations`),
/// ignoring non-string values.
pub(super) fn string_entries(object: &Value, pointer: &str) -> BTreeMap<String, String> {
    object
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The default queue of a namespace: its annotation, else the first matching policy's
/// `defaultQueue`.
pub(super) fn default_queue(
    annotations: &BTreeMap<String, String>,
    policies: &[&QueuePolicy],
    findings: &mut Vec<Finding>,
) -> QueueChoice {
    if let Some(queue) = keys::value_in(annotations, keys::NAMESPACE_QUEUE_ANNOTATION) {
        return QueueChoice::Namespace(queue.to_string());
    }
    let mut defaults = policies.iter().filter_map(|p| {
        let queue = p.spec.default_queue.as_deref().filter(|q| !q.is_empty())?;
        Some((p.metadata.name.as_deref().unwrap_or_default(), queue))
    });
    let Some((policy, queue)) = defaults.next() else {
        return QueueChoice::Unset;
    };
    for (other, other_queue) in defaults.filter(|(_, q)| *q != queue) {
        findings.push(Finding::warning(
            POLICY_DEFAULT_QUEUE_CONFLICT,
            QUEUE_LABEL_FIELD,
            format!(
                "QueuePolicies {policy:?} and {other:?} name different default queues ({queue:?}, {other_queue:?}); using {queue:?}"
            ),
            Compat::Raygate,
        ));
    }
    QueueChoice::Policy {
        queue: queue.to_string(),
        policy: policy.to_string(),
    }
}

/// The JSON patch that sets the queue label on `object`, creating `metadata.labels` if needed;
/// `None` when `metadata` is not an object (the API server never sends such an object).
pub(super) fn queue_label_patch(object: &Value, queue: &str) -> Option<Patch> {
    object.get("metadata").filter(|m| m.is_object())?;
    let labels = object.pointer("/metadata/labels");
    let operation = match labels {
        Some(Value::Object(map)) if map.contains_key(keys::QUEUE_LABEL) => {
            PatchOperation::Replace(ReplaceOperation {
                path: PointerBuf::from_tokens(["metadata", "labels", keys::QUEUE_LABEL]),
                value: queue.into(),
            })
        }
        Some(Value::Object(_)) => PatchOperation::Add(AddOperation {
            path: PointerBuf::from_tokens(["metadata", "labels", keys::QUEUE_LABEL]),
            value: queue.into(),
        }),
        _ => PatchOperation::Add(AddOperation {
            path: PointerBuf::from_tokens(["metadata", "labels"]),
            value: serde_json::json!({ keys::QUEUE_LABEL: queue }),
        }),
    };
    Some(Patch(vec![operation]))
}

/// A RayJob's cluster that still holds its PodGroup, read from the RayJob's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveCluster {
    /// `status.rayClusterName`.
    pub name: String,
    /// `status.jobDeploymentStatus`.
    pub deployment_status: String,
}

/// The RayJob's live cluster, if it has one: `status.rayClusterName` is set and
/// `status.jobDeploymentStatus` is
///
/// * `Initializing`, `Waiting`, `Running`, `Suspending` or `Retrying` (the cluster exists or is
///   being created or torn down, and its PodGroup with it), or
/// * `Complete` or `Failed` with `spec.shutdownAfterJobFinishes` not `true` (the cluster is
///   kept after the job).
///
/// New (`""`), `Suspended` (the cluster was deleted) and `ValidationFailed` (never started) have
/// none, nor has `Complete`/`Failed` with `shutdownAfterJobFinishes: true`.
pub fn live_cluster(job: &Value) -> Option<LiveCluster> {
    let name = job
        .pointer("/status/rayClusterName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())?;
    let status = job
        .pointer("/status/jobDeploymentStatus")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let shutdown = job.pointer("/spec/shutdownAfterJobFinishes") == Some(&Value::Bool(true));
    let live = match status {
        "Initializing" | "Waiting" | "Running" | "Suspending" | "Retrying" => true,
        "Complete" | "Failed" => !shutdown,
        _ => false,
    };
    live.then(|| LiveCluster {
        name: name.to_string(),
        deployment_status: status.to_string(),
    })
}

/// Rules that compare the old and the new object of an UPDATE.
pub(super) fn transition_rules(scope: &Scope<'_>, old: &Value, new: &Value) -> Vec<Finding> {
    let mut findings = Vec::new();
    if scope.governed {
        let holder = match scope.kind {
            RayKind::RayJob => live_cluster(old).map(|cluster| {
                format!(
                    "while the RayJob has a live RayCluster {:?} (status.jobDeploymentStatus {})",
                    cluster.name, cluster.deployment_status
                )
            }),
            RayKind::RayCluster => Some("on an existing RayCluster".to_string()),
        };
        if let Some(holder) = holder {
            let (old_labels, new_labels) = (labels(old), labels(new));
            for (key, field, rule) in [
                (keys::QUEUE_LABEL, QUEUE_LABEL_FIELD, QUEUE_LABEL_IMMUTABLE),
                (
                    keys::PRIORITY_CLASS_LABEL,
                    PRIORITY_LABEL_FIELD,
                    PRIORITY_LABEL_IMMUTABLE,
                ),
            ] {
                let (before, after) = (
                    keys::value_in(&old_labels, key),
                    keys::value_in(&new_labels, key),
                );
                if before != after {
                    findings.push(Finding::error(
                        rule,
                        field,
                        format!(
                            "cannot change from {} to {} {holder}: its PodGroup keeps the value it was created with; delete and re-create the {} to change it",
                            shown(before),
                            shown(after),
                            kind_name(scope.kind)
                        ),
                        Compat::Raygate,
                    ));
                }
            }
        }
    }
    let started = old
        .pointer("/status/jobDeploymentStatus")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if scope.kind == RayKind::RayJob
        && started
        && old.pointer("/spec/rayClusterSpec") != new.pointer("/spec/rayClusterSpec")
    {
        findings.push(Finding::warning(
            RAYJOB_CLUSTER_SPEC_CHANGE_IGNORED,
            "spec.rayClusterSpec",
            "changes after the RayJob has started are ignored: its RayCluster keeps the spec it was created with (as in KubeRay)",
            Compat::Kuberay,
        ));
    }
    findings
}

fn shown(value: Option<&str>) -> String {
    value.map_or_else(|| "(unset)".to_string(), |v| format!("{v:?}"))
}

fn kind_name(kind: RayKind) -> &'static str {
    match kind {
        RayKind::RayJob => "RayJob",
        RayKind::RayCluster => "RayCluster",
    }
}

/// Foundation, Volcano and policy rules on one object with its (possibly defaulted) queue.
pub(super) fn evaluate(scope: &Scope<'_>, object: Value, queue: &QueueChoice) -> Vec<Finding> {
    let priority = keys::value_in(&labels(&object), keys::PRIORITY_CLASS_LABEL).map(str::to_string);
    let selector = scope.kind == RayKind::RayJob
        && object
            .pointer("/spec/clusterSelector")
            .and_then(Value::as_object)
            .is_some_and(|s| !s.is_empty());
    let Some(checked) = check_object(object, scope.context) else {
        return Vec::new();
    };
    let mut findings = checked.report.findings;
    if !scope.governed && scope.policies.is_empty() {
        return findings;
    }
    let gang_field = match scope.kind {
        RayKind::RayJob => "spec.rayClusterSpec",
        RayKind::RayCluster => "spec",
    };
    if selector && scope.governed {
        findings.push(Finding::error(
            VOLCANO_CLUSTER_SELECTOR,
            "spec.clusterSelector",
            "gang scheduling does not support a RayJob that runs on an existing RayCluster: remove clusterSelector (and give the RayJob a rayClusterSpec) or run it in a namespace without the raygate.io/scheduler=volcano label",
            Compat::Raygate,
        ));
    }
    let gang = match &checked.gang {
        Some(Ok(gang)) if !selector => Some(gang),
        _ => None,
    };
    if scope.governed {
        queue_rules(scope, queue, gang, gang_field, &mut findings);
    }
    let fields = PolicyFields {
        gang: gang_field,
        ..RAY_OBJECT_FIELDS
    };
    for policy in &scope.policies {
        policy_rules(
            policy,
            scope.namespace,
            queue,
            priority.as_deref(),
            gang,
            &fields,
            &mut findings,
        );
    }
    if let (Some(gang), Some(typed)) = (gang, checked.typed.as_ref()) {
        feasibility_rules(scope, typed, gang, &mut findings);
    }
    findings
}

/// What the matching policies do with an infeasible object: `Deny` (with the first denying
/// policy by name) when any says so, `Ignore` when every one of them (at least one) does, else
/// `Warn`.
fn infeasible_action<'p>(policies: &[&'p QueuePolicy]) -> (InfeasibleAction, Option<&'p str>) {
    if let Some(denying) = policies
        .iter()
        .find(|p| p.infeasible() == InfeasibleAction::Deny)
    {
        let name = denying.metadata.name.as_deref().unwrap_or_default();
        return (InfeasibleAction::Deny, Some(name));
    }
    if !policies.is_empty()
        && policies
            .iter()
            .all(|p| p.infeasible() == InfeasibleAction::Ignore)
    {
        return (InfeasibleAction::Ignore, None);
    }
    (InfeasibleAction::Warn, None)
}

/// The object's feasibility on the scope's nodes, as the matching policies want it reported.
fn feasibility_rules(
    scope: &Scope<'_>,
    typed: &Typed,
    gang: &GangSize,
    findings: &mut Vec<Finding>,
) {
    let (action, denying) = infeasible_action(&scope.policies);
    if action != InfeasibleAction::Ignore {
        let templates = queue_policy::node_templates(&scope.policies);
        let nodes = scope.nodes.with_templates(&templates);
        findings.extend(feasibility_findings(typed, gang, &nodes, denying));
    }
}

/// The feasibility of `typed` (whose gang is `gang`) on `nodes` as findings: one
/// [`RAY_OBJECT_INFEASIBLE`] per reason, a warning, or an error naming the QueuePolicy
/// `denying`; with no schedulable node, the warning [`FEASIBILITY_NOT_CHECKED`] at the gang's
/// field. `raygate validate --nodes` reports the warnings of the same function.
pub fn feasibility_findings(
    typed: &Typed,
    gang: &GangSize,
    nodes: &NodeKinds,
    denying: Option<&str>,
) -> Vec<Finding> {
    match feasibility::check_feasibility(typed.into(), gang, nodes) {
        Feasibility::NoNodes => {
            let gang_field = match typed {
                Typed::RayJob(_) => "spec.rayClusterSpec",
                Typed::RayCluster(_) => "spec",
            };
            vec![Finding::warning(
                FEASIBILITY_NOT_CHECKED,
                gang_field,
                feasibility::NO_NODES_MESSAGE,
                Compat::Raygate,
            )]
        }
        Feasibility::Checked(found) => found
            .into_iter()
            .map(|f| match denying {
                Some(policy) => Finding::error(
                    RAY_OBJECT_INFEASIBLE,
                    f.field.clone(),
                    format!(
                        "{f} (QueuePolicy {policy:?} denies what can never be scheduled: infeasible: Deny)"
                    ),
                    Compat::Raygate,
                ),
                None => Finding::warning(
                    RAY_OBJECT_INFEASIBLE,
                    f.field.clone(),
                    f.to_string(),
                    Compat::Raygate,
                ),
            })
            .collect(),
    }
}

fn queue_rules(
    scope: &Scope<'_>,
    choice: &QueueChoice,
    gang: Option<&GangSize>,
    gang_field: &str,
    findings: &mut Vec<Finding>,
) {
    let name = choice.effective();
    let origin = choice.origin();
    let Some(queue) = scope.queues.queue(name) else {
        findings.push(Finding::error(
            VOLCANO_QUEUE_MISSING,
            QUEUE_LABEL_FIELD,
            format!(
                "queue {name:?}{origin} does not exist: Volcano never schedules a PodGroup whose queue is missing; create the queue or choose another one"
            ),
            Compat::Raygate,
        ));
        return;
    };
    match queue.state() {
        QueueState::Open => {}
        QueueState::Unset => findings.push(Finding::warning(
            VOLCANO_QUEUE_STATE_UNSET,
            QUEUE_LABEL_FIELD,
            format!(
                "queue {name:?}{origin} has no state yet (its controller has not reported one); it is treated as Open"
            ),
            Compat::Raygate,
        )),
        QueueState::NotOpen => {
            let state = queue
                .status
                .as_ref()
                .and_then(|s| s.state.as_deref())
                .unwrap_or_default();
            findings.push(Finding::error(
                VOLCANO_QUEUE_NOT_OPEN,
                QUEUE_LABEL_FIELD,
                format!(
                    "queue {name:?}{origin} is {state}: Volcano admits new PodGroups only to an Open queue; choose another queue or reopen it"
                ),
                Compat::Raygate,
            ));
        }
    }
    let Some(gang) = gang else {
        return;
    };
    let mut named = BTreeSet::new();
    for (resource, capability, needed) in exceeded(&queue, gang) {
        findings.push(Finding::error(
            VOLCANO_GANG_EXCEEDS_CAPABILITY,
            gang_field,
            format!(
                "the gang needs {resource} {needed} but queue {name:?} has capability {resource} {capability} ({} over): Volcano can never admit this PodGroup; shrink the cluster or choose a bigger queue",
                over(needed, capability)
            ),
            Compat::Raygate,
        ));
        named.insert(resource.to_string());
    }
    // The ancestors, nearest first; a cycle (which Volcano's webhook refuses) ends the walk.
    let mut visited = vec![name.to_string()];
    let mut parent = queue.spec.parent.clone();
    while let Some(ancestor_name) = parent.filter(|p| !p.is_empty() && !visited.contains(p)) {
        let Some(ancestor) = scope.queues.queue(&ancestor_name) else {
            break;
        };
        for (resource, capability, needed) in exceeded(&ancestor, gang) {
            if named.insert(resource.to_string()) {
                findings.push(Finding::warning(
                    VOLCANO_GANG_EXCEEDS_PARENT_CAPABILITY,
                    gang_field,
                    format!(
                        "the gang needs {resource} {needed} but queue {name:?}'s ancestor queue {ancestor_name:?} has capability {resource} {capability} ({} over): where Volcano enforces the queue hierarchy (capacity plugin, enableHierarchy) it can never admit this PodGroup; shrink the cluster or choose a queue under a bigger parent",
                        over(needed, capability)
                    ),
                    Compat::Raygate,
                ));
            }
        }
        parent = ancestor.spec.parent.clone();
        visited.push(ancestor_name);
    }
}

/// The resources of which `gang` needs more than `queue`'s capability: each with the
/// capability and the need.
fn exceeded<'q>(
    queue: &'q Queue,
    gang: &GangSize,
) -> Vec<(&'q str, ResourceQuantity, ResourceQuantity)> {
    (queue.spec.capability.iter().flatten())
        .filter_map(|(resource, capability)| {
            let capability = ResourceQuantity::try_from(capability).ok()?;
            let needed = *gang.min_resources.get(resource)?;
            (needed > capability).then_some((resource.as_str(), capability, needed))
        })
        .collect()
}

fn over(needed: ResourceQuantity, limit: ResourceQuantity) -> ResourceQuantity {
    needed + limit.times(-1)
}

/// One policy's rules on an object: its queue (`choice`), its priority class and its gang, each
/// found where `fields` says.
pub(crate) fn policy_rules(
    policy: &QueuePolicy,
    namespace: &str,
    choice: &QueueChoice,
    priority: Option<&str>,
    gang: Option<&GangSize>,
    fields: &PolicyFields<'_>,
    findings: &mut Vec<Finding>,
) {
    let gang_field = fields.gang;
    let name = policy.metadata.name.as_deref().unwrap_or_default();
    let enforcement = policy.enforcement();
    let mut violation = |rule: &str, field: &str, message: String| {
        findings.push(match enforcement {
            Enforcement::Deny => Finding::error(rule, field, message, Compat::Raygate),
            Enforcement::Warn => Finding::warning(
                rule,
                field,
                format!("{message} (QueuePolicy {name:?} is in Warn mode: admitted)"),
                Compat::Raygate,
            ),
        });
    };
    let queue = choice.effective();
    if policy.spec.require_queue == Some(true) && choice.name().is_none() {
        violation(
            POLICY_QUEUE_REQUIRED,
            fields.queue,
            format!(
                "QueuePolicy {name:?} requires a queue in namespace {namespace:?}: set the {}",
                fields.queue_setting
            ),
        );
    } else if let Some(allowed) = &policy.spec.allowed_queues
        && !allowed.iter().any(|q| q == queue)
    {
        violation(
            POLICY_QUEUE_NOT_ALLOWED,
            fields.queue,
            format!(
                "queue {queue:?}{} is not allowed in namespace {namespace:?} by QueuePolicy {name:?} (allowed: {})",
                choice.origin_of(fields),
                listed(allowed)
            ),
        );
    }
    if let (Some(class), Some(allowed)) = (priority, &policy.spec.allowed_priority_classes)
        && !allowed.iter().any(|c| c == class)
    {
        violation(
            POLICY_PRIORITY_CLASS_NOT_ALLOWED,
            fields.priority,
            format!(
                "priority class {class:?} is not allowed in namespace {namespace:?} by QueuePolicy {name:?} (allowed: {})",
                listed(allowed)
            ),
        );
    }
    let Some(gang) = gang else {
        return;
    };
    if let Some(max) = policy.spec.max_min_member
        && gang.min_member > max
    {
        violation(
            POLICY_MAX_MIN_MEMBER,
            gang_field,
            format!(
                "the gang's minMember {} exceeds maxMinMember {max} of QueuePolicy {name:?} by {}",
                gang.min_member,
                i64::from(gang.min_member) - i64::from(max)
            ),
        );
    }
    for (resource, limit) in policy.spec.max_min_resources.iter().flatten() {
        let (Ok(limit), Some(needed)) = (
            ResourceQuantity::try_from(limit),
            gang.min_resources.get(resource),
        ) else {
            continue;
        };
        if *needed > limit {
            violation(
                POLICY_MAX_MIN_RESOURCES,
                gang_field,
                format!(
                    "the gang needs {resource} {needed}, above maxMinResources {resource} {limit} of QueuePolicy {name:?} ({} over)",
                    over(*needed, limit)
                ),
            );
        }
    }
}

fn listed(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// Errors the old object already had become warnings: they are not new with this UPDATE.
pub(super) fn ratchet(findings: Vec<Finding>, before: &[Finding]) -> Vec<Finding> {
    findings
        .into_iter()
        .map(|finding| {
            let preexisting = finding.is_error()
                && before
                    .iter()
                    .any(|b| b.is_error() && b.rule == finding.rule && b.field == finding.field);
            if preexisting {
                Finding::warning(
                    finding.rule,
                    finding.field,
                    format!(
                        "{} (already true before this update: not enforced)",
                        finding.message
                    ),
                    finding.compat,
                )
            } else {
                finding
            }
        })
        .collect()
}
