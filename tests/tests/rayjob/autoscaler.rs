//! In-tree autoscaling under raygate's own reconciler, on the real nodes: the Ray autoscaler in
//! the head scales a worker group from none up for a job that needs CPUs the minimum cluster
//! does not have, the new workers join the RayJob's gang, and they go again after the idle
//! timeout.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::DeleteParams;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::PodGroup;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::lifecycle::{OPT_IN, assert_gang_bound, assert_on_real_nodes};
use super::{RUN, create, events_about, job_dashboard, pods, ray_job, wait_status, wait_succeeded};

/// Scale-down waits out the idle timeout and then an autoscaler period or two.
const IDLE_TIMEOUT_SECONDS: u64 = 20;

#[tokio::test(flavor = "multi_thread")]
async fn the_autoscaler_scales_workers_up_for_the_job_and_down_when_idle() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-autoscale", &OPT_IN).await;
    // The head offers Ray no CPU and the group starts empty: the two 1-CPU tasks can only run
    // on workers the autoscaler adds.
    let mut job = ray_job(
        "elastic",
        "python -c \"import ray, time; ray.init(); f = ray.remote(num_cpus=1)(lambda: time.sleep(5) or 1); print('tasks done:', sum(ray.get([f.remote() for _ in range(2)])))\"",
        0,
        json!({"shutdownAfterJobFinishes": false}),
    );
    let cluster_spec = job.spec.ray_cluster_spec.as_mut().expect("a cluster spec");
    cluster_spec.enable_in_tree_autoscaling = Some(true);
    cluster_spec.autoscaler_options = Some(
        serde_json::from_value(json!({
            "version": "v2",
            "idleTimeoutSeconds": IDLE_TIMEOUT_SECONDS,
            "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        }))
        .expect("autoscaler options"),
    );
    cluster_spec
        .head_group_spec
        .ray_start_params
        .get_or_insert_default()
        .insert("num-cpus".into(), "0".into());
    let group = &mut cluster_spec.worker_group_specs.as_mut().expect("a group")[0];
    group.max_replicas = Some(2);
    group
        .ray_start_params
        .get_or_insert_default()
        .insert("num-cpus".into(), "1".into());
    create(&ns, &job).await;

    let pod_groups = ns.api::<PodGroup>();
    let pg = ns
        .wait_for("PodGroup ray-elastic-pg", RUN, || async {
            Ok(pod_groups.get_opt("ray-elastic-pg").await?)
        })
        .await;
    assert_eq!(pg.spec.min_member, Some(1), "the head: minReplicas is 0");

    let running = wait_status(&ns, "elastic", "the RayJob to be Running", |s| {
        s.job_deployment_status.as_deref() == Some("Running")
    })
    .await;
    let running_at = Instant::now();
    let cluster = running.ray_cluster_name.clone().expect("a cluster");
    let head = pods(
        &ns,
        &format!("ray.io/cluster={cluster},ray.io/node-type=head"),
    )
    .await;
    let head_spec = head[0].spec.as_ref().expect("spec");
    let containers: Vec<&str> = head_spec
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(containers, ["ray-head", "autoscaler"]);
    assert_eq!(
        head_spec.service_account_name.as_deref(),
        Some(cluster.as_str())
    );
    for (kind, owner) in [
        (
            "ServiceAccount",
            ns.api::<ServiceAccount>()
                .get(&cluster)
                .await
                .map(|o| o.metadata),
        ),
        (
            "Role",
            ns.api::<Role>().get(&cluster).await.map(|o| o.metadata),
        ),
        (
            "RoleBinding",
            ns.api::<RoleBinding>()
                .get(&cluster)
                .await
                .map(|o| o.metadata),
        ),
    ] {
        let meta = owner.unwrap_or_else(|e| panic!("{kind} {cluster}: {e}"));
        let owner = &meta.owner_references.expect("an owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("RayCluster", cluster.as_str())
        );
    }

    let worker_selector = format!("ray.io/cluster={cluster},ray.io/node-type=worker");
    let workers = ns
        .wait_for("the autoscaler to add workers", RUN, || async {
            let workers = pods(&ns, &worker_selector).await;
            Ok((!workers.is_empty()).then_some(workers))
        })
        .await;
    let scale_up = running_at.elapsed();
    let done = wait_succeeded(&ns, "elastic").await;
    let logs = job_dashboard(&ns, "elastic")
        .get(&format!(
            "/api/jobs/{}/logs",
            done.job_id.clone().expect("a job id")
        ))
        .await
        .expect("logs");
    assert!(logs.body.contains("tasks done: 2"), "{}", logs.body);
    let workers_at_completion = pods(&ns, &worker_selector).await;
    let dump = ns.dump().await;
    assert!(!workers.is_empty());
    assert_gang_bound(&workers_at_completion, "elastic", Some("small"), &dump);
    assert_on_real_nodes(&workers_at_completion, &env, &dump);
    let scaled = ns
        .api::<RayCluster>()
        .get(&cluster)
        .await
        .expect("the cluster");
    let replicas = scaled.spec.worker_group_specs.as_ref().expect("groups")[0].replicas;
    assert!(
        replicas.is_some_and(|r| r >= 1),
        "the autoscaler patched replicas: {replicas:?}"
    );
    let pg = pod_groups
        .get("ray-elastic-pg")
        .await
        .expect("the PodGroup");
    assert_eq!(
        pg.spec.min_member,
        Some(1),
        "a scale-up does not resize the gang"
    );

    let idle_from = Instant::now();
    ns.wait_for(
        "the idle workers to go",
        RUN + Duration::from_secs(IDLE_TIMEOUT_SECONDS),
        || async { Ok(pods(&ns, &worker_selector).await.is_empty().then_some(())) },
    )
    .await;
    let scale_down = idle_from.elapsed();
    let deleted_events = events_about(&ns, &cluster)
        .await
        .expect("events")
        .into_iter()
        .filter(|e| {
            e.message
                .as_deref()
                .is_some_and(|m| m.contains("listed in scaleStrategy.workersToDelete"))
        })
        .count();
    assert!(deleted_events >= 1, "{}", ns.dump().await);
    eprintln!(
        "autoscaler: first worker {:.0} s after Running, workers gone {:.0} s after completion",
        scale_up.as_secs_f64(),
        scale_down.as_secs_f64()
    );

    ns.api::<RayJob>()
        .delete("elastic", &DeleteParams::default())
        .await
        .expect("delete the RayJob");
    ns.wait_for(
        "the autoscaler's Role to go with its cluster",
        RUN,
        || async {
            Ok(ns
                .api::<Role>()
                .get_opt(&cluster)
                .await?
                .is_none()
                .then_some(()))
        },
    )
    .await;
}
