//! `raygate.io/v1alpha1` QueuePolicy: which Volcano queues, priorities and gang sizes the Ray
//! objects of a set of namespaces may use.
//!
//! A QueuePolicy is cluster-scoped and written by cluster admins. It selects namespaces with a
//! label selector; when several policies select the same namespace, **every** one of them is
//! evaluated on its own (see [`crate::admission`] and `docs/queue-policy.md`): a request is
//! denied when any matching `Deny` policy refuses it, and each matching `Warn` policy that would
//! refuse it adds a warning. The default queue comes from the first matching policy, by name,
//! that names one.
//!
//! This module holds the type, namespace matching, and [`validate_queue_policy`], the checks the
//! webhook runs when a policy itself is created or updated.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::finding::{Compat, Finding};
use crate::quantity::ResourceQuantity;
use crate::settings::OptInLabel;
use crate::validation::k8s;

/// Which Volcano queues, priority classes and gang sizes the Ray objects of the selected
/// namespaces may use.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "raygate.io",
    version = "v1alpha1",
    kind = "QueuePolicy",
    status = "QueuePolicyStatus",
    shortname = "qp",
    printcolumn = r#"{"name":"enforcement","type":"string","jsonPath":".spec.enforcement"}"#,
    printcolumn = r#"{"name":"default queue","type":"string","jsonPath":".spec.defaultQueue"}"#,
    printcolumn = r#"{"name":"namespaces","type":"integer","jsonPath":".status.matchedNamespaces"}"#,
    printcolumn = r#"{"name":"age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct QueuePolicySpec {
    /// Namespaces the policy applies to; absent selects every namespace. Only namespaces opted
    /// into Volcano scheduling (`raygate.io/scheduler=volcano`) are ever governed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Queue given to a RayJob or RayCluster that names none (after the namespace annotation
    /// `scheduling.volcano.sh/queue-name`, which wins). Must be in `allowedQueues` when that is
    /// set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_queue: Option<String>,
    /// Queues the selected namespaces may use; absent allows every queue. An object that names
    /// no queue uses Volcano's `default` queue, which must then be listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_queues: Option<Vec<String>>,
    /// Whether every RayJob and RayCluster must end up with a queue label (its own, or one
    /// defaulted from the namespace or a policy) instead of falling back to Volcano's `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_queue: Option<bool>,
    /// Priority classes the `ray.io/priority-class-name` label may name; absent allows all. An
    /// object without the label is always allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_priority_classes: Option<Vec<String>>,
    /// Largest PodGroup `minMember` (head + workers) one RayJob or RayCluster may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_min_member: Option<i32>,
    /// Largest PodGroup `minResources`, per resource name; resources not listed are unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_min_resources: Option<BTreeMap<String, Quantity>>,
    /// `Deny` (default) rejects violating objects; `Warn` (audit mode) admits them with warnings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<Enforcement>,
    /// What admission does with a RayJob or RayCluster whose Pods no node of the cluster could
    /// ever hold (docs/feasibility.md): `Warn` (default) admits it with a warning, `Deny`
    /// rejects it (a warning under `enforcement: Warn`), `Ignore` says nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infeasible: Option<InfeasibleAction>,
    /// Nodes an autoscaler can add to the cluster (node pools that may be scaled to zero), as
    /// many as needed: feasibility judges the selected namespaces' objects against the nodes
    /// that exist and these, so a scale-from-zero cluster is judged against what it can become.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_templates: Option<Vec<NodeTemplate>>,
}

/// The shape of the nodes of a node pool an autoscaler can add (docs/feasibility.md, "Nodes an
/// autoscaler adds").
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTemplate {
    /// A name for the findings, e.g. the node pool's: `the largest node offers 8 (template
    /// gpu-pool)`.
    pub name: String,
    /// The labels its nodes carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// The taints its nodes carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<Taint>>,
    /// The allocatable resources of one of its nodes (`cpu`, `memory`, `nvidia.com/gpu`, …).
    pub allocatable: BTreeMap<String, Quantity>,
}

/// The node templates of `policies`, in their order.
pub fn node_templates<'a>(policies: &[&'a QueuePolicy]) -> Vec<&'a NodeTemplate> {
    policies
        .iter()
        .flat_map(|p| p.spec.node_templates.iter().flatten())
        .collect()
}

/// What a policy does with a Ray object that can never be scheduled on the cluster's nodes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum InfeasibleAction {
    /// Reject the object.
    Deny,
    /// Admit the object with a warning.
    #[default]
    Warn,
    /// Admit the object and say nothing.
    Ignore,
}

/// What a policy does with a violation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Enforcement {
    /// Reject the object.
    #[default]
    Deny,
    /// Admit the object and tell the user (audit mode).
    Warn,
}

/// Observed state of a QueuePolicy, written by raygate's reconciler.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueuePolicyStatus {
    /// The `metadata.generation` the status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// How many namespaces opted into Volcano scheduling the policy currently selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_namespaces: Option<i32>,
}

impl QueuePolicy {
    /// The policy's enforcement (`Deny` when unset).
    pub fn enforcement(&self) -> Enforcement {
        self.spec.enforcement.unwrap_or_default()
    }

    /// What the policy does with an infeasible object (`Warn` when unset); `Deny` acts as
    /// `Warn` under `enforcement: Warn`, as every other rule of the policy does.
    pub fn infeasible(&self) -> InfeasibleAction {
        match (self.spec.infeasible.unwrap_or_default(), self.enforcement()) {
            (InfeasibleAction::Deny, Enforcement::Warn) => InfeasibleAction::Warn,
            (action, _) => action,
        }
    }

    /// Whether the policy selects a namespace with these labels.
    pub fn selects(&self, namespace_labels: &BTreeMap<String, String>) -> bool {
        self.spec
            .namespace_selector
            .as_ref()
            .is_none_or(|selector| selector_matches(selector, namespace_labels))
    }
}

/// Whether a label selector matches `labels`, with Kubernetes' semantics: every `matchLabels`
/// entry and every expression must hold; an empty selector matches everything. An expression
/// with an unknown operator matches nothing (such selectors are refused at admission).
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value))
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|requirement| requirement_matches(requirement, labels))
}

fn requirement_matches(
    requirement: &LabelSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> bool {
    let value = labels.get(&requirement.key);
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

/// The policies that govern a namespace with these labels, sorted by name (the combination
/// rule's order). The caller decides whether the namespace is opted in at all.
pub fn matching_policies<'a, P: AsRef<QueuePolicy>>(
    policies: &'a [P],
    namespace_labels: &BTreeMap<String, String>,
) -> Vec<&'a QueuePolicy> {
    let mut matched: Vec<&QueuePolicy> = policies
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| p.selects(namespace_labels))
        .collect();
    matched.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    matched
}

impl AsRef<QueuePolicy> for QueuePolicy {
    fn as_ref(&self) -> &QueuePolicy {
        self
    }
}

/// The status a policy should have, given the labels of every namespace in the cluster:
/// `observedGeneration` = its generation, `matchedNamespaces` = the namespaces opted in by
/// `opt_in` (the only ones a QueuePolicy governs) that it selects. `None` when the current
/// status already says so (nothing to write).
pub fn desired_status<'a>(
    policy: &QueuePolicy,
    opt_in: &OptInLabel,
    namespaces: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
) -> Option<QueuePolicyStatus> {
    let matched = namespaces
        .into_iter()
        .filter(|labels| opt_in.selects(labels) && policy.selects(labels))
        .count();
    let status = QueuePolicyStatus {
        observed_generation: policy.metadata.generation,
        matched_namespaces: Some(i32::try_from(matched).unwrap_or(i32::MAX)),
    };
    (policy.status.as_ref() != Some(&status)).then_some(status)
}

/// Rule names of [`validate_queue_policy`].
pub mod rules {
    /// **Error.** The object is not a JSON object, or a field has the wrong JSON type.
    pub const POLICY_MALFORMED: &str = "queue-policy-malformed";
    /// **Error.** A field raygate does not know (a typo would otherwise silently do nothing).
    pub const POLICY_UNKNOWN_FIELD: &str = "queue-policy-unknown-field";
    /// **Error.** A `namespaceSelector` the API server would refuse in a LabelSelector: bad
    /// keys or values, an unknown operator, values with `Exists`/`DoesNotExist`, none with
    /// `In`/`NotIn`.
    pub const POLICY_SELECTOR_INVALID: &str = "queue-policy-selector-invalid";
    /// **Error.** A queue name that is not a DNS-1123 subdomain (Volcano's Queue name rule).
    pub const POLICY_QUEUE_NAME_INVALID: &str = "queue-policy-queue-name-invalid";
    /// **Error.** `defaultQueue` not in `allowedQueues`: every defaulted object would be denied.
    pub const POLICY_DEFAULT_QUEUE_NOT_ALLOWED: &str = "queue-policy-default-queue-not-allowed";
    /// **Error.** A priority class name that is not a DNS-1123 subdomain.
    pub const POLICY_PRIORITY_CLASS_INVALID: &str = "queue-policy-priority-class-invalid";
    /// **Error.** `maxMinMember` below 1: no gang (at least the head) could ever be admitted.
    pub const POLICY_MAX_MIN_MEMBER_INVALID: &str = "queue-policy-max-min-member-invalid";
    /// **Error.** A `maxMinResources` value that is not a non-negative quantity.
    pub const POLICY_MAX_MIN_RESOURCES_INVALID: &str = "queue-policy-max-min-resources-invalid";
    /// **Error.** `enforcement` other than `Deny` or `Warn`.
    pub const POLICY_ENFORCEMENT_INVALID: &str = "queue-policy-enforcement-invalid";
    /// **Error.** `infeasible` other than `Deny`, `Warn` or `Ignore`.
    pub const POLICY_INFEASIBLE_INVALID: &str = "queue-policy-infeasible-invalid";
    /// **Error.** A node template without a name, with a name used twice, with an allocatable
    /// value that is not a non-negative quantity, or with a taint without a key or with an
    /// effect other than `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub const POLICY_NODE_TEMPLATE_INVALID: &str = "queue-policy-node-template-invalid";
    /// **Warning.** `allowedQueues: []` allows no queue: every Ray object of the selected
    /// namespaces is refused (legitimate to freeze namespaces, but usually a mistake).
    pub const POLICY_ALLOWS_NOTHING: &str = "queue-policy-allows-nothing";
}

const SPEC_FIELDS: [&str; 10] = [
    "namespaceSelector",
    "defaultQueue",
    "allowedQueues",
    "requireQueue",
    "allowedPriorityClasses",
    "maxMinMember",
    "maxMinResources",
    "enforcement",
    "infeasible",
    "nodeTemplates",
];
const NODE_TEMPLATE_FIELDS: [&str; 4] = ["name", "labels", "taints", "allocatable"];
const TAINT_FIELDS: [&str; 4] = ["key", "value", "effect", "timeAdded"];
const ROOT_FIELDS: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];
const STATUS_FIELDS: [&str; 2] = ["observedGeneration", "matchedNamespaces"];
const SELECTOR_FIELDS: [&str; 2] = ["matchLabels", "matchExpressions"];
const REQUIREMENT_FIELDS: [&str; 3] = ["key", "operator", "values"];

/// Every reason to refuse a QueuePolicy (and warnings), with field paths. Takes the raw object
/// so that unknown fields and wrong types are reported where they are, never as a panic.
pub fn validate_queue_policy(object: &Value) -> Vec<Finding> {
    let mut findings = Vec::new();
    let Some(root) = object.as_object() else {
        findings.push(error(
            rules::POLICY_MALFORMED,
            "",
            "a QueuePolicy must be a JSON object",
        ));
        return findings;
    };
    unknown_fields(root, &ROOT_FIELDS, "", &mut findings);
    if let Some(status) = root.get("status").and_then(Value::as_object) {
        unknown_fields(status, &STATUS_FIELDS, "status.", &mut findings);
    }
    let Some(spec) = root.get("spec") else {
        return findings;
    };
    let Some(spec_map) = spec.as_object() else {
        findings.push(error(rules::POLICY_MALFORMED, "spec", "must be an object"));
        return findings;
    };
    unknown_fields(spec_map, &SPEC_FIELDS, "spec.", &mut findings);
    if let Some(selector) = spec_map.get("namespaceSelector") {
        validate_selector(selector, "spec.namespaceSelector", &mut findings);
    }
    for (i, template) in (spec_map.get("nodeTemplates"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let field = format!("spec.nodeTemplates[{i}]");
        let Some(template) = template.as_object() else {
            continue;
        };
        unknown_fields(
            template,
            &NODE_TEMPLATE_FIELDS,
            &format!("{field}."),
            &mut findings,
        );
        for (j, taint) in (template.get("taints"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(taint) = taint.as_object() {
                let prefix = format!("{field}.taints[{j}].");
                unknown_fields(taint, &TAINT_FIELDS, &prefix, &mut findings);
            }
        }
    }
    let mut typable = spec_map.clone();
    match typable.get("enforcement") {
        None | Some(Value::Null) => {}
        Some(Value::String(e)) if matches!(e.as_str(), "Deny" | "Warn") => {}
        Some(other) => {
            findings.push(error(
                rules::POLICY_ENFORCEMENT_INVALID,
                "spec.enforcement",
                format!("Unsupported value: {other}: supported values: \"Deny\", \"Warn\""),
            ));
            typable.remove("enforcement");
        }
    }
    match typable.get("infeasible") {
        None | Some(Value::Null) => {}
        Some(Value::String(e)) if matches!(e.as_str(), "Deny" | "Warn" | "Ignore") => {}
        Some(other) => {
            findings.push(error(
                rules::POLICY_INFEASIBLE_INVALID,
                "spec.infeasible",
                format!(
                    "Unsupported value: {other}: supported values: \"Deny\", \"Warn\", \"Ignore\""
                ),
            ));
            typable.remove("infeasible");
        }
    }
    let typed: QueuePolicySpec = match serde_json::from_value(Value::Object(typable)) {
        Ok(spec) => spec,
        Err(e) => {
            findings.push(error(rules::POLICY_MALFORMED, "spec", e.to_string()));
            return findings;
        }
    };
    validate_spec(&typed, &mut findings);
    findings
}

/// Each node template has a name of its own, allocatable quantities and taints a node could
/// have.
fn validate_node_templates(templates: &[NodeTemplate], findings: &mut Vec<Finding>) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, template) in templates.iter().enumerate() {
        let field = format!("spec.nodeTemplates[{i}]");
        let invalid =
            |at: String, message: String| error(rules::POLICY_NODE_TEMPLATE_INVALID, &at, message);
        if template.name.is_empty() {
            findings.push(invalid(
                format!("{field}.name"),
                "Required value: name the template, e.g. after its node pool".to_string(),
            ));
        } else if !seen.insert(template.name.as_str()) {
            findings.push(invalid(
                format!("{field}.name"),
                format!(
                    "Duplicate value: {:?}: another node template of this policy has that name",
                    template.name
                ),
            ));
        }
        for (resource, quantity) in &template.allocatable {
            let valid =
                ResourceQuantity::try_from(quantity).is_ok_and(|q| q >= ResourceQuantity::ZERO);
            if !valid {
                findings.push(invalid(
                    format!("{field}.allocatable.{resource}"),
                    format!(
                        "Invalid value: {:?}: must be a non-negative quantity, e.g. 8, 500m or 64Gi",
                        quantity.0
                    ),
                ));
            }
        }
        for (j, taint) in template.taints.iter().flatten().enumerate() {
            if taint.key.is_empty() {
                findings.push(invalid(
                    format!("{field}.taints[{j}].key"),
                    "Required value".to_string(),
                ));
            }
            if !matches!(
                taint.effect.as_str(),
                "NoSchedule" | "PreferNoSchedule" | "NoExecute"
            ) {
                findings.push(invalid(
                    format!("{field}.taints[{j}].effect"),
                    format!(
                        "Unsupported value: {:?}: supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
                        taint.effect
                    ),
                ));
            }
        }
    }
}

fn validate_spec(spec: &QueuePolicySpec, findings: &mut Vec<Finding>) {
    validate_node_templates(spec.node_templates.as_deref().unwrap_or_default(), findings);
    for (i, queue) in spec.allowed_queues.iter().flatten().enumerate() {
        queue_name(queue, &format!("spec.allowedQueues[{i}]"), findings);
    }
    if let Some(queue) = &spec.default_queue {
        queue_name(queue, "spec.defaultQueue", findings);
        if let Some(allowed) = &spec.allowed_queues
            && !allowed.contains(queue)
        {
            findings.push(error(
                rules::POLICY_DEFAULT_QUEUE_NOT_ALLOWED,
                "spec.defaultQueue",
                format!(
                    "queue {queue:?} is not in spec.allowedQueues [{}]: every object defaulted to it would be denied",
                    allowed.join(", ")
                ),
            ));
        }
    }
    if spec.allowed_queues.as_ref().is_some_and(Vec::is_empty) {
        findings.push(Finding::warning(
            rules::POLICY_ALLOWS_NOTHING,
            "spec.allowedQueues",
            "an empty list allows no queue: every RayJob and RayCluster of the selected namespaces will be refused",
            Compat::Raygate,
        ));
    }
    for (i, class) in spec.allowed_priority_classes.iter().flatten().enumerate() {
        let errs = k8s::is_dns1123_subdomain(class);
        if !errs.is_empty() {
            findings.push(error(
                rules::POLICY_PRIORITY_CLASS_INVALID,
                format!("spec.allowedPriorityClasses[{i}]"),
                format!("Invalid value: {class:?}: {}", errs.join("; ")),
            ));
        }
    }
    if let Some(max) = spec.max_min_member
        && max < 1
    {
        findings.push(error(
            rules::POLICY_MAX_MIN_MEMBER_INVALID,
            "spec.maxMinMember",
            format!("Invalid value: {max}: must be at least 1 (every gang has a head Pod)"),
        ));
    }
    for (name, quantity) in spec.max_min_resources.iter().flatten() {
        let field = format!("spec.maxMinResources.{name}");
        match ResourceQuantity::try_from(quantity) {
            Ok(q) if q < ResourceQuantity::ZERO => findings.push(error(
                rules::POLICY_MAX_MIN_RESOURCES_INVALID,
                field,
                format!(
                    "Invalid value: {:?}: must be greater than or equal to 0",
                    quantity.0
                ),
            )),
            Ok(_) => {}
            Err(e) => findings.push(error(
                rules::POLICY_MAX_MIN_RESOURCES_INVALID,
                field,
                format!("Invalid value: {:?}: {e}", quantity.0),
            )),
        }
    }
}

fn queue_name(queue: &str, field: &str, findings: &mut Vec<Finding>) {
    let errs = k8s::is_dns1123_subdomain(queue);
    if !errs.is_empty() {
        findings.push(error(
            rules::POLICY_QUEUE_NAME_INVALID,
            field,
            format!("Invalid value: {queue:?}: {}", errs.join("; ")),
        ));
    }
}

fn validate_selector(selector: &Value, field: &str, findings: &mut Vec<Finding>) {
    let Some(map) = selector.as_object() else {
        findings.push(error(
            rules::POLICY_SELECTOR_INVALID,
            field,
            "must be an object",
        ));
        return;
    };
    unknown_fields(map, &SELECTOR_FIELDS, &format!("{field}."), findings);
    if let Some(labels) = map.get("matchLabels") {
        match labels.as_object() {
            Some(labels) => {
                for (key, value) in labels {
                    let at = format!("{field}.matchLabels");
                    label_key(key, &at, findings);
                    match value.as_str() {
                        Some(value) => label_value(value, &format!("{at}[{key}]"), findings),
                        None => findings.push(error(
                            rules::POLICY_SELECTOR_INVALID,
                            format!("{at}[{key}]"),
                            "must be a string",
                        )),
                    }
                }
            }
            None => findings.push(error(
                rules::POLICY_SELECTOR_INVALID,
                format!("{field}.matchLabels"),
                "must be a map of strings",
            )),
        }
    }
    if let Some(expressions) = map.get("matchExpressions") {
        let Some(expressions) = expressions.as_array() else {
            findings.push(error(
                rules::POLICY_SELECTOR_INVALID,
                format!("{field}.matchExpressions"),
                "must be a list",
            ));
            return;
        };
        for (i, expression) in expressions.iter().enumerate() {
            requirement(
                expression,
                &format!("{field}.matchExpressions[{i}]"),
                findings,
            );
        }
    }
}

fn requirement(expression: &Value, field: &str, findings: &mut Vec<Finding>) {
    let Some(map) = expression.as_object() else {
        findings.push(error(
            rules::POLICY_SELECTOR_INVALID,
            field,
            "must be an object",
        ));
        return;
    };
    unknown_fields(map, &REQUIREMENT_FIELDS, &format!("{field}."), findings);
    match map.get("key").and_then(Value::as_str) {
        Some(key) => label_key(key, &format!("{field}.key"), findings),
        None => findings.push(error(
            rules::POLICY_SELECTOR_INVALID,
            format!("{field}.key"),
            "Required value",
        )),
    }
    let values: Option<Vec<&str>> = match map.get("values") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => Some(items.iter().filter_map(Value::as_str).collect()),
        Some(_) => {
            findings.push(error(
                rules::POLICY_SELECTOR_INVALID,
                format!("{field}.values"),
                "must be a list of strings",
            ));
            return;
        }
    };
    let count = values.as_ref().map_or(0, Vec::len);
    match map.get("operator").and_then(Value::as_str) {
        Some("In" | "NotIn") if count == 0 => findings.push(error(
            rules::POLICY_SELECTOR_INVALID,
            format!("{field}.values"),
            "Required value: must be specified when `operator` is 'In' or 'NotIn'",
        )),
        Some("In" | "NotIn") => {}
        Some("Exists" | "DoesNotExist") if count > 0 => findings.push(error(
            rules::POLICY_SELECTOR_INVALID,
            format!("{field}.values"),
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        Some("Exists" | "DoesNotExist") => {}
        Some(other) => findings.push(error(
            rules::POLICY_SELECTOR_INVALID,
            format!("{field}.operator"),
            format!("Unsupported value: {other:?}: supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\""),
        )),
        None => findings.push(error(
            rules::POLICY_SELECTOR_INVALID,
            format!("{field}.operator"),
            "Required value",
        )),
    }
    for (j, value) in values.into_iter().flatten().enumerate() {
        label_value(value, &format!("{field}.values[{j}]"), findings);
    }
}

fn label_key(key: &str, field: &str, findings: &mut Vec<Finding>) {
    let errs = k8s::is_qualified_name(key);
    if !errs.is_empty() {
        findings.push(error(
            rules::POLICY_SELECTOR_INVALID,
            field,
            format!("Invalid value: {key:?}: {}", errs.join("; ")),
        ));
    }
}

fn label_value(value: &str, field: &str, findings: &mut Vec<Finding>) {
    let errs = k8s::is_valid_label_value(value);
    if !errs.is_empty() {
        findings.push(error(
            rules::POLICY_SELECTOR_INVALID,
            field,
            format!("Invalid value: {value:?}: {}", errs.join("; ")),
        ));
    }
}

fn unknown_fields(
    map: &serde_json::Map<String, Value>,
    known: &[&str],
    prefix: &str,
    findings: &mut Vec<Finding>,
) {
    for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
        findings.push(error(
            rules::POLICY_UNKNOWN_FIELD,
            format!("{prefix}{key}"),
            format!(
                "field not declared in schema; known fields: {}",
                known.join(", ")
            ),
        ));
    }
}

fn error(rule: &str, field: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding::error(rule, field, message, Compat::Raygate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn selector(value: Value) -> LabelSelector {
        serde_json::from_value(value).expect("selector")
    }

    #[test]
    fn selectors_match_like_kubernetes() {
        let ns = labels(&[("team", "a"), ("env", "prod")]);
        let table = [
            (json!({}), true),
            (json!({"matchLabels": {"team": "a"}}), true),
            (json!({"matchLabels": {"team": "b"}}), false),
            (json!({"matchLabels": {"team": "a", "env": "dev"}}), false),
            (
                json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["b"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["b"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["x"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "Exists"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "Near"}]}),
                false,
            ),
        ];
        for (value, expected) in table {
            assert_eq!(
                selector_matches(&selector(value.clone()), &ns),
                expected,
                "{value}"
            );
        }
    }

    #[test]
    fn absent_selector_selects_every_namespace_and_matches_sort_by_name() {
        let all = QueuePolicy::new("z-all", QueuePolicySpec::default());
        let team_b = QueuePolicy::new(
            "b",
            QueuePolicySpec {
                namespace_selector: Some(selector(json!({"matchLabels": {"team": "b"}}))),
                ..QueuePolicySpec::default()
            },
        );
        let team_a = QueuePolicy::new(
            "a",
            QueuePolicySpec {
                namespace_selector: Some(selector(json!({"matchLabels": {"team": "a"}}))),
                ..QueuePolicySpec::default()
            },
        );
        let policies = [all, team_b, team_a];
        let names: Vec<_> = matching_policies(&policies, &labels(&[("team", "a")]))
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["a", "z-all"]);
    }

    #[test]
    fn status_counts_opted_in_selected_namespaces_and_is_written_only_on_change() {
        let opt_in = ("team.example.com/gang", "on");
        let label = OptInLabel {
            key: opt_in.0.to_owned(),
            value: opt_in.1.to_owned(),
            ..OptInLabel::default()
        };
        let namespaces = [
            // raygate's default label opts nothing in when another one is configured.
            labels(&[
                (
                    crate::keys::NAMESPACE_OPT_IN_LABEL,
                    crate::keys::NAMESPACE_OPT_IN_VALUE,
                ),
                ("team", "a"),
            ]),
            labels(&[opt_in, ("team", "a")]),
            labels(&[opt_in, ("team", "b")]),
            labels(&[("team", "a")]),
            labels(&[opt_in]),
        ];
        let mut policy = QueuePolicy::new(
            "p",
            QueuePolicySpec {
                namespace_selector: Some(selector(json!({"matchExpressions": [
                    {"key": "team", "operator": "Exists"}]}))),
                ..QueuePolicySpec::default()
            },
        );
        policy.metadata.generation = Some(3);
        let status = desired_status(&policy, &label, &namespaces).expect("no status yet");
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.matched_namespaces, Some(2));
        policy.status = Some(status);
        assert_eq!(desired_status(&policy, &label, &namespaces), None);
        policy.metadata.generation = Some(4);
        assert_eq!(
            desired_status(&policy, &label, &namespaces).and_then(|s| s.observed_generation),
            Some(4)
        );
        policy.spec.namespace_selector = None;
        assert_eq!(
            desired_status(&policy, &label, &namespaces).and_then(|s| s.matched_namespaces),
            Some(3)
        );
    }

    fn rules_of(object: Value) -> Vec<(String, String)> {
        validate_queue_policy(&object)
            .into_iter()
            .map(|f| (f.rule, f.field))
            .collect()
    }

    fn policy(spec: Value) -> Value {
        json!({"apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy",
               "metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn policy_validation_table() {
        let table: [(Value, Option<(&str, &str)>); 28] = [
            (
                policy(json!({"defaultQueue": "a", "allowedQueues": ["a", "b"],
                              "namespaceSelector": {"matchLabels": {"team": "a"},
                                  "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
                              "requireQueue": true, "allowedPriorityClasses": ["high"],
                              "maxMinMember": 4, "maxMinResources": {"cpu": "8", "nvidia.com/gpu": 2},
                              "enforcement": "Warn", "infeasible": "Deny"})),
                None,
            ),
            (policy(json!({})), None),
            (
                policy(json!({"defaultQueue": "c", "allowedQueues": ["a"]})),
                Some((rules::POLICY_DEFAULT_QUEUE_NOT_ALLOWED, "spec.defaultQueue")),
            ),
            (
                policy(json!({"allowedQueue": ["a"]})),
                Some((rules::POLICY_UNKNOWN_FIELD, "spec.allowedQueue")),
            ),
            (
                json!({"apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy", "spec": {}, "extra": 1}),
                Some((rules::POLICY_UNKNOWN_FIELD, "extra")),
            ),
            (
                policy(json!({"namespaceSelector": {"matchLabel": {"a": "b"}}})),
                Some((
                    rules::POLICY_UNKNOWN_FIELD,
                    "spec.namespaceSelector.matchLabel",
                )),
            ),
            (
                policy(json!({"namespaceSelector": {"matchLabels": {"bad key!": "b"}}})),
                Some((
                    rules::POLICY_SELECTOR_INVALID,
                    "spec.namespaceSelector.matchLabels",
                )),
            ),
            (
                policy(json!({"namespaceSelector": {"matchLabels": {"team": "no spaces"}}})),
                Some((
                    rules::POLICY_SELECTOR_INVALID,
                    "spec.namespaceSelector.matchLabels[team]",
                )),
            ),
            (
                policy(
                    json!({"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Near", "values": ["a"]}]}}),
                ),
                Some((
                    rules::POLICY_SELECTOR_INVALID,
                    "spec.namespaceSelector.matchExpressions[0].operator",
                )),
            ),
            (
                policy(
                    json!({"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In"}]}}),
                ),
                Some((
                    rules::POLICY_SELECTOR_INVALID,
                    "spec.namespaceSelector.matchExpressions[0].values",
                )),
            ),
            (
                policy(
                    json!({"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]}}),
                ),
                Some((
                    rules::POLICY_SELECTOR_INVALID,
                    "spec.namespaceSelector.matchExpressions[0].values",
                )),
            ),
            (
                policy(
                    json!({"namespaceSelector": {"matchExpressions": [{"operator": "Exists"}]}}),
                ),
                Some((
                    rules::POLICY_SELECTOR_INVALID,
                    "spec.namespaceSelector.matchExpressions[0].key",
                )),
            ),
            (
                policy(json!({"allowedQueues": ["Not_A_Queue"]})),
                Some((rules::POLICY_QUEUE_NAME_INVALID, "spec.allowedQueues[0]")),
            ),
            (
                policy(json!({"allowedPriorityClasses": ["UPPER"]})),
                Some((
                    rules::POLICY_PRIORITY_CLASS_INVALID,
                    "spec.allowedPriorityClasses[0]",
                )),
            ),
            (
                policy(json!({"maxMinMember": 0})),
                Some((rules::POLICY_MAX_MIN_MEMBER_INVALID, "spec.maxMinMember")),
            ),
            (
                policy(json!({"maxMinResources": {"cpu": "-1"}})),
                Some((
                    rules::POLICY_MAX_MIN_RESOURCES_INVALID,
                    "spec.maxMinResources.cpu",
                )),
            ),
            (
                policy(json!({"maxMinResources": {"cpu": "lots"}})),
                Some((
                    rules::POLICY_MAX_MIN_RESOURCES_INVALID,
                    "spec.maxMinResources.cpu",
                )),
            ),
            (
                policy(json!({"enforcement": "Audit"})),
                Some((rules::POLICY_ENFORCEMENT_INVALID, "spec.enforcement")),
            ),
            (
                policy(json!({"infeasible": "Refuse"})),
                Some((rules::POLICY_INFEASIBLE_INVALID, "spec.infeasible")),
            ),
            (
                policy(json!({"requireQueue": "yes"})),
                Some((rules::POLICY_MALFORMED, "spec")),
            ),
            (
                policy(
                    json!({"nodeTemplates": [{"name": "gpu", "labels": {"pool": "gpu"},
                    "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                    "allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}}]}),
                ),
                None,
            ),
            (
                policy(json!({"nodeTemplates": [{"name": "", "allocatable": {}}]})),
                Some((
                    rules::POLICY_NODE_TEMPLATE_INVALID,
                    "spec.nodeTemplates[0].name",
                )),
            ),
            (
                policy(json!({"nodeTemplates": [{"name": "a", "allocatable": {}},
                                                {"name": "a", "allocatable": {}}]})),
                Some((
                    rules::POLICY_NODE_TEMPLATE_INVALID,
                    "spec.nodeTemplates[1].name",
                )),
            ),
            (
                policy(json!({"nodeTemplates": [{"name": "a", "allocatable": {"cpu": "-1"}}]})),
                Some((
                    rules::POLICY_NODE_TEMPLATE_INVALID,
                    "spec.nodeTemplates[0].allocatable.cpu",
                )),
            ),
            (
                policy(
                    json!({"nodeTemplates": [{"name": "a", "allocatable": {"cpu": "8 cores"}}]}),
                ),
                Some((
                    rules::POLICY_NODE_TEMPLATE_INVALID,
                    "spec.nodeTemplates[0].allocatable.cpu",
                )),
            ),
            (
                policy(json!({"nodeTemplates": [{"name": "a", "allocatable": {},
                    "taints": [{"key": "x", "effect": "NoRun"}]}]})),
                Some((
                    rules::POLICY_NODE_TEMPLATE_INVALID,
                    "spec.nodeTemplates[0].taints[0].effect",
                )),
            ),
            (
                policy(json!({"nodeTemplates": [{"name": "a", "allocatable": {},
                    "taints": [{"key": "", "effect": "NoSchedule"}]}]})),
                Some((
                    rules::POLICY_NODE_TEMPLATE_INVALID,
                    "spec.nodeTemplates[0].taints[0].key",
                )),
            ),
            (
                policy(
                    json!({"nodeTemplates": [{"name": "a", "allocatable": {}, "allocatables": {}}]}),
                ),
                Some((
                    rules::POLICY_UNKNOWN_FIELD,
                    "spec.nodeTemplates[0].allocatables",
                )),
            ),
        ];
        for (object, expected) in table {
            let found = rules_of(object.clone());
            match expected {
                None => assert!(found.is_empty(), "{object}: {found:?}"),
                Some((rule, field)) => assert!(
                    found.contains(&(rule.to_string(), field.to_string())),
                    "{object}: expected {rule} at {field}, got {found:?}"
                ),
            }
        }
    }

    #[test]
    fn infeasible_defaults_to_warn_and_audit_mode_never_denies() {
        let with = |infeasible: Option<InfeasibleAction>, enforcement: Option<Enforcement>| {
            QueuePolicy::new(
                "p",
                QueuePolicySpec {
                    infeasible,
                    enforcement,
                    ..QueuePolicySpec::default()
                },
            )
            .infeasible()
        };
        assert_eq!(with(None, None), InfeasibleAction::Warn);
        assert_eq!(
            with(Some(InfeasibleAction::Deny), None),
            InfeasibleAction::Deny
        );
        assert_eq!(
            with(Some(InfeasibleAction::Deny), Some(Enforcement::Warn)),
            InfeasibleAction::Warn
        );
        assert_eq!(
            with(Some(InfeasibleAction::Ignore), Some(Enforcement::Warn)),
            InfeasibleAction::Ignore
        );
    }

    #[test]
    fn empty_allow_list_is_a_warning_and_garbage_never_panics() {
        let findings = validate_queue_policy(&policy(json!({"allowedQueues": []})));
        assert!(
            findings
                .iter()
                .all(|f| f.rule == rules::POLICY_ALLOWS_NOTHING && !f.is_error()),
            "{findings:?}"
        );
        assert!(!findings.is_empty());
        for garbage in [
            json!(null),
            json!([1, 2]),
            json!({"spec": 3}),
            json!({"spec": {"namespaceSelector": []}}),
            json!({"spec": {"namespaceSelector": {"matchExpressions": [3, {"key": 1, "operator": 2, "values": "x"}]}}}),
            json!({"spec": {"maxMinMember": "many"}}),
        ] {
            let findings = validate_queue_policy(&garbage);
            assert!(findings.iter().any(Finding::is_error), "{garbage}");
        }
    }
}
