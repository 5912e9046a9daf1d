//! The RayCluster controller's decisions: what a cluster's head Service and Pods look like, and
//! which actions bring the observed Pods to the desired ones (docs/upstream.md,
//! "KubeRay: RayCluster controller").
//!
//! * [`build`] turns a RayCluster into its head Service and into one head or worker Pod, the
//!   way KubeRay v1.7 does (names, labels, `ray start` command, environment).
//! * [`decide`] compares a snapshot of what exists with the spec and returns the actions to
//!   take, in order, and the status to write.
//!
//! Pod names are deterministic: KubeRay's `generateName` prefix followed by a five-character
//! suffix derived from the cluster's UID, the group and a slot number. A reconcile that works
//! from a stale view therefore asks to create a name that already exists, the API server
//! answers AlreadyExists, and no second Pod is made — no scale expectations are needed.

pub mod build;
pub mod decide;
pub mod status;

pub use build::{BuildOptions, build_head_service, build_pod, head_service_name, pod_object};
pub use decide::{Action, Observed, Plan, decide};

/// `ray.io/node-type` of the head Pod.
pub const HEAD_NODE_TYPE: &str = "head";
/// `ray.io/node-type` of worker Pods.
pub const WORKER_NODE_TYPE: &str = "worker";
/// `ray.io/group` of the head Pod.
pub const HEAD_GROUP: &str = "headgroup";
/// Label `ray.io/identifier` (`<cluster>-head` / `<cluster>-worker`).
pub const IDENTIFIER_LABEL: &str = "ray.io/identifier";
/// Label `ray.io/is-ray-node` (`yes`).
pub const IS_RAY_NODE_LABEL: &str = "ray.io/is-ray-node";
/// Label `app.kubernetes.io/name` (`kuberay`).
pub const APP_NAME_LABEL: &str = "app.kubernetes.io/name";
/// Label `app.kubernetes.io/created-by` (`kuberay-operator`).
pub const CREATED_BY_LABEL: &str = "app.kubernetes.io/created-by";
/// Annotation that keeps the user's container command untouched.
pub const OVERWRITE_CONTAINER_CMD_ANNOTATION: &str = "ray.io/overwrite-container-cmd";
/// Default Kubernetes cluster DNS domain.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// Default GCS port of the head.
pub const DEFAULT_GCS_PORT: i32 = 6379;
/// Default dashboard port of the head.
pub const DEFAULT_DASHBOARD_PORT: i32 = 8265;
/// Default Ray client port of the head.
pub const DEFAULT_CLIENT_PORT: i32 = 10001;
