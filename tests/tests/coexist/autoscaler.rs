//! A KubeRay-run RayCluster with the in-tree autoscaler, in PodGroup-only mode: the Pods the
//! autoscaler's scale-ups add join the cluster's gang, the gang stays sized by `minReplicas`
//! (docs/reconciler.md, "Autoscaling clusters"), and suspending the cluster gives its queue's
//! capacity back.
//!
//! The autoscaler itself needs a running Ray head; here the test drives the operator exactly as
//! the autoscaler does: JSON patches of a worker group's `replicas` and
//! `scaleStrategy.workersToDelete` through the API.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use raygate_api::quantity::ResourceQuantity;
use raygate_e2e::kuberay::KubeRay;
use raygate_e2e::nodes::{FakeNode, placement};
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{
    KUBERAY, OPT_IN, SETTLE, annotation, create, delete_queue, head, holds_nothing, min_resources,
    open_queue, pod_group, pods, quantities, queue_allocated, ray_api, scheduler, workers,
};

const CLUSTER: &str = "elastic";
const GROUP: &str = "ray-elastic-pg";
/// The test's own node pool: the suite's other tests share the environment's kwok nodes, and
/// Volcano's overcommit check counts every gang there.
const POOL: &str = "coexist-scale";

/// The worker Pods of the cluster, by name.
async fn worker_pods(ns: &TestNamespace) -> Vec<Pod> {
    pods(ns)
        .await
        .into_iter()
        .filter(|pod| {
            let labels = pod.metadata.labels.as_ref();
            labels
                .and_then(|l| l.get("ray.io/cluster"))
                .map(String::as_str)
                == Some(CLUSTER)
                && labels
                    .and_then(|l| l.get("ray.io/node-type"))
                    .map(String::as_str)
                    == Some("worker")
                && pod.metadata.deletion_timestamp.is_none()
        })
        .collect()
}

/// Patches the worker group the way KubeRay's autoscaler does: one JSON patch of `replicas`
/// and, on a scale-down, of the Pods to delete.
async fn scale(ns: &TestNamespace, replicas: i32, delete: &[String]) {
    let mut ops = vec![json!({
        "op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas
    })];
    if !delete.is_empty() {
        ops.push(json!({
            "op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy",
            "value": {"workersToDelete": delete}
        }));
    }
    let patch: json_patch::Patch = serde_json::from_value(json!(ops)).expect("a JSON patch");
    ray_api(ns, "RayCluster")
        .patch(CLUSTER, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .unwrap_or_else(|e| panic!("scaling RayCluster {CLUSTER} to {replicas}: {e}"));
}

/// Waits until `count` worker Pods exist and the queue accounts for at least `cpu` CPUs.
async fn wait_workers_counted(ns: &TestNamespace, queue: &str, count: usize, cpu: &str) {
    let cpu: ResourceQuantity = cpu.parse().expect("a quantity");
    ns.wait_for(
        &format!("{count} worker Pods, and queue {queue} accounting for {cpu} CPUs"),
        SETTLE,
        || async {
            let workers = worker_pods(ns).await.len();
            let allocated = queue_allocated(ns, queue).await?;
            Ok((workers == count && allocated.get("cpu").is_some_and(|c| *c >= cpu)).then_some(()))
        },
    )
    .await;
}

#[tokio::test]
async fn autoscaler_scale_ups_join_the_gang_sized_by_min_replicas_and_suspend_frees_the_queue() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "coexist-scale", &[OPT_IN, KUBERAY]).await;
    let _kuberay = KubeRay::start(&env, &[&ns], None).await;
    let queue = format!("{}-elastic", ns.name());
    open_queue(&ns, &queue).await;

    let _node = FakeNode::create(
        &env,
        &ns,
        POOL,
        0,
        &[("cpu", "8"), ("memory", "32Gi"), ("pods", "20")],
    )
    .await;
    let (selector, tolerations) = placement(POOL);
    let mut head = head();
    let mut group = workers("small", 1);
    for template in [
        &mut head["template"]["spec"],
        &mut group["template"]["spec"],
    ] {
        template["nodeSelector"] = json!(selector);
        template["tolerations"] = json!(tolerations);
    }
    group["minReplicas"] = json!(1);
    group["maxReplicas"] = json!(4);
    create(
        &ns,
        json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": CLUSTER, "labels": {"volcano.sh/queue-name": queue}},
            "spec": {
                "rayVersion": "2.60.0",
                "enableInTreeAutoscaling": true,
                "headGroupSpec": head,
                "workerGroupSpecs": [group]
            }
        }),
    )
    .await;

    // The gang: head + minReplicas workers, whatever the autoscaler will ask for later.
    let gang = quantities(&[("cpu", "2"), ("memory", "3Gi")]);
    ns.wait_for(
        &format!("{GROUP} sized for head + 1 worker"),
        SETTLE,
        || async {
            Ok(pod_group(&ns, GROUP)
                .await
                .filter(|pg| pg.spec.min_member == Some(2) && min_resources(pg) == gang))
        },
    )
    .await;
    // Head (1 CPU, plus the autoscaler sidecar KubeRay adds) and one worker.
    wait_workers_counted(&ns, &queue, 1, "2").await;

    // Scale up as the autoscaler does: the new Pods are onboarded into the same gang and
    // Volcano accounts them to the cluster's queue.
    scale(&ns, 3, &[]).await;
    wait_workers_counted(&ns, &queue, 3, "4").await;
    for pod in worker_pods(&ns).await {
        let name = pod.metadata.name.clone().unwrap_or_default();
        assert_eq!(
            annotation(&pod, "scheduling.k8s.io/group-name"),
            Some(GROUP),
            "{name}"
        );
        assert_eq!(
            annotation(&pod, "volcano.sh/task-spec"),
            Some("small"),
            "{name}"
        );
        assert_eq!(scheduler(&pod), "volcano", "{name}");
    }
    // The gang still asks for what minReplicas needs: a scale-up is not a bigger minimum.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let pg = pod_group(&ns, GROUP).await.expect("the cluster's PodGroup");
    assert_eq!(pg.spec.min_member, Some(2), "{}", ns.dump().await);
    assert_eq!(min_resources(&pg), gang);

    // Scale down as the autoscaler does, naming the Pods to delete.
    let doomed: Vec<String> = worker_pods(&ns)
        .await
        .into_iter()
        .filter_map(|pod| pod.metadata.name)
        .take(2)
        .collect();
    scale(&ns, 1, &doomed).await;
    ns.wait_for("the scale-down's Pods to be gone", SETTLE, || async {
        let left: Vec<String> = worker_pods(&ns)
            .await
            .into_iter()
            .filter_map(|pod| pod.metadata.name)
            .collect();
        Ok((left.len() == 1 && !doomed.iter().any(|d| left.contains(d))).then_some(()))
    })
    .await;
    let pg = pod_group(&ns, GROUP).await.expect("the cluster's PodGroup");
    assert_eq!(pg.spec.min_member, Some(2), "{}", ns.dump().await);

    // Suspend: KubeRay deletes every Pod, raygate zeroes the gang, and the queue's allocation
    // falls back to nothing.
    ray_api(&ns, "RayCluster")
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("suspending the RayCluster");
    ns.wait_for(
        &format!("queue {queue} and {GROUP} to hold nothing"),
        SETTLE,
        || async {
            let allocated = queue_allocated(&ns, &queue).await?;
            let pg = pod_group(&ns, GROUP).await;
            Ok(
                (allocated.is_empty() && holds_nothing(pg.as_ref()) && pods(&ns).await.is_empty())
                    .then_some(()),
            )
        },
    )
    .await;

    // Resume: the gang comes back at its minReplicas size.
    ray_api(&ns, "RayCluster")
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .expect("resuming the RayCluster");
    ns.wait_for(&format!("{GROUP} sized again"), SETTLE, || async {
        Ok(pod_group(&ns, GROUP)
            .await
            .filter(|pg| pg.spec.min_member == Some(2) && min_resources(pg) == gang))
    })
    .await;
    delete_queue(&ns, &queue).await;
}
