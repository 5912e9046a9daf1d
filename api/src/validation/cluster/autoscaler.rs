//! `ValidateRayClusterSpec`, steps 10–13: the in-tree autoscaler and `autoscalerOptions`; and
//! the autoscaler-v1 restartPolicy warning KubeRay emits after the spec rules.

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{RAY_ENABLE_AUTOSCALER_V2, env_var, has_env, pod_spec, ray_container, workers};
use crate::ray::v1::RayClusterSpec;
use crate::validation::out::Out;

const KUBERAY_GEN_AUTOSCALER_START_CMD: &str = "KUBERAY_GEN_AUTOSCALER_START_CMD";

/// Steps 10–13, in KubeRay's order.
pub(super) fn validate(spec: &RayClusterSpec, out: &mut Out<'_>) {
    // Steps 10 and 11 exclude each other.
    if spec.autoscaling() {
        in_tree_autoscaling(spec, out);
    } else {
        v2_env_without_autoscaling(spec, out);
    }
    // 12. Autoscaler idle timeout.
    if let Some(idle) = spec
        .autoscaler_options
        .as_ref()
        .and_then(|a| a.idle_timeout_seconds)
        .filter(|i| *i < 0)
    {
        out.kuberay(
            "autoscaler-idle-timeout-negative",
            "autoscalerOptions.idleTimeoutSeconds",
            format!("autoscalerOptions.idleTimeoutSeconds must be non-negative, got {idle}"),
        );
    }
    // 13. Autoscaler env.
    if spec
        .autoscaler_options
        .as_ref()
        .and_then(|a| a.env.as_ref())
        .is_some_and(|env| {
            env.iter()
                .any(|e| e.name == KUBERAY_GEN_AUTOSCALER_START_CMD)
        })
    {
        out.kuberay(
            "autoscaler-env-start-cmd",
            "autoscalerOptions.env",
            format!("autoscalerOptions.env must not contain {KUBERAY_GEN_AUTOSCALER_START_CMD}: it is managed by KubeRay and injected automatically into the autoscaler container"),
        );
    }
}

/// Step 10: the head's autoscaler-v2 env var asks for an autoscaler that is off.
fn v2_env_without_autoscaling(spec: &RayClusterSpec, out: &mut Out<'_>) {
    let head_container = ray_container(&spec.head_group_spec.template);
    if let Some(value) = env_var(head_container, RAY_ENABLE_AUTOSCALER_V2)
        .and_then(|e| e.value.as_deref())
        .filter(|v| *v == "1" || *v == "true")
    {
        out.kuberay(
            "autoscaler-v2-env-without-autoscaling",
            "headGroupSpec.template.spec.containers[0].env",
            format!("environment variable {RAY_ENABLE_AUTOSCALER_V2} cannot be set to '{value}' when enableInTreeAutoscaling is false. Please set enableInTreeAutoscaling: true to use autoscaler v2"),
        );
    }
}

/// Step 11: with autoscaling, no suspended worker group, one way to pick the autoscaler version,
/// and autoscaler v2's restart policies.
fn in_tree_autoscaling(spec: &RayClusterSpec, out: &mut Out<'_>) {
    let head = &spec.head_group_spec;
    for (i, group) in workers(spec).iter().enumerate() {
        if group.suspend == Some(true) {
            out.kuberay(
                "worker-group-suspend-with-autoscaling",
                &format!("workerGroupSpecs[{i}].suspend"),
                format!(
                    "worker group {} cannot be suspended with Autoscaler enabled",
                    group.group_name
                ),
            );
        }
    }
    let version_set = spec
        .autoscaler_options
        .as_ref()
        .is_some_and(|a| a.version.is_some());
    if version_set && has_env(ray_container(&head.template), RAY_ENABLE_AUTOSCALER_V2) {
        out.kuberay(
            "autoscaler-version-and-env-both-set",
            "autoscalerOptions.version",
            format!("both .spec.autoscalerOptions.version and head Pod env var {RAY_ENABLE_AUTOSCALER_V2} are set, please only use the former"),
        );
    }
    if spec.autoscaler_v2() {
        let head_policy = restart_policy(&head.template);
        if !head_policy.is_empty() && head_policy != "Never" {
            out.kuberay(
                "autoscaler-v2-head-restart-policy",
                "headGroupSpec.template.spec.restartPolicy",
                "restartPolicy for head Pod should be Never or unset when using autoscaler V2",
            );
        }
        for (i, group) in workers(spec).iter().enumerate() {
            let policy = restart_policy(&group.template);
            if !policy.is_empty() && policy != "Never" {
                out.kuberay(
                    "autoscaler-v2-worker-restart-policy",
                    &format!("workerGroupSpecs[{i}].template.spec.restartPolicy"),
                    format!("restartPolicy for worker group {} should be Never or unset when using autoscaler V2", group.group_name),
                );
            }
        }
    }
}

/// The autoscaler-v1 restartPolicy warning, emitted after the spec rules (docs/upstream.md,
/// "KubeRay: validation").
pub(crate) fn autoscaler_v1_restart_policy_warning(spec: &RayClusterSpec, out: &mut Out<'_>) {
    if !spec.autoscaling() || spec.autoscaler_v2() {
        return;
    }
    let offending: Vec<(usize, &str)> = workers(spec)
        .iter()
        .enumerate()
        .filter(|(_, g)| {
            let p = restart_policy(&g.template);
            !p.is_empty() && p != "Never"
        })
        .map(|(i, g)| (i, g.group_name.as_str()))
        .collect();
    if let Some((first, _)) = offending.first() {
        let names: Vec<&str> = offending.iter().map(|(_, n)| *n).collect();
        out.kuberay_warning(
            "autoscaler-v1-worker-restart-policy",
            &format!("workerGroupSpecs[{first}].template.spec.restartPolicy"),
            format!(
                "restartPolicy for worker groups [{}] should be Never or unset when using autoscaler V1",
                names.join(", ")
            ),
        );
    }
}

/// The restart policy of a template, `""` when unset.
fn restart_policy(template: &PodTemplateSpec) -> &str {
    pod_spec(template)
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("")
}
