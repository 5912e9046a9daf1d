//! The RayJob controller end to end: real API server and Volcano. The lifecycle, mode and
//! `raygate follow` tests run on the real kubelet nodes: each RayJob gets a Ray cluster of its
//! own made of raygate's Pods, its submitter Pod runs `ray job submit` against the head
//! Service's cluster DNS name, and the environment's reconciler (a host process, or the
//! in-cluster installation's; `tests/run` runs this suite both ways) reaches the dashboard the
//! same way. The gang and pending-gang tests need exact capacities, so they run on kwok nodes of
//! their own with the shared Ray head and a reconciler of their own pointed at it; so does the
//! crash test.

mod autoscaler;
mod crash;
mod follow;
mod gang;
mod lifecycle;
mod modes;
mod pending;
mod token_auth;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ListParams, PostParams};
use raygate_api::ray::v1::RayJob;
use raygate_e2e::TestNamespace;
use raygate_e2e::ray::Dashboard;
use serde_json::{Value, json};

/// Bound for a whole RayJob run (cluster up, submitter, Ray job, status). On the real nodes
/// (4 CPUs in all, two tests at a time) a gang may first wait for the other test's cluster to
/// go: up to about two runs.
const RUN: Duration = Duration::from_secs(240);

/// A RayJob with one head (500m, 2Gi) and `workers` workers (250m, 1Gi), running `entrypoint`;
/// `extra` is merged into its spec.
fn ray_job(name: &str, entrypoint: &str, workers: i32, extra: Value) -> RayJob {
    let container = |name: &str, cpu: &str, memory: &str| {
        json!({"name": name, "image": "rayproject/ray:2.60.0",
               "resources": {"requests": {"cpu": cpu, "memory": memory}}})
    };
    let mut spec = json!({
        "entrypoint": entrypoint,
        "rayClusterSpec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head", "500m", "2Gi")]}}},
            "workerGroupSpecs": [{
                "groupName": "small", "replicas": workers, "minReplicas": 0, "maxReplicas": 5,
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker", "250m", "1Gi")]}}
            }]
        }
    });
    if let (Value::Object(spec), Value::Object(extra)) = (&mut spec, extra) {
        spec.extend(extra);
    }
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a valid RayJob")
}

/// The Ray dashboard of RayJob `job`'s current cluster, through the RayJob's head Service by
/// its cluster DNS name, as the submitter and the reconciler reach it.
fn job_dashboard(ns: &TestNamespace, job: &str) -> Dashboard {
    Dashboard::new(&format!(
        "http://{job}-head-svc.{}.svc.cluster.local:8265",
        ns.name()
    ))
}

async fn create(ns: &TestNamespace, job: &RayJob) {
    ns.api::<RayJob>()
        .create(&PostParams::default(), job)
        .await
        .unwrap_or_else(|e| panic!("create RayJob: {e}"));
}

/// Waits until the RayJob's status satisfies `done` and returns it.
async fn wait_status(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    done: impl Fn(&raygate_api::ray::v1::RayJobStatus) -> bool,
) -> raygate_api::ray::v1::RayJobStatus {
    let api = ns.api::<RayJob>();
    ns.wait_for(what, RUN, || async {
        let job = api.get(name).await?;
        Ok(job.status.filter(&done))
    })
    .await
}

/// Waits until the RayJob is `Complete` and returns its status, failing with the namespace's
/// state unless its Ray job `SUCCEEDED`.
async fn wait_succeeded(ns: &TestNamespace, name: &str) -> raygate_api::ray::v1::RayJobStatus {
    let done = wait_status(ns, name, "the RayJob to be Complete", |s| {
        s.job_deployment_status.as_deref() == Some("Complete")
    })
    .await;
    assert_eq!(
        done.job_status.as_deref(),
        Some("SUCCEEDED"),
        "{}",
        ns.dump().await
    );
    done
}

/// The Events about object `name` in the test namespace.
async fn events_about(ns: &TestNamespace, name: &str) -> kube::Result<Vec<Event>> {
    let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
    Ok(ns.api::<Event>().list(&about).await?.items)
}

/// Pods with `label=value`.
async fn pods(ns: &TestNamespace, selector: &str) -> Vec<Pod> {
    ns.api::<Pod>()
        .list(&ListParams::default().labels(selector))
        .await
        .expect("list pods")
        .items
}
