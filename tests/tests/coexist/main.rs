//! raygate next to a real KubeRay operator (the environment's, `RAYGATE_KUBERAY`; `tests/run` runs
//! the suite next to the oldest supported release too, built by `tests/env/build kuberay`), on the
//! real control plane: namespaces labelled `raygate.io/reconciler=kuberay` are run by KubeRay;
//! where they are also opted into Volcano, raygate's webhook onboards KubeRay's Pods and
//! raygate's reconciler keeps their PodGroups (PodGroup-only mode).
//!
//! * `autoscaler`: Pods that a RayCluster's autoscaler adds join its gang, which stays sized by
//!   `minReplicas`, and suspending the cluster frees its queue;
//! * `differential`: an autoscaling, token-authenticated RayCluster gets the same autoscaler
//!   access objects, token Secret, autoscaler and `wait-gcs-ready` containers from raygate's
//!   reconciler as from KubeRay;
//! * `gang`: the same RayJob is gang-scheduled by Volcano and completes with the real Ray head
//!   in a Volcano namespace, and runs as plain KubeRay in an unlabelled one;
//! * `ingress`: a RayCluster with `enableIngress` gets the same head Ingress from raygate's
//!   reconciler as from KubeRay;
//! * `lifecycle`: suspension, deletion and completion leave no PodGroup holding resources, and
//!   Volcano's accounting of each RayJob's own queue back at nothing;
//! * `oracle`: a KubeRay started with `--batch-scheduler=volcano` is detected and left alone,
//!   and the PodGroups raygate sizes are compared with the ones that KubeRay sizes itself.
//! * `real_nodes`: the same RayJob under raygate and under KubeRay forms a real Ray cluster of
//!   the same shape on the real nodes;
//! * `sub_gangs`: with Volcano's real scheduler, a GPU group that cannot be placed keeps the
//!   whole autoscaling cluster unbound although its head and CPU workers fit, and a multi-host
//!   group binds in whole replicas only;
//! * `validation`: the webhook refuses a feature raygate's reconciler lacks only where the
//!   namespace's `raygate.io/reconciler` label hands the namespace to raygate.
//!
//! Each test starts its own KubeRay operators for its own namespaces.
//! Run inside the environment: `tests/env/control-plane exec -- cargo test -p raygate-e2e --test coexist`.

mod autoscaler;
mod differential;
mod gang;
mod ingress;
mod lifecycle;
mod oracle;
mod real_nodes;
mod sub_gangs;
mod validation;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use raygate_api::quantity::ResourceQuantity;
use raygate_api::volcano::{PodGroup, Queue};
use raygate_e2e::TestNamespace;
use serde_json::{Value, json};

/// Generous bound for what a controller, a scheduler or the Ray head does.
const SETTLE: Duration = Duration::from_secs(120);

/// Opts a namespace into Volcano.
const OPT_IN: (&str, &str) = ("raygate.io/scheduler", "volcano");
/// Hands a namespace's Ray objects to KubeRay.
const KUBERAY: (&str, &str) = raygate_e2e::kuberay::RECONCILER_LABEL;

fn ray_resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("ray.io", "v1", kind))
}

fn ray_api(ns: &TestNamespace, kind: &str) -> kube::Api<DynamicObject> {
    kube::Api::namespaced_with(ns.client(), ns.name(), &ray_resource(kind))
}

/// Creates a `ray.io/v1` object from JSON.
async fn create(ns: &TestNamespace, object: Value) -> DynamicObject {
    let kind = object["kind"].as_str().expect("kind").to_string();
    let object: DynamicObject = serde_json::from_value(object).expect("a ray.io object");
    ray_api(ns, &kind)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "creating {kind} {}: {e}",
                object.metadata.name.clone().unwrap_or_default()
            )
        })
}

/// A container with requests (and, for GPUs, limits only, as users write them).
fn container(name: &str, cpu: &str, memory: &str, gpus: Option<&str>) -> Value {
    let mut resources = json!({"requests": {"cpu": cpu, "memory": memory}});
    if let Some(gpus) = gpus {
        resources["limits"] = json!({"nvidia.com/gpu": gpus});
    }
    json!({"name": name, "image": "rayproject/ray:2.60.0", "resources": resources})
}

/// A head group of 1 CPU / 2Gi.
fn head() -> Value {
    json!({
        "rayStartParams": {},
        "template": {"spec": {"containers": [container("ray-head", "1", "2Gi", None)]}}
    })
}

/// A worker group of `replicas` Pods of 1 CPU / 1Gi.
fn workers(name: &str, replicas: i32) -> Value {
    json!({
        "groupName": name, "replicas": replicas, "minReplicas": 0, "maxReplicas": 10,
        "rayStartParams": {},
        "template": {"spec": {"containers": [container("ray-worker", "1", "1Gi", None)]}}
    })
}

/// A K8sJobMode RayJob printing one line, with one worker group of two.
fn ray_job(name: &str, entrypoint: &str, extra_spec: Value) -> Value {
    let mut job = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": entrypoint,
            "shutdownAfterJobFinishes": true,
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "headGroupSpec": head(),
                "workerGroupSpecs": [workers("small", 2)]
            }
        }
    });
    if let (Some(spec), Some(extra)) = (job["spec"].as_object_mut(), extra_spec.as_object()) {
        spec.extend(extra.clone());
    }
    job
}

async fn pod_group(ns: &TestNamespace, name: &str) -> Option<PodGroup> {
    ns.api::<PodGroup>()
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading PodGroup {name}: {e}"))
}

/// `minResources` by value (`1000m` = `1`); absent = empty (Volcano drops empty fields).
fn min_resources(pg: &PodGroup) -> BTreeMap<String, ResourceQuantity> {
    pg.spec
        .min_resources
        .iter()
        .flatten()
        .map(|(k, v)| {
            let q = ResourceQuantity::try_from(v)
                .unwrap_or_else(|e| panic!("PodGroup quantity {k}={v:?}: {e}"));
            (k.clone(), q)
        })
        .filter(|(_, q)| *q != ResourceQuantity::ZERO)
        .collect()
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, ResourceQuantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.parse().expect("a quantity")))
        .collect()
}

/// Creates Volcano Queue `name` (8 CPU / 32Gi, room for one gang and its submitter) and waits
/// until Volcano has opened it.
async fn open_queue(ns: &TestNamespace, name: &str) {
    let queues = kube::Api::<Queue>::all(ns.client());
    let queue: Queue = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": false, "capability": {"cpu": "8", "memory": "32Gi"}}
    }))
    .expect("a Queue");
    queues
        .create(&PostParams::default(), &queue)
        .await
        .unwrap_or_else(|e| panic!("creating Queue {name}: {e}"));
    ns.wait_for(&format!("Queue {name} Open"), SETTLE, || async {
        let queue = queues.get(name).await?;
        Ok((queue.status.and_then(|s| s.state).as_deref() == Some("Open")).then_some(()))
    })
    .await;
}

/// Deletes Volcano Queue `name` (cluster-scoped, so not deleted with the test's namespace).
async fn delete_queue(ns: &TestNamespace, name: &str) {
    kube::Api::<Queue>::all(ns.client())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("deleting Queue {name}: {e}"));
}

/// Queue `name`'s `status.allocated` (what Volcano's scheduler accounts to the queue's bound
/// Pods), by value, without zero quantities.
async fn queue_allocated(
    ns: &TestNamespace,
    name: &str,
) -> anyhow::Result<BTreeMap<String, ResourceQuantity>> {
    let queue = kube::Api::<Queue>::all(ns.client()).get(name).await?;
    let mut allocated = BTreeMap::new();
    for (resource, quantity) in queue.status.and_then(|s| s.allocated).unwrap_or_default() {
        let value = ResourceQuantity::try_from(&quantity)
            .map_err(|e| anyhow::anyhow!("Queue {name} allocated[{resource}]: {e}"))?;
        if value != ResourceQuantity::ZERO {
            allocated.insert(resource, value);
        }
    }
    Ok(allocated)
}

/// Whether the group holds nothing: no PodGroup, or `minMember` 0 and no resources.
fn holds_nothing(pg: Option<&PodGroup>) -> bool {
    pg.is_none_or(|pg| pg.spec.min_member.unwrap_or(0) == 0 && min_resources(pg).is_empty())
}

/// The RayJob's `status.jobDeploymentStatus` and `status.jobStatus`.
async fn job_state(ns: &TestNamespace, name: &str) -> anyhow::Result<(String, String)> {
    let job = ray_api(ns, "RayJob").get(name).await?;
    let field = |key: &str| {
        job.data["status"][key]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    Ok((field("jobDeploymentStatus"), field("jobStatus")))
}

/// Waits for the RayJob to reach `Complete` with `SUCCEEDED`.
async fn wait_complete(ns: &TestNamespace, name: &str) {
    ns.wait_for(
        &format!("RayJob {name} Complete/SUCCEEDED"),
        SETTLE,
        || async {
            let (deployment, job) = job_state(ns, name).await?;
            anyhow::ensure!(
                deployment != "Failed",
                "RayJob {name} failed (job status {job})"
            );
            Ok((deployment == "Complete" && job == "SUCCEEDED").then_some(()))
        },
    )
    .await;
}

/// Every Pod of the namespace.
async fn pods(ns: &TestNamespace) -> Vec<Pod> {
    ns.api::<Pod>()
        .list(&ListParams::default())
        .await
        .expect("listing pods")
        .items
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn scheduler(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or_default()
}

/// The Events of one reason in the namespace, as `involved kind/name: note` lines.
async fn events(ns: &TestNamespace, reason: &str) -> Vec<String> {
    ns.api::<k8s_openapi::api::events::v1::Event>()
        .list(&ListParams::default())
        .await
        .expect("listing events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| {
            let regarding = e.regarding.unwrap_or_default();
            format!(
                "{}/{}: {}",
                regarding.kind.unwrap_or_default(),
                regarding.name.unwrap_or_default(),
                e.note.unwrap_or_default()
            )
        })
        .collect()
}
