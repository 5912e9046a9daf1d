//! RayCluster rules: KubeRay's `ValidateRayClusterMetadata`, `ValidateRayClusterSpec`,
//! `ValidateRayClusterUpgradeOptions` and `ValidateRayClusterStatus` (docs/upstream.md,
//! "KubeRay: validation"), and raygate's own cluster rules.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::k8s::{
    go_quote, go_string_list, is_dns1035_label, is_dns1123_label, is_qualified_name,
    is_valid_label_value,
};
use super::out::Out;
use super::raygate_rules as rr;
use super::version::GenericVersion;
use super::{ReconcilerKind, ValidationContext};
use crate::features::Feature;
use crate::finding::Finding;
use crate::keys;
use crate::ray::v1::{RayCluster, RayClusterSpec, WorkerGroupSpec};

/// `63 - len("-serve-svc")`: longest RayCluster name KubeRay accepts.
pub(crate) const MAX_RAY_CLUSTER_NAME_LENGTH: usize = 53;
/// Placeholder appended to `generateName` to stand for the API server's 5 random characters.
pub(crate) const GENERATED_SUFFIX: &str = "bcdfg";

const RAY_REDIS_ADDRESS: &str = "RAY_REDIS_ADDRESS";
const REDIS_PASSWORD: &str = "REDIS_PASSWORD";
const REDIS_USERNAME: &str = "REDIS_USERNAME";
const RAY_ENABLE_AUTOSCALER_V2: &str = "RAY_enable_autoscaler_v2";
const KUBERAY_GEN_AUTOSCALER_START_CMD: &str = "KUBERAY_GEN_AUTOSCALER_START_CMD";
const RAY_GCS_STORAGE: &str = "RAY_gcs_storage";
const RAY_GCS_STORAGE_PATH: &str = "RAY_gcs_storage_path";
const GCS_STORAGE_VOLUME_NAME: &str = "gcs-storage";
const GCS_STORAGE_MOUNT_PATH: &str = "/data/gcs";
const COLLECTOR_CONTAINER_NAME: &str = "ray-history-collector";
const TLS_FORBIDDEN_ENV: [&str; 4] = [
    "RAY_USE_TLS",
    "RAY_TLS_SERVER_CERT",
    "RAY_TLS_SERVER_KEY",
    "RAY_TLS_CA_CERT",
];
const RAY_TLS_VOLUME_NAME: &str = "ray-tls";
const RAY_TLS_CERT_MOUNT_PATH: &str = "/etc/ray/tls";
const COLLECTOR_FORBIDDEN_ENV: [&str; 8] = [
    "POD_IP",
    "FQ_RAY_IP",
    "RAY_CLUSTER_NAME",
    "RAY_CLUSTER_NAMESPACE",
    "RAY_ROLE",
    "OWNER_KIND",
    "OWNER_NAME",
    "EVENTS_PORT",
];

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

/// The restart policy of a template, `""` when unset.
fn restart_policy(template: &PodTemplateSpec) -> &str {
    pod_spec(template)
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("")
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

/// `IsAutoscalingEnabled`: `enableInTreeAutoscaling` is set and true.
pub(crate) fn autoscaling_enabled(spec: &RayClusterSpec) -> bool {
    spec.enable_in_tree_autoscaling == Some(true)
}

/// `IsAutoscalingV2Enabled`: `autoscalerOptions.version` is `v2`.
fn autoscaling_v2(spec: &RayClusterSpec) -> bool {
    spec.autoscaler_options
        .as_ref()
        .and_then(|a| a.version.as_deref())
        == Some("v2")
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

/// `IsK8sAuthEnabled`.
pub(crate) fn k8s_token_auth_enabled(spec: &RayClusterSpec) -> bool {
    spec.auth_options
        .as_ref()
        .and_then(|a| a.enable_k8s_token_auth)
        == Some(true)
}

/// `IsAuthEnabled`: `authOptions.mode` is `token`.
fn token_auth_enabled(spec: &RayClusterSpec) -> bool {
    spec.auth_options.as_ref().and_then(|a| a.mode.as_deref()) == Some("token")
}

/// Annotation `ray.io/ft-enabled` equals `true`, case-insensitively.
fn ft_annotation_true(annotations: Option<&BTreeMap<String, String>>) -> bool {
    map_get(annotations, keys::FT_ENABLED_ANNOTATION).eq_ignore_ascii_case("true")
}

fn workers(spec: &RayClusterSpec) -> &[WorkerGroupSpec] {
    spec.worker_group_specs.as_deref().unwrap_or(&[])
}

/// A JSON value that Go would see as a non-empty list.
fn non_empty_list(value: Option<&Value>) -> bool {
    value
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

// ----- ValidateRayClusterSpec --------------------------------------------------------------

/// KubeRay's `ValidateRayClusterSpec(spec, annotations)` — every rule, in KubeRay's order, with
/// raygate's own rules after the rule they belong to and the `unsupported-*` rules last.
pub(crate) fn validate_spec(
    spec: &RayClusterSpec,
    annotations: Option<&BTreeMap<String, String>>,
    ctx: &ValidationContext,
    out: &mut Out<'_>,
) {
    let head = &spec.head_group_spec;
    let head_container = ray_container(&head.template);
    let autoscaling = autoscaling_enabled(spec);

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

    // 4. Worker groups.
    let mut seen_names: HashMap<&str, usize> = HashMap::new();
    for (i, group) in workers(spec).iter().enumerate() {
        let base = format!("workerGroupSpecs[{i}]");
        let g = group.group_name.as_str();
        // 4.1
        if containers(&group.template).is_empty() {
            out.kuberay(
                "worker-group-no-containers",
                &format!("{base}.template.spec.containers"),
                "workerGroupSpec should have at least one container",
            );
        }
        // raygate: unique, label-safe group names (upstream defects 5 and 19, docs/upstream.md).
        if let Some(first) = seen_names.get(g) {
            out.raygate(
                rr::WORKER_GROUP_DUPLICATE_NAME,
                &format!("{base}.groupName"),
                format!("worker group names must be unique: {g:?} is already the name of workerGroupSpecs[{first}]; KubeRay would create and delete this group's Pods in a loop"),
            );
        } else {
            seen_names.insert(g, i);
        }
        let label_errs = is_valid_label_value(g);
        if !label_errs.is_empty() {
            out.raygate(
                rr::WORKER_GROUP_NAME_INVALID,
                &format!("{base}.groupName"),
                format!("worker group name {g:?} is used as the value of the ray.io/group Pod label and must be a valid label value: {}", label_errs.join("; ")),
            );
        }
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
                    format!(
                        "worker group {g} has minReplicas {min} greater than maxReplicas {max}"
                    ),
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
        // 4.5, 4.6
        group_resources(
            g,
            &base,
            group.ray_start_params.as_ref(),
            group.resources.as_ref(),
            out,
        );
        group_labels(
            g,
            &base,
            group.ray_start_params.as_ref(),
            group.labels.as_ref(),
            out,
        );
        // 4.7 idleTimeoutSeconds
        if let Some(idle) = group.idle_timeout_seconds {
            if idle < 0 {
                out.kuberay(
                    "worker-group-idle-timeout-negative",
                    &format!("{base}.idleTimeoutSeconds"),
                    format!(
                        "worker group {g}: idleTimeoutSeconds must be non-negative, got {idle}"
                    ),
                );
            } else if !autoscaling_v2(spec) && !head_env_enables_v2(spec) {
                out.kuberay(
                    "worker-group-idle-timeout-requires-autoscaler-v2",
                    &format!("{base}.idleTimeoutSeconds"),
                    format!("worker group {g}: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. Please set .spec.autoscalerOptions.version to 'v2' (or set {RAY_ENABLE_AUTOSCALER_V2} environment variable to 'true' in the head pod if using KubeRay < 1.4.0)"),
                );
            }
        }
        // 4.8 priority
        if let Some(priority) = group.priority.filter(|p| *p != 0) {
            let field = format!("{base}.priority");
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
            if !autoscaling_v2(spec) && !head_env_enables_v2(spec) {
                out.kuberay(
                    "worker-group-priority-requires-autoscaler-v2",
                    &field,
                    format!("worker group {g}: priority is set to {priority}, but autoscaler v2 is not enabled. Priority is only supported with autoscaler v2 enabled"),
                );
            }
        }
        // raygate: the worker's Ray container has requests for gang sizing.
        ray_container_resources(&format!("worker group {g}"), &base, &group.template, out);
    }

    // 5. ft-enabled annotation together with options.
    let ft_annotation = map_get(annotations, keys::FT_ENABLED_ANNOTATION);
    if !ft_annotation.is_empty() && spec.gcs_fault_tolerance_options.is_some() {
        out.kuberay(
            "gcs-ft-annotation-and-options",
            &format!("metadata.annotations[{}]", keys::FT_ENABLED_ANNOTATION),
            format!("{} annotation and GcsFaultToleranceOptions are both set. Please use only GcsFaultToleranceOptions to configure GCS fault tolerance", keys::FT_ENABLED_ANNOTATION),
        );
    }
    // 6. RAY_REDIS_ADDRESS without GCS FT.
    let gcs_ft = ft_annotation_true(annotations) || spec.gcs_fault_tolerance_options.is_some();
    if !gcs_ft && has_env(head_container, RAY_REDIS_ADDRESS) {
        out.kuberay(
            "redis-address-without-gcs-ft",
            "headGroupSpec.template.spec.containers[0].env",
            format!("{RAY_REDIS_ADDRESS} is set which implicitly enables GCS fault tolerance, but GcsFaultToleranceOptions is not set. Please set GcsFaultToleranceOptions to enable GCS fault tolerance"),
        );
    }
    // 7. GCS FT options.
    if let Some(options) = &spec.gcs_fault_tolerance_options {
        let head_env = "headGroupSpec.template.spec.containers[0].env";
        if !map_get(head.ray_start_params.as_ref(), "redis-password").is_empty() {
            out.kuberay(
                "gcs-ft-redis-password-in-ray-start-params",
                "headGroupSpec.rayStartParams[redis-password]",
                "cannot set `redis-password` in rayStartParams when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisPassword instead",
            );
        }
        if has_env(head_container, REDIS_PASSWORD) {
            out.kuberay(
                "gcs-ft-redis-password-env",
                head_env,
                "cannot set `REDIS_PASSWORD` env var in head Pod when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisPassword instead",
            );
        }
        if has_env(head_container, RAY_REDIS_ADDRESS) {
            out.kuberay(
                "gcs-ft-redis-address-env",
                head_env,
                "cannot set `RAY_REDIS_ADDRESS` env var in head Pod when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisAddress instead",
            );
        }
        if !map_get(annotations, keys::EXTERNAL_STORAGE_NAMESPACE_ANNOTATION).is_empty() {
            out.kuberay(
                "gcs-ft-external-storage-namespace-annotation",
                &format!(
                    "metadata.annotations[{}]",
                    keys::EXTERNAL_STORAGE_NAMESPACE_ANNOTATION
                ),
                "cannot set `ray.io/external-storage-namespace` annotation when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.ExternalStorageNamespace instead",
            );
        }
        if options.backend.as_deref() == Some("rocksdb") {
            if !ctx.gates.enabled(Feature::GcsFaultToleranceEmbeddedStorage) {
                out.kuberay(
                    "gcs-ft-rocksdb-feature-gate",
                    "gcsFaultToleranceOptions.backend",
                    "the embedded RocksDB GCS fault tolerance backend (GcsFaultToleranceOptions.Backend: 'rocksdb') requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled",
                );
            }
            let redis_fields = [
                (
                    options
                        .redis_address
                        .as_deref()
                        .is_some_and(|a| !a.is_empty()),
                    "RedisAddress",
                    "redisAddress",
                ),
                (
                    options.redis_username.is_some(),
                    "RedisUsername",
                    "redisUsername",
                ),
                (
                    options.redis_password.is_some(),
                    "RedisPassword",
                    "redisPassword",
                ),
                (
                    options
                        .external_storage_namespace
                        .as_deref()
                        .is_some_and(|n| !n.is_empty()),
                    "ExternalStorageNamespace",
                    "externalStorageNamespace",
                ),
            ];
            for (set, go_name, json_name) in redis_fields {
                if set {
                    out.kuberay(
                        "gcs-ft-rocksdb-redis-field",
                        &format!("gcsFaultToleranceOptions.{json_name}"),
                        format!("cannot set GcsFaultToleranceOptions.{go_name} when backend is 'rocksdb'"),
                    );
                }
            }
            if let Some(storage) = &options.storage {
                let claim = storage.claim_name.as_deref().unwrap_or("");
                let managed = storage.size.is_some()
                    || storage.storage_class_name.is_some()
                    || storage.access_modes.as_ref().is_some_and(|m| !m.is_empty());
                if !claim.is_empty() && managed {
                    out.kuberay(
                        "gcs-ft-rocksdb-claim-name-exclusive",
                        "gcsFaultToleranceOptions.storage.claimName",
                        "GcsFaultToleranceOptions.Storage.ClaimName is mutually exclusive with size, storageClassName, and accessModes",
                    );
                }
            }
            if has_env(head_container, RAY_GCS_STORAGE)
                || has_env(head_container, RAY_GCS_STORAGE_PATH)
            {
                out.kuberay(
                    "gcs-ft-rocksdb-storage-env",
                    head_env,
                    format!("cannot set `{RAY_GCS_STORAGE}` or `{RAY_GCS_STORAGE_PATH}` env var in head Pod when the embedded GCS FT backend is used - these are managed by KubeRay"),
                );
            }
            let mounts = head_container
                .and_then(|c| c.volume_mounts.as_deref())
                .unwrap_or(&[]);
            if mounts.iter().any(|m| {
                m.mount_path == GCS_STORAGE_MOUNT_PATH || m.name == GCS_STORAGE_VOLUME_NAME
            }) {
                out.kuberay(
                    "gcs-ft-rocksdb-storage-mount",
                    "headGroupSpec.template.spec.containers[0].volumeMounts",
                    format!("cannot set a volume mount named {} or mounted at {GCS_STORAGE_MOUNT_PATH} in the head container when the embedded GCS FT backend is used - it is managed by KubeRay", go_quote(GCS_STORAGE_VOLUME_NAME)),
                );
            }
            let volumes = pod_spec(&head.template)
                .and_then(|s| s.volumes.as_deref())
                .unwrap_or(&[]);
            if volumes.iter().any(|v| v.name == GCS_STORAGE_VOLUME_NAME) {
                out.kuberay(
                    "gcs-ft-rocksdb-storage-volume",
                    "headGroupSpec.template.spec.volumes",
                    format!("cannot set a volume named {} in the head Pod when the embedded GCS FT backend is used - it is managed by KubeRay", go_quote(GCS_STORAGE_VOLUME_NAME)),
                );
            }
        } else if options.storage.is_some() {
            out.kuberay(
                "gcs-ft-redis-storage",
                "gcsFaultToleranceOptions.storage",
                "cannot set GcsFaultToleranceOptions.Storage when backend is 'redis' - it only applies to the 'rocksdb' backend",
            );
        }
    }
    // 8. Redis user name outside the options.
    let username_param = !map_get(head.ray_start_params.as_ref(), "redis-username").is_empty();
    if username_param || has_env(head_container, REDIS_USERNAME) {
        out.kuberay(
            "redis-username-outside-gcs-options",
            if username_param {
                "headGroupSpec.rayStartParams[redis-username]"
            } else {
                "headGroupSpec.template.spec.containers[0].env"
            },
            "cannot set redis username in rayStartParams or environment variables - use GcsFaultToleranceOptions.RedisUsername instead",
        );
    }
    // 9. Suspended worker groups need the RayJobDeletionPolicy gate.
    if !ctx.gates.enabled(Feature::RayJobDeletionPolicy) {
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
    // 10. Autoscaler v2 env without autoscaling.
    if !autoscaling
        && let Some(value) = env_var(head_container, RAY_ENABLE_AUTOSCALER_V2)
            .and_then(|e| e.value.as_deref())
            .filter(|v| *v == "1" || *v == "true")
    {
        out.kuberay(
                "autoscaler-v2-env-without-autoscaling",
                "headGroupSpec.template.spec.containers[0].env",
                format!("environment variable {RAY_ENABLE_AUTOSCALER_V2} cannot be set to '{value}' when enableInTreeAutoscaling is false. Please set enableInTreeAutoscaling: true to use autoscaler v2"),
            );
    }
    // 11. Autoscaling enabled.
    if autoscaling {
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
        if version_set && has_env(head_container, RAY_ENABLE_AUTOSCALER_V2) {
            out.kuberay(
                "autoscaler-version-and-env-both-set",
                "autoscalerOptions.version",
                format!("both .spec.autoscalerOptions.version and head Pod env var {RAY_ENABLE_AUTOSCALER_V2} are set, please only use the former"),
            );
        }
        if autoscaling_v2(spec) {
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
    // 14. History server.
    if let Some(options) = &spec.history_server_options {
        history_server(spec, options, ctx, out);
    }
    // 15. Token authentication.
    auth(spec, out);
    // 16. Network policy.
    if let Some(policy) = &spec.network_policy {
        if !ctx.gates.enabled(Feature::RayClusterNetworkPolicy) {
            out.kuberay(
                "network-policy-feature-gate",
                "networkPolicy",
                "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled",
            );
        }
        network_policy(spec, policy, out);
    }
    // 17. mTLS.
    if spec.tls_options.is_some() {
        if !ctx.gates.enabled(Feature::RayClusterMtls) {
            out.kuberay(
                "tls-feature-gate",
                "tlsOptions",
                "spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled",
            );
        }
        tls(spec, out);
    }
    // raygate: features raygate's own reconciler does not run.
    if ctx.reconciler == ReconcilerKind::Raygate {
        unsupported(spec, annotations, out);
    }
}

/// `ValidateRayClusterSpec`, head and worker groups: resources in both `rayStartParams` and
/// `resources`.
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

/// `ValidateRayClusterSpec`, head and worker groups: Ray node labels.
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

/// `ValidateRayClusterSpec`: `historyServerOptions`.
fn history_server(
    spec: &RayClusterSpec,
    options: &Value,
    ctx: &ValidationContext,
    out: &mut Out<'_>,
) {
    if !ctx.gates.enabled(Feature::RayClusterHistoryServer) {
        out.kuberay(
            "history-server-feature-gate",
            "historyServerOptions",
            "RayClusterHistoryServer feature gate is not enabled",
        );
    }
    match options.get("collectorOptions").filter(|c| !c.is_null()) {
        None => out.kuberay(
            "history-server-collector-options-missing",
            "historyServerOptions.collectorOptions",
            "historyServerOptions.collectorOptions must be set",
        ),
        Some(collector) => collector_options(collector, out),
    }
    for (i, c) in containers(&spec.head_group_spec.template)
        .iter()
        .enumerate()
    {
        if c.name == COLLECTOR_CONTAINER_NAME {
            out.kuberay(
                "history-server-collector-container-name",
                &format!("headGroupSpec.template.spec.containers[{i}].name"),
                format!("head pod template must not define a container with name '{COLLECTOR_CONTAINER_NAME}' when history server collector options are enabled"),
            );
        }
    }
    for (gi, group) in workers(spec).iter().enumerate() {
        for (i, c) in containers(&group.template).iter().enumerate() {
            if c.name == COLLECTOR_CONTAINER_NAME {
                out.kuberay(
                    "history-server-collector-container-name",
                    &format!("workerGroupSpecs[{gi}].template.spec.containers[{i}].name"),
                    format!("worker group {} pod template must not define a container with name '{COLLECTOR_CONTAINER_NAME}' when history server collector options are enabled", group.group_name),
                );
            }
        }
    }
}

/// `validateCollectorOptions`.
fn collector_options(collector: &Value, out: &mut Out<'_>) {
    let base = "historyServerOptions.collectorOptions";
    if collector
        .get("image")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        out.kuberay(
            "history-server-collector-image-missing",
            &format!("{base}.image"),
            "historyServerOptions.collectorOptions.image must be set",
        );
    }
    // Later entries win, as in Go's map built from the list.
    let mut env: HashMap<&str, &Value> = HashMap::new();
    for entry in collector
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(name) = entry.get("name").and_then(Value::as_str) {
            env.insert(name, entry);
        }
    }
    let literal = |name: &str| {
        env.get(name)
            .and_then(|e| e.get("value"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let has_value = |name: &str| {
        env.get(name).is_some_and(|e| {
            e.get("value")
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty())
                || e.get("valueFrom").is_some_and(|v| !v.is_null())
        })
    };
    let env_field = format!("{base}.env");
    for name in COLLECTOR_FORBIDDEN_ENV {
        if env.contains_key(name) {
            out.kuberay(
                "history-server-collector-env-forbidden",
                &env_field,
                format!("historyServerOptions.collectorOptions.env must not contain {name}: it is managed by KubeRay and injected automatically into the collector container"),
            );
        }
    }
    let backend = literal("STORAGE_BACKEND");
    if backend.is_empty() {
        out.kuberay(
            "history-server-storage-backend-missing",
            &env_field,
            "STORAGE_BACKEND environment variable must be set with a literal string value in historyServerOptions.collectorOptions.env",
        );
        return;
    }
    let mut missing = |message: String| {
        out.kuberay("history-server-storage-env-missing", &env_field, message);
    };
    match backend.to_uppercase().as_str() {
        "GCS" if !has_value("GCS_BUCKET") => missing(
            "GCS_BUCKET environment variable must be set when STORAGE_BACKEND is GCS".into(),
        ),
        "S3" if !has_value("S3_REGION") => {
            missing("S3_REGION environment variable must be set when STORAGE_BACKEND is S3".into())
        }
        "AZUREBLOB" => {
            let mode = literal("AZURE_STORAGE_AUTH_MODE").trim().to_lowercase();
            match mode.as_str() {
                "connection_string" if !has_value("AZURE_STORAGE_CONNECTION_STRING") => missing(
                    "AZURE_STORAGE_CONNECTION_STRING environment variable must be set when STORAGE_BACKEND is AZUREBLOB and AZURE_STORAGE_AUTH_MODE is connection_string".into(),
                ),
                "connection_string" => {}
                "workload_identity" | "default" => {
                    if !has_value("AZURE_STORAGE_ACCOUNT_URL") {
                        missing(format!("AZURE_STORAGE_ACCOUNT_URL environment variable must be set when STORAGE_BACKEND is AZUREBLOB and AZURE_STORAGE_AUTH_MODE is {mode}"));
                    }
                }
                _ => {
                    if !has_value("AZURE_STORAGE_CONNECTION_STRING")
                        && !has_value("AZURE_STORAGE_ACCOUNT_URL")
                    {
                        missing("either AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT_URL environment variable must be set when STORAGE_BACKEND is AZUREBLOB".into());
                    }
                }
            }
        }
        "ALIYUNOSS" => {
            for name in ["OSS_BUCKET", "OSS_ENDPOINT", "OSS_REGION"] {
                if !has_value(name) {
                    missing(format!(
                        "{name} environment variable must be set when STORAGE_BACKEND is ALIYUNOSS"
                    ));
                }
            }
        }
        _ => {}
    }
}

/// `ValidateRayClusterSpec`: token authentication.
fn auth(spec: &RayClusterSpec, out: &mut Out<'_>) {
    let k8s = k8s_token_auth_enabled(spec);
    if !token_auth_enabled(spec) {
        if k8s {
            out.kuberay(
                "auth-k8s-token-without-token-mode",
                "authOptions.enableK8sTokenAuth",
                "authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'",
            );
        }
        return;
    }
    let version = spec.ray_version.as_deref().unwrap_or("");
    if version.is_empty() {
        out.kuberay(
            "auth-token-ray-version-missing",
            "rayVersion",
            "authOptions.mode is 'token' but RayVersion was not specified. Ray version 2.52.0 or later is required",
        );
    } else {
        match GenericVersion::parse(version) {
            Err(err) => out.kuberay(
                "auth-token-ray-version-invalid",
                "rayVersion",
                format!(
                    "authOptions.mode is 'token' but RayVersion format is invalid: {version}, {err}"
                ),
            ),
            Ok(v) => {
                if v.less_than(2, 52, 0) {
                    out.kuberay(
                        "auth-token-ray-version-too-old",
                        "rayVersion",
                        format!("authOptions.mode is 'token' but minimum Ray version is 2.52.0, got {version}"),
                    );
                }
                if k8s && v.less_than(2, 55, 0) {
                    out.kuberay(
                        "auth-k8s-token-ray-version-too-old",
                        "rayVersion",
                        format!("authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, got {version}"),
                    );
                }
            }
        }
    }
    let secret = spec
        .auth_options
        .as_ref()
        .and_then(|a| a.secret_name.as_deref())
        .unwrap_or("");
    if k8s && !secret.is_empty() {
        out.kuberay(
            "auth-k8s-token-with-secret-name",
            "authOptions.secretName",
            "authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set",
        );
    }
}

/// `ValidateRayClusterSpec`: `networkPolicy` consistency.
fn network_policy(spec: &RayClusterSpec, policy: &Value, out: &mut Out<'_>) {
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

/// `ValidateRayClusterSpec`: settings the operator manages when `tlsOptions` is set.
fn tls(spec: &RayClusterSpec, out: &mut Out<'_>) {
    let check = |base: String, location: String, template: &PodTemplateSpec, out: &mut Out<'_>| {
        let Some(container) = ray_container(template) else {
            return;
        };
        for name in TLS_FORBIDDEN_ENV {
            if has_env(Some(container), name) {
                out.kuberay(
                    "tls-forbidden-env",
                    &format!("{base}.template.spec.containers[0].env"),
                    format!("cannot set {name} environment variable in {location} when tlsOptions is set - the operator manages TLS configuration automatically"),
                );
            }
        }
        let mounts = container.volume_mounts.as_deref().unwrap_or(&[]);
        if let Some(m) = mounts
            .iter()
            .find(|m| m.name == RAY_TLS_VOLUME_NAME || m.mount_path == RAY_TLS_CERT_MOUNT_PATH)
        {
            let what = if m.name == RAY_TLS_VOLUME_NAME {
                format!("named {}", go_quote(RAY_TLS_VOLUME_NAME))
            } else {
                format!("at path {}", go_quote(RAY_TLS_CERT_MOUNT_PATH))
            };
            out.kuberay(
                "tls-forbidden-volume-mount",
                &format!("{base}.template.spec.containers[0].volumeMounts"),
                format!("cannot use volume mount {what} in {location} when tlsOptions is set - the operator manages TLS configuration automatically"),
            );
        }
    };
    check(
        "headGroupSpec".into(),
        "head Pod".into(),
        &spec.head_group_spec.template,
        out,
    );
    for (i, group) in workers(spec).iter().enumerate() {
        check(
            format!("workerGroupSpecs[{i}]"),
            format!("worker group {}", go_quote(&group.group_name)),
            &group.template,
            out,
        );
    }
    if let Some(options) = &spec.autoscaler_options {
        for name in TLS_FORBIDDEN_ENV {
            if options
                .env
                .as_ref()
                .is_some_and(|e| e.iter().any(|v| v.name == name))
            {
                out.kuberay(
                    "tls-forbidden-env",
                    "autoscalerOptions.env",
                    format!("cannot set {name} environment variable in autoscalerOptions.env when tlsOptions is set - the operator manages TLS configuration for the autoscaler automatically"),
                );
            }
        }
        for m in options.volume_mounts.as_deref().unwrap_or(&[]) {
            let what = if m.name == RAY_TLS_VOLUME_NAME {
                format!("named {}", go_quote(RAY_TLS_VOLUME_NAME))
            } else if m.mount_path == RAY_TLS_CERT_MOUNT_PATH {
                format!("at path {}", go_quote(RAY_TLS_CERT_MOUNT_PATH))
            } else {
                continue;
            };
            out.kuberay(
                "tls-forbidden-volume-mount",
                "autoscalerOptions.volumeMounts",
                format!("cannot use volume mount {what} in autoscalerOptions.volumeMounts when tlsOptions is set - the operator manages TLS configuration automatically"),
            );
            break;
        }
    }
}

/// raygate, `ReconcilerKind::Raygate` only: features raygate's reconciler does not run.
fn unsupported(
    spec: &RayClusterSpec,
    annotations: Option<&BTreeMap<String, String>>,
    out: &mut Out<'_>,
) {
    let report = |rule: &str, field: &str, what: &str, out: &mut Out<'_>| {
        out.raygate(
            rule,
            field,
            format!("{what} is not supported by raygate's reconciler; run this object with KubeRay (--reconciler kuberay) or remove the field"),
        );
    };
    if autoscaling_enabled(spec) {
        report(
            rr::UNSUPPORTED_IN_TREE_AUTOSCALING,
            "enableInTreeAutoscaling",
            "enableInTreeAutoscaling",
            out,
        );
    }
    if spec.gcs_fault_tolerance_options.is_some() {
        report(
            rr::UNSUPPORTED_GCS_FAULT_TOLERANCE,
            "gcsFaultToleranceOptions",
            "gcsFaultToleranceOptions (GCS fault tolerance)",
            out,
        );
    }
    if ft_annotation_true(annotations) {
        report(
            rr::UNSUPPORTED_GCS_FAULT_TOLERANCE,
            &format!("metadata.annotations[{}]", keys::FT_ENABLED_ANNOTATION),
            "the ray.io/ft-enabled annotation (GCS fault tolerance)",
            out,
        );
    }
    if spec.tls_options.is_some() {
        report(rr::UNSUPPORTED_TLS, "tlsOptions", "tlsOptions (mTLS)", out);
    }
    if spec.history_server_options.is_some() {
        report(
            rr::UNSUPPORTED_HISTORY_SERVER,
            "historyServerOptions",
            "historyServerOptions",
            out,
        );
    }
    if spec.network_policy.is_some() {
        report(
            rr::UNSUPPORTED_NETWORK_POLICY,
            "networkPolicy",
            "networkPolicy",
            out,
        );
    }
    if spec.head_group_spec.enable_ingress == Some(true) {
        report(
            rr::UNSUPPORTED_INGRESS,
            "headGroupSpec.enableIngress",
            "enableIngress",
            out,
        );
    }
    if token_auth_enabled(spec) {
        report(
            rr::UNSUPPORTED_TOKEN_AUTH,
            "authOptions.mode",
            "authOptions.mode 'token'",
            out,
        );
    }
}

/// The autoscaler-v1 restartPolicy warning, emitted after the spec rules (docs/upstream.md,
/// "KubeRay: validation").
pub(crate) fn autoscaler_v1_restart_policy_warning(spec: &RayClusterSpec, out: &mut Out<'_>) {
    if !autoscaling_enabled(spec) || autoscaling_v2(spec) {
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
