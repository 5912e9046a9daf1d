//! `ray.io/v1` RayJob and RayCluster, as served by KubeRay v1.7.
//!
//! Field names, optionality and CRD defaults follow KubeRay's Go types. CRD defaults are declared
//! on the fields (`extend("default" = …)`) so that the generated CRD carries them and
//! [`crate::crd::apply_defaults`] applies exactly the same values offline.
//!
//! Alpha features that raygate never runs itself (history server, network policy, mTLS, ingress
//! options) are kept as opaque objects: their content is preserved, only the gate checks look at
//! them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EnvFromSource, EnvVar, EnvVarSource, PodTemplateSpec, ResourceRequirements, SecurityContext,
    Service, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of a RayJob: the entrypoint to run and the cluster to run it on.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ray.io",
    version = "v1",
    kind = "RayJob",
    namespaced,
    status = "RayJobStatus",
    category = "all",
    printcolumn = r#"{"name":"job status","type":"string","jsonPath":".status.jobStatus","priority":0}"#,
    printcolumn = r#"{"name":"deployment status","type":"string","jsonPath":".status.jobDeploymentStatus","priority":0}"#,
    printcolumn = r#"{"name":"gang","type":"string","jsonPath":".status.conditions[?(@.type==\"GangPending\")].reason","priority":0}"#,
    printcolumn = r#"{"name":"ray cluster name","type":"string","jsonPath":".status.rayClusterName","priority":0}"#,
    printcolumn = r#"{"name":"start time","type":"string","jsonPath":".status.startTime","priority":0}"#,
    printcolumn = r#"{"name":"end time","type":"string","jsonPath":".status.endTime","priority":0}"#,
    printcolumn = r#"{"name":"age","type":"date","jsonPath":".metadata.creationTimestamp","priority":0}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RayJobSpec {
    /// Wall-clock limit in seconds, measured from `status.startTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i32>,
    /// Retries before the RayJob is marked failed; each retry uses a new RayCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub backoff_limit: Option<i32>,
    /// Template of the RayCluster the job creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_spec: Option<RayClusterSpec>,
    /// Pod template of the K8sJobMode submitter Job (boxed, as every Pod template here: a
    /// `PodTemplateSpec` is almost 2 kB, and moving it by value dominated decoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter_pod_template: Option<Box<PodTemplateSpec>>,
    /// Metadata stored with the Ray job (Ray ≥ 2.6.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Runs the job on an existing RayCluster; only the key `ray.io/cluster` is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<BTreeMap<String, String>>,
    /// Configuration of the submitter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter_config: Option<SubmitterConfig>,
    /// Controller that manages this RayJob; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "the managedBy field is immutable"},
        {"rule": "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
         "message": "the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"}
    ]))]
    pub managed_by: Option<String>,
    /// What is deleted, and when, after the job finishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_strategy: Option<DeletionStrategy>,
    /// Command run by `ray job submit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
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
    /// How the job is submitted: `K8sJobMode`, `HTTPMode`, `InteractiveMode` or `SidecarMode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "K8sJobMode"))]
    pub submission_mode: Option<String>,
    /// Custom resources reserved for the entrypoint, as a JSON object text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_resources: Option<String>,
    /// CPUs reserved for the entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_cpus: Option<f32>,
    /// GPUs reserved for the entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_gpus: Option<f32>,
    /// Seconds to wait after the job ends before shutting the cluster down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Delete the RayCluster once the job has finished (after the TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_after_job_finishes: Option<bool>,
    /// While true, no RayCluster exists for this job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Seconds from `status.startTime` in which the job must reach Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub pre_running_deadline_seconds: Option<i32>,
}

/// Configuration of the RayJob submitter.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubmitterConfig {
    /// `backoffLimit` of the submitter Job (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
}

/// What happens to the RayJob's resources after the job finishes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))",
     "message": "legacy policies (onSuccess/onFailure) and deletionRules cannot be used together within the same deletionStrategy"},
    {"rule": "(has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules)",
     "message": "deletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)"}
]))]
pub struct DeletionStrategy {
    /// Legacy: policy applied when the job succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<DeletionPolicy>,
    /// Legacy: policy applied when the job failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<DeletionPolicy>,
    /// Rules applied when their condition matches, each after its own TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub deletion_rules: Option<Vec<DeletionRule>>,
}

/// Legacy deletion policy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletionPolicy {
    /// What to delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<DeletionPolicyType>,
}

/// One deletion rule: a policy, and the condition that triggers it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletionRule {
    /// What to delete.
    pub policy: DeletionPolicyType,
    /// When to delete it.
    pub condition: DeletionCondition,
}

/// Condition of a [`DeletionRule`]: exactly one of `jobStatus` and `jobDeploymentStatus`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!(has(self.jobStatus) && has(self.jobDeploymentStatus))",
     "message": "JobStatus and JobDeploymentStatus cannot be used together within the same deletion condition."},
    {"rule": "has(self.jobStatus) || has(self.jobDeploymentStatus)",
     "message": "the deletion condition requires either the JobStatus or the JobDeploymentStatus field."}
]))]
pub struct DeletionCondition {
    /// Ray job status that triggers the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["SUCCEEDED", "FAILED"]))]
    pub job_status: Option<String>,
    /// Deployment status that triggers the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Failed"]))]
    pub job_deployment_status: Option<String>,
    /// Seconds after `status.endTime` before the rule applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 0))]
    pub ttl_seconds: Option<i32>,
}

/// What a deletion policy deletes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DeletionPolicyType {
    /// Delete the RayCluster.
    DeleteCluster,
    /// Suspend every worker group of the RayCluster.
    DeleteWorkers,
    /// Delete the RayJob itself (and everything it owns).
    DeleteSelf,
    /// Delete nothing.
    DeleteNone,
}

impl DeletionPolicyType {
    /// The policy's name as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeleteCluster => "DeleteCluster",
            Self::DeleteWorkers => "DeleteWorkers",
            Self::DeleteSelf => "DeleteSelf",
            Self::DeleteNone => "DeleteNone",
        }
    }
}

/// Dashboard job times, copied into the RayJob status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RayJobStatusInfo {
    /// When Ray started the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When Ray finished the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
}

/// Observed state of a RayJob, written exactly as KubeRay writes it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RayJobStatus {
    /// Dashboard job times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_job_info: Option<RayJobStatusInfo>,
    /// Ray submission id in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// RayCluster in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_name: Option<String>,
    /// Dashboard address, `<head-svc>.<ns>.svc.<domain>:<port>`, without scheme.
    #[serde(
        default,
        rename = "dashboardURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub dashboard_url: Option<String>,
    /// Ray's job status (`PENDING`, `RUNNING`, `STOPPED`, `SUCCEEDED`, `FAILED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_status: Option<String>,
    /// The controller's state (`Initializing`, `Running`, `Complete`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_deployment_status: Option<String>,
    /// Why the job failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the current attempt started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job reached Complete or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    /// Successful attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub succeeded: Option<i32>,
    /// Failed attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub failed: Option<i32>,
    /// Copy of the RayCluster's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_status: Option<RayClusterStatus>,
    /// Since when dashboard status checks have been failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_status_check_failure_start_time: Option<Time>,
    /// Generation last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// raygate's conditions (not KubeRay's): `GangPending`, why Volcano has not bound the gang
    /// (docs/reconciler.md, "Why a gang is pending").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// Desired state of a RayCluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ray.io",
    version = "v1",
    kind = "RayCluster",
    namespaced,
    status = "RayClusterStatus",
    category = "all",
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
    /// How the cluster is upgraded when its spec changes (user-created clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_strategy: Option<RayClusterUpgradeStrategy>,
    /// Ray token authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_options: Option<AuthOptions>,
    /// Deletes all Pods while true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Controller that manages this RayCluster; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "the managedBy field is immutable"},
        {"rule": "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
         "message": "the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"}
    ]))]
    pub managed_by: Option<String>,
    /// Ray autoscaler configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler_options: Option<AutoscalerOptions>,
    /// Annotations copied onto the head Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_service_annotations: Option<BTreeMap<String, String>>,
    /// Runs the Ray autoscaler as a sidecar of the head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_in_tree_autoscaling: Option<bool>,
    /// GCS fault tolerance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs_fault_tolerance_options: Option<GcsFaultToleranceOptions>,
    /// The head Pod.
    pub head_group_spec: HeadGroupSpec,
    /// Ray version of the images; drives version-dependent behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_version: Option<String>,
    /// Worker groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_group_specs: Option<Vec<WorkerGroupSpec>>,
    /// History server collector (alpha, gate RayClusterHistoryServer); kept opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::opaque_object")]
    pub history_server_options: Option<serde_json::Value>,
    /// Network policies (alpha, gate RayClusterNetworkPolicy); kept opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::opaque_object")]
    pub network_policy: Option<serde_json::Value>,
    /// Mutual TLS between Ray nodes (alpha, gate RayClusterMTLS); kept opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::opaque_object")]
    pub tls_options: Option<serde_json::Value>,
}

impl RayClusterSpec {
    /// KubeRay's `IsAutoscalingEnabled`: `enableInTreeAutoscaling` is set and true.
    pub fn autoscaling(&self) -> bool {
        self.enable_in_tree_autoscaling == Some(true)
    }

    /// KubeRay's `IsAutoscalingV2Enabled`: `autoscalerOptions.version` is `v2`.
    pub fn autoscaler_v2(&self) -> bool {
        self.autoscaler_version() == Some("v2")
    }

    /// `autoscalerOptions.version`, when set.
    pub fn autoscaler_version(&self) -> Option<&str> {
        self.autoscaler_options.as_ref()?.version.as_deref()
    }

    /// KubeRay's `IsAuthEnabled`: `authOptions.mode` is `token`.
    pub fn token_auth(&self) -> bool {
        self.auth_options.as_ref().and_then(|a| a.mode.as_deref()) == Some("token")
    }

    /// KubeRay's `IsK8sAuthEnabled`: `authOptions.enableK8sTokenAuth` is set and true.
    pub fn k8s_token_auth(&self) -> bool {
        self.auth_options
            .as_ref()
            .and_then(|a| a.enable_k8s_token_auth)
            == Some(true)
    }
}

/// Upgrade strategy of a user-created RayCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterUpgradeStrategy {
    /// `Recreate` or `None`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

/// Ray token authentication options.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthOptions {
    /// `disabled` or `token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["disabled", "token"]))]
    pub mode: Option<String>,
    /// Secret holding the token (key `auth_token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// Use Kubernetes service-account tokens (Ray ≥ 2.55.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_k8s_token_auth: Option<bool>,
}

/// GCS fault-tolerance options.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcsFaultToleranceOptions {
    /// Redis user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_username: Option<RedisCredential>,
    /// Redis password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_password: Option<RedisCredential>,
    /// Storage namespace inside Redis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_storage_namespace: Option<String>,
    /// Redis address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_address: Option<String>,
    /// `redis` (default) or `rocksdb` (embedded storage; immutable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["redis", "rocksdb"]))]
    pub backend: Option<String>,
    /// Volume for the `rocksdb` backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<GcsStorage>,
}

/// A Redis credential: a literal value or a reference.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RedisCredential {
    /// Where to read the value from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<EnvVarSource>,
    /// The literal value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// Volume of the embedded (`rocksdb`) GCS storage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcsStorage {
    /// Existing PersistentVolumeClaim to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    /// Size of a claim raygate would create.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    /// Storage class of that claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// Access modes of that claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_modes: Option<Vec<String>>,
}

/// The head Pod of a RayCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeadGroupSpec {
    /// Pod template; the Ray container is `containers[0]`. Boxed: see `submitter_pod_template`.
    pub template: Box<PodTemplateSpec>,
    /// Custom head Service (boxed for the same reason as the template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_service: Option<Box<Service>>,
    /// Creates an Ingress for the head Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_ingress: Option<bool>,
    /// Ingress options; kept opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::opaque_object")]
    pub ingress_options: Option<serde_json::Value>,
    /// Ray logical resources of the head node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<BTreeMap<String, String>>,
    /// Ray node labels of the head node (also put on the Pod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Parameters of `ray start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_start_params: Option<BTreeMap<String, String>>,
    /// Type of the head Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<String>,
}

/// A group of identical worker Pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerGroupSpec {
    /// Deletes the group's Pods while true (used by `DeleteWorkers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Name of the group; must be unique within the cluster.
    pub group_name: String,
    /// Desired replicas; clamped into `[minReplicas, maxReplicas]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub replicas: Option<i32>,
    /// Minimum replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub min_replicas: Option<i32>,
    /// Maximum replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 2147483647))]
    pub max_replicas: Option<i32>,
    /// Seconds an idle worker lives before the autoscaler (v2) removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_seconds: Option<i32>,
    /// Scale-down priority for autoscaler v2 (Ray ≥ 2.56.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub priority: Option<i32>,
    /// Ray logical resources of each worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<BTreeMap<String, String>>,
    /// Ray node labels of each worker (also put on the Pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Parameters of `ray start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_start_params: Option<BTreeMap<String, String>>,
    /// Pod template; the Ray container is `containers[0]`. Boxed: see `submitter_pod_template`.
    pub template: Box<PodTemplateSpec>,
    /// Pods per replica (multi-host replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    pub num_of_hosts: Option<i32>,
    /// Which Pods to remove on scale-down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<ScaleStrategy>,
}

/// Pods the autoscaler asked to remove.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScaleStrategy {
    /// Names of worker Pods to delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_to_delete: Option<Vec<String>>,
}

/// Ray autoscaler options.
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
    /// Autoscaler version, `v1` or `v2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["v1", "v2"]))]
    pub version: Option<String>,
    /// Environment of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Environment sources of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// Volume mounts of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    /// Command of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Arguments of the autoscaler container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
}

/// Observed state of a RayCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterStatus {
    /// Deprecated summary state: `ready`, `suspended` or `failed`.
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
    /// Last status update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When each state was entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_transition_times: Option<BTreeMap<String, Time>>,
    /// Head Service ports by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<BTreeMap<String, String>>,
    /// Head Pod and Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<HeadInfo>,
    /// Why the cluster is in its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Standard conditions (`RayClusterProvisioned`, `HeadPodReady`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// Generation last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Addresses of the head Pod and Service.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeadInfo {
    /// Head Pod IP.
    #[serde(default, rename = "podIP", skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    /// Head Service IP.
    #[serde(default, rename = "serviceIP", skip_serializing_if = "Option::is_none")]
    pub service_ip: Option<String>,
    /// Head Pod name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    /// Head Service name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn boxed_pod_templates_and_head_service_keep_their_json_shape() {
        let written = json!({
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "demo"},
            "spec": {
                "submitterPodTemplate": {"spec": {"containers": [{"name": "submit"}]}},
                "rayClusterSpec": {
                    "headGroupSpec": {
                        "headService": {"apiVersion": "v1", "kind": "Service",
                                    "metadata": {"name": "head-svc"}},
                        "template": {"spec": {"containers": [{"name": "head", "image": "ray"}]}}
                    },
                    "workerGroupSpecs": [{
                        "groupName": "w",
                        "template": {"metadata": {"labels": {"a": "b"}},
                                     "spec": {"containers": [{"name": "w"}]}}
                    }]
                }
            }
        });
        let job: RayJob = serde_json::from_value(written.clone()).expect("decodes");
        let cluster = job.spec.ray_cluster_spec.as_ref().expect("cluster spec");
        assert_eq!(
            cluster
                .head_group_spec
                .head_service
                .as_ref()
                .map(|s| s.metadata.name.as_deref()),
            Some(Some("head-svc"))
        );
        assert_eq!(serde_json::to_value(&job).expect("encodes"), written);
    }
}
