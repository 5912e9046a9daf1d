//! Whole RayJob lifecycles: success with gang scheduling and TTL cleanup, retries, deletion,
//! HTTPMode.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, Service};
use kube::api::DeleteParams;
use raygate_api::keys::{NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE};
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::PodGroup;
use raygate_e2e::ray::Dashboard;
use raygate_e2e::{Env, TestNamespace, kubectl};
use serde_json::json;

use super::{RUN, create, events_about, job_dashboard, pods, ray_job, wait_status, wait_succeeded};

pub(super) const OPT_IN: [(&str, &str); 1] = [(NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE)];

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Every pod is bound by Volcano into `ray-<job>-pg` as task `task` (or any task when `None`).
pub(super) fn assert_gang_bound(pods: &[Pod], job: &str, task: Option<&str>, dump: &str) {
    for pod in pods {
        let spec = pod.spec.as_ref().unwrap();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        assert_eq!(
            spec.scheduler_name.as_deref(),
            Some("volcano"),
            "{name}\n{dump}"
        );
        assert!(spec.node_name.is_some(), "{name} is not bound\n{dump}");
        assert_eq!(
            annotation(pod, "scheduling.k8s.io/group-name"),
            Some(format!("ray-{job}-pg").as_str()),
            "{name}\n{dump}"
        );
        if let Some(task) = task {
            assert_eq!(
                annotation(pod, "volcano.sh/task-spec"),
                Some(task),
                "{name}\n{dump}"
            );
        }
    }
}

/// The Pod's Ray container has raygate's readiness probe on the agent's health endpoint, and
/// the kubelet marked the Pod Ready only once it answered: not before the probe's 10 s
/// initial delay after the container started.
fn assert_ready_only_after_ray_answered(pod: &Pod) {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let probe = container
        .readiness_probe
        .as_ref()
        .and_then(|p| p.http_get.as_ref())
        .unwrap_or_else(|| panic!("{name}: no HTTP readiness probe"));
    assert_eq!(probe.path.as_deref(), Some("/api/healthz"), "{name}");
    let status = pod.status.as_ref().unwrap();
    let started = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == container.name)
        .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.clone())
        .unwrap_or_else(|| panic!("{name}: the Ray container is not running"));
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| panic!("{name}: not Ready"));
    let waited = ready.0.as_second() - started.0.as_second();
    assert!(
        waited >= 10,
        "{name}: Ready {waited} s after its Ray container started, before the probe could pass"
    );
}

/// A worker Pod's `wait-gcs-ready` init container ran, found the head's GCS and exited 0, and
/// the Ray container started only after it.
pub(super) fn assert_waited_for_the_gcs(pod: &Pod) {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.as_ref().unwrap();
    let waited = status
        .init_container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == "wait-gcs-ready")
        .and_then(|c| c.state.as_ref()?.terminated.clone())
        .unwrap_or_else(|| panic!("{name}: no finished wait-gcs-ready init container"));
    assert_eq!(waited.exit_code, 0, "{name}: {waited:?}");
    let ray_started = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == "ray-worker")
        .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.clone())
        .unwrap_or_else(|| panic!("{name}: the Ray container is not running"));
    let gcs_found = waited
        .finished_at
        .unwrap_or_else(|| panic!("{name}: wait-gcs-ready has no finish time"));
    assert!(
        ray_started.0 >= gcs_found.0,
        "{name}: Ray started at {ray_started:?}, before the GCS answered at {gcs_found:?}"
    );
}

/// Every Pod is bound to one of the environment's real kubelet nodes.
pub(super) fn assert_on_real_nodes(pods: &[Pod], env: &Env, dump: &str) {
    let real = env.real_nodes();
    for pod in pods {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        assert!(
            node.is_some_and(|n| real.iter().any(|r| r == n)),
            "{name} is on {node:?}, not on a real node {real:?}\n{dump}"
        );
    }
}

/// What a newcomer does after the demo: a new namespace with only raygate's label, as
/// `kubectl` makes it, and the README's example RayJob applied there. Its Pods land on the real
/// nodes with nothing else asked of the user, and it runs to the end.
#[tokio::test]
async fn the_example_rayjob_completes_on_real_nodes_in_a_namespace_with_only_the_label() {
    let env = Env::load();
    let ns = TestNamespace::plain(&env, "rayjob-plain", &OPT_IN).await;
    let example = raygate_e2e::examples::example("rayjob.yaml");
    kubectl::stdout(&["apply", "-n", ns.name(), "-f", example.path_str()]).await;

    let running = wait_status(&ns, "rayjob-sample", "the RayJob to be Running", |s| {
        s.job_deployment_status.as_deref() == Some("Running")
    })
    .await;
    let cluster = running.ray_cluster_name.clone().unwrap();
    let ray_pods = pods(&ns, &format!("ray.io/cluster={cluster}")).await;
    let dump = ns.dump().await;
    assert_eq!(ray_pods.len(), 3, "head + 2 workers\n{dump}");
    assert_gang_bound(&ray_pods, "rayjob-sample", None, &dump);
    assert_on_real_nodes(&ray_pods, &env, &dump);

    wait_succeeded(&ns, "rayjob-sample").await;
    let submitter_pods = pods(&ns, "job-name=rayjob-sample").await;
    assert_eq!(submitter_pods.len(), 1, "{}", ns.dump().await);
    assert_on_real_nodes(&submitter_pods, &env, "");
}

#[tokio::test]
async fn a_rayjob_runs_gang_scheduled_to_success_and_its_cluster_goes_after_the_ttl() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-happy", &OPT_IN).await;
    let job = ray_job(
        "demo",
        "python -c \"print('hello from raygate')\"",
        2,
        json!({"shutdownAfterJobFinishes": true, "ttlSecondsAfterFinished": 10}),
    );
    create(&ns, &job).await;

    let pod_groups = ns.api::<PodGroup>();
    let pg = ns
        .wait_for("PodGroup ray-demo-pg", RUN, || async {
            Ok(pod_groups.get_opt("ray-demo-pg").await?)
        })
        .await;
    assert_eq!(
        pg.spec.min_member,
        Some(3),
        "head + 2 workers, not the submitter"
    );
    let resources: BTreeMap<String, String> = pg
        .spec
        .min_resources
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    assert_eq!(
        resources,
        BTreeMap::from([
            ("cpu".to_string(), "1500m".to_string()),
            ("memory".to_string(), "4296Mi".to_string())
        ]),
        "head + 2 × worker + the default submitter (500m, 200Mi)"
    );
    let owner = &pg.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("RayJob", "demo")
    );

    let running = wait_status(&ns, "demo", "the RayJob to be Running", |s| {
        s.job_deployment_status.as_deref() == Some("Running")
    })
    .await;
    let cluster = running.ray_cluster_name.clone().unwrap();
    let submission = running.job_id.clone().unwrap();
    assert!(
        cluster.starts_with("demo-") && cluster.len() == 10,
        "{cluster}"
    );
    assert!(
        submission.starts_with("demo-") && submission.len() == 10,
        "{submission}"
    );
    assert_eq!(
        running.dashboard_url.as_deref(),
        Some(format!("{cluster}-head-svc.{}.svc.cluster.local:8265", ns.name()).as_str())
    );
    let ray_pods = pods(&ns, &format!("ray.io/cluster={cluster}")).await;
    assert_eq!(ray_pods.len(), 3, "{}", ns.dump().await);
    assert_gang_bound(&ray_pods, "demo", None, &ns.dump().await);
    for pod in &ray_pods {
        assert_ready_only_after_ray_answered(pod);
        if pod.metadata.labels.as_ref().unwrap()["ray.io/node-type"] == "worker" {
            assert_waited_for_the_gcs(pod);
        }
    }
    let head_service = job_head_service_selecting(&ns, "demo", &cluster).await;
    let labels = head_service.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels,
        BTreeMap::from([
            ("ray.io/identifier".to_string(), "demo-head".to_string()),
            ("ray.io/node-type".to_string(), "head".to_string()),
            (
                "ray.io/originated-from-cr-name".to_string(),
                "demo".to_string()
            ),
            (
                "ray.io/originated-from-crd".to_string(),
                "RayJob".to_string()
            ),
        ])
    );
    let owner = &head_service.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("RayJob", "demo", Some(true))
    );
    let spec = head_service.spec.clone().unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    let ports: Vec<(String, i32)> = spec
        .ports
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.name.unwrap_or_default(), p.port))
        .collect();
    assert!(
        ports.contains(&("dashboard".to_string(), 8265)),
        "{ports:?}"
    );

    let done = wait_status(&ns, "demo", "the RayJob to be Complete", |s| {
        s.job_deployment_status.as_deref() == Some("Complete")
    })
    .await;
    assert_eq!(done.job_status.as_deref(), Some("SUCCEEDED"));
    assert_eq!((done.succeeded, done.failed), (Some(1), Some(0)));
    assert!(done.end_time.is_some() && done.start_time.is_some());
    assert!(done.ray_job_info.as_ref().unwrap().end_time.is_some());

    let submitter_pods = pods(&ns, "job-name=demo").await;
    assert_eq!(submitter_pods.len(), 1, "{}", ns.dump().await);
    assert_gang_bound(&submitter_pods, "demo", Some("submittergroup"), "");

    let dashboard = job_dashboard(&ns, "demo");
    let ray = dashboard.job(&submission).await.expect("Ray knows the job");
    assert_eq!(ray["status"], "SUCCEEDED", "{ray}");
    let logs = dashboard
        .get(&format!("/api/jobs/{submission}/logs"))
        .await
        .expect("logs");
    assert!(logs.body.contains("hello from raygate"), "{}", logs.body);

    let clusters = ns.api::<RayCluster>();
    ns.wait_for(
        "the RayCluster to be deleted after the TTL",
        RUN,
        || async { Ok(clusters.get_opt(&cluster).await?.is_none().then_some(())) },
    )
    .await;
    assert!(ns.api::<RayJob>().get_opt("demo").await.unwrap().is_some());
    assert!(ns.api::<Job>().get_opt("demo").await.unwrap().is_some());
    let pg = ns
        .wait_for("the PodGroup to be zeroed", RUN, || async {
            let pg = pod_groups.get("ray-demo-pg").await?;
            // Absent and 0 are the same: Volcano writes PodGroups back with Go's omitempty.
            Ok((pg.spec.min_member.unwrap_or(0) == 0).then_some(pg))
        })
        .await;
    assert_eq!(pg.spec.min_resources.unwrap_or_default(), BTreeMap::new());
}

/// Waits until the RayJob head Service `<job>-head-svc` selects the head of `cluster`.
async fn job_head_service_selecting(ns: &TestNamespace, job: &str, cluster: &str) -> Service {
    let services = ns.api::<Service>();
    let name = format!("{job}-head-svc");
    ns.wait_for(
        &format!("Service {name} to select {cluster}"),
        RUN,
        || async {
            let service = services.get_opt(&name).await?;
            Ok(service.filter(|s| {
                let selector = s.spec.as_ref().and_then(|s| s.selector.clone());
                selector.is_some_and(|sel| {
                    sel.get("ray.io/cluster").map(String::as_str) == Some(cluster)
                        && sel.get("ray.io/node-type").map(String::as_str) == Some("head")
                })
            }))
        },
    )
    .await
}

#[tokio::test]
async fn a_failing_entrypoint_is_retried_on_a_new_cluster_then_fails() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-retry", &OPT_IN).await;
    create(
        &ns,
        &ray_job(
            "flaky",
            "python -c 'exit(3)'",
            1,
            json!({"backoffLimit": 1}),
        ),
    )
    .await;
    let first = wait_status(&ns, "flaky", "the first attempt to run", |s| {
        s.job_deployment_status.as_deref() == Some("Running")
    })
    .await;
    wait_status(&ns, "flaky", "the RayJob to count the failure", |s| {
        s.failed == Some(1)
    })
    .await;
    // Retrying with reason AppFailed lasts only until the first cluster is torn down, which
    // can be quicker than a poll; the Warning Event announcing it stays.
    let retry = ns
        .wait_for("the Warning Event of the retry", RUN, || async {
            Ok(events_about(&ns, "flaky").await?.into_iter().find(|e| {
                e.reason.as_deref() == Some("Retrying") && e.type_.as_deref() == Some("Warning")
            }))
        })
        .await;
    assert!(
        retry.message.as_deref().is_some_and(|m| m
            .starts_with("RayJob deployment status changed from Running to Retrying: AppFailed: ")),
        "{retry:?}"
    );
    let second = wait_status(&ns, "flaky", "the second attempt to run", |s| {
        s.failed == Some(1)
            && s.job_deployment_status.as_deref() == Some("Running")
            && s.ray_cluster_name.is_some()
            && s.ray_cluster_name != first.ray_cluster_name
    })
    .await;
    assert_ne!(
        second.job_id, first.job_id,
        "a new submission id per attempt"
    );
    let old_cluster = first.ray_cluster_name.clone().unwrap();
    let new_cluster = second.ray_cluster_name.clone().unwrap();
    let retargeted = job_head_service_selecting(&ns, "flaky", &new_cluster).await;
    assert_eq!(
        retargeted.spec.unwrap().cluster_ip.as_deref(),
        Some("None"),
        "the same headless Service, its selector moved"
    );
    assert!(
        ns.api::<RayCluster>()
            .get_opt(&old_cluster)
            .await
            .unwrap()
            .is_none(),
        "the first attempt's cluster is gone before the second runs"
    );
    assert!(
        pods(&ns, &format!("ray.io/cluster={old_cluster}"))
            .await
            .iter()
            .all(|p| p.metadata.deletion_timestamp.is_some()),
        "{}",
        ns.dump().await
    );
    let failed = wait_status(&ns, "flaky", "the RayJob to fail for good", |s| {
        s.job_deployment_status.as_deref() == Some("Failed")
    })
    .await;
    assert_eq!(failed.failed, Some(2));
    assert_eq!(failed.job_status.as_deref(), Some("FAILED"));
    assert_eq!(failed.reason.as_deref(), Some("AppFailed"));
    // The second attempt's cluster stays (shutdownAfterJobFinishes is false): its Ray knows
    // exactly one submission, the second one, and it failed; the first went with its cluster.
    let dashboard = job_dashboard(&ns, "flaky");
    let id = second.job_id.as_deref().unwrap();
    let ray = dashboard
        .job(id)
        .await
        .expect("Ray knows the second attempt");
    assert_eq!(ray["status"], "FAILED", "{ray}");
    assert_eq!(
        submission_ids(&dashboard).await,
        [id],
        "one Ray submission per attempt"
    );
}

#[tokio::test]
async fn deleting_a_running_rayjob_stops_its_ray_job() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-delete", &OPT_IN).await;
    create(
        &ns,
        &ray_job(
            "long",
            "python -c 'import time; time.sleep(600)'",
            1,
            json!({}),
        ),
    )
    .await;
    let dashboard = job_dashboard(&ns, "long");
    let running = wait_status(&ns, "long", "the Ray job to be RUNNING", |s| {
        s.job_status.as_deref() == Some("RUNNING")
    })
    .await;
    let submission = running.job_id.unwrap();
    ns.api::<RayJob>()
        .delete("long", &DeleteParams::default())
        .await
        .expect("delete the RayJob");
    // The finalizer stops the Ray job before the RayJob (and with it the cluster) goes. It
    // removes itself once Ray has acknowledged the stop, as KubeRay's does, so on a loaded
    // machine the cluster can be gone before a poll sees STOPPED: Ray's acknowledgement in the
    // environment's reconciler log (`stopped=true`) is then the evidence.
    let acknowledged = |log: &str| {
        log.lines().any(|line| {
            line.contains("Ray job stop requested")
                && line.contains(&format!("submission_id={submission} "))
                && line.ends_with("stopped=true")
        })
    };
    ns.wait_for("Ray to report STOPPED", RUN, || async {
        match dashboard.job(&submission).await {
            Ok(ray) if ray["status"] == "STOPPED" => Ok(Some(())),
            _ if acknowledged(&raygate_e2e::reconciler::environment_log(&env).await) => {
                Ok(Some(()))
            }
            Ok(_) => Ok(None),
            Err(error) => Err(error),
        }
    })
    .await;
    let jobs = ns.api::<RayJob>();
    ns.wait_for("the RayJob to disappear", RUN, || async {
        Ok(jobs.get_opt("long").await?.is_none().then_some(()))
    })
    .await;
}

#[tokio::test]
async fn http_mode_submits_the_job_itself() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-http", &OPT_IN).await;
    create(
        &ns,
        &ray_job(
            "web",
            "python -c \"print('submitted over http')\"",
            1,
            json!({"submissionMode": "HTTPMode"}),
        ),
    )
    .await;
    let pg = ns
        .wait_for("PodGroup ray-web-pg", RUN, || async {
            Ok(ns.api::<PodGroup>().get_opt("ray-web-pg").await?)
        })
        .await;
    assert_eq!(pg.spec.min_member, Some(2));
    assert_eq!(
        pg.spec.min_resources.unwrap()["cpu"].0,
        "750m",
        "no submitter Pod in HTTPMode"
    );
    let done = wait_status(&ns, "web", "the RayJob to be Complete", |s| {
        s.job_deployment_status.as_deref() == Some("Complete")
    })
    .await;
    assert_eq!(done.job_status.as_deref(), Some("SUCCEEDED"));
    assert!(
        ns.api::<Job>().get_opt("web").await.unwrap().is_none(),
        "HTTPMode has no submitter Job"
    );
    let dashboard = job_dashboard(&ns, "web");
    let id = done.job_id.unwrap();
    let logs = dashboard
        .get(&format!("/api/jobs/{id}/logs"))
        .await
        .expect("logs");
    assert!(logs.body.contains("submitted over http"), "{}", logs.body);
}

async fn patch_spec(ns: &TestNamespace, name: &str, spec: serde_json::Value) {
    ns.api::<RayJob>()
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": spec})),
        )
        .await
        .unwrap_or_else(|e| panic!("patch RayJob {name}: {e}"));
}

#[tokio::test]
async fn suspend_deletes_the_cluster_and_resume_starts_a_new_one() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-suspend", &OPT_IN).await;
    create(
        &ns,
        &ray_job(
            "pausable",
            "python -c 'import time; time.sleep(60)'",
            1,
            json!({"shutdownAfterJobFinishes": true}),
        ),
    )
    .await;
    let first = wait_status(&ns, "pausable", "the first run", |s| {
        s.job_deployment_status.as_deref() == Some("Running")
    })
    .await;
    patch_spec(&ns, "pausable", json!({"suspend": true})).await;
    let suspended = wait_status(&ns, "pausable", "the RayJob to be Suspended", |s| {
        s.job_deployment_status.as_deref() == Some("Suspended")
    })
    .await;
    assert_eq!(suspended.ray_cluster_name, None);
    let old = first.ray_cluster_name.clone().unwrap();
    assert!(
        ns.api::<RayCluster>()
            .get_opt(&old)
            .await
            .unwrap()
            .is_none(),
        "no cluster while suspended"
    );
    assert!(ns.api::<Job>().get_opt("pausable").await.unwrap().is_none());
    let pg = ns.api::<PodGroup>().get("ray-pausable-pg").await.unwrap();
    assert_eq!(
        pg.spec.min_member.unwrap_or(0),
        0,
        "a suspended RayJob holds no gang"
    );
    patch_spec(&ns, "pausable", json!({"suspend": false})).await;
    let resumed = wait_status(&ns, "pausable", "the resumed run", |s| {
        s.job_deployment_status.as_deref() == Some("Running")
            && s.ray_cluster_name.is_some()
            && s.ray_cluster_name != first.ray_cluster_name
    })
    .await;
    assert_ne!(resumed.job_id, first.job_id);
    let pg = ns.api::<PodGroup>().get("ray-pausable-pg").await.unwrap();
    assert_eq!(pg.spec.min_member, Some(2), "the gang is back");
}

#[tokio::test]
async fn interactive_mode_follows_the_job_the_user_submitted() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-interactive", &OPT_IN).await;
    create(
        &ns,
        &ray_job(
            "chat",
            "python -c 'print(0)'",
            1,
            json!({"submissionMode": "InteractiveMode"}),
        ),
    )
    .await;
    let waiting = wait_status(&ns, "chat", "the RayJob to wait for a job id", |s| {
        s.job_deployment_status.as_deref() == Some("Waiting")
    })
    .await;
    assert_eq!(waiting.job_id, None);
    let id = format!("{}-by-hand", ns.name());
    // InteractiveMode has no RayJob head Service: the user submits through the cluster's.
    let url = waiting
        .dashboard_url
        .as_deref()
        .expect("a dashboard URL once Waiting");
    let dashboard = Dashboard::new(&format!("http://{url}"));
    let answer = dashboard
        .submit(&id, "python -c \"print('interactive')\"")
        .await
        .expect("submit");
    assert_eq!(answer.status, 200, "{}", answer.body);
    patch_spec(&ns, "chat", json!({"jobId": id})).await;
    let done = wait_status(&ns, "chat", "the RayJob to be Complete", |s| {
        s.job_deployment_status.as_deref() == Some("Complete")
    })
    .await;
    assert_eq!(done.job_status.as_deref(), Some("SUCCEEDED"));
    assert_eq!(done.job_id.as_deref(), Some(id.as_str()));
}

#[tokio::test]
async fn a_killed_head_container_ends_complete_with_one_submission_per_attempt() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-head-kill", &OPT_IN).await;
    create(
        &ns,
        &ray_job(
            "crash",
            "python -c 'import time; time.sleep(25); print(\"survived\")'",
            0,
            json!({"backoffLimit": 1}),
        ),
    )
    .await;
    let first = wait_status(&ns, "crash", "the Ray job to be RUNNING", |s| {
        s.job_status.as_deref() == Some("RUNNING")
    })
    .await;
    let cluster = first.ray_cluster_name.clone().unwrap();
    let head_selector = format!("ray.io/cluster={cluster},ray.io/node-type=head");
    let heads = pods(&ns, &head_selector).await;
    assert_eq!(heads.len(), 1, "{}", ns.dump().await);
    let head = &heads[0];
    let node = head
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap();
    let container = ray_head_status(head)
        .and_then(|c| c.container_id.clone())
        .expect("the head container's id");
    let id = container
        .strip_prefix("containerd://")
        .expect("a containerd container id");
    // SIGKILL through containerd, as the OOM killer would: the API server learns of it only
    // from the kubelet.
    let killed = tokio::process::Command::new("ctr")
        .arg("--address")
        .arg(env.containerd_socket(&node))
        .args([
            "--namespace",
            "k8s.io",
            "tasks",
            "kill",
            "--signal",
            "SIGKILL",
            id,
        ])
        .output()
        .await
        .expect("running ctr");
    assert!(
        killed.status.success(),
        "ctr tasks kill: {}",
        String::from_utf8_lossy(&killed.stderr)
    );

    // As under KubeRay, one of two things follows, depending on which comes first: the head's
    // restart (the kubelet restarts the container in the same Pod, restartPolicy Always, with an
    // empty GCS) or the end of the submitter Job's own retries (each of its Pods tails the lost
    // job or meets the restarting head and fails). Either way each attempt has exactly one Ray
    // submission, and the RayJob completes.
    let done = wait_status(&ns, "crash", "the RayJob to be Complete", |s| {
        s.job_deployment_status.as_deref() == Some("Complete")
    })
    .await;
    assert_eq!(done.job_status.as_deref(), Some("SUCCEEDED"));
    let submissions = submission_ids(&job_dashboard(&ns, "crash")).await;
    let submitters = pods(&ns, "job-name=crash").await;
    let phases: Vec<_> = submitters
        .iter()
        .filter_map(|p| p.status.as_ref()?.phase.clone())
        .collect();
    if done.ray_cluster_name == first.ray_cluster_name {
        // The head came back first: the submitter Job's retry submitted the same submission id
        // to the new GCS, where it ran to the end. One RayJob attempt, one cluster, no failure
        // counted.
        assert_eq!(done.job_id, first.job_id);
        assert_eq!(done.failed.unwrap_or(0), 0, "{done:?}");
        let restarted = pods(&ns, &head_selector).await;
        let uids: Vec<_> = restarted.iter().map(|p| p.metadata.uid.as_ref()).collect();
        assert_eq!(uids, [head.metadata.uid.as_ref()], "the same head Pod");
        let restarts = ray_head_status(&restarted[0]).map(|c| c.restart_count);
        assert_eq!(restarts, Some(1), "{}", ns.dump().await);
        assert!(
            phases.contains(&"Failed".to_string()) && phases.contains(&"Succeeded".to_string()),
            "the submitter Pod of the lost job failed and its retry succeeded: {phases:?}"
        );
        assert_eq!(
            submissions,
            [first.job_id.clone().unwrap()],
            "the new GCS knows one submission, the resubmitted one"
        );
    } else {
        // The submitter Job gave up first: the attempt failed, and backoffLimit 1 retried the
        // RayJob on a new cluster with a new submission id, its only submission.
        assert_eq!(done.failed, Some(1), "one failed attempt: {done:?}");
        assert_ne!(
            done.job_id, first.job_id,
            "a new submission id for the retry"
        );
        assert!(
            phases.contains(&"Succeeded".to_string()),
            "the retry's submitter succeeded: {phases:?}"
        );
        assert_eq!(
            submissions,
            [done.job_id.clone().unwrap()],
            "the retry's cluster knows one submission"
        );
    }
}

#[tokio::test]
async fn a_multi_host_worker_group_joins_the_cluster_with_every_host() {
    let env = Env::load();
    let ns = TestNamespace::on_real_nodes(&env, "rayjob-multihost", &OPT_IN).await;
    let mut job = ray_job(
        "slice",
        "python -c \"import ray; ray.init(); print('alive nodes:', sum(n['Alive'] for n in ray.nodes()))\"",
        1,
        // HTTPMode: no submitter Pod, so the cluster (1 CPU) fits beside another test's.
        json!({"submissionMode": "HTTPMode"}),
    );
    let groups = job
        .spec
        .ray_cluster_spec
        .as_mut()
        .and_then(|c| c.worker_group_specs.as_mut())
        .expect("a worker group");
    groups[0].num_of_hosts = Some(2);
    create(&ns, &job).await;
    let pg = ns
        .wait_for("PodGroup ray-slice-pg", RUN, || async {
            Ok(ns.api::<PodGroup>().get_opt("ray-slice-pg").await?)
        })
        .await;
    assert_eq!(pg.spec.min_member, Some(3), "head + 1 replica of 2 hosts");
    let done = wait_status(&ns, "slice", "the RayJob to be Complete", |s| {
        s.job_deployment_status.as_deref() == Some("Complete")
    })
    .await;
    assert_eq!(done.job_status.as_deref(), Some("SUCCEEDED"));
    let cluster = done.ray_cluster_name.clone().unwrap();
    let workers = pods(
        &ns,
        &format!("ray.io/cluster={cluster},ray.io/node-type=worker"),
    )
    .await;
    assert_eq!(workers.len(), 2, "{}", ns.dump().await);
    let id = done.job_id.unwrap();
    let logs = job_dashboard(&ns, "slice")
        .get(&format!("/api/jobs/{id}/logs"))
        .await
        .expect("logs");
    assert!(
        logs.body.contains("alive nodes: 3"),
        "the head and both hosts of the replica are alive Ray nodes: {}",
        logs.body
    );
}

/// The status of a head Pod's `ray-head` container.
fn ray_head_status(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "ray-head")
}

/// The submission ids of every job the cluster's Ray knows.
async fn submission_ids(dashboard: &Dashboard) -> Vec<String> {
    let listed = dashboard.get("/api/jobs/").await.expect("the job list");
    listed
        .json()
        .expect("a JSON job list")
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|j| j["submission_id"].as_str().map(str::to_string))
        .collect()
}
