//! The same RayJob run by raygate and by KubeRay on the real nodes: both operators' Pods
//! form a real Ray cluster, and the two clusters have the same shape (alive Ray nodes and
//! their CPUs, the Ray labels of their Pods, the ports the head Service exposes).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Endpoints, Pod};
use kube::api::ListParams;
use raygate_e2e::kuberay::{Dashboards, KubeRay};
use raygate_e2e::ray::Dashboard;
use raygate_e2e::{Env, TestNamespace};
use serde_json::{Value, json};

use super::{KUBERAY, SETTLE, container, create, ray_api};

/// Prints the alive Ray nodes as `CPU` counts, one JSON line the test compares.
const SHAPE: &str = "python -c \"import json, ray; ray.init(); \
    print('SHAPE', json.dumps(sorted(n['Resources'].get('CPU', 0) for n in ray.nodes() if n['Alive'])))\"";

/// A small RayJob (head 500m, two workers 250m) that prints its cluster's shape.
fn shape_job() -> Value {
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "shape"},
        "spec": {
            "entrypoint": SHAPE,
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                    container("ray-head", "500m", "1Gi", None)]}}},
                "workerGroupSpecs": [{
                    "groupName": "small", "replicas": 2, "minReplicas": 0, "maxReplicas": 4,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("ray-worker", "250m", "1Gi", None)]}}
                }]
            }
        }
    })
}

/// What is compared between the two operators' clusters.
#[derive(Debug, PartialEq, Eq)]
struct Shape {
    /// The entrypoint's `SHAPE` line: alive Ray nodes' CPUs.
    ray_nodes: String,
    /// Per Pod, sorted: its `ray.io/node-type` and `ray.io/group` labels and whether it is Ready.
    pods: Vec<(String, String, bool)>,
    /// The head Service's endpoint ports (name, number).
    head_ports: BTreeSet<(String, i32)>,
}

/// Waits for RayJob `shape` in `ns` to complete and reads its cluster's shape.
async fn shape_of(ns: &TestNamespace) -> Shape {
    let jobs = ray_api(ns, "RayJob");
    let status = ns
        .wait_for("RayJob shape to be Complete", SETTLE * 2, || async {
            let job = jobs.get("shape").await?;
            let status = job.data["status"].clone();
            Ok((status["jobDeploymentStatus"] == "Complete").then_some(status))
        })
        .await;
    assert_eq!(status["jobStatus"], "SUCCEEDED", "{status}");
    let cluster = status["rayClusterName"]
        .as_str()
        .expect("a cluster")
        .to_string();
    let url = status["dashboardURL"].as_str().expect("a dashboard URL");
    let id = status["jobId"].as_str().expect("a job id");
    let logs = Dashboard::new(&format!("http://{url}"))
        .get(&format!("/api/jobs/{id}/logs"))
        .await
        .expect("the Ray job's logs");
    let text = logs.json().expect("the logs as JSON")["logs"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ray_nodes = text
        .lines()
        .find_map(|l| l.strip_prefix("SHAPE "))
        .unwrap_or_else(|| panic!("no SHAPE line in {text}"))
        .to_string();
    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("ray.io/cluster={cluster}")))
        .await
        .expect("the cluster's Pods");
    let label = |pod: &Pod, key: &str| {
        pod.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key).cloned())
            .unwrap_or_default()
    };
    let mut pods: Vec<_> = pods
        .iter()
        .map(|p| {
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            (
                label(p, "ray.io/node-type"),
                label(p, "ray.io/group"),
                ready,
            )
        })
        .collect();
    pods.sort();
    let endpoints = ns
        .api::<Endpoints>()
        .get(&format!("{cluster}-head-svc"))
        .await
        .expect("the head Service's endpoints");
    let head_ports = endpoints
        .subsets
        .iter()
        .flatten()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| (p.name.clone().unwrap_or_default(), p.port))
        .collect();
    Shape {
        ray_nodes,
        pods,
        head_ports,
    }
}

#[tokio::test]
async fn raygate_and_kuberay_form_the_same_ray_cluster_on_the_real_nodes() {
    let env = Env::load();
    let theirs = TestNamespace::on_real_nodes(&env, "coexist-real-kuberay", &[KUBERAY]).await;
    let ours = TestNamespace::on_real_nodes(&env, "coexist-real-raygate", &[]).await;
    let kuberay = KubeRay::start_with(&env, &[&theirs], None, Dashboards::ClusterDns).await;
    create(&theirs, shape_job()).await;
    create(&ours, shape_job()).await;
    let (kuberay_shape, raygate_shape) = tokio::join!(shape_of(&theirs), shape_of(&ours));
    assert_eq!(
        kuberay_shape.ray_nodes,
        "[1.0, 1.0, 1.0]",
        "KubeRay's cluster: head + 2 workers alive\n{}",
        kuberay.log_text()
    );
    assert_eq!(raygate_shape, kuberay_shape);
}
