//! RayCluster rules: KubeRay's `ValidateRayClusterMetadata`, `ValidateRayClusterSpec`,
//! `ValidateRayClusterUpgradeOptions` and `ValidateRayClusterStatus` (docs/upstream.md,
//! "KubeRay: validation"), and raygate's own cluster rules.
//!
//! [`validate_spec`] runs the spec rules area by area, each area in a module of its own.

mod auth;
mod autoscaler;
mod gcs_fault_tolerance;
mod groups;
mod history_server;
mod network_policy;
mod tls;
mod unsupported;

pub(crate) use autoscaler::autoscaler_v1_restart_policy_warning;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::k8s::{go_string_list, is_dns1035_label};
use super::out::Out;
use super::{ReconcilerKind, ValidationContext};
use crate::finding::Finding;
use crate::keys;
use crate::ray::v1::{RayCluster, RayClusterSpec, WorkerGroupSpec};

/// `63 - len("-serve-svc")`: longest RayCluster name KubeRay accepts.
pub(crate) const MAX_RAY_CLUSTER_NAME_LENGTH: usize = 53;
/// Placeholder appended to `generateName` to stand for the API server's 5 random characters.
pub(crate) const GENERATED_SUFFIX: &str = "bcdfg";

/// The head env var that asks for autoscaler v2 (the way before `autoscalerOptions.version`).
const RAY_ENABLE_AUTOSCALER_V2: &str = "RAY_enable_autoscaler_v2";

/// Validates a standalone RayCluster, in KubeRay's controller order: metadata → spec →
/// autoscaler-v1 restartPolicy warning → upgrade options → status.
pub(crate) fn validate_cluster(
    cluster: &RayCluster,
    ctx: &ValidationContext,
    findings: &mut Vec<Finding>,
) {
    validate_metadata(&cluster.metadata, findings);
    let annotations = cluster.metadata.annotations.as_ref();
    let mut out = Out::new(findings, "spec.", "");
    validate_spec(&cluster.spec, annotations, ctx, &mut out);
    autoscaler_v1_restart_policy_warning(&cluster.spec, &mut out);
    validate_upgrade_options(cluster, &mut out);
    validate_status(cluster, findings);
}

/// KubeRay's `ValidateRayClusterSpec(spec, annotations)` — every rule, in KubeRay's order, with
/// raygate's own rules after the rule they belong to and the `unsupported-*` rules last. The
/// step numbers in the area modules count KubeRay's rules.
pub(crate) fn validate_spec(
    spec: &RayClusterSpec,
    annotations: Option<&BTreeMap<String, String>>,
    ctx: &ValidationContext,
    out: &mut Out<'_>,
) {
    groups::head_group(spec, out);
    groups::worker_groups(spec, out);
    gcs_fault_tolerance::validate(spec, annotations, ctx, out);
    groups::suspended_worker_groups(spec, ctx, out);
    autoscaler::validate(spec, out);
    history_server::validate(spec, ctx, out);
    auth::validate(spec, out);
    network_policy::validate(spec, ctx, out);
    tls::validate(spec, ctx, out);
    if ctx.reconciler == ReconcilerKind::Raygate {
        unsupported::validate(spec, annotations, out);
    }
}

/// The name a metadata check looks at: `name`, or `generateName` plus five random characters.
pub(crate) fn effective_name(meta: &ObjectMeta) -> Option<String> {
    match (&meta.name, &meta.generate_name) {
        (Some(name), _) if !name.is_empty() => Some(name.clone()),
        (_, Some(prefix)) if !prefix.is_empty() => Some(format!("{prefix}{GENERATED_SUFFIX}")),
        _ => None,
    }
}

/// KubeRay's `ValidateRayClusterMetadata`.
fn validate_metadata(meta: &ObjectMeta, findings: &mut Vec<Finding>) {
    let name = effective_name(meta).unwrap_or_default();
    let mut out = Out::new(findings, "", "");
    if name.len() > MAX_RAY_CLUSTER_NAME_LENGTH {
        out.kuberay(
            "raycluster-name-too-long",
            "metadata.name",
            format!(
                "RayCluster name should be no more than {MAX_RAY_CLUSTER_NAME_LENGTH} characters"
            ),
        );
    }
    let errs = is_dns1035_label(&name);
    if !errs.is_empty() {
        out.kuberay(
            "raycluster-name-not-dns1035",
            "metadata.name",
            format!(
                "RayCluster name should be a valid DNS1035 label: {}",
                go_string_list(&errs)
            ),
        );
    }
}

/// KubeRay's `ValidateRayClusterStatus`.
fn validate_status(cluster: &RayCluster, findings: &mut Vec<Finding>) {
    let Some(conditions) = cluster.status.as_ref().and_then(|s| s.conditions.as_ref()) else {
        return;
    };
    let is_true = |t: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    if is_true("RayClusterSuspending") && is_true("RayClusterSuspended") {
        Out::new(findings, "", "").kuberay(
            "raycluster-status-suspending-and-suspended",
            "status.conditions",
            "invalid RayCluster State: rayv1.RayClusterSuspending and rayv1.RayClusterSuspended conditions should not be both true",
        );
    }
}

/// KubeRay's `ValidateRayClusterUpgradeOptions`.
fn validate_upgrade_options(cluster: &RayCluster, out: &mut Out<'_>) {
    let Some(kind) = cluster
        .spec
        .upgrade_strategy
        .as_ref()
        .and_then(|u| u.type_.as_deref())
    else {
        return;
    };
    if kind != "Recreate" && kind != "None" {
        out.kuberay(
            "upgrade-strategy-invalid-type",
            "upgradeStrategy.type",
            format!("The RayCluster spec is invalid: Spec.UpgradeStrategy.Type value {kind} is invalid, valid options are Recreate or None"),
        );
    }
    let creator = cluster
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::ORIGINATED_FROM_CRD_LABEL))
        .map(String::as_str);
    if let Some(creator @ ("RayJob" | "RayService")) = creator {
        out.kuberay(
            "upgrade-strategy-on-owned-cluster",
            "upgradeStrategy.type",
            format!("upgradeStrategy cannot be set when RayCluster is created by {creator}"),
        );
    }
}

// ----- helpers ---------------------------------------------------------------------------

/// The Pod spec of a template, if any.
fn pod_spec(template: &PodTemplateSpec) -> Option<&PodSpec> {
    template.spec.as_ref()
}

/// The containers of a template (empty when the Pod spec is absent).
fn containers(template: &PodTemplateSpec) -> &[Container] {
    pod_spec(template).map_or(&[], |s| s.containers.as_slice())
}

/// The Ray container (`containers[0]`) of a template.
fn ray_container(template: &PodTemplateSpec) -> Option<&Container> {
    containers(template).first()
}

/// The first env var named `name` of a container.
fn env_var<'c>(container: Option<&'c Container>, name: &str) -> Option<&'c EnvVar> {
    container?.env.as_ref()?.iter().find(|e| e.name == name)
}

/// Whether a container defines env var `name`.
fn has_env(container: Option<&Container>, name: &str) -> bool {
    env_var(container, name).is_some()
}

/// The value of a string-valued map entry, `""` when absent.
fn map_get<'m>(map: Option<&'m BTreeMap<String, String>>, key: &str) -> &'m str {
    map.and_then(|m| m.get(key)).map_or("", String::as_str)
}

/// Head env `RAY_enable_autoscaler_v2` is `1` or `true`.
fn head_env_enables_v2(spec: &RayClusterSpec) -> bool {
    env_var(
        ray_container(&spec.head_group_spec.template),
        RAY_ENABLE_AUTOSCALER_V2,
    )
    .and_then(|e| e.value.as_deref())
    .is_some_and(|v| v == "1" || v == "true")
}

/// Annotation `ray.io/ft-enabled` equals `true`, case-insensitively.
fn ft_annotation_true(annotations: Option<&BTreeMap<String, String>>) -> bool {
    map_get(annotations, keys::FT_ENABLED_ANNOTATION).eq_ignore_ascii_case("true")
}

/// The worker groups (none when unset).
fn workers(spec: &RayClusterSpec) -> &[WorkerGroupSpec] {
    spec.worker_group_specs.as_deref().unwrap_or(&[])
}
