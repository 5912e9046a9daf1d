//! The RayCluster controller's decisions: what a cluster's head Service and Pods look like, and
//! which actions bring the observed Pods to the desired ones (docs/upstream.md,
//! "KubeRay: RayCluster controller").
//!
//! * [`build`] turns a RayCluster into its head Service and into one head or worker Pod, the
//!   way KubeRay v1.7 does (names, labels, `ray start` command, environment).
//! * [`decide()`] compares a snapshot of what exists with the spec and returns the actions to
//!   take, in order, with their Events and the status to write.
//! * [`autoscaler`] adds the Ray autoscaler to the head Pod and builds the ServiceAccount, Role
//!   and RoleBinding it acts with.
//! * [`auth`] gives every Ray process of a token-authenticated cluster its token, and builds
//!   the Secret that holds it.
//! * [`ingress`] builds the head Ingress of a cluster that asks for one.
//! * [`gcs_wait`] adds the init container that holds a worker until the head's GCS answers.
//! * [`upgrade`] decides when `upgradeStrategy: Recreate` replaces the Pods.
//!
//! Pod names are deterministic: KubeRay's `generateName` prefix followed by a five-character
//! suffix derived from the cluster's UID, the group and a slot number. A reconcile that works
//! from a stale view therefore asks to create a name that already exists, the API server
//! answers AlreadyExists, and no second Pod is made — no scale expectations are needed.

pub mod auth;
pub mod autoscaler;
pub mod build;
pub mod decide;
pub mod gcs_wait;
pub mod ingress;
pub mod status;
pub mod upgrade;

pub use build::{
    BuildOptions, build_head_service, build_pod, has_multi_host_group, head_service_name,
    headless_worker_service_name, pod_object,
};
pub use decide::{Action, FailedWrite, Snapshot, decide, ready_may_be_due, ready_status_due};

use crate::ray::v1::RayCluster;

/// Whether no pass has written `cluster`'s status yet (a cluster's creating pass writes none:
/// its Pods do not exist yet). Its first pass may wait behind the passes of clusters on their
/// way (docs/reconciler.md, "First passes wait their turn").
pub fn awaits_first_pass(cluster: &RayCluster) -> bool {
    cluster.status.is_none()
}
