//! The `wait-gcs-ready` init container KubeRay v1.7 adds to every worker Pod (docs/upstream.md,
//! "KubeRay: RayCluster controller"): the worker's Ray container starts only once the head's GCS
//! answers `ray health-check`, instead of relying on Ray's own connection retries.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Name of the init container (KubeRay's; its TLS and token settings are found by it).
pub const CONTAINER_NAME: &str = "wait-gcs-ready";

/// Seconds during which failed health checks are kept quiet: a head that is still starting is
/// normal, so only a GCS unreachable for longer shows Ray's errors in the init container's log.
const QUIET_SECONDS: u32 = 120;

/// The loop the init container runs until the GCS at `address` (`host:port`) is healthy.
fn script(address: &str) -> String {
    format!(
        "SECONDS=0\n\
         while true; do\n\
         \x20 if (( SECONDS <= {QUIET_SECONDS} )); then\n\
         \x20   if ray health-check --address {address} > /dev/null 2>&1; then echo \"GCS is ready.\"; break; fi\n\
         \x20   echo \"$SECONDS seconds elapsed: waiting for the GCS at {address} to be ready.\"\n\
         \x20 else\n\
         \x20   if ray health-check --address {address}; then echo \"GCS is ready; earlier errors can be ignored.\"; break; fi\n\
         \x20   echo \"$SECONDS seconds elapsed: still waiting for the GCS at {address} (see https://docs.ray.io/en/latest/cluster/kubernetes/troubleshooting.html).\"\n\
         \x20 fi\n\
         \x20 sleep 5\n\
         done\n"
    )
}

/// Fixed requests and limits, as KubeRay sets them: the container only polls, and a namespace
/// with a ResourceQuota refuses init containers without resources.
fn resources() -> ResourceRequirements {
    let fixed = BTreeMap::from([
        ("cpu".to_string(), Quantity("200m".to_string())),
        ("memory".to_string(), Quantity("256Mi".to_string())),
    ]);
    ResourceRequirements {
        limits: Some(fixed.clone()),
        requests: Some(fixed),
        ..ResourceRequirements::default()
    }
}

/// Appends the init container to a worker Pod's `spec`, taken from its Ray container
/// (`containers[0]`) as the template has it: image, pull policy and security context, and its
/// environment and volume mounts, which Ray's TLS settings may name. A template that already has
/// an init container of that name keeps its own (the API server refuses two).
pub(super) fn add_to_worker(spec: &mut PodSpec, gcs_address: &str) {
    let Some(ray) = spec.containers.first() else {
        return;
    };
    let init_containers = spec.init_containers.get_or_insert_with(Vec::new);
    if init_containers.iter().any(|c| c.name == CONTAINER_NAME) {
        return;
    }
    let container = Container {
        name: CONTAINER_NAME.to_string(),
        image: ray.image.clone(),
        image_pull_policy: ray.image_pull_policy.clone(),
        command: Some(vec!["/bin/bash".into(), "-c".into(), "--".into()]),
        args: Some(vec![script(gcs_address)]),
        security_context: ray.security_context.clone(),
        env: ray.env.clone(),
        volume_mounts: ray.volume_mounts.clone(),
        resources: Some(resources()),
        ..Container::default()
    };
    init_containers.push(container);
}

#[cfg(test)]
mod tests;
