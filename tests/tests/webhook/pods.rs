//! Pod onboarding on the real control plane: Pods created as KubeRay creates them get exactly
//! raygate's scheduler, annotations and labels in an opted-in namespace and are gang-scheduled
//! by Volcano (all bound or none); in an unlabelled namespace they are untouched and bound by
//! the default scheduler.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{PostParams, ResourceExt};
use raygate_api::check::check_object;
use raygate_api::validation::ValidationContext;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{
    OPT_IN, PODS_BY_HAND, SETTLE, annotations, create_ray_object, kuberay_pod, labels, ray_cluster,
    string_map, webhook_up,
};

/// How long "nothing is bound" is watched for (Volcano schedules every second).
const NOTHING_BOUND_FOR: Duration = Duration::from_secs(10);

async fn create(ns: &TestNamespace, pod: &Pod) -> Pod {
    ns.api::<Pod>()
        .create(&PostParams::default(), pod)
        .await
        .unwrap_or_else(|e| panic!("creating pod {}: {e}", pod.name_any()))
}

/// Waits until every named pod is bound to a node and Running.
async fn wait_running(ns: &TestNamespace, names: &[&str]) -> Vec<Pod> {
    let pods = ns.api::<Pod>();
    ns.wait_for(
        &format!("pods {names:?} bound and Running"),
        SETTLE,
        || async {
            let mut running = Vec::new();
            for name in names {
                let pod = pods.get(name).await?;
                let bound = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some();
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                if !bound || phase != Some("Running") {
                    return Ok(None);
                }
                running.push(pod);
            }
            Ok(Some(running))
        },
    )
    .await
}

fn scheduler(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_rayclusters_pods_join_one_gang_with_exactly_raygates_metadata_and_bind_all_or_none() {
    let _webhook = webhook_up().await;
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "webhook-gang", &[OPT_IN, PODS_BY_HAND]).await;
    let cluster = create_ray_object(
        &ns,
        ray_cluster("gang", 2, json!({"volcano.sh/queue-name": "default"})),
    )
    .await;
    // The PodGroup raygate's reconciler creates for the cluster, sized by the same function
    // (the environment's reconciler leaves this namespace alone: PODS_BY_HAND).
    let stored = serde_json::to_value(&cluster).unwrap();
    let mut group = check_object(stored, &ValidationContext::default())
        .expect("a RayCluster")
        .pod_group()
        .expect("readable")
        .expect("sized");
    assert_eq!(group.metadata.name.as_deref(), Some("ray-gang-pg"));
    assert_eq!(group.spec.min_member, Some(3), "head + 2 workers");
    group.metadata.namespace = Some(ns.name().to_string());
    ns.api::<raygate_api::volcano::PodGroup>()
        .create(&PostParams::default(), &group)
        .await
        .expect("create the PodGroup");

    let head = kuberay_pod(&cluster, "gang-head", "head", "headgroup");
    let workers: Vec<Pod> = (0..2)
        .map(|i| kuberay_pod(&cluster, &format!("gang-worker-{i}"), "worker", "cpu"))
        .collect();

    // Server-side dry run: the answer carries the mutation, nothing is stored.
    let dry = ns
        .api::<Pod>()
        .create(
            &PostParams {
                dry_run: true,
                field_manager: None,
            },
            &head,
        )
        .await
        .expect("dry-run create");
    assert_eq!(scheduler(&dry), "volcano");
    assert_eq!(
        annotations(&dry)["scheduling.k8s.io/group-name"],
        "ray-gang-pg"
    );
    assert!(
        ns.api::<Pod>()
            .get_opt("gang-head")
            .await
            .unwrap()
            .is_none(),
        "a dry run stores nothing"
    );

    // Two of three members: Volcano binds none of them.
    create(&ns, &head).await;
    create(&ns, &workers[0]).await;
    let pods = ns.api::<Pod>();
    let started = Instant::now();
    while started.elapsed() < NOTHING_BOUND_FOR {
        for name in ["gang-head", "gang-worker-0"] {
            let pod = pods.get(name).await.expect("pod");
            assert!(
                pod.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_none(),
                "{name} was bound although its gang is incomplete\n{}",
                ns.dump().await
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The third member completes the gang: all three are bound together.
    create(&ns, &workers[1]).await;
    let running = wait_running(&ns, &["gang-head", "gang-worker-0", "gang-worker-1"]).await;
    for pod in running {
        let task = if pod.name_any() == "gang-head" {
            "headgroup"
        } else {
            "cpu"
        };
        assert_eq!(scheduler(&pod), "volcano", "{}", pod.name_any());
        assert_eq!(
            annotations(&pod),
            string_map(&[
                ("scheduling.k8s.io/group-name", "ray-gang-pg"),
                ("volcano.sh/task-spec", task),
            ]),
            "{}",
            pod.name_any()
        );
        assert_eq!(
            labels(&pod)
                .get("volcano.sh/queue-name")
                .map(String::as_str),
            Some("default"),
            "the cluster's queue label is copied"
        );
    }
}

#[tokio::test]
async fn a_rayjobs_cluster_pods_join_the_rayjobs_gang_with_its_labels() {
    let _webhook = webhook_up().await;
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "webhook-job", &[OPT_IN, PODS_BY_HAND]).await;
    let mut job_cluster = ray_cluster("unused", 1, json!({}));
    let job = create_ray_object(
        &ns,
        json!({
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "train", "labels": {
                "volcano.sh/queue-name": "default",
                "ray.io/priority-class-name": "e2e-high",
            }},
            "spec": {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": job_cluster["spec"].take()},
        }),
    )
    .await;
    // The cluster a reconciler creates for the RayJob: owned by it, without the RayJob's labels.
    let mut cluster = ray_cluster("train-x7k2p", 1, json!({}));
    cluster["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train",
        "uid": job.metadata.uid.clone().expect("RayJob uid"), "controller": true,
    }]);
    let cluster = create_ray_object(&ns, cluster).await;
    let head = create(
        &ns,
        &kuberay_pod(&cluster, "train-head", "head", "headgroup"),
    )
    .await;
    assert_eq!(scheduler(&head), "volcano");
    assert_eq!(
        annotations(&head),
        string_map(&[
            ("scheduling.k8s.io/group-name", "ray-train-pg"),
            ("volcano.sh/task-spec", "headgroup"),
        ])
    );
    let head_labels = labels(&head);
    assert_eq!(head_labels["volcano.sh/queue-name"], "default");
    assert_eq!(head_labels["ray.io/priority-class-name"], "e2e-high");
}

#[tokio::test]
async fn ray_pods_in_an_unlabelled_namespace_are_untouched_and_bound_by_the_default_scheduler() {
    let _webhook = webhook_up().await;
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "webhook-plain", &[PODS_BY_HAND]).await;
    let cluster = create_ray_object(
        &ns,
        ray_cluster("plain", 1, json!({"volcano.sh/queue-name": "default"})),
    )
    .await;
    let head = kuberay_pod(&cluster, "plain-head", "head", "headgroup");
    let worker = kuberay_pod(&cluster, "plain-worker-0", "worker", "cpu");
    for pod in [&head, &worker] {
        let created = create(&ns, pod).await;
        assert!(annotations(&created).is_empty(), "{created:?}");
        assert_eq!(labels(&created), labels(pod), "labels untouched");
    }
    for pod in wait_running(&ns, &["plain-head", "plain-worker-0"]).await {
        assert_eq!(scheduler(&pod), "default-scheduler");
        assert!(annotations(&pod).is_empty());
    }
}
