//! The head Ingress (`headGroupSpec.enableIngress: true`), as KubeRay v1.7 builds it on plain
//! Kubernetes (docs/upstream.md, "KubeRay: head Ingress"): the dashboard of the head Service
//! under `/<cluster>/`, for an ingress controller the user runs.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::build::{head_ports, head_service_name, identifier, owner_reference};
use crate::keys::{
    self, APP_NAME_LABEL, CREATED_BY_LABEL, CREATED_BY_VALUE, DEFAULT_DASHBOARD_PORT,
    HEAD_NODE_TYPE, IDENTIFIER_LABEL,
};
use crate::ray::v1::RayCluster;

/// The cluster annotation whose value becomes `spec.ingressClassName` (and which is therefore
/// not copied onto the Ingress: the two must not both be set).
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// Whether the cluster asks for the head Ingress.
pub fn enabled(cluster: &RayCluster) -> bool {
    cluster.spec.head_group_spec.enable_ingress == Some(true)
}

/// `<cluster>-head-ingress`.
pub fn name(cluster: &RayCluster) -> String {
    format!(
        "{}-{HEAD_NODE_TYPE}-ingress",
        cluster.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The head Ingress: labelled as KubeRay labels it, with the cluster's annotations (but the
/// class annotation, which becomes `ingressClassName`), one rule routing `/<cluster>/(.*)`
/// (path type Exact) to the head Service's `dashboard` port, owned by the cluster.
pub fn build(cluster: &RayCluster) -> Ingress {
    let cluster_name = cluster.metadata.name.as_deref().unwrap_or_default();
    let annotations = cluster.metadata.annotations.clone().unwrap_or_default();
    let class = annotations.get(CLASS_ANNOTATION).cloned();
    let copied: BTreeMap<String, String> = annotations
        .into_iter()
        .filter(|(key, _)| key != CLASS_ANNOTATION)
        .collect();
    let dashboard_port = head_ports(cluster)
        .into_iter()
        .find(|p| p.name.as_deref() == Some("dashboard"))
        .map_or(DEFAULT_DASHBOARD_PORT, |p| p.port);
    Ingress {
        metadata: ObjectMeta {
            name: Some(name(cluster)),
            namespace: cluster.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([
                (
                    keys::RAY_CLUSTER_LABEL.to_string(),
                    cluster_name.to_string(),
                ),
                (
                    IDENTIFIER_LABEL.to_string(),
                    identifier(cluster_name, HEAD_NODE_TYPE),
                ),
                (APP_NAME_LABEL.to_string(), "kuberay".to_string()),
                (CREATED_BY_LABEL.to_string(), CREATED_BY_VALUE.to_string()),
            ])),
            annotations: Some(copied),
            owner_references: Some(vec![owner_reference(cluster)]),
            ..ObjectMeta::default()
        },
        spec: Some(IngressSpec {
            ingress_class_name: class,
            rules: Some(vec![IngressRule {
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some(format!("/{cluster_name}/(.*)")),
                        path_type: "Exact".to_string(),
                        backend: IngressBackend {
                            service: Some(IngressServiceBackend {
                                name: head_service_name(cluster),
                                port: Some(ServiceBackendPort {
                                    number: Some(dashboard_port),
                                    ..ServiceBackendPort::default()
                                }),
                            }),
                            ..IngressBackend::default()
                        },
                    }],
                }),
                ..IngressRule::default()
            }]),
            ..IngressSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests;
