//! Sub-gangs with Volcano's real scheduler, on Pods a real KubeRay operator makes: `minMember`
//! counts Pods, not which Pods, so with autoscaling (the gang counts `minReplicas`, KubeRay makes
//! `replicas`) surplus Pods of one group could stand in for another group that cannot be placed
//! (ray-project/kuberay#4656), or for the missing hosts of a multi-host replica. raygate's
//! `subGroupPolicy` per worker group is what keeps both from binding.
//!
//! Each test has kwok nodes of its own (a pool per role, reserved by label and taint), so what
//! fits is exactly what the test says.

use k8s_openapi::api::core::v1::Pod;
use raygate_api::volcano::PodGroup;
use raygate_e2e::kuberay::KubeRay;
use raygate_e2e::nodes::{FakeNode, placement};
use raygate_e2e::{Env, TestNamespace};
use serde_json::{Value, json};

use super::{KUBERAY, OPT_IN, SETTLE, container, create, pod_group, pods};

/// A Pod template spec of `containers` placed in `pool` only.
fn pinned(pool: &str, containers: Value) -> Value {
    let (selector, tolerations) = placement(pool);
    json!({"spec": {
        "containers": containers,
        "nodeSelector": selector,
        "tolerations": tolerations,
    }})
}

/// An autoscaling RayCluster (KubeRay makes `replicas` Pods per group, the gang counts
/// `minReplicas`) with its head in `head_pool` and these worker groups.
fn autoscaling_cluster(name: &str, head_pool: &str, groups: Value) -> Value {
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "rayVersion": "2.60.0",
            "enableInTreeAutoscaling": true,
            "headGroupSpec": {
                "rayStartParams": {},
                "template": pinned(head_pool, json!([container("ray-head", "1", "2Gi", None)]))
            },
            "workerGroupSpecs": groups
        }
    })
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some()
}

/// The Ray Pods of cluster `cluster`.
async fn ray_pods(ns: &TestNamespace, cluster: &str) -> Vec<Pod> {
    pods(ns)
        .await
        .into_iter()
        .filter(|p| label(p, "ray.io/cluster") == Some(cluster))
        .collect()
}

/// `(group, replica name, bound)` of every Pod, sorted, for messages.
fn outline(pods: &[Pod]) -> Vec<(String, String, bool)> {
    let mut rows: Vec<_> = pods
        .iter()
        .map(|p| {
            (
                label(p, "ray.io/group").unwrap_or("-").to_string(),
                label(p, "ray.io/worker-group-replica-name")
                    .unwrap_or("-")
                    .to_string(),
                bound(p),
            )
        })
        .collect();
    rows.sort();
    rows
}

/// Waits until Volcano has judged the gang (a `Scheduled` or `Unschedulable` condition of a
/// session after the PodGroup was enqueued).
async fn judged(ns: &TestNamespace, name: &str) -> PodGroup {
    ns.wait_for(&format!("Volcano's verdict on {name}"), SETTLE, || async {
        Ok(pod_group(ns, name).await.filter(|pg| {
            pg.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c.type_.as_deref() == Some("Unschedulable")
                            || c.type_.as_deref() == Some("Scheduled")
                    })
                })
        }))
    })
    .await
}

/// Asserts for a while (several of Volcano's one-second sessions) that `check` holds.
async fn holds_for_a_while(
    ns: &TestNamespace,
    cluster: &str,
    what: &str,
    check: fn(&[Pod]) -> bool,
) {
    for _ in 0..8 {
        let pods = ray_pods(ns, cluster).await;
        assert!(check(&pods), "{what}: {:?}", outline(&pods));
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn a_gpu_group_that_cannot_be_placed_keeps_the_whole_cluster_unbound() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "subgang-gpu", &[OPT_IN, KUBERAY]).await;
    let (head_pool, cpu_pool, gpu_pool) = ("sg-gpu-head", "sg-gpu-cpu", "sg-gpu-gpu");
    let _head = FakeNode::create(
        &env,
        &ns,
        head_pool,
        0,
        &[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;
    let _cpu = FakeNode::create(
        &env,
        &ns,
        cpu_pool,
        0,
        &[("cpu", "3"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;
    // A GPU the GPU workers cannot use (another pool): Volcano enqueues the gang, whose
    // minResources ask for a GPU, but cannot place a GPU worker.
    let _decoy = FakeNode::create(
        &env,
        &ns,
        "sg-gpu-decoy",
        0,
        &[
            ("cpu", "1"),
            ("memory", "2Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "1"),
        ],
    )
    .await;
    let kuberay = KubeRay::start(&env, &[&ns], None).await;
    // Gang: head + minReplicas 1 CPU + 1 GPU = minMember 3. KubeRay makes 3 CPU workers: head
    // and CPU workers alone are 4 Pods that fit, more than minMember.
    create(
        &ns,
        autoscaling_cluster(
            "mixed",
            head_pool,
            json!([
                {"groupName": "cpu", "replicas": 3, "minReplicas": 1, "maxReplicas": 3,
                 "rayStartParams": {},
                 "template": pinned(cpu_pool, json!([container("ray-worker", "1", "1Gi", None)]))},
                {"groupName": "gpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
                 "rayStartParams": {},
                 "template": pinned(gpu_pool, json!([container("ray-worker", "500m", "1Gi", Some("1"))]))}
            ]),
        ),
    )
    .await;

    let group = ns
        .wait_for("PodGroup ray-mixed-pg", SETTLE, || async {
            Ok(pod_group(&ns, "ray-mixed-pg").await)
        })
        .await;
    assert_eq!(group.spec.min_member, Some(3));
    let policies = group.spec.sub_group_policy.clone().unwrap_or_default();
    let summary: Vec<(Option<&str>, Option<i32>, Option<i32>)> = policies
        .iter()
        .map(|p| (p.name.as_deref(), p.sub_group_size, p.min_sub_groups))
        .collect();
    assert_eq!(
        summary,
        [
            (Some("cpu"), Some(1), Some(1)),
            (Some("gpu"), Some(1), Some(1))
        ]
    );
    ns.wait_for("KubeRay's 5 Pods", SETTLE, || async {
        Ok((ray_pods(&ns, "mixed").await.len() == 5).then_some(()))
    })
    .await;
    judged(&ns, "ray-mixed-pg").await;
    holds_for_a_while(
        &ns,
        "mixed",
        "no Pod bound while no GPU worker fits",
        |pods| !pods.iter().any(bound),
    )
    .await;

    // A GPU for the GPU workers' own pool (room for nothing else): now the whole gang binds.
    let _gpu = FakeNode::create(
        &env,
        &ns,
        gpu_pool,
        0,
        &[
            ("cpu", "1"),
            ("memory", "2Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "1"),
        ],
    )
    .await;
    ns.wait_for("all 5 Pods bound", SETTLE, || async {
        let pods = ray_pods(&ns, "mixed").await;
        Ok((pods.len() == 5 && pods.iter().all(bound)).then_some(()))
    })
    .await;
    drop(kuberay);
}

#[tokio::test]
async fn a_multi_host_group_binds_in_whole_replicas_only() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "subgang-hosts", &[OPT_IN, KUBERAY]).await;
    let (head_pool, host_pool) = ("sg-hosts-head", "sg-hosts-hosts");
    let _head = FakeNode::create(
        &env,
        &ns,
        head_pool,
        0,
        &[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;
    // Room for three hosts of 1 CPU: one whole replica and half of another.
    let _hosts = FakeNode::create(
        &env,
        &ns,
        host_pool,
        0,
        &[("cpu", "3"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;
    // KubeRay labels multi-host replicas (ray.io/worker-group-replica-name) behind this gate,
    // off by default in v1.5 and on in v1.6: named, so the test means the same on both.
    let kuberay =
        KubeRay::start_with_feature_gates(&env, &[&ns], "RayMultiHostIndexing=true").await;
    // Gang: head + minReplicas 1 × 2 hosts = minMember 3; KubeRay makes 2 replicas (4 Pods).
    create(
        &ns,
        autoscaling_cluster(
            "slices",
            head_pool,
            json!([
                {"groupName": "slice", "replicas": 2, "minReplicas": 1, "maxReplicas": 2,
                 "numOfHosts": 2, "rayStartParams": {},
                 "template": pinned(host_pool, json!([container("ray-worker", "1", "1Gi", None)]))}
            ]),
        ),
    )
    .await;

    let group = ns
        .wait_for("PodGroup ray-slices-pg", SETTLE, || async {
            Ok(pod_group(&ns, "ray-slices-pg").await)
        })
        .await;
    assert_eq!(group.spec.min_member, Some(3));
    let policy = &group.spec.sub_group_policy.clone().unwrap_or_default()[0];
    assert_eq!(
        (
            policy.match_label_keys.clone().unwrap_or_default(),
            policy.sub_group_size,
            policy.min_sub_groups
        ),
        (
            vec!["ray.io/worker-group-replica-name".to_string()],
            Some(2),
            Some(1)
        )
    );

    // The head and one whole replica bind; of the other replica, no host does, although one
    // would fit (and minMember alone would let it bind).
    fn one_whole_replica(pods: &[Pod]) -> bool {
        let workers: Vec<&Pod> = pods
            .iter()
            .filter(|p| label(p, "ray.io/node-type") == Some("worker"))
            .collect();
        let replicas: std::collections::BTreeSet<&str> = workers
            .iter()
            .filter_map(|p| label(p, "ray.io/worker-group-replica-name"))
            .collect();
        let bound_in = |replica: &str| {
            workers
                .iter()
                .filter(|p| label(p, "ray.io/worker-group-replica-name") == Some(replica))
                .filter(|p| bound(p))
                .count()
        };
        let mut counts: Vec<usize> = replicas.iter().map(|r| bound_in(r)).collect();
        counts.sort_unstable();
        workers.len() == 4
            && counts == [0, 2]
            && pods
                .iter()
                .filter(|p| label(p, "ray.io/node-type") == Some("head"))
                .all(bound)
    }
    ns.wait_for("the head and one whole replica bound", SETTLE, || async {
        Ok(one_whole_replica(&ray_pods(&ns, "slices").await).then_some(()))
    })
    .await;
    holds_for_a_while(
        &ns,
        "slices",
        "one whole replica bound, no host of the other",
        one_whole_replica,
    )
    .await;

    // One more host's room: the second replica binds, whole.
    let _more = FakeNode::create(
        &env,
        &ns,
        host_pool,
        1,
        &[("cpu", "1"), ("memory", "2Gi"), ("pods", "110")],
    )
    .await;
    ns.wait_for("both replicas bound", SETTLE, || async {
        let pods = ray_pods(&ns, "slices").await;
        Ok((pods.len() == 5 && pods.iter().all(bound)).then_some(()))
    })
    .await;
    drop(kuberay);
}

#[tokio::test]
async fn a_multi_host_group_kuberay_made_without_replica_names_binds_as_one_group() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "subgang-unindexed", &[OPT_IN, KUBERAY]).await;
    let (head_pool, host_pool) = ("sg-unindexed-head", "sg-unindexed-hosts");
    let _head = FakeNode::create(
        &env,
        &ns,
        head_pool,
        0,
        &[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;
    let _hosts = FakeNode::create(
        &env,
        &ns,
        host_pool,
        0,
        &[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;
    // KubeRay without RayMultiHostIndexing (off by default in v1.5, on in v1.6, so turned off
    // here): its multi-host Pods have no replica name, so a per-replica policy would leave
    // every one of them in no sub-group.
    let kuberay =
        KubeRay::start_with_feature_gates(&env, &[&ns], "RayMultiHostIndexing=false").await;
    create(
        &ns,
        autoscaling_cluster(
            "slices",
            head_pool,
            json!([
                {"groupName": "slice", "replicas": 2, "minReplicas": 1, "maxReplicas": 2,
                 "numOfHosts": 2, "rayStartParams": {},
                 "template": pinned(host_pool, json!([container("ray-worker", "1", "1Gi", None)]))}
            ]),
        ),
    )
    .await;

    let workers = ns
        .wait_for("KubeRay's 4 worker Pods", SETTLE, || async {
            let pods = ray_pods(&ns, "slices").await;
            let workers: Vec<Pod> = pods
                .into_iter()
                .filter(|p| label(p, "ray.io/node-type") == Some("worker"))
                .collect();
            Ok((workers.len() == 4).then_some(workers))
        })
        .await;
    assert!(
        workers
            .iter()
            .all(|p| label(p, "ray.io/worker-group-replica-name").is_none()),
        "KubeRay without the gate names no replica: {:?}",
        outline(&workers)
    );
    // The group is one sub-group of its 2 required Pods; minMember stays head + 2.
    let group = ns
        .wait_for("the whole-group policy", SETTLE, || async {
            Ok(pod_group(&ns, "ray-slices-pg").await.filter(|pg| {
                pg.spec.sub_group_policy.as_ref().is_some_and(|p| {
                    p.len() == 1
                        && p[0].match_label_keys.as_deref() == Some(&["ray.io/group".to_string()])
                })
            }))
        })
        .await;
    let policy = &group.spec.sub_group_policy.clone().unwrap_or_default()[0];
    assert_eq!(
        (
            group.spec.min_member,
            policy.sub_group_size,
            policy.min_sub_groups
        ),
        (Some(3), Some(2), Some(1))
    );
    // And Volcano binds it: the head and every worker, for which the nodes have room.
    ns.wait_for("every Pod bound", SETTLE, || async {
        let pods = ray_pods(&ns, "slices").await;
        Ok((pods.len() == 5 && pods.iter().all(bound)).then_some(()))
    })
    .await;
    drop(kuberay);
}
