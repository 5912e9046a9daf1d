//! Smoke tests of the real control plane started by `tests/env/control-plane up`: the API server
//! and its controllers, both schedulers, kwok, the real kubelet nodes, Volcano gang scheduling,
//! the Ray head, the submitter runner and raygate's own binary. Run them inside the environment's namespace:
//! `tests/env/control-plane exec -- cargo test -p raygate-e2e`.

mod api;
mod gang;
mod ray;
mod real_nodes;
mod submitter;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;

/// Generous bound for anything a controller or scheduler does (they act within seconds).
const SETTLE: Duration = Duration::from_secs(90);

/// A pod with one container requesting `cpu`, for scheduler `scheduler` (`None`: the default).
fn pod(name: &str, scheduler: Option<&str>, cpu: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            scheduler_name: scheduler.map(str::to_string),
            restart_policy: Some("Never".into()),
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([
                        ("cpu".to_string(), Quantity(cpu.into())),
                        ("memory".to_string(), Quantity("1Gi".into())),
                    ])),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// `name phase node` of a pod, for assertions and messages.
fn placement(pod: &Pod) -> (String, String, String) {
    (
        pod.metadata.name.clone().unwrap_or_default(),
        pod.status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default(),
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
    )
}

/// True when the pod is bound to a kwok node and Running.
fn running_on_kwok(pod: &Pod) -> bool {
    let (_, phase, node) = placement(pod);
    phase == "Running" && node.starts_with("kwok-node-")
}

#[tokio::test]
async fn raygate_binary_runs_inside_the_environment() {
    let output = raygate_e2e::raygate::run(&["version"]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "raygate version failed ({}): {stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(env!("CARGO_PKG_VERSION")),
        "raygate version printed {stdout:?}"
    );
}
