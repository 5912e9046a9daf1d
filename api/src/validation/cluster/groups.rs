//! `ValidateRayClusterSpec`, steps 1–4 and 9: the head group, each worker group, and suspended
//! worker groups; with raygate's group rules after the KubeRay rule they belong to.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{
    RAY_ENABLE_AUTOSCALER_V2, containers, head_env_enables_v2, map_get, ray_container, workers,
};
use crate::features::Feature;
use crate::ray::v1::{RayClusterSpec, WorkerGroupSpec};
use crate::validation::ValidationContext;
use crate::validation::k8s::{is_qualified_name, is_valid_label_value};
use crate::validation::out::Out;
use crate::validation::raygate_rules as rr;
use crate::validation::version::GenericVersion;

/// Steps 1–3: the head group has a container, sets its resources and Ray labels once each;
/// then raygate's check that its Ray container has requests for gang sizing.
pub(super) fn head_group(spec: &RayClusterSpec, out: &mut Out<'_>) {
    let head = &spec.head_group_spec;
    // 1. Head containers.
    if containers(&head.template).is_empty() {
        out.kuberay(
            "head-group-no-containers",
            "headGroupSpec.template.spec.containers",
            "headGroupSpec should have at least one container",
        );
    }
    // 2. Head resources set twice.
    group_resources(
        "Head",
        "headGroupSpec",
        head.ray_start_params.as_ref(),
        head.resources.as_ref(),
        out,
    );
    // 3. Head labels.
    group_labels(
        "Head",
        "headGroupSpec",
        head.ray_start_params.as_ref(),
        head.labels.as_ref(),
        out,
    );
    // raygate: the head's Ray container has requests for gang sizing.
    ray_container_resources("the head group", "headGroupSpec", &head.template, out);
}

/// Step 4: every rule of one worker group before the next group's.
pub(super) fn worker_groups(spec: &RayClusterSpec, out: &mut Out<'_>) {
    let autoscaling = spec.autoscaling();
    let mut seen_names: HashMap<&str, usize> = HashMap::new();
    for (i, group) in workers(spec).iter().enumerate() {
        let base = format!("workerGroupSpecs[{i}]");
        // 4.1
        if containers(&group.template).is_empty() {
            out.kuberay(
                "worker-group-no-containers",
                &format!("{base}.template.spec.containers"),
                "workerGroupSpec should have at least one container",
            );
        }
        worker_group_name(i, group, &base, &mut seen_names, out);
        worker_group_replicas(group, &base, autoscaling, out);
        // 4.5, 4.6
        group_resources(
            &group.group_name,
            &base,
            group.ray_start_params.as_ref(),
            group.resources.as_ref(),
            out,
        );
        group_labels(
            &group.group_name,
            &base,
            group.ray_start_params.as_ref(),
            group.labels.as_ref(),
            out,
        );
        worker_group_idle_timeout(spec, group, &base, out);
        worker_group_priority(spec, group, &base, out);
        // raygate: the worker's Ray container has requests for gang sizing.
        ray_container_resources(
            &format!("worker group {}", group.group_name),
            &base,
            &group.template,
            out,
        );
    }
}

/// raygate: unique, label-safe group names (upstream defects 5 and 19, docs/upstream.md).
/// `seen_names` maps each name met so far to the index of its first group.
fn worker_group_name<'s>(
    index: usize,
    group: &'s WorkerGroupSpec,
    base: &str,
    seen_names: &mut HashMap<&'s str, usize>,
    out: &mut Out<'_>,
) {
    let g = group.group_name.as_str();
    if let Some(first) = seen_names.get(g) {
        out.raygate(
            rr::WORKER_GROUP_DUPLICATE_NAME,
            &format!("{base}.groupName"),
            format!("worker group names must be unique: {g:?} is already the name of workerGroupSpecs[{first}]; KubeRay would create and delete this group's Pods in a loop"),
        );
    } else {
        seen_names.insert(g, index);
    }
    let label_errs = is_valid_label_value(g);
    if !label_errs.is_empty() {
        out.raygate(
            rr::WORKER_GROUP_NAME_INVALID,
            &format!("{base}.groupName"),
            format!("worker group name {g:?} is used as the value of the ray.io/group Pod label and must be a valid label value: {}", label_errs.join("; ")),
        );
    }
}

/// Steps 4.2–4.4: `minReplicas`, `maxReplicas` and `replicas` (raygate warns of a clamp), then
/// raygate's `numOfHosts` rule.
fn worker_group_replicas(
    group: &WorkerGroupSpec,
    base: &str,
    autoscaling: bool,
    out: &mut Out<'_>,
) {
    let g = group.group_name.as_str();
    // 4.2
    if !autoscaling && (group.min_replicas.is_none() || group.max_replicas.is_none()) {
        let field = if group.min_replicas.is_none() {
            "minReplicas"
        } else {
            "maxReplicas"
        };
        out.kuberay(
            "worker-group-min-max-unset",
            &format!("{base}.{field}"),
            format!("worker group {g} must set both minReplicas and maxReplicas when autoscaling is disabled"),
        );
    }
    // 4.3
    if let Some(min) = group.min_replicas.filter(|m| *m < 0) {
        out.kuberay(
            "worker-group-negative-min-replicas",
            &format!("{base}.minReplicas"),
            format!("worker group {g} has negative minReplicas {min}"),
        );
    }
    if let Some(max) = group.max_replicas.filter(|m| *m < 0) {
        out.kuberay(
            "worker-group-negative-max-replicas",
            &format!("{base}.maxReplicas"),
            format!("worker group {g} has negative maxReplicas {max}"),
        );
    }
    // 4.4
    if let (Some(min), Some(max)) = (group.min_replicas, group.max_replicas) {
        if min > max {
            out.kuberay(
                "worker-group-min-greater-than-max",
                &format!("{base}.minReplicas"),
                format!("worker group {g} has minReplicas {min} greater than maxReplicas {max}"),
            );
        } else if let Some(replicas) = group.replicas.filter(|r| *r < min || *r > max) {
            // raygate: replicas outside [min, max] is clamped, not rejected.
            let clamped = replicas.clamp(min, max);
            out.raygate_warning(
                rr::WORKER_GROUP_REPLICAS_OUT_OF_RANGE,
                &format!("{base}.replicas"),
                format!("worker group {g}: replicas {replicas} is outside [minReplicas {min}, maxReplicas {max}] and will be clamped to {clamped}"),
            );
        }
    }
    // raygate: numOfHosts multiplies every Pod count and quantity (upstream defects 10–12,
    // docs/upstream.md).
    if let Some(hosts) = group.num_of_hosts.filter(|h| *h < 1) {
        out.raygate(
            rr::WORKER_GROUP_NUM_OF_HOSTS,
            &format!("{base}.numOfHosts"),
            format!("worker group {g}: numOfHosts must be at least 1, got {hosts}"),
        );
    }
}

/// Step 4.7: `idleTimeoutSeconds` is non-negative and needs autoscaler v2.
fn worker_group_idle_timeout(
    spec: &RayClusterSpec,
    group: &WorkerGroupSpec,
    base: &str,
    out: &mut Out<'_>,
) {
    let g = group.group_name.as_str();
    let Some(idle) = group.idle_timeout_seconds else {
        return;
    };
    if idle < 0 {
        out.kuberay(
            "worker-group-idle-timeout-negative",
            &format!("{base}.idleTimeoutSeconds"),
            format!("worker group {g}: idleTimeoutSeconds must be non-negative, got {idle}"),
        );
    } else if !spec.autoscaler_v2() && !head_env_enables_v2(spec) {
        out.kuberay(
            "worker-group-idle-timeout-requires-autoscaler-v2",
            &format!("{base}.idleTimeoutSeconds"),
            format!("worker group {g}: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. Please set .spec.autoscalerOptions.version to 'v2' (or set {RAY_ENABLE_AUTOSCALER_V2} environment variable to 'true' in the head pod if using KubeRay < 1.4.0)"),
        );
    }
}

/// Step 4.8: a non-zero `priority` needs Ray 2.56.0 or later and autoscaler v2.
fn worker_group_priority(
    spec: &RayClusterSpec,
    group: &WorkerGroupSpec,
    base: &str,
    out: &mut Out<'_>,
) {
    let g = group.group_name.as_str();
    let Some(priority) = group.priority.filter(|p| *p != 0) else {
        return;
    };
    let version = spec.ray_version.as_deref().unwrap_or("");
    if version.is_empty() {
        out.kuberay(
            "worker-group-priority-ray-version-missing",
            "rayVersion",
            format!("worker group {g}: priority is set, but RayVersion was not specified. Ray version 2.56.0 or later is required"),
        );
    } else {
        match GenericVersion::parse(version) {
            Err(err) => out.kuberay(
                "worker-group-priority-ray-version-invalid",
                "rayVersion",
                format!("worker group {g}: priority is set, but RayVersion format is invalid: {version}, {err}"),
            ),
            Ok(v) if v.less_than(2, 56, 0) => out.kuberay(
                "worker-group-priority-ray-version-too-old",
                "rayVersion",
                format!("worker group {g}: priority is set, but minimum Ray version is 2.56.0, got {version}"),
            ),
            Ok(_) => {}
        }
    }
    if !spec.autoscaler_v2() && !head_env_enables_v2(spec) {
        out.kuberay(
            "worker-group-priority-requires-autoscaler-v2",
            &format!("{base}.priority"),
            format!("worker group {g}: priority is set to {priority}, but autoscaler v2 is not enabled. Priority is only supported with autoscaler v2 enabled"),
        );
    }
}

/// Step 9: suspended worker groups need the RayJobDeletionPolicy feature gate.
pub(super) fn suspended_worker_groups(
    spec: &RayClusterSpec,
    ctx: &ValidationContext,
    out: &mut Out<'_>,
) {
    if ctx.gates.enabled(Feature::RayJobDeletionPolicy) {
        return;
    }
    for (i, group) in workers(spec).iter().enumerate() {
        if group.suspend == Some(true) {
            out.kuberay(
                "worker-group-suspend-requires-feature-gate",
                &format!("workerGroupSpecs[{i}].suspend"),
                format!("worker group {} can be suspended only when the RayJobDeletionPolicy feature gate is enabled", group.group_name),
            );
        }
    }
}

/// Head and worker groups: resources in both `rayStartParams` and `resources`.
fn group_resources(
    group: &str,
    base: &str,
    params: Option<&BTreeMap<String, String>>,
    resources: Option<&BTreeMap<String, String>>,
    out: &mut Out<'_>,
) {
    let in_params = ["num-cpus", "num-gpus", "memory", "resources"]
        .iter()
        .any(|k| !map_get(params, k).is_empty());
    if in_params && resources.is_some_and(|r| !r.is_empty()) {
        out.kuberay(
            "group-resources-set-twice",
            &format!("{base}.resources"),
            format!("resource fields should not be set in both rayStartParams and Resources for {group} group; please use only one"),
        );
    }
}

/// Head and worker groups: Ray node labels.
fn group_labels(
    group: &str,
    base: &str,
    params: Option<&BTreeMap<String, String>>,
    labels: Option<&BTreeMap<String, String>>,
    out: &mut Out<'_>,
) {
    if params.is_some_and(|p| p.contains_key("labels")) {
        out.kuberay(
            "group-labels-in-ray-start-params",
            &format!("{base}.rayStartParams[labels]"),
            format!("rayStartParams['labels'] is not supported for {group} group; please use the top-level Labels field instead"),
        );
    }
    for (key, value) in labels.into_iter().flatten() {
        let field = format!("{base}.labels[{key}]");
        for err in is_qualified_name(key) {
            out.kuberay(
                "group-label-key-invalid",
                &field,
                format!("invalid label key for {group} group: '{key}', error: {err}"),
            );
        }
        for err in is_valid_label_value(value) {
            out.kuberay(
                "group-label-value-invalid",
                &field,
                format!(
                    "invalid label value for key '{key}' in {group} group: '{value}', error: {err}"
                ),
            );
        }
    }
}

/// raygate: the Ray container should request (or limit) CPU and memory, or the PodGroup's
/// `minResources` counts 0 for it and Volcano reserves nothing (docs/upstream.md,
/// "KubeRay: Volcano adapter", defects 11–12).
fn ray_container_resources(who: &str, base: &str, template: &PodTemplateSpec, out: &mut Out<'_>) {
    let Some(container) = ray_container(template) else {
        return;
    };
    let resources = container.resources.as_ref();
    let has = |name: &str| {
        resources.is_some_and(|r| {
            r.requests.as_ref().is_some_and(|m| m.contains_key(name))
                || r.limits.as_ref().is_some_and(|m| m.contains_key(name))
        })
    };
    let missing: Vec<&str> = ["cpu", "memory"].into_iter().filter(|n| !has(n)).collect();
    if !missing.is_empty() {
        out.raygate_warning(
            rr::RAY_CONTAINER_NO_RESOURCES,
            &format!("{base}.template.spec.containers[0].resources"),
            format!(
                "the Ray container of {who} sets no {} request or limit; gang sizing (PodGroup minResources) will count 0 for it",
                missing.join(" or ")
            ),
        );
    }
}
