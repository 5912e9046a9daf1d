//! The RayCluster a RayJob creates, and the dashboard address of a cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use serde_json::{Map, Value, json};

use super::{SubmissionMode, submitter};
use crate::cluster::build::identifier;
use crate::cluster::{BuildOptions, build_head_service, head_service_name};
use crate::keys::{self, DEFAULT_DASHBOARD_PORT, HEAD_NODE_TYPE, IDENTIFIER_LABEL};
use crate::preserve::keep_unknown_fields;
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
    let namespace = cluster.metadata.namespace.as_deref().unwrap_or_default();
    let service = head_service_name(cluster);
    let port = dashboard_port(Some(&cluster.spec));
    format!("{service}.{namespace}.svc.{domain}:{port}")
}

/// The RayCluster `name` that `job` creates (docs/upstream.md, "KubeRay: RayJob controller"): the
/// RayJob's labels and annotations plus KubeRay's origin labels, a copy of `spec.rayClusterSpec`, a
/// controller ownerReference to the RayJob; in SidecarMode the submitter container is appended to
/// the head and the head never restarts; in Volcano namespaces (K8sJobMode, as KubeRay) the
/// RayJob's PodGroup annotations, so the cluster's Pods are recognisably part of the RayJob's gang.
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

/// Name of the RayJob head Service: `<rayjob>-head-svc`.
pub fn job_head_service_name(job: &RayJob) -> String {
    keys::head_service_name(job.metadata.name.as_deref().unwrap_or_default())
}

/// The RayJob head Service (docs/upstream.md, "KubeRay: RayJob head Service"): the head Service of
/// the current attempt's `cluster` — same selector, ports, type and headlessness, without the
/// cluster's `headServiceAnnotations` — renamed to `<rayjob>-head-svc`, labelled as the RayJob's
/// head (`ray.io/originated-from-cr-name`, `ray.io/originated-from-crd=RayJob`,
/// `ray.io/node-type=head`, `ray.io/identifier=<rayjob>-head`) and owned by the RayJob, so clients
/// reach whichever attempt is current under one stable name.
pub fn job_head_service(job: &RayJob, cluster: &RayCluster, options: &BuildOptions) -> Service {
    let mut source = cluster.clone();
    source.spec.head_service_annotations = None;
    let mut service = build_head_service(&source, options);
    let job_name = job.metadata.name.clone().unwrap_or_default();
    service.metadata.name = Some(job_head_service_name(job));
    service.metadata.namespace = job.metadata.namespace.clone();
    service.metadata.labels = Some(BTreeMap::from([
        (
            keys::ORIGINATED_FROM_CR_NAME_LABEL.to_string(),
            job_name.clone(),
        ),
        (
            keys::ORIGINATED_FROM_CRD_LABEL.to_string(),
            "RayJob".to_string(),
        ),
        (
            keys::RAY_NODE_TYPE_LABEL.to_string(),
            HEAD_NODE_TYPE.to_string(),
        ),
        (
            IDENTIFIER_LABEL.to_string(),
            identifier(&job_name, HEAD_NODE_TYPE),
        ),
    ]));
    service.metadata.owner_references = Some(vec![owned_by(job)]);
    service
}

/// The merge patch that points the live RayJob head Service at `desired`'s cluster, or `None`
/// when its selector already names that cluster (KubeRay updates the Service only when the
/// cluster switches). Every field of the desired spec is written except `clusterIP`, which is
/// immutable and kept; stale selector keys are removed; fields the API server defaulted stay.
pub fn job_head_service_patch(live: &Service, desired: &Service) -> Option<Value> {
    let selected = |service: &Service| {
        service
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| s.get(keys::RAY_CLUSTER_LABEL))
            .cloned()
    };
    if selected(live) == selected(desired) {
        return None;
    }
    let live_selector = live
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .map(|s| json!(s))
        .unwrap_or_else(|| json!({}));
    let desired_spec = desired.spec.as_ref().map(|s| json!(s)).unwrap_or_default();
    let mut patch = Map::new();
    for (key, value) in desired_spec.as_object().into_iter().flatten() {
        match key.as_str() {
            "clusterIP" | "clusterIPs" => {}
            "selector" => {
                patch.insert(key.clone(), super::merge_patch(&live_selector, value));
            }
            _ => {
                patch.insert(key.clone(), value.clone());
            }
        }
    }
    Some(json!({"spec": patch}))
}

/// The RayCluster `cluster` (built by [`ray_cluster_for_job`] from `job`) as the JSON to create:
/// its spec is `spec.rayClusterSpec` as stored in `raw_job` (the RayJob's JSON from the API
/// server) with raygate's changes applied, so fields raygate's types do not know are copied
/// too ([`crate::preserve::keep_unknown_fields`]).
pub fn ray_cluster_object(raw_job: &Value, job: &RayJob, cluster: &RayCluster) -> Value {
    let mut object = serde_json::to_value(cluster).unwrap_or(Value::Null);
    if let (Some(raw), Ok(typed), Some(built)) = (
        raw_job.pointer("/spec/rayClusterSpec"),
        serde_json::to_value(&job.spec.ray_cluster_spec),
        object.get_mut("spec"),
    ) {
        *built = keep_unknown_fields(raw, &typed, built);
    }
    object
}
