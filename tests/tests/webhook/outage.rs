//! With the webhook down, Ray Pod creation in opted-in namespaces fails visibly (failurePolicy
//! Fail), and so does Ray object creation there. So does the creation of Job Pods there: the
//! match condition cannot tell a RayJob's submitter Pod (KubeRay leaves it unlabelled) from
//! another Job's, a trade-off `docs/reconciler.md` states. Other Pods and other namespaces are
//! unaffected (their Ray objects are validated with failurePolicy Ignore); after a restart it
//! works again.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use raygate_e2e::env::control_plane;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{
    OPT_IN, PODS_BY_HAND, WEBHOOK, annotations, create_ray_object, create_ray_object_result,
    kuberay_pod, ray_cluster,
};

/// `tests/env/control-plane webhook stop|start`.
async fn webhook(action: &str) {
    control_plane(&["webhook", action])
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
}

/// A Pod as the Job controller creates it for Job `job`: its job-name label and its controller
/// ownerReference, nothing Ray.
fn job_pod(job: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("{job}-x7k2p"),
            "labels": {"batch.kubernetes.io/job-name": job, "job-name": job},
            "ownerReferences": [{
                "apiVersion": "batch/v1", "kind": "Job", "name": job,
                "uid": "0b6f5a8e-3c1d-4e59-9a57-6d0f2b8c4e11",
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap()
}

fn plain_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn with_the_webhook_down_only_ray_and_job_pods_in_opted_in_namespaces_are_refused() {
    let _alone = WEBHOOK.write().await;
    let env = Env::load();
    let opted_in =
        TestNamespace::with_labels(&env, "webhook-outage", &[OPT_IN, PODS_BY_HAND]).await;
    let plain = TestNamespace::with_labels(&env, "webhook-outage-plain", &[PODS_BY_HAND]).await;
    let opted_cluster = create_ray_object(&opted_in, ray_cluster("down", 1, json!({}))).await;
    let plain_cluster = create_ray_object(&plain, ray_cluster("down", 1, json!({}))).await;

    webhook("stop").await;
    let outcome = AssertUnwindSafe(async {
        let refused = opted_in
            .api::<Pod>()
            .create(
                &PostParams::default(),
                &kuberay_pod(&opted_cluster, "down-head", "head", "headgroup"),
            )
            .await
            .expect_err("a Ray Pod in an opted-in namespace is refused while the webhook is down");
        let message = refused.to_string();
        assert!(
            message.contains("failed calling webhook \"pods.raygate.io\""),
            "{message}"
        );
        opted_in
            .api::<Pod>()
            .create(&PostParams::default(), &plain_pod("web"))
            .await
            .expect("a non-Ray Pod in the opted-in namespace is not affected");
        let refused = opted_in
            .api::<Pod>()
            .create(&PostParams::default(), &job_pod("nightly"))
            .await
            .expect_err(
                "a Job's Pod in an opted-in namespace is refused while the webhook is down",
            );
        assert!(
            refused
                .to_string()
                .contains("failed calling webhook \"pods.raygate.io\""),
            "{refused}"
        );
        plain
            .api::<Pod>()
            .create(&PostParams::default(), &job_pod("nightly"))
            .await
            .expect("a Job's Pod in an unlabelled namespace is not affected");
        plain
            .api::<Pod>()
            .create(
                &PostParams::default(),
                &kuberay_pod(&plain_cluster, "down-head", "head", "headgroup"),
            )
            .await
            .expect("a Ray Pod in an unlabelled namespace is not affected");
        // Ray objects: validated everywhere, but only the opted-in scope fails closed.
        let refused = create_ray_object_result(&opted_in, ray_cluster("while-down", 1, json!({})))
            .await
            .expect_err(
                "a RayCluster in an opted-in namespace is refused while the webhook is down",
            );
        assert!(
            refused.to_string().contains("failed calling webhook"),
            "{refused}"
        );
        create_ray_object_result(&plain, ray_cluster("while-down", 1, json!({})))
            .await
            .expect("a RayCluster in an unlabelled namespace is admitted (failurePolicy Ignore)");
    })
    .catch_unwind()
    .await;
    webhook("start").await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }

    let head = opted_in
        .api::<Pod>()
        .create(
            &PostParams::default(),
            &kuberay_pod(&opted_cluster, "down-head", "head", "headgroup"),
        )
        .await
        .expect("after the restart the Ray Pod is admitted");
    assert_eq!(
        annotations(&head)
            .get("scheduling.k8s.io/group-name")
            .map(String::as_str),
        Some("ray-down-pg")
    );
}
