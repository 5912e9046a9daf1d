//! raygate's admission webhook on the real control plane (`tests/env/control-plane up` runs it
//! and registers it, as a host process or installed in-cluster; `tests/run` runs this suite both
//! ways): `kubectl apply` of the examples, server-side dry run, Pod onboarding into Volcano
//! gangs, untouched unlabelled namespaces, what an outage of the host process does, and how
//! `raygate run` leaves the Service when its reconciler fails.
//! Run inside the environment: `tests/env/control-plane exec -- cargo test -p raygate-e2e --test webhook`.

mod examples;
mod fatal;
mod outage;
mod pods;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use raygate_e2e::TestNamespace;
use raygate_e2e::kubectl::run as kubectl;
use serde_json::{Value, json};
use tokio::sync::{RwLock, RwLockReadGuard};

/// Generous bound for anything a controller or scheduler does (they act within seconds).
const SETTLE: Duration = Duration::from_secs(90);

/// The outage test stops the webhook, which would fail every other test of this binary that
/// runs meanwhile: they share the webhook (read), the outage test takes it alone (write).
static WEBHOOK: RwLock<()> = RwLock::const_new(());

/// Holds the webhook up for the duration of a test.
async fn webhook_up() -> RwLockReadGuard<'static, ()> {
    WEBHOOK.read().await
}

/// The namespace label that opts into Volcano onboarding.
const OPT_IN: (&str, &str) = (
    raygate_api::keys::NAMESPACE_OPT_IN_LABEL,
    raygate_api::keys::NAMESPACE_OPT_IN_VALUE,
);

/// These tests create Ray Pods by hand, as KubeRay would, so the environment's reconciler
/// must leave their namespaces alone.
const PODS_BY_HAND: (&str, &str) = (raygate_e2e::reconciler::PRIVATE_RECONCILER_LABEL, "true");

fn ray_resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("ray.io", "v1", kind))
}

/// Creates a `ray.io/v1` object from JSON in the namespace; the API server's answer.
async fn create_ray_object_result(
    ns: &TestNamespace,
    object: Value,
) -> Result<DynamicObject, kube::Error> {
    let kind = object["kind"].as_str().expect("kind").to_string();
    let object: DynamicObject = serde_json::from_value(object).expect("a ray.io object");
    kube::Api::<DynamicObject>::namespaced_with(ns.client(), ns.name(), &ray_resource(&kind))
        .create(&PostParams::default(), &object)
        .await
}

/// Creates a `ray.io/v1` object from JSON in the namespace.
async fn create_ray_object(ns: &TestNamespace, object: Value) -> DynamicObject {
    let kind = object["kind"].as_str().expect("kind").to_string();
    let name = ns.name().to_owned();
    create_ray_object_result(ns, object)
        .await
        .unwrap_or_else(|e| panic!("creating {kind} in {name}: {e}"))
}

/// A small RayCluster: a head and a worker group `cpu` of `workers` replicas, 1 CPU each.
fn ray_cluster(name: &str, workers: i32, labels: Value) -> Value {
    let container = |name: &str| {
        json!({"name": name, "image": "rayproject/ray:2.60.0",
               "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}})
    };
    json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
            "workerGroupSpecs": [{
                "groupName": "cpu", "replicas": workers, "minReplicas": workers, "maxReplicas": workers,
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker")]}}
            }]
        }
    })
}

/// A Pod as KubeRay creates it for `cluster`: labelled `ray.io/cluster`, `ray.io/node-type`
/// and `ray.io/group`, owned by the RayCluster, with no scheduler set.
fn kuberay_pod(cluster: &DynamicObject, name: &str, node_type: &str, group: &str) -> Pod {
    let cluster_name = cluster.metadata.name.clone().expect("cluster name");
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {
                "ray.io/cluster": cluster_name,
                "ray.io/node-type": node_type,
                "ray.io/group": group,
                "app.kubernetes.io/created-by": "kuberay-operator",
            },
            "ownerReferences": [{
                "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster_name,
                "uid": cluster.metadata.uid.clone().expect("cluster uid"),
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": format!("ray-{node_type}"), "image": "rayproject/ray:2.60.0",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        },
    }))
    .expect("a Pod")
}

fn annotations(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.annotations.clone().unwrap_or_default()
}

fn labels(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.labels.clone().unwrap_or_default()
}

fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}
