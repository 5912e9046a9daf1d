//! The submitter runner: Job pods really run, and the Job controller sees their exit codes.

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec};
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};
use raygate_e2e::{Env, TestNamespace};

use super::SETTLE;

/// A Job (no retries) whose one container runs `command`, scheduled by `scheduler`.
fn job(name: &str, scheduler: &str, command: &[&str]) -> Job {
    Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    scheduler_name: Some(scheduler.into()),
                    restart_policy: Some("Never".into()),
                    containers: vec![Container {
                        name: "submitter".into(),
                        image: Some("rayproject/ray:2.60.0".into()),
                        command: Some(command.iter().map(|s| s.to_string()).collect()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    }
}

/// Waits for the Job's `Complete` or `Failed` condition and returns its type.
async fn finished(ns: &TestNamespace, name: &str) -> String {
    let jobs: Api<Job> = ns.api();
    ns.wait_for(
        &format!("Job {name} to complete or fail"),
        SETTLE,
        || async {
            let job = jobs.get(name).await?;
            let conditions = job.status.and_then(|s| s.conditions).unwrap_or_default();
            Ok(conditions
                .into_iter()
                .find(|c| c.status == "True" && (c.type_ == "Complete" || c.type_ == "Failed"))
                .map(|c| c.type_))
        },
    )
    .await
}

/// The Job's pods.
async fn pods_of(ns: &TestNamespace, name: &str) -> Vec<Pod> {
    ns.api::<Pod>()
        .list(&ListParams::default().labels(&format!("job-name={name}")))
        .await
        .expect("list the Job's pods")
        .items
}

/// Container 0's terminated exit code.
fn exit_code(pod: &Pod) -> Option<i32> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    Some(
        statuses
            .first()?
            .state
            .as_ref()?
            .terminated
            .as_ref()?
            .exit_code,
    )
}

#[tokio::test]
async fn job_running_ray_job_submit_completes() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-submitter-ok").await;
    let submit = [
        "ray",
        "job",
        "submit",
        "--address",
        "http://somewhere.example:8265",
        "--",
    ];
    let command: Vec<&str> = submit
        .into_iter()
        .chain(["python", "-c", "print(1)"])
        .collect();
    ns.api::<Job>()
        .create(&PostParams::default(), &job("submit", "volcano", &command))
        .await
        .expect("create Job");
    assert_eq!(
        finished(&ns, "submit").await,
        "Complete",
        "{}",
        ns.dump().await
    );
    let pods = pods_of(&ns, "submit").await;
    assert_eq!(pods.len(), 1, "{}", ns.dump().await);
    let phase = pods[0].status.as_ref().and_then(|s| s.phase.as_deref());
    assert_eq!((phase, exit_code(&pods[0])), (Some("Succeeded"), Some(0)));
    let status = &pods[0]
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        (status.name.as_str(), status.image.as_str()),
        ("submitter", "rayproject/ray:2.60.0")
    );
}

#[tokio::test]
async fn job_exiting_three_fails_with_that_exit_code() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-submitter-fail").await;
    ns.api::<Job>()
        .create(
            &PostParams::default(),
            &job("exit3", "default-scheduler", &["/bin/sh", "-c", "exit 3"]),
        )
        .await
        .expect("create Job");
    assert_eq!(
        finished(&ns, "exit3").await,
        "Failed",
        "{}",
        ns.dump().await
    );
    let pods = pods_of(&ns, "exit3").await;
    assert_eq!(pods.len(), 1, "{}", ns.dump().await);
    let phase = pods[0].status.as_ref().and_then(|s| s.phase.as_deref());
    assert_eq!((phase, exit_code(&pods[0])), (Some("Failed"), Some(3)));
}
