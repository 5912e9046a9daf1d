//! Admission decisions for RayJobs, RayClusters and QueuePolicies: what the webhook answers.
//!
//! [`review_ray_object`] is the whole decision for a RayJob or RayCluster CREATE or UPDATE:
//!
//! 1. **Queue defaulting** (CREATE, opted-in namespaces): an object without a
//!    `volcano.sh/queue-name` label gets one from the namespace annotation
//!    `scheduling.volcano.sh/queue-name`, else from the first matching [`QueuePolicy`] (by name)
//!    that has a `defaultQueue`. The result carries it as a JSON patch, and every rule below is
//!    evaluated against the defaulted object, so a mutating and a validating call agree.
//! 2. **Foundation rules** ([`crate::check::check_object`]): errors deny, warnings are returned.
//! 3. **Volcano rules** (opted-in namespaces, see [`rules`]): no `clusterSelector` with gang
//!    scheduling; the queue must exist and be `Open` (an unset state is Open, with a warning);
//!    the gang's `minResources` must fit in the queue's `capability`.
//! 4. **QueuePolicy rules**: every matching policy is evaluated on its own; a `Deny` policy's
//!    violations are errors, a `Warn` policy's are warnings (the combination rule: all `Deny`
//!    policies must allow). **Feasibility** ([`crate::feasibility`]) against the nodes the
//!    caller knows: a Pod or gang no node could ever hold is a warning, or an error where a
//!    matching policy says `infeasible: Deny`; with no node known, a warning that nothing was
//!    checked. Outside opted-in namespaces they apply to an object that names a
//!    Volcano queue (`volcano.sh/queue-name`), which KubeRay's Volcano adapter would use
//!    ([`escape`] covers Pods, PodGroups and the opt-in label itself).
//! 5. **UPDATE rules**: the queue and priority labels cannot change while a RayJob has a live
//!    cluster ([`live_cluster`]) or on a standalone RayCluster; a changed `rayClusterSpec` on a
//!    started RayJob is warned about. Errors the old object already had are **ratcheted** down to
//!    warnings, so that a queue closed later, a policy tightened later or a rule added later
//!    never blocks finalizer or label edits of objects that were admitted before.
//!
//! The foundation rules that depend on which controller runs the object (`unsupported-*`, only
//! for raygate's reconciler) follow the namespace: its `raygate.io/reconciler` label when set,
//! else the process-wide `--reconciler` ([`crate::coexist::namespace_reconciler`], the same
//! resolution raygate's reconciler uses). An invalid label value keeps the process-wide
//! setting: the reconciler leaves such a namespace alone, so nothing more is known.
//!
//! RayClusters created by a RayJob (label `ray.io/originated-from-crd=RayJob`) belong to the
//! RayJob's gang: only the foundation rules apply to them, because the RayJob was already checked.
//!
//! Everything is pure: the caller passes the namespace, a [`QueueLookup`], the policies and
//! the node shapes it has cached. `docs/queue-policy.md` documents the rules and the combination rule.

pub mod escape;
pub mod rules;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use json_patch::Patch;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;

use crate::check::{RayKind, type_meta};
use crate::coexist::namespace_reconciler;
use crate::feasibility::NodeKinds;
use crate::finding::{Finding, Severity};
use crate::keys;
use crate::queue_policy::{QueuePolicy, matching_policies, validate_queue_policy};
use crate::settings::OptInLabel;
use crate::validation::ValidationContext;
use crate::volcano::Queue;

pub use rules::{LiveCluster, live_cluster};

/// The operation under review, as an AdmissionReview names it (`request.operation`).
#[derive(serde::Deserialize, serde::Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// A new object.
    Create,
    /// A change to an existing object; the review carries the old object.
    Update,
    /// Object deletion (never sent to raygate's Ray object review).
    Delete,
    /// A connect call: exec, proxy, … (never sent to raygate's Ray object review).
    Connect,
}

impl Operation {
    /// The API server's spelling, as a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// Volcano queues by name, as the caller has them cached.
pub trait QueueLookup {
    /// The queue named `name`, if it exists.
    fn queue(&self, name: &str) -> Option<Arc<Queue>>;
}

impl QueueLookup for BTreeMap<String, Arc<Queue>> {
    fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        self.get(name).cloned()
    }
}

impl<F: Fn(&str) -> Option<Arc<Queue>>> QueueLookup for F {
    fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        self(name)
    }
}

/// Everything [`review_ray_object`] needs about one admission request.
pub struct RayObjectReview<'a> {
    /// CREATE or UPDATE.
    pub operation: Operation,
    /// `request.object`: the RayJob or RayCluster as the API server has it (CRD defaults
    /// applied, mutations of earlier webhooks included).
    pub object: Value,
    /// `request.oldObject`; required for UPDATE, ignored for CREATE.
    pub old_object: Option<Value>,
    /// Metadata of the object's Namespace (its labels decide opt-in and policy matching, its
    /// annotations the default queue).
    pub namespace: &'a ObjectMeta,
    /// The namespace label that opts a namespace in (only opted-in namespaces are governed by
    /// QueuePolicies).
    pub opt_in: &'a OptInLabel,
    /// Volcano queues.
    pub queues: &'a dyn QueueLookup,
    /// Every QueuePolicy in the cluster; the review selects those that match the namespace.
    pub policies: &'a [Arc<QueuePolicy>],
    /// The cluster's nodes, for feasibility (`crate::feasibility`); empty when none is known.
    pub nodes: &'a NodeKinds,
    /// Feature gates, and the reconciler kind of namespaces without a valid
    /// `raygate.io/reconciler` label, for the foundation rules.
    pub context: &'a ValidationContext,
}

/// The answer to an admission request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Admission {
    /// Every finding, in evaluation order: errors deny, warnings are shown to the user.
    pub findings: Vec<Finding>,
    /// JSON patch to apply to `request.object` (queue defaulting); `None` when nothing changes.
    /// Only a mutating webhook may return it.
    pub patch: Option<Patch>,
}

impl Admission {
    /// Whether the request is allowed (no error finding).
    pub fn allowed(&self) -> bool {
        !self.findings.iter().any(Finding::is_error)
    }

    /// The denial message, kubectl-style (`field: reason`, joined with `; `), when denied.
    pub fn denial(&self) -> Option<String> {
        let errors: Vec<String> = self
            .findings
            .iter()
            .filter(|f| f.is_error())
            .map(ToString::to_string)
            .collect();
        (!errors.is_empty()).then(|| errors.join("; "))
    }

    /// One warning string per warning finding (`field: reason`).
    pub fn warnings(&self) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .map(ToString::to_string)
            .collect()
    }
}

/// Decides a RayJob or RayCluster CREATE or UPDATE (see the module documentation).
pub fn review_ray_object(review: RayObjectReview<'_>) -> Admission {
    let RayObjectReview {
        operation,
        object,
        old_object,
        namespace,
        opt_in,
        queues,
        policies,
        nodes,
        context,
    } = review;
    let Some(kind) = type_meta(&object).and_then(|(v, k)| RayKind::of(v, k)) else {
        let (api_version, kind) = type_meta(&object).unwrap_or(("<none>", "<none>"));
        return Admission {
            findings: vec![Finding::error(
                rules::NOT_A_RAY_OBJECT,
                "",
                format!(
                    "raygate reviews only ray.io/v1 and ray.io/v1alpha1 RayJobs and RayClusters, not {api_version} {kind}"
                ),
                crate::finding::Compat::Raygate,
            )],
            patch: None,
        };
    };
    let empty = BTreeMap::new();
    let namespace_labels = namespace.labels.as_ref().unwrap_or(&empty);
    let namespace_context;
    let context = match namespace_reconciler(Some(namespace_labels), context.reconciler) {
        Ok(reconciler) if reconciler != context.reconciler => {
            namespace_context = ValidationContext {
                reconciler,
                ..context.clone()
            };
            &namespace_context
        }
        _ => context,
    };
    let object_labels = rules::labels(&object);
    // A RayJob's cluster is governed through its RayJob, by the same ownership answer as Pod
    // onboarding and sizing give (ownerReference first, then KubeRay's labels).
    let owned_by_ray_job = kind == RayKind::RayCluster && {
        let owners: Vec<OwnerReference> = object
            .pointer("/metadata/ownerReferences")
            .and_then(|owners| serde_json::from_value(owners.clone()).ok())
            .unwrap_or_default();
        crate::onboarding::cluster_ray_job(&object_labels, &owners).is_some()
    };
    let opted_in = opt_in.selects(namespace_labels);
    let governed = opted_in && !owned_by_ray_job;
    // Outside opted-in namespaces an object that names a Volcano queue still reaches it (through
    // KubeRay's Volcano adapter, which reads the label): the namespace's QueuePolicies apply to
    // it, or removing the opt-in label would escape them.
    let names_queue = |object: &Value| {
        !opted_in
            && !owned_by_ray_job
            && keys::value_in(&rules::labels(object), keys::QUEUE_LABEL).is_some()
    };
    let scope_for = |policy_checked: bool| rules::Scope {
        kind,
        governed,
        namespace: namespace.name.as_deref().unwrap_or_default(),
        queues,
        policies: if policy_checked {
            matching_policies(policies, namespace_labels)
        } else {
            Vec::new()
        },
        nodes,
        context,
    };
    let scope = scope_for(governed || names_queue(&object));

    let mut findings = Vec::new();
    let mut patch = None;
    let queue = match keys::value_in(&object_labels, keys::QUEUE_LABEL) {
        Some(queue) => rules::QueueChoice::Label(queue.to_string()),
        None if governed && operation == Operation::Create => {
            let annotations = namespace.annotations.as_ref().unwrap_or(&empty);
            let choice = rules::default_queue(annotations, &scope.policies, &mut findings);
            if let Some(queue) = choice.name() {
                patch = rules::queue_label_patch(&object, queue);
            }
            choice
        }
        None => rules::QueueChoice::Unset,
    };

    let old = match (operation, old_object) {
        (Operation::Update, Some(old)) => Some(old),
        _ => None,
    };
    if let Some(old) = &old {
        findings.extend(rules::transition_rules(&scope, old, &object));
    }
    let new_findings = rules::evaluate(&scope, object, &queue);
    match old {
        Some(old) => {
            let old_queue = match keys::value_in(&rules::labels(&old), keys::QUEUE_LABEL) {
                Some(queue) => rules::QueueChoice::Label(queue.to_string()),
                None => rules::QueueChoice::Unset,
            };
            // An old object that named no queue outside an opted-in namespace was not checked
            // against the policies: a queue added now is new, not ratcheted.
            let before = if governed || names_queue(&old) {
                rules::evaluate(&scope, old, &old_queue)
            } else {
                rules::evaluate(&scope_for(false), old, &old_queue)
            };
            findings.extend(rules::ratchet(new_findings, &before));
        }
        None => findings.extend(new_findings),
    }
    Admission { findings, patch }
}

/// Decides a QueuePolicy CREATE or UPDATE: the policy's own validity
/// ([`validate_queue_policy`]).
pub fn review_queue_policy(object: &Value) -> Admission {
    Admission {
        findings: validate_queue_policy(object),
        patch: None,
    }
}
