//! `ValidateRayClusterSpec`, steps 5–8: GCS fault tolerance — the `ray.io/ft-enabled`
//! annotation, Redis settings outside `gcsFaultToleranceOptions`, and the options themselves
//! (Redis or the embedded RocksDB backend).

use std::collections::BTreeMap;

use super::{ft_annotation_true, has_env, map_get, pod_spec, ray_container};
use crate::features::Feature;
use crate::keys;
use crate::ray::v1::{GcsFaultToleranceOptions, RayClusterSpec};
use crate::validation::ValidationContext;
use crate::validation::k8s::go_quote;
use crate::validation::out::Out;

const RAY_REDIS_ADDRESS: &str = "RAY_REDIS_ADDRESS";
const REDIS_PASSWORD: &str = "REDIS_PASSWORD";
const REDIS_USERNAME: &str = "REDIS_USERNAME";
const RAY_GCS_STORAGE: &str = "RAY_gcs_storage";
const RAY_GCS_STORAGE_PATH: &str = "RAY_gcs_storage_path";
const GCS_STORAGE_VOLUME_NAME: &str = "gcs-storage";
const GCS_STORAGE_MOUNT_PATH: &str = "/data/gcs";
/// The field path of the head's Ray container env.
const HEAD_ENV: &str = "headGroupSpec.template.spec.containers[0].env";

/// Steps 5–8, in KubeRay's order.
pub(super) fn validate(
    spec: &RayClusterSpec,
    annotations: Option<&BTreeMap<String, String>>,
    ctx: &ValidationContext,
    out: &mut Out<'_>,
) {
    let head = &spec.head_group_spec;
    let head_container = ray_container(&head.template);
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
            HEAD_ENV,
            format!("{RAY_REDIS_ADDRESS} is set which implicitly enables GCS fault tolerance, but GcsFaultToleranceOptions is not set. Please set GcsFaultToleranceOptions to enable GCS fault tolerance"),
        );
    }
    // 7. GCS FT options.
    if let Some(options) = &spec.gcs_fault_tolerance_options {
        gcs_fault_tolerance_options(spec, options, annotations, ctx, out);
    }
    // 8. Redis user name outside the options.
    let username_param = !map_get(head.ray_start_params.as_ref(), "redis-username").is_empty();
    if username_param || has_env(head_container, REDIS_USERNAME) {
        out.kuberay(
            "redis-username-outside-gcs-options",
            if username_param {
                "headGroupSpec.rayStartParams[redis-username]"
            } else {
                HEAD_ENV
            },
            "cannot set redis username in rayStartParams or environment variables - use GcsFaultToleranceOptions.RedisUsername instead",
        );
    }
}

/// Step 7: with `gcsFaultToleranceOptions`, the Redis settings it replaces are not set elsewhere,
/// and the storage settings fit the backend.
fn gcs_fault_tolerance_options(
    spec: &RayClusterSpec,
    options: &GcsFaultToleranceOptions,
    annotations: Option<&BTreeMap<String, String>>,
    ctx: &ValidationContext,
    out: &mut Out<'_>,
) {
    let head = &spec.head_group_spec;
    let head_container = ray_container(&head.template);
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
            HEAD_ENV,
            "cannot set `REDIS_PASSWORD` env var in head Pod when GcsFaultToleranceOptions is enabled - use GcsFaultToleranceOptions.RedisPassword instead",
        );
    }
    if has_env(head_container, RAY_REDIS_ADDRESS) {
        out.kuberay(
            "gcs-ft-redis-address-env",
            HEAD_ENV,
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
        rocksdb_options(options, ctx, out);
        rocksdb_head_pod(spec, out);
    } else if options.storage.is_some() {
        out.kuberay(
            "gcs-ft-redis-storage",
            "gcsFaultToleranceOptions.storage",
            "cannot set GcsFaultToleranceOptions.Storage when backend is 'redis' - it only applies to the 'rocksdb' backend",
        );
    }
}

/// The embedded RocksDB backend: its feature gate, no Redis fields, and a claim name or a managed
/// volume's settings but not both.
fn rocksdb_options(options: &GcsFaultToleranceOptions, ctx: &ValidationContext, out: &mut Out<'_>) {
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
}

/// The embedded RocksDB backend: the head Pod leaves the storage env, mount and volume to
/// KubeRay.
fn rocksdb_head_pod(spec: &RayClusterSpec, out: &mut Out<'_>) {
    let head = &spec.head_group_spec;
    let head_container = ray_container(&head.template);
    if has_env(head_container, RAY_GCS_STORAGE) || has_env(head_container, RAY_GCS_STORAGE_PATH) {
        out.kuberay(
            "gcs-ft-rocksdb-storage-env",
            HEAD_ENV,
            format!("cannot set `{RAY_GCS_STORAGE}` or `{RAY_GCS_STORAGE_PATH}` env var in head Pod when the embedded GCS FT backend is used - these are managed by KubeRay"),
        );
    }
    let mounts = head_container
        .and_then(|c| c.volume_mounts.as_deref())
        .unwrap_or(&[]);
    if mounts
        .iter()
        .any(|m| m.mount_path == GCS_STORAGE_MOUNT_PATH || m.name == GCS_STORAGE_VOLUME_NAME)
    {
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
}
