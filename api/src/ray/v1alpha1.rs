//! `ray.io/v1alpha1` RayJob and RayCluster: KubeRay's frozen, deprecated API version.
//!
//! KubeRay stopped adding fields to `v1alpha1` when `v1` became the storage version (v1.0.0) and
//! synchronised the two one last time shortly after; KubeRay v1.7 serves it with
//! `deprecated: true`. These types model that frozen feature set field by field, so that the
//! conversion service can translate between the versions without guessing:
//!
//! * RayJob: no `activeDeadlineSeconds`, `submissionMode`, `backoffLimit`, `submitterConfig`,
//!   `managedBy`, `deletionStrategy`, `preRunningDeadlineSeconds`; `entrypoint` is **required**.
//!   The status has no `reason`, `succeeded`, `failed`, `rayJobInfo`,
//!   `jobStatusCheckFailureStartTime`.
//! * RayCluster: no `upgradeStrategy`, `authOptions`, `managedBy`, `gcsFaultToleranceOptions`,
//!   `historyServerOptions`, `networkPolicy`, `tlsOptions`; the head group has no
//!   `ingressOptions`, `resources`, `labels`; worker groups have no `suspend`,
//!   `idleTimeoutSeconds`, `priority`, `resources`, `labels`, `numOfHosts`; `rayStartParams` is
//!   **required** for the head and every worker group; the autoscaler options have no `version`,
//!   `command`, `args`. The status has no `conditions`, `stateTransitionTimes`, `head.podName`,
//!   `head.serviceName`.
//!
//! Structs whose shape is identical in both versions are shared with [`super::v1`]
//! ([`ScaleStrategy`]); every other struct is distinct.
//!
//! Required fields that a Go client always writes (`entrypoint`, `rayStartParams`, `minReplicas`,
//! `maxReplicas`) are `#[serde(default)]` in Rust so that reading a malformed object never fails,
//! and are marked required in the schema by a schema transform, as in KubeRay's CRD.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EnvFromSource, EnvVar, PodTemplateSpec, ResourceRequirements, SecurityContext, Service,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

pub use super::v1::ScaleStrategy;

/// Deprecation warning of `ray.io/v1alpha1` RayJob, as served by KubeRay v1.7.
pub const RAYJOB_DEPRECATION_WARNING: &str = "ray.io/v1alpha1 RayJob is deprecated; it will not receive new fields and will be unavailable in KubeRay 1.9; use ray.io/v1";
/// Deprecation warning of `ray.io/v1alpha1` RayCluster, as served by KubeRay v1.7.
pub const RAYCLUSTER_DEPRECATION_WARNING: &str = "ray.io/v1alpha1 RayCluster is deprecated; it will not receive new fields and will be unavailable in KubeRay 1.9; use ray.io/v1";

/// Adds `fields` to the `required` list of an object schema (keeping it sorted and unique), and
/// drops the `default` schemars derives from `#[serde(default)]` on them (KubeRay's CRD has none:
/// a required field is never defaulted into existence).
fn require(schema: &mut Schema, fields: &[&str]) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if let Some(props) = obj.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for field in fields {
            if let Some(prop) = props.get_mut(*field).and_then(|p| p.as_object_mut())
                && !matches!(*field, "minReplicas" | "maxReplicas")
            {
                prop.remove("default");
            }
        }
    }
    let entry = obj
        .entry("required")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let Some(list) = entry.as_array_mut() {
        for field in fields {
            if !list.iter().any(|v| v.as_str() == Some(field)) {
                list.push(serde_json::Value::String((*field).to_owned()));
            }
        }
        list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    }
}

fn require_entrypoint(schema: &mut Schema) {
    require(schema, &["entrypoint"]);
}

fn require_head_fields(schema: &mut Schema) {
    require(schema, &["rayStartParams", "template"]);
}

fn require_worker_fields(schema: &mut Schema) {
    require(
        schema,
        &[
            "groupName",
            "maxReplicas",
            "minReplicas",
            "rayStartParams",
            "template",
        ],
    );
}

/// Desired state of a `v1alpha1` RayJob.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ray.io",
    version = "v1alpha1",
    kind = "RayJob",
    namespaced,
    status = "RayJobStatus",
    category = "all",
    deprecated = "ray.io/v1alpha1 RayJob is deprecated; it will not receive new fields and will be unavailable in KubeRay 1.9; use ray.io/v1",
    printcolumn = r#"{"name":"job status","type":"string","jsonPath":".status.jobStatus","priority":0}"#,
    printcolumn = r#"{"name":"deployment status","type":"string","jsonPath":".status.jobDeploymentStatus","priority":0}"#,
    printcolumn = r#"{"name":"gang","type":"string","jsonPath":".status.conditions[?(@.type==\"GangPending\")].reason","priority":0}"#,
    printcolumn = r#"{"name":"ray cluster name","type":"string","jsonPath":".status.rayClusterName","priority":0}"#,
    printcolumn = r#"{"name":"start time","type":"string","jsonPath":".status.startTime","priority":0}"#,
    printcolumn = r#"{"name":"end time","type":"string","jsonPath":".status.endTime","priority":0}"#,
    printcolumn = r#"{"name":"age","type":"date","jsonPath":".metadata.creationTimestamp","priority":0}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = require_entrypoint)]
pub struct RayJobSpec {
    /// Pod template of the submitter Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter_pod_template: Option<PodTemplateSpec>,
    /// Metadata stored with the Ray job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Template of the RayCluster the job creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_spec: Option<RayClusterSpec>,
    /// Runs the job on an existing RayCluster; only the key `ray.io/cluster` is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<BTreeMap<String, String>>,
    /// Command run by `ray job submit` (required in `v1alpha1`; always written).
    #[serde(default)]
    pub entrypoint: String,
    /// Runtime environment as a YAML document.
    #[serde(
        default,
        rename = "runtimeEnvYAML",
        skip_serializing_if = "Option::is_none"
    )]
    pub runtime_env_yaml: Option<String>,
    /// Ray submission id; generated when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// Custom resources reserved for the entrypoint, as a JSON object text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_resources: Option<String>,
    /// Seconds to wait after the job ends before shutting the cluster down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
    /// CPUs reserved for the entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_cpus: Option<f32>,
    /// GPUs reserved for the entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_gpus: Option<f32>,
    /// Delete the RayCluster once the job has finished (after the TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_after_job_finishes: Option<bool>,
    /// While true, no RayCluster exists for this job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

/// Observed state of a `v1alpha1` RayJob.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RayJobStatus {
    /// Ray submission id in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// RayCluster in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_name: Option<String>,
    /// Dashboard address, without scheme.
    #[serde(
        default,
        rename = "dashboardURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub dashboard_url: Option<String>,
    /// Ray's job status (`PENDING`, `RUNNING`, `STOPPED`, `SUCCEEDED`, `FAILED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_status: Option<String>,
    /// The controller's state; `v1alpha1` knew `Initializing`, `Running`, `Complete`,
    /// `Suspended`, but the schema is a plain string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_deployment_status: Option<String>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the current attempt started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    /// Copy of the RayCluster's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_status: Option<RayClusterStatus>,
    /// Generation last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Desired state of a `v1alpha1` RayCluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ray.io",
    version = "v1alpha1",
    kind = "RayCluster",
    namespaced,
    status = "RayClusterStatus",
    category = "all",
    deprecated = "ray.io/v1alpha1 RayCluster is deprecated; it will not receive new fields and will be unavailable in KubeRay 1.9; use ray.io/v1",
    printcolumn = r#"{"name":"desired workers","type":"integer","jsonPath":".status.desiredWorkerReplicas","priority":0}"#,
    printcolumn = r#"{"name":"available workers","type":"integer","jsonPath":".status.availableWorkerReplicas","priority":0}"#,
    printcolumn = r#"{"name":"cpus","type":"string","jsonPath":".status.desiredCPU","priority":0}"#,
    printcolumn = r#"{"name":"memory","type":"string","jsonPath":".status.desiredMemory","priority":0}"#,
    printcolumn = r#"{"name":"gpus","type":"string","jsonPath":".status.desiredGPU","priority":0}"#,
    printcolumn = r#"{"name":"tpus","type":"string","jsonPath":".status.desiredTPU","priority":1}"#,
    printcolumn = r#"{"name":"status","type":"string","jsonPath":".status.state","priority":0}"#,
    printcolumn = r#"{"name":"gang","type":"string","jsonPath":".status.conditions[?(@.type==\"GangPending\")].reason","priority":0}"#,
    printcolumn = r#"{"name":"age","type":"date","jsonPath":".metadata.creationTimestamp","priority":0}"#,
    printcolumn = r#"{"name":"head pod IP","type":"string","jsonPath":".status.head.podIP","priority":1}"#,
    printcolumn = r#"{"name":"head service IP","type":"string","jsonPath":".status.head.serviceIP","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterSpec {
    /// Runs the Ray autoscaler as a sidecar of the head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_in_tree_autoscaling: Option<bool>,
    /// Ray autoscaler configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler_options: Option<AutoscalerOptions>,
    /// Deletes all Pods while true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Annotations copied onto the head Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_service_annotations: Option<BTreeMap<String, String>>,
    /// The head Pod.
    pub head_group_spec: HeadGroupSpec,
    /// Ray version of the images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_version: Option<String>,
    /// Worker groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_group_specs: Option<Vec<WorkerGroupSpec>>,
}

/// The head Pod of a `v1alpha1` RayCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = require_head_fields)]
pub struct HeadGroupSpec {
    /// Type of the head Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<String>,
    /// Custom head Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_service: Option<Service>,
    /// Creates an Ingress for the head Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_ingress: Option<bool>,
    /// Parameters of `ray start` (required in `v1alpha1`; always written).
    #[serde(default)]
    pub ray_start_params: BTreeMap<String, String>,
    /// Pod template; the Ray container is `containers[0]`.
    pub template: PodTemplateSpec,
}

/// A group of identical worker Pods of a `v1alpha1` RayCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = require_worker_fields)]
pub struct WorkerGroupSpec {
    /// Name of the group.
    pub group_name: String,
    /// Desired replicas; clamped into `[minReplicas, maxReplicas]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub replicas: Option<i32>,
    /// Minimum replicas (required by the schema, defaulted to 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub min_replicas: Option<i32>,
    /// Maximum replicas (required by the schema, defaulted to 2147483647).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 2147483647))]
    pub max_replicas: Option<i32>,
    /// Parameters of `ray start` (required in `v1alpha1`; always written).
    #[serde(default)]
    pub ray_start_params: BTreeMap<String, String>,
    /// Pod template; the Ray container is `containers[0]`.
    pub template: PodTemplateSpec,
    /// Which Pods to remove on scale-down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<ScaleStrategy>,
}

/// Ray autoscaler options of a `v1alpha1` RayCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalerOptions {
    /// Resources of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Image of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Pull policy of that image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    /// Security context of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    /// Seconds before an idle worker is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_seconds: Option<i32>,
    /// `Default`, `Aggressive` or `Conservative`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Default", "Aggressive", "Conservative"]))]
    pub upscaling_mode: Option<String>,
    /// Environment of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Environment sources of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// Volume mounts of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
}

/// Observed state of a `v1alpha1` RayCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterStatus {
    /// Summary state: `ready`, `unhealthy`, `failed` or `suspended`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Workers that are Running and Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_worker_replicas: Option<i32>,
    /// Workers in phase Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_worker_replicas: Option<i32>,
    /// Desired worker Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_worker_replicas: Option<i32>,
    /// Minimum worker Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_worker_replicas: Option<i32>,
    /// Maximum worker Pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_worker_replicas: Option<i32>,
    /// Total desired CPU.
    #[serde(
        default,
        rename = "desiredCPU",
        skip_serializing_if = "Option::is_none"
    )]
    pub desired_cpu: Option<Quantity>,
    /// Total desired memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_memory: Option<Quantity>,
    /// Total desired GPUs.
    #[serde(
        default,
        rename = "desiredGPU",
        skip_serializing_if = "Option::is_none"
    )]
    pub desired_gpu: Option<Quantity>,
    /// Total desired TPUs.
    #[serde(
        default,
        rename = "desiredTPU",
        skip_serializing_if = "Option::is_none"
    )]
    pub desired_tpu: Option<Quantity>,
    /// Last status update (the only nullable field of KubeRay's schemas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Head Service ports by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<BTreeMap<String, String>>,
    /// Head Pod and Service addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<HeadInfo>,
    /// Why the cluster is in its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Generation last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Addresses of the head Pod and Service (`v1alpha1`: no names).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeadInfo {
    /// Head Pod IP.
    #[serde(default, rename = "podIP", skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    /// Head Service IP.
    #[serde(default, rename = "serviceIP", skip_serializing_if = "Option::is_none")]
    pub service_ip: Option<String>,
}
