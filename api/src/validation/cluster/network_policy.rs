//! `ValidateRayClusterSpec`, step 16: `networkPolicy`.

use serde_json::Value;

use super::workers;
use crate::features::Feature;
use crate::ray::v1::RayClusterSpec;
use crate::validation::ValidationContext;
use crate::validation::k8s::{go_quote, go_string_list, is_dns1123_label};
use crate::validation::out::Out;

/// Step 16: `networkPolicy` needs its feature gate, fits its mode, names worker groups that
/// exist, and makes each group name part of a valid NetworkPolicy name.
pub(super) fn validate(spec: &RayClusterSpec, ctx: &ValidationContext, out: &mut Out<'_>) {
    let Some(policy) = &spec.network_policy else {
        return;
    };
    if !ctx.gates.enabled(Feature::RayClusterNetworkPolicy) {
        out.kuberay(
            "network-policy-feature-gate",
            "networkPolicy",
            "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled",
        );
    }
    let mode = policy
        .get("mode")
        .and_then(Value::as_str)
        .unwrap_or("DenyAll");
    let quoted_mode = go_quote(mode);
    let rules = |rules: Option<&Value>, path: String, shown: String, out: &mut Out<'_>| {
        let Some(rules) = rules else { return };
        if mode == "DenyAllEgress" && non_empty_list(rules.get("ingressRules")) {
            out.kuberay(
                "network-policy-rules-mode-conflict",
                &format!("{path}.ingressRules"),
                format!("networkPolicy.{shown}.ingressRules cannot be set when mode is {quoted_mode} (ingress is not restricted)"),
            );
        }
        if mode == "DenyAllIngress" && non_empty_list(rules.get("egressRules")) {
            out.kuberay(
                "network-policy-rules-mode-conflict",
                &format!("{path}.egressRules"),
                format!("networkPolicy.{shown}.egressRules cannot be set when mode is {quoted_mode} (egress is not restricted)"),
            );
        }
    };
    rules(
        policy.get("head"),
        "networkPolicy.head".into(),
        "head".into(),
        out,
    );
    rules(
        policy.get("worker"),
        "networkPolicy.worker".into(),
        "worker".into(),
        out,
    );
    for (i, group) in workers(spec).iter().enumerate() {
        let errs = is_dns1123_label(&group.group_name);
        if !errs.is_empty() {
            out.kuberay(
                "network-policy-group-name-not-dns1123",
                &format!("workerGroupSpecs[{i}].groupName"),
                format!("worker group name {} must be a valid DNS1123 label when networkPolicy is enabled (it is embedded in the NetworkPolicy name): {}", go_quote(&group.group_name), go_string_list(&errs)),
            );
        }
    }
    let entries = policy
        .get("workerGroups")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for (i, entry) in entries.iter().enumerate() {
        let name = entry.get("groupName").and_then(Value::as_str).unwrap_or("");
        let shown = format!("workerGroups[{}]", go_quote(name));
        rules(
            Some(entry),
            format!("networkPolicy.workerGroups[{i}]"),
            shown.clone(),
            out,
        );
        if !workers(spec).iter().any(|g| g.group_name == name) {
            out.kuberay(
                "network-policy-unknown-worker-group",
                &format!("networkPolicy.workerGroups[{i}].groupName"),
                format!("networkPolicy.{shown} does not match any group name in workerGroupSpecs"),
            );
        }
    }
}

/// A JSON value that Go would see as a non-empty list.
fn non_empty_list(value: Option<&Value>) -> bool {
    value
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}
