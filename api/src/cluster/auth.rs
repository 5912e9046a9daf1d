//! Ray token authentication (`authOptions.mode: token`), as KubeRay v1.7 runs it
//! (docs/upstream.md, "KubeRay: token authentication"): one shared token per cluster, kept in a
//! Secret and given to every Ray process (head, workers, the autoscaler, `wait-gcs-ready`, the
//! RayJob submitter) in `RAY_AUTH_TOKEN`; the dashboard then refuses a request without it.
//!
//! raygate creates the Secret (key `auth_token`, named after the cluster) unless
//! `authOptions.secretName` names one the user keeps. Kubernetes service-account tokens
//! (`enableK8sTokenAuth`) are refused by raygate's reconciler at admission.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, PodSpec, Secret, SecretKeySelector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::build::{check_name, owner_reference, value_env};
use super::{autoscaler, gcs_wait};
use crate::keys;
use crate::ray::v1::{RayCluster, RayClusterSpec};

/// Key of the token in its Secret (KubeRay's).
pub const TOKEN_KEY: &str = "auth_token";

/// HTTP header the Ray dashboard reads the token from, as `Bearer <token>`.
pub const DASHBOARD_HEADER: &str = "x-ray-authorization";

/// Random bytes in a token raygate generates (encoded in standard base64, as KubeRay's).
pub const TOKEN_BYTES: usize = 32;

/// The Secret holding the token of cluster `cluster_name` with `spec`: `authOptions.secretName`,
/// else one named after the cluster. `None` without token authentication.
pub fn secret_name(spec: &RayClusterSpec, cluster_name: &str) -> Option<String> {
    if !spec.token_auth() {
        return None;
    }
    let named = spec
        .auth_options
        .as_ref()
        .and_then(|a| a.secret_name.as_deref())
        .filter(|name| !name.is_empty());
    Some(named.map_or_else(|| check_name(cluster_name), str::to_string))
}

/// The token Secret raygate creates for the cluster, named after it: with token
/// authentication and no `secretName` of the user's; else `None`.
pub fn created_secret_name(cluster: &RayCluster) -> Option<String> {
    let spec = &cluster.spec;
    let users = spec
        .auth_options
        .as_ref()
        .and_then(|a| a.secret_name.as_deref())
        .is_some_and(|name| !name.is_empty());
    (spec.token_auth() && !users)
        .then(|| check_name(cluster.metadata.name.as_deref().unwrap_or_default()))
}

/// The token Secret raygate creates with `token` in it: named after the cluster
/// ([`created_secret_name`]), labelled
/// `ray.io/cluster`, owned by the cluster (so it goes with it).
pub fn build_secret(cluster: &RayCluster, token: &str) -> Secret {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    Secret {
        metadata: ObjectMeta {
            name: Some(check_name(name)),
            namespace: cluster.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([(
                keys::RAY_CLUSTER_LABEL.to_string(),
                name.to_string(),
            )])),
            owner_references: Some(vec![owner_reference(cluster)]),
            ..ObjectMeta::default()
        },
        string_data: Some(BTreeMap::from([(TOKEN_KEY.to_string(), token.to_string())])),
        ..Secret::default()
    }
}

/// The token environment of a Ray process: `RAY_AUTH_MODE=token` and `RAY_AUTH_TOKEN` from
/// the Secret `secret`.
pub fn token_env(secret: &str) -> [EnvVar; 2] {
    [
        value_env("RAY_AUTH_MODE", "token"),
        EnvVar {
            name: "RAY_AUTH_TOKEN".to_string(),
            value: None,
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: secret.to_string(),
                    key: TOKEN_KEY.to_string(),
                    optional: None,
                }),
                ..EnvVarSource::default()
            }),
        },
    ]
}

/// Adds [`token_env`] to `container`, leaving a variable it sets itself alone.
pub fn add_token_env(container: &mut Container, secret: &str) {
    let env = container.env.get_or_insert_with(Vec::new);
    for var in token_env(secret) {
        if !env.iter().any(|e| e.name == var.name) {
            env.push(var);
        }
    }
}

/// With token authentication, gives a Pod of `cluster` the token: its Ray container
/// (`containers[0]`), the autoscaler and the `wait-gcs-ready` init container; other
/// containers and init containers are the user's own.
pub(super) fn add_to_pod(cluster: &RayCluster, pod: &mut PodSpec) {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let Some(secret) = secret_name(&cluster.spec, name) else {
        return;
    };
    for (index, container) in pod.containers.iter_mut().enumerate() {
        if index == 0 || container.name == autoscaler::CONTAINER_NAME {
            add_token_env(container, &secret);
        }
    }
    for container in pod.init_containers.iter_mut().flatten() {
        if container.name == gcs_wait::CONTAINER_NAME {
            add_token_env(container, &secret);
        }
    }
}

#[cfg(test)]
mod tests;
