//! Shared parts of the in-cluster tests: the installation under test, as the environment
//! describes it (`RAYGATE_ENV_INSTALL`, `RAYGATE_IN_CLUSTER_NAMESPACE`, `RAYGATE_IMAGE`), and
//! the raygate Pods it runs.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use raygate_e2e::Env;

/// The environment, which must have raygate installed in-cluster.
///
/// # Panics
/// When the environment runs raygate as host processes (`RAYGATE_ENV_INSTALL=process`): these
/// tests would then test nothing of the installation.
pub fn in_cluster_env() -> Env {
    let env = Env::load();
    let mode = env.var("RAYGATE_ENV_INSTALL");
    assert!(
        mode == "helm" || mode == "manifests",
        "these tests need raygate installed in-cluster, but the environment runs it as `{mode}`: \
         start it with RAYGATE_ENV_INSTALL=helm tests/env/control-plane up (tests/run does)"
    );
    env
}

/// raygate's namespace.
pub fn namespace(env: &Env) -> String {
    env.var("RAYGATE_IN_CLUSTER_NAMESPACE").to_owned()
}

/// raygate's Pods (by the Deployment's selector).
pub async fn raygate_pods(env: &Env) -> Vec<Pod> {
    let client = env.client().await;
    let pods: Api<Pod> = Api::namespaced(client, &namespace(env));
    pods.list(&ListParams::default().labels("app.kubernetes.io/name=raygate"))
        .await
        .expect("list raygate's Pods")
        .items
}

/// Whether the Pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The logs of every container of raygate's Pods (current and previous runs).
pub async fn raygate_logs(env: &Env) -> String {
    let mut logs = String::new();
    for pod in raygate_pods(env).await {
        let name = pod.metadata.name.unwrap_or_default();
        let output = raygate_e2e::kubectl::run(&["-n", &namespace(env), "logs", &name]).await;
        logs.push_str(&String::from_utf8_lossy(&output.stdout));
    }
    logs
}
