//! Suspension, deletion and completion of KubeRay-run RayJobs leave no PodGroup holding
//! resources, by the PodGroup's `minMember` / `minResources` and by Volcano's queue accounting:
//! each RayJob runs in a queue of its own, whose `status.allocated` (what Volcano's scheduler
//! writes back in v1.14; the per-phase PodGroup counters are no longer persisted) must show the
//! gang's Pods while it runs and nothing afterwards.

use kube::api::{DeleteParams, Patch, PatchParams};
use raygate_e2e::kuberay::KubeRay;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{
    KUBERAY, OPT_IN, SETTLE, create, delete_queue, holds_nothing, job_state, open_queue, pod_group,
    queue_allocated, ray_api, ray_job, wait_complete,
};

/// Waits until queue `queue` shows the running gang: at least head + 2 workers' CPUs.
async fn wait_gang_allocated(ns: &TestNamespace, queue: &str) {
    let gang = "3".parse().expect("a quantity");
    ns.wait_for(
        &format!("queue {queue} to account for the running gang"),
        SETTLE,
        || async {
            let allocated = queue_allocated(ns, queue).await?;
            Ok(allocated
                .get("cpu")
                .is_some_and(|cpu| *cpu >= gang)
                .then_some(()))
        },
    )
    .await;
}

/// Waits until queue `queue` holds nothing and `group` holds nothing either.
async fn wait_released(ns: &TestNamespace, queue: &str, group: &str) {
    ns.wait_for(
        &format!("queue {queue} and PodGroup {group} to hold nothing"),
        SETTLE,
        || async {
            let allocated = queue_allocated(ns, queue).await?;
            let group = pod_group(ns, group).await;
            Ok((allocated.is_empty() && holds_nothing(group.as_ref())).then_some(()))
        },
    )
    .await;
}

#[tokio::test]
async fn suspending_deleting_and_completing_a_kuberay_rayjob_releases_its_gang_and_queue() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "coexist-life", &[OPT_IN, KUBERAY]).await;
    let _kuberay = KubeRay::start(&env, &[&ns], None).await;
    // One queue per RayJob, so that each one's accounting is its own.
    let queues: Vec<String> = ["paused", "doomed", "brief"]
        .into_iter()
        .map(|job| format!("{}-{job}", ns.name()))
        .collect();
    for queue in &queues {
        open_queue(&ns, queue).await;
    }
    // Long enough to be suspended or deleted while it runs, even when Volcano admits the gangs
    // late on a crowded machine (neither runs to its end: one is suspended, one deleted).
    let sleeper = "python -c 'import time; time.sleep(300)'";
    for ((name, entrypoint), queue) in [
        ("paused", sleeper),
        ("doomed", sleeper),
        ("brief", "python -c 'print(1)'"),
    ]
    .into_iter()
    .zip(&queues)
    {
        let mut job = ray_job(name, entrypoint, json!({}));
        job["metadata"]["labels"] = json!({"volcano.sh/queue-name": queue});
        create(&ns, job).await;
    }
    for name in ["ray-paused-pg", "ray-doomed-pg"] {
        ns.wait_for(
            &format!("{name} sized for head + 2 workers"),
            SETTLE,
            || async {
                Ok(pod_group(&ns, name)
                    .await
                    .filter(|pg| pg.spec.min_member == Some(3)))
            },
        )
        .await;
    }
    wait_gang_allocated(&ns, &queues[0]).await;
    wait_gang_allocated(&ns, &queues[1]).await;

    // Suspend: KubeRay tears the cluster down; raygate zeroes the group at once.
    ray_api(&ns, "RayJob")
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("suspending the RayJob");
    wait_released(&ns, &queues[0], "ray-paused-pg").await;
    ns.wait_for("RayJob paused Suspended", SETTLE, || async {
        Ok((job_state(&ns, "paused").await?.0 == "Suspended").then_some(()))
    })
    .await;
    // It stays zero: nothing re-sizes a suspended job's gang.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert!(
        holds_nothing(pod_group(&ns, "ray-paused-pg").await.as_ref()),
        "{}",
        ns.dump().await
    );
    let allocated = queue_allocated(&ns, &queues[0])
        .await
        .expect("reading the queue");
    assert!(allocated.is_empty(), "{allocated:?}");

    // Delete: KubeRay's finalizer runs, then the group goes with its owner.
    ray_api(&ns, "RayJob")
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("deleting the RayJob");
    ns.wait_for("the deleted RayJob's group to be gone", SETTLE, || async {
        Ok(pod_group(&ns, "ray-doomed-pg")
            .await
            .is_none()
            .then_some(()))
    })
    .await;
    wait_released(&ns, &queues[1], "ray-doomed-pg").await;

    // Completion: the cluster is shut down after the job, the submitter Pod has finished.
    wait_complete(&ns, "brief").await;
    wait_released(&ns, &queues[2], "ray-brief-pg").await;

    for queue in &queues {
        delete_queue(&ns, queue).await;
    }
}
