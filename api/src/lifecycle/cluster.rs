//! The RayCluster a RayJob creates, and the dashboard address of a cluster.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use super::{DEFAULT_DASHBOARD_PORT, SubmissionMode, submitter};
use crate::keys;
use crate::ray::v1::{RayCluster, RayClusterSpec, RayJob};

/// Annotation that keeps a provisioned SidecarMode head from being recreated (KubeRay).
pub const DISABLE_PROVISIONED_HEAD_RESTART_ANNOTATION: &str =
    "ray.io/disable-provisioned-head-restart";
/// Label on a RayJob's cluster naming the submission mode (KubeRay).
pub const JOB_SUBMISSION_MODE_LABEL: &str = "ray.io/job-submission-mode";

/// The controller ownerReference of an object owned by `job`.
pub(super) fn owned_by(job: &RayJob) -> OwnerReference {
    OwnerReference {
        api_version: "ray.io/v1".to_string(),
        kind: "RayJob".to_string(),
        name: job.metadata.name.clone().unwrap_or_default(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The dashboard port of a cluster spec: the head `containers[0]` port named `dashboard`, else
/// 8265.
pub fn dashboard_port(spec: Option<&RayClusterSpec>) -> i32 {
    spec.and_then(|s| s.head_group_spec.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .and_then(|c| c.ports.as_ref())
        .and_then(|ports| {
            ports
                .iter()
                .find(|p| p.name.as_deref() == Some("dashboard"))
        })
        .map(|p| p.container_port)
        .unwrap_or(DEFAULT_DASHBOARD_PORT)
}

/// `status.dashboardURL` of a cluster: `<cluster>-head-svc.<ns>.svc.<domain>:<port>`, no scheme.
pub fn dashboard_url(cluster: &RayCluster, domain: &str) -> String {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let namespace = cluster.metadata.namespace.as_deref().unwrap_or_default();
    let service = cluster
        .spec
        .head_group_spec
        .head_service
        .as_ref()
        .and_then(|s| s.metadata.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("{name}-head-svc"));
    let port = dashboard_port(Some(&cluster.spec));
    format!("{service}.{namespace}.svc.{domain}:{port}")
}

/// The RayCluster `name` that `job` creates (`kuberay-compat.md` §6.5): the RayJob's labels and
/// annotations plus KubeRay's origin labels, a copy of `spec.rayClusterSpec`, a controller
/// ownerReference to the RayJob; in SidecarMode the submitter container is appended to the head
/// and the head never restarts; in Volcano namespaces (K8sJobMode, as KubeRay) the RayJob's
/// PodGroup annotations, so the cluster's Pods are recognisably part of the RayJob's gang.
///
/// `dashboard_url` and `submission_id` are only used by SidecarMode's submitter.
pub fn ray_cluster_for_job(
    job: &RayJob,
    name: &str,
    submission_id: &str,
    volcano: bool,
    login_shell: bool,
) -> Option<RayCluster> {
    let mut spec = job.spec.ray_cluster_spec.clone()?;
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let mode = SubmissionMode::of(job).unwrap_or(SubmissionMode::K8sJob);
    let mut labels: BTreeMap<String, String> = job.metadata.labels.clone().unwrap_or_default();
    labels.insert(keys::ORIGINATED_FROM_CR_NAME_LABEL.into(), job_name.clone());
    labels.insert(keys::ORIGINATED_FROM_CRD_LABEL.into(), "RayJob".into());
    labels.insert(JOB_SUBMISSION_MODE_LABEL.into(), mode.as_str().into());
    let mut annotations = job.metadata.annotations.clone().unwrap_or_default();
    if mode == SubmissionMode::Sidecar {
        annotations.insert(
            DISABLE_PROVISIONED_HEAD_RESTART_ANNOTATION.into(),
            "true".into(),
        );
        let port = dashboard_port(Some(&spec));
        let container = submitter::sidecar_container(job, &spec, submission_id, port, login_shell);
        if let Some(head) = spec.head_group_spec.template.spec.as_mut() {
            head.containers.push(container);
            head.restart_policy = Some("Never".into());
        }
    }
    if volcano && mode == SubmissionMode::K8sJob {
        annotations.insert(
            keys::POD_GROUP_ANNOTATION.into(),
            keys::pod_group_name(&job_name),
        );
        annotations.insert(keys::TASK_SPEC_ANNOTATION.into(), String::new());
    }
    Some(RayCluster {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: job.meta().namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owned_by(job)]),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    })
}
