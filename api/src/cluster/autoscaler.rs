//! In-tree autoscaling (`enableInTreeAutoscaling: true`), as KubeRay v1.7 runs it
//! (docs/upstream.md, "KubeRay: in-tree autoscaling"): the Ray autoscaler as a sidecar of the
//! head Pod, and the ServiceAccount, Role and RoleBinding it acts with.
//!
//! The autoscaler scales the cluster by patching the RayCluster: a worker group's `replicas`,
//! and `scaleStrategy.workersToDelete` to name the workers to remove. The RayCluster decision
//! ([`super::decide()`]) then creates or deletes exactly those Pods; with autoscaling it never
//! picks workers to remove itself.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, PodSpec, ResourceRequirements, ServiceAccount, Volume,
    VolumeMount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::build::{check_name, field_env, owner_reference, value_env};
use crate::keys::{self, APP_NAME_LABEL, CREATED_BY_LABEL, CREATED_BY_VALUE};
use crate::ray::v1::{RayCluster, RayClusterSpec};

/// Name of the autoscaler container in the head Pod (KubeRay's).
pub const CONTAINER_NAME: &str = "autoscaler";

/// The command that starts the autoscaler, also in `KUBERAY_GEN_AUTOSCALER_START_CMD` so that
/// `autoscalerOptions.args` can run it after a command of their own.
pub const START_COMMAND: &str = "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)";

/// The emptyDir the Ray container and the autoscaler share at `/tmp/ray`: the head reads the
/// autoscaler's event logs from it.
const LOG_VOLUME: &str = "ray-logs";
const LOG_MOUNT_PATH: &str = "/tmp/ray";

fn cluster_name(cluster: &RayCluster) -> &str {
    cluster.metadata.name.as_deref().unwrap_or_default()
}

/// The head template's `serviceAccountName`, when it names one.
fn template_service_account(cluster: &RayCluster) -> Option<&str> {
    cluster
        .spec
        .head_group_spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .filter(|name| !name.is_empty())
}

/// The ServiceAccount the head Pod runs as: the head template's `serviceAccountName`, else one
/// named after the cluster.
pub fn service_account_name(cluster: &RayCluster) -> String {
    check_name(template_service_account(cluster).unwrap_or(cluster_name(cluster)))
}

/// Whether raygate creates the head's ServiceAccount: not when the head template names one,
/// which its user must create (as with KubeRay).
pub fn creates_service_account(cluster: &RayCluster) -> bool {
    template_service_account(cluster).is_none()
}

fn metadata(cluster: &RayCluster, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: cluster.metadata.namespace.clone(),
        labels: Some(BTreeMap::from([
            (
                keys::RAY_CLUSTER_LABEL.to_string(),
                cluster_name(cluster).to_string(),
            ),
            (APP_NAME_LABEL.to_string(), "kuberay".to_string()),
            (CREATED_BY_LABEL.to_string(), CREATED_BY_VALUE.to_string()),
        ])),
        owner_references: Some(vec![owner_reference(cluster)]),
        ..ObjectMeta::default()
    }
}

/// The head's ServiceAccount, when raygate creates it ([`creates_service_account`]).
pub fn build_service_account(cluster: &RayCluster) -> ServiceAccount {
    ServiceAccount {
        metadata: metadata(cluster, service_account_name(cluster)),
        ..ServiceAccount::default()
    }
}

/// The Role the autoscaler acts with, named after the cluster: it reads and patches the
/// cluster's Pods and the RayCluster itself.
pub fn build_role(cluster: &RayCluster) -> Role {
    let rule = |group: &str, resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..PolicyRule::default()
    };
    Role {
        metadata: metadata(cluster, check_name(cluster_name(cluster))),
        rules: Some(vec![
            rule("", &["pods"], &["get", "list", "watch", "patch"]),
            rule("", &["pods/resize"], &["patch"]),
            rule("ray.io", &["rayclusters"], &["get", "patch"]),
        ]),
    }
}

/// The RoleBinding of [`build_role`] to the head's ServiceAccount, named after the cluster.
pub fn build_role_binding(cluster: &RayCluster) -> RoleBinding {
    RoleBinding {
        metadata: metadata(cluster, check_name(cluster_name(cluster))),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_string()),
            kind: "Role".to_string(),
            name: check_name(cluster_name(cluster)),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_string(),
            name: service_account_name(cluster),
            namespace: cluster.metadata.namespace.clone(),
            ..Subject::default()
        }]),
    }
}

/// The autoscaler container: the Ray container's image, KubeRay's environment, command and
/// 500m / 512Mi, then `autoscalerOptions` (which replace the resources, image, pull policy,
/// security context, command and args, and add to the environment and mounts).
fn build_container(spec: &RayClusterSpec, ray_image: Option<String>) -> Container {
    let quantities = || {
        Some(BTreeMap::from([
            ("cpu".to_string(), Quantity("500m".to_string())),
            ("memory".to_string(), Quantity("512Mi".to_string())),
        ]))
    };
    let mut container = Container {
        name: CONTAINER_NAME.to_string(),
        image: ray_image,
        image_pull_policy: Some("IfNotPresent".to_string()),
        env: Some(vec![
            field_env("RAY_CLUSTER_NAME", "metadata.labels['ray.io/cluster']"),
            field_env("RAY_CLUSTER_NAMESPACE", "metadata.namespace"),
            field_env("RAY_HEAD_POD_NAME", "metadata.name"),
            value_env("KUBERAY_CRD_VER", "v1"),
            value_env("KUBERAY_GEN_AUTOSCALER_START_CMD", START_COMMAND),
        ]),
        command: Some(vec!["/bin/bash".into(), "-c".into(), "--".into()]),
        args: Some(vec![START_COMMAND.to_string()]),
        resources: Some(ResourceRequirements {
            limits: quantities(),
            requests: quantities(),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    };
    let Some(options) = &spec.autoscaler_options else {
        return container;
    };
    if let Some(resources) = &options.resources {
        container.resources = Some(resources.clone());
    }
    if let Some(image) = &options.image {
        container.image = Some(image.clone());
    }
    if let Some(policy) = &options.image_pull_policy {
        container.image_pull_policy = Some(policy.clone());
    }
    if let Some(env) = options.env.as_ref().filter(|e| !e.is_empty()) {
        container
            .env
            .get_or_insert_with(Vec::new)
            .extend_from_slice(env);
    }
    if let Some(env_from) = options.env_from.as_ref().filter(|e| !e.is_empty()) {
        container
            .env_from
            .get_or_insert_with(Vec::new)
            .extend_from_slice(env_from);
    }
    if let Some(mounts) = options.volume_mounts.as_ref().filter(|m| !m.is_empty()) {
        container
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .extend_from_slice(mounts);
    }
    if let Some(context) = &options.security_context {
        container.security_context = Some(context.clone());
    }
    if let Some(command) = options.command.as_ref().filter(|c| !c.is_empty()) {
        container.command = Some(command.clone());
    }
    if let Some(args) = options.args.as_ref().filter(|a| !a.is_empty()) {
        container.args = Some(args.clone());
    }
    container
}

/// Makes a head Pod's spec autoscaled: its ServiceAccount, the autoscaler container after the
/// Ray container, and the autoscaler version's environment on the Ray container
/// (`RAY_enable_autoscaler_v2`, set only when `autoscalerOptions.version` is; v2 also makes the
/// head `restartPolicy: Never`). Before the Ray container's own environment, as KubeRay orders
/// it; [`mount_logs`] follows once `/dev/shm` is mounted.
pub fn add_to_head(cluster: &RayCluster, pod: &mut PodSpec) {
    let spec = &cluster.spec;
    pod.service_account_name = Some(service_account_name(cluster));
    let ray_image = pod.containers.first().and_then(|c| c.image.clone());
    pod.containers.push(build_container(spec, ray_image));
    let version_env = match spec.autoscaler_version() {
        Some("v2") => Some("true"),
        Some("v1") => Some("false"),
        _ => None,
    };
    if let (Some(value), Some(ray)) = (version_env, pod.containers.first_mut()) {
        ray.env
            .get_or_insert_with(Vec::new)
            .push(value_env("RAY_enable_autoscaler_v2", value));
    }
    if spec.autoscaler_v2() {
        pod.restart_policy = Some("Never".to_string());
    }
}

/// Mounts the `ray-logs` emptyDir at `/tmp/ray` in the Ray container and the autoscaler,
/// unless something is mounted there already.
pub fn mount_logs(pod: &mut PodSpec) {
    let volumes = pod.volumes.get_or_insert_with(Vec::new);
    if !volumes.iter().any(|v| v.name == LOG_VOLUME) {
        volumes.push(Volume {
            name: LOG_VOLUME.to_string(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        });
    }
    let autoscaler = pod
        .containers
        .iter()
        .rposition(|c| c.name == CONTAINER_NAME);
    for index in [Some(0), autoscaler].into_iter().flatten() {
        let Some(container) = pod.containers.get_mut(index) else {
            continue;
        };
        let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
        if !mounts.iter().any(|m| m.mount_path == LOG_MOUNT_PATH) {
            mounts.push(VolumeMount {
                name: LOG_VOLUME.to_string(),
                mount_path: LOG_MOUNT_PATH.to_string(),
                ..VolumeMount::default()
            });
        }
    }
}

/// Makes a worker Pod's spec autoscaled: autoscaler v2 restarts no worker
/// (`restartPolicy: Never`), it replaces them.
pub fn add_to_worker(spec: &RayClusterSpec, pod: &mut PodSpec) {
    if spec.autoscaler_v2() {
        pod.restart_policy = Some("Never".to_string());
    }
}

#[cfg(test)]
mod tests;
