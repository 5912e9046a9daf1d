//! Crash safety: the reconciler is SIGKILLed again and again while RayJobs start; every RayJob
//! still completes with exactly one RayCluster and exactly one Ray submission.

use std::time::Duration;

use kube::api::ListParams;
use raygate_api::keys::{NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE};
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_e2e::ray::Dashboard;
use raygate_e2e::reconciler::{PRIVATE_RECONCILER_LABEL, Reconciler};
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{RUN, create, ray_job};

#[tokio::test]
async fn rayjobs_survive_a_reconciler_killed_at_random_moments() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(
        &env,
        "rayjob-crash",
        &[
            (NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE),
            (PRIVATE_RECONCILER_LABEL, "true"),
        ],
    )
    .await;
    let names: Vec<String> = (0..4).map(|i| format!("crash-{i}")).collect();
    for name in &names {
        let entrypoint = format!("python -c 'print(\"{} {name}\")'", ns.name());
        create(&ns, &ray_job(name, &entrypoint, 1, json!({}))).await;
    }
    // Kill it every 0.7–2.1 s (varying, so kills land between different API calls), ten times.
    for round in 0..10u64 {
        let mut reconciler = Reconciler::start(&env, &ns, None).await;
        tokio::time::sleep(Duration::from_millis(700 + (round * 389) % 1400)).await;
        reconciler.kill().await;
    }
    let _last = Reconciler::start(&env, &ns, None).await;
    let jobs = ns.api::<RayJob>();
    for name in &names {
        ns.wait_for(&format!("{name} to be Complete"), RUN, || async {
            let status = jobs.get(name).await?.status.unwrap_or_default();
            Ok((status.job_deployment_status.as_deref() == Some("Complete")).then_some(()))
        })
        .await;
    }
    let clusters = ns
        .api::<RayCluster>()
        .list(&ListParams::default())
        .await
        .expect("list clusters")
        .items;
    let dashboard = Dashboard::new(env.ray_dashboard());
    let submissions = dashboard.get("/api/jobs/").await.expect("list Ray jobs");
    let submissions: serde_json::Value = submissions.json().expect("JSON");
    for name in &names {
        let status = jobs.get(name).await.unwrap().status.unwrap();
        assert_eq!(status.job_status.as_deref(), Some("SUCCEEDED"), "{name}");
        let owned: Vec<_> = clusters
            .iter()
            .filter(|c| {
                c.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("ray.io/originated-from-cr-name"))
                    == Some(name)
            })
            .collect();
        assert_eq!(owned.len(), 1, "{name}: exactly one RayCluster");
        assert_eq!(owned[0].metadata.name, status.ray_cluster_name);
        let id = status.job_id.unwrap();
        let marker = format!("{} {name}\"", ns.name());
        let runs: Vec<&str> = submissions
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| {
                j["entrypoint"]
                    .as_str()
                    .is_some_and(|e| e.contains(&marker))
            })
            .filter_map(|j| j["submission_id"].as_str())
            .collect();
        assert_eq!(runs, [id.as_str()], "{name}: exactly one Ray submission");
    }
}
