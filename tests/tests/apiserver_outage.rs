//! The reconciler across an API server crash (docs/reconciler.md, "API server outages"): 200
//! RayJobs are created at once, kube-apiserver is SIGKILLed one second later and started again
//! 20 s after that with its own command line (`tests/env/control-plane apiserver kill|start`).
//! Every RayJob must then reach `Waiting` under the reconciler that lived through the outage,
//! with exactly one RayCluster, PodGroup, head Service, head Pod and worker Pod each: nothing
//! duplicated by requests that were in flight when the server died.
//!
//! The time from the API server answering `/readyz` to the last RayJob `Waiting` is printed;
//! `rayjob-bench` is where it is compared with KubeRay (docs/benchmarks.md). This test
//! bounds it only generously, since Volcano and kwok recover on the same two shared cores.
//!
//! It stops the environment's API server, so it is a suite of its own: cargo runs test
//! binaries one after another, and no other test runs during the outage.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Resource};
use raygate_api::keys;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::PodGroup;
use raygate_e2e::env::control_plane;
use raygate_e2e::nodes::{FakeNode, placement};
use raygate_e2e::reconciler::{PRIVATE_RECONCILER_LABEL, Reconciler};
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

/// RayJobs created at once.
const JOBS: usize = 200;
/// How long the API server stays down.
const OUTAGE: Duration = Duration::from_secs(20);
/// Generous bound for every RayJob to be `Waiting` after the restart (the figure itself is
/// printed; debug builds, Volcano and kwok share two cores here).
const RECOVERY_BOUND: Duration = Duration::from_secs(300);
const POOL: &str = "apiserver-outage";

/// `tests/env/control-plane apiserver <action>` (`start` returns once it answers `/readyz`).
async fn apiserver(action: &str) {
    control_plane(&["apiserver", action])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
}

/// An InteractiveMode RayJob (nothing is submitted): a head and one worker of 100m / 128Mi,
/// placed on the test's own nodes.
fn ray_job(name: &str) -> RayJob {
    let (selector, tolerations) = placement(POOL);
    let pod = |container: &str| {
        json!({"spec": {
            "nodeSelector": selector, "tolerations": tolerations,
            "containers": [{"name": container, "image": "rayproject/ray:2.60.0",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]
        }})
    };
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "submissionMode": "InteractiveMode",
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {"rayStartParams": {}, "template": pod("ray-head")},
                "workerGroupSpecs": [{
                    "groupName": "small", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
                    "rayStartParams": {}, "template": pod("ray-worker")
                }]
            }
        }
    }))
    .expect("a RayJob")
}

/// How many of `objects` each owning RayJob / RayCluster (by ownerReference name) has.
fn per_owner<K: Resource>(objects: &[K], owner_kind: &str) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for object in objects {
        for owner in object.meta().owner_references.iter().flatten() {
            if owner.kind == owner_kind {
                *counts.entry(owner.name.clone()).or_insert(0) += 1;
            }
        }
    }
    counts
}

fn deployment_status(job: &RayJob) -> &str {
    job.status
        .as_ref()
        .and_then(|s| s.job_deployment_status.as_deref())
        .unwrap_or_default()
}

#[tokio::test]
async fn every_rayjob_gets_waiting_once_after_the_api_server_is_killed_and_restarted() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(
        &env,
        "apiserver-outage",
        &[
            (keys::NAMESPACE_OPT_IN_LABEL, keys::NAMESPACE_OPT_IN_VALUE),
            (PRIVATE_RECONCILER_LABEL, "true"),
        ],
    )
    .await;
    let room = [("cpu", "64"), ("memory", "256Gi"), ("pods", "250")];
    let _nodes = [
        FakeNode::create(&env, &ns, POOL, 0, &room).await,
        FakeNode::create(&env, &ns, POOL, 1, &room).await,
    ];
    let mut reconciler = Reconciler::start(&env, &ns, None).await;

    let api: Api<RayJob> = ns.api();
    let names: Vec<String> = (0..JOBS).map(|i| format!("outage-{i:03}")).collect();
    futures::stream::iter(names.iter().map(|name| {
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &ray_job(name))
                .await
                .map_err(|e| anyhow::anyhow!("creating RayJob {name}: {e}"))
        }
    }))
    .buffer_unordered(16)
    .try_collect::<Vec<_>>()
    .await
    .expect("creating the RayJobs");
    tokio::time::sleep(Duration::from_secs(1)).await;
    apiserver("kill").await;
    tokio::time::sleep(OUTAGE).await;
    // Returns once the API server answers /readyz.
    apiserver("start").await;
    let ready = Instant::now();

    ns.wait_for("every RayJob Waiting", RECOVERY_BOUND, || async {
        let jobs = api.list(&ListParams::default()).await?.items;
        let waiting = jobs
            .iter()
            .filter(|j| deployment_status(j) == "Waiting")
            .count();
        Ok((jobs.len() == JOBS && waiting == JOBS).then_some(()))
    })
    .await;
    println!(
        "every RayJob Waiting {:.1} s after the API server answered /readyz",
        ready.elapsed().as_secs_f64()
    );
    assert!(
        reconciler.is_running(),
        "the reconciler exited during the outage:\n{}",
        reconciler.log_text()
    );

    let clusters = ns
        .api::<RayCluster>()
        .list(&ListParams::default())
        .await
        .expect("listing RayClusters")
        .items;
    let pod_groups = ns
        .api::<PodGroup>()
        .list(&ListParams::default())
        .await
        .expect("listing PodGroups")
        .items;
    let services = ns
        .api::<Service>()
        .list(&ListParams::default())
        .await
        .expect("listing Services")
        .items;
    let pods: Vec<Pod> = ns
        .api::<Pod>()
        .list(&ListParams::default())
        .await
        .expect("listing Pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let one_each: BTreeMap<String, usize> = names.iter().map(|n| (n.clone(), 1)).collect();
    assert_eq!(
        per_owner(&clusters, "RayJob"),
        one_each,
        "RayClusters per RayJob"
    );
    assert_eq!(clusters.len(), JOBS, "RayClusters");
    assert_eq!(
        per_owner(&pod_groups, "RayJob"),
        one_each,
        "PodGroups per RayJob"
    );
    assert_eq!(pod_groups.len(), JOBS, "PodGroups");
    let cluster_names: Vec<String> = clusters
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let each = |n: usize| -> BTreeMap<String, usize> {
        cluster_names.iter().map(|c| (c.clone(), n)).collect()
    };
    assert_eq!(
        per_owner(&services, "RayCluster"),
        each(1),
        "head Services per RayCluster"
    );
    assert_eq!(
        per_owner(&pods, "RayCluster"),
        each(2),
        "Pods per RayCluster (head + worker)"
    );

    // The reconciler that lived through the outage still releases every finalizer, so the
    // namespace goes with the test instead of keeping 200 RayJobs and their Pods.
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("deleting the RayJobs");
    ns.wait_for("every RayJob gone", RECOVERY_BOUND, || async {
        let left = api.list(&ListParams::default()).await?.items.len();
        Ok((left == 0).then_some(()))
    })
    .await;
    assert!(
        reconciler.is_running(),
        "the reconciler exited while the RayJobs were deleted:\n{}",
        reconciler.log_text()
    );
}
