//! Suspension and deletion of KubeRay-run RayJobs leave no PodGroup holding resources
//! (completion is checked by `gang`).

use kube::api::{DeleteParams, Patch, PatchParams};
use raygate_e2e::kuberay::KubeRay;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{
    KUBERAY, OPT_IN, SETTLE, create, holds_nothing, job_state, pod_group, ray_api, ray_job,
};

#[tokio::test]
async fn suspending_and_deleting_a_kuberay_rayjob_releases_its_gang() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "coexist-life", &[OPT_IN, KUBERAY]).await;
    let _kuberay = KubeRay::start(&env, &[&ns], None).await;
    // Long enough to be suspended or deleted while it runs.
    let sleeper = "python -c 'import time; time.sleep(45)'";
    create(&ns, ray_job("paused", sleeper, json!({}))).await;
    create(&ns, ray_job("doomed", sleeper, json!({}))).await;
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

    // Suspend: KubeRay tears the cluster down; raygate zeroes the group at once.
    ray_api(&ns, "RayJob")
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("suspending the RayJob");
    ns.wait_for(
        "the suspended RayJob's group to hold nothing",
        SETTLE,
        || async {
            Ok(holds_nothing(pod_group(&ns, "ray-paused-pg").await.as_ref()).then_some(()))
        },
    )
    .await;
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
}
