//! Submission modes and cluster sources beyond the default: SidecarMode (the submitter is a
//! container of the head Pod) and clusterSelector mode (the job runs on a RayCluster it did not
//! create).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, PostParams};
use raygate_api::quantity::ResourceQuantity;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::PodGroup;
use raygate_e2e::ray::Dashboard;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{RUN, create, job_dashboard, pods, ray_job, wait_status};

const OPT_IN: [(&str, &str); 1] = [("raygate.io/scheduler", "volcano")];

#[tokio::test]
async fn sidecar_mode_runs_the_submitter_in_the_head_pod_to_completion() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-sidecar", &OPT_IN).await;
    create(
        &ns,
        &ray_job(
            "side",
            // The finished sidecar makes the head pod NotReady for good, and the head's
            // readiness probe first passes 10-15 s after it starts: a job of 20 s lets the
            // cluster be seen ready first, as any real job does.
            "python -c \"import time; time.sleep(20); print('submitted from the sidecar')\"",
            1,
            json!({"submissionMode": "SidecarMode"}),
        ),
    )
    .await;
    let pg = ns
        .wait_for("PodGroup ray-side-pg", RUN, || async {
            Ok(ns.api::<PodGroup>().get_opt("ray-side-pg").await?)
        })
        .await;
    assert_eq!(pg.spec.min_member, Some(2), "head + 1 worker");
    let cpu = &pg.spec.min_resources.unwrap()["cpu"];
    assert_eq!(
        ResourceQuantity::try_from(cpu).ok(),
        ResourceQuantity::try_from(&Quantity("1250m".into())).ok(),
        "head 500m + worker 250m + the sidecar submitter 500m, not {cpu:?}"
    );

    let done = wait_status(&ns, "side", "the RayJob to be Complete", |s| {
        s.job_deployment_status.as_deref() == Some("Complete")
    })
    .await;
    assert_eq!(done.job_status.as_deref(), Some("SUCCEEDED"));
    assert_eq!((done.succeeded, done.failed), (Some(1), Some(0)));
    assert!(
        ns.api::<Job>().get_opt("side").await.unwrap().is_none(),
        "SidecarMode has no submitter Job"
    );

    let cluster = done.ray_cluster_name.clone().unwrap();
    let heads = pods(
        &ns,
        &format!("ray.io/cluster={cluster},ray.io/node-type=head"),
    )
    .await;
    assert_eq!(heads.len(), 1, "{}", ns.dump().await);
    let head = &heads[0];
    let spec = head.spec.as_ref().unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.scheduler_name.as_deref(), Some("volcano"));
    assert!(spec.node_name.is_some(), "{}", ns.dump().await);
    let submitter = spec
        .containers
        .iter()
        .find(|c| c.name == "ray-job-submitter")
        .expect("the submitter container is in the head pod");
    let env_of = |name: &str| {
        submitter
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(env_of("RAY_JOB_SUBMISSION_ID"), done.job_id);
    let status = head.status.as_ref().unwrap();
    assert_eq!(
        status.phase.as_deref(),
        Some("Running"),
        "the head outlives its submitter"
    );
    let dump = ns.dump().await;
    let terminated = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == "ray-job-submitter")
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .unwrap_or_else(|| panic!("the sidecar has terminated\n{dump}"));
    assert_eq!(terminated.exit_code, 0);

    let dashboard = job_dashboard(&ns, "side");
    let id = done.job_id.unwrap();
    let ray = dashboard.job(&id).await.expect("Ray knows the job");
    assert_eq!(ray["status"], "SUCCEEDED", "{ray}");
    let logs = dashboard
        .get(&format!("/api/jobs/{id}/logs"))
        .await
        .expect("logs");
    assert!(
        logs.body.contains("submitted from the sidecar"),
        "{}",
        logs.body
    );
}

/// A standalone RayCluster `name`: one head (500m, 2Gi) and one worker (250m, 1Gi).
fn standalone_cluster(name: &str) -> RayCluster {
    let container = |name: &str, cpu: &str, memory: &str| {
        json!({"name": name, "image": "rayproject/ray:2.60.0",
               "resources": {"requests": {"cpu": cpu, "memory": memory}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head", "500m", "2Gi")]}}},
            "workerGroupSpecs": [{
                "groupName": "small", "replicas": 1, "minReplicas": 0, "maxReplicas": 2,
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker", "250m", "1Gi")]}}
            }]
        }
    }))
    .expect("a valid RayCluster")
}

/// Pod name → uid of the cluster's live pods.
async fn live_pods(ns: &TestNamespace, cluster: &str) -> BTreeMap<String, String> {
    pods(ns, &format!("ray.io/cluster={cluster}"))
        .await
        .into_iter()
        .filter(|p: &Pod| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.metadata.uid.unwrap_or_default(),
            )
        })
        .collect()
}

/// The cluster exists with `uid`, is not being deleted and still has exactly `pods`.
async fn assert_untouched(
    ns: &TestNamespace,
    name: &str,
    uid: &str,
    pods: &BTreeMap<String, String>,
    when: &str,
) {
    let cluster = ns
        .api::<RayCluster>()
        .get_opt(name)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("RayCluster {name} is gone {when}"));
    assert_eq!(
        cluster.metadata.uid.as_deref(),
        Some(uid),
        "same cluster {when}"
    );
    assert!(
        cluster.metadata.deletion_timestamp.is_none(),
        "not being deleted {when}"
    );
    assert_eq!(
        cluster.spec.worker_group_specs.as_ref().unwrap()[0].suspend,
        None,
        "workers not suspended {when}"
    );
    assert_eq!(
        &live_pods(ns, name).await,
        pods,
        "the same pods {when}\n{}",
        ns.dump().await
    );
}

#[tokio::test]
async fn cluster_selector_mode_runs_on_an_existing_cluster_and_deletes_nothing_of_it() {
    let env = Env::load();
    // clusterSelector is refused at admission in Volcano namespaces (a gang cannot include a
    // cluster that already runs), so this runs where kube-scheduler places the pods.
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-selector", &[]).await;
    let clusters = ns.api::<RayCluster>();
    let shared = clusters
        .create(&PostParams::default(), &standalone_cluster("shared"))
        .await
        .expect("create the standalone RayCluster");
    let uid = shared.metadata.uid.clone().unwrap();
    ns.wait_for("the standalone RayCluster to be ready", RUN, || async {
        let cluster = clusters.get("shared").await?;
        Ok((cluster.status.and_then(|s| s.state).as_deref() == Some("ready")).then_some(()))
    })
    .await;
    let before = live_pods(&ns, "shared").await;
    assert_eq!(before.len(), 2, "head + 1 worker\n{}", ns.dump().await);

    let job: RayJob = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "borrow"},
        "spec": {
            "entrypoint": "python -c \"print('ran on the shared cluster')\"",
            "clusterSelector": {"ray.io/cluster": "shared"},
            // With a cluster of the RayJob's own this deletes it right after the job ends; it
            // must not touch a selected one.
            "shutdownAfterJobFinishes": true,
        },
    }))
    .expect("a valid RayJob");
    create(&ns, &job).await;
    let done = wait_status(&ns, "borrow", "the RayJob to be Complete", |s| {
        s.job_deployment_status.as_deref() == Some("Complete")
    })
    .await;
    assert_eq!(done.job_status.as_deref(), Some("SUCCEEDED"));
    assert_eq!(done.ray_cluster_name.as_deref(), Some("shared"));
    assert_eq!(
        done.dashboard_url.as_deref(),
        Some(format!("shared-head-svc.{}.svc.cluster.local:8265", ns.name()).as_str())
    );
    let dashboard = Dashboard::new(&format!(
        "http://{}",
        done.dashboard_url.as_deref().unwrap()
    ));
    let id = done.job_id.clone().unwrap();
    let logs = dashboard
        .get(&format!("/api/jobs/{id}/logs"))
        .await
        .expect("logs");
    assert!(
        logs.body.contains("ran on the shared cluster"),
        "{}",
        logs.body
    );
    let all: Vec<String> = clusters
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(all, ["shared"], "the RayJob created no cluster of its own");
    assert_untouched(&ns, "shared", &uid, &before, "after the job completed").await;

    let jobs = ns.api::<RayJob>();
    jobs.delete("borrow", &DeleteParams::default())
        .await
        .expect("delete the RayJob");
    // The submitter Job is the RayJob's dependent: once the garbage collector has removed it,
    // it has dealt with everything the RayJob owned.
    let submitters = ns.api::<Job>();
    ns.wait_for(
        "the RayJob and its submitter Job to be gone",
        RUN,
        || async {
            let gone = jobs.get_opt("borrow").await?.is_none()
                && submitters.get_opt("borrow").await?.is_none();
            Ok(gone.then_some(()))
        },
    )
    .await;
    assert_untouched(&ns, "shared", &uid, &before, "after the RayJob was deleted").await;
}
