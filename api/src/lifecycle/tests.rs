//! The RayJob state machine, branch by branch, without a server.

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use std::collections::BTreeMap;

use super::*;
use crate::feasibility::NodeShape;
use crate::ray::v1::{RayClusterStatus, RayJobStatusInfo};

const NOW: i64 = 1_800_000_000;

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap())
}

fn job(extra_spec: &str) -> RayJob {
    let yaml = format!(
        r#"
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: demo
  namespace: ml
  uid: job-uid
  generation: 1
  resourceVersion: "7"
  finalizers: [ray.io/rayjob-finalizer]
  labels: {{volcano.sh/queue-name: research}}
spec:
  entrypoint: python -c 'print(1)'
{extra_spec}
  rayClusterSpec:
    rayVersion: "2.60.0"
    headGroupSpec:
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray:2.60.0
            resources:
              requests: {{cpu: "1", memory: 2Gi}}
    workerGroupSpecs:
    - groupName: small
      replicas: 2
      minReplicas: 0
      maxReplicas: 5
      template:
        spec:
          containers:
          - name: ray-worker
            image: rayproject/ray:2.60.0
            resources:
              requests: {{cpu: 500m, memory: 1Gi}}
"#
    );
    serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}"))
}

fn with_status(mut job: RayJob, status: serde_json::Value) -> RayJob {
    job.status = Some(serde_json::from_value(status).unwrap());
    job
}

fn running(job: RayJob) -> RayJob {
    with_status(
        job,
        json!({
            "jobDeploymentStatus": "Running",
            "jobStatus": "",
            "jobId": "demo-abcde",
            "rayClusterName": "demo-fghjk",
            "dashboardURL": "demo-fghjk-head-svc.ml.svc.cluster.local:8265",
            "startTime": at(NOW - 60),
            "failed": 0,
            "succeeded": 0,
        }),
    )
}

fn initializing(job: RayJob) -> RayJob {
    with_status(
        job,
        json!({
            "jobDeploymentStatus": "Initializing",
            "jobStatus": "",
            "jobId": "demo-abcde",
            "rayClusterName": "demo-fghjk",
            "startTime": at(NOW - 10),
            "failed": 0,
            "succeeded": 0,
        }),
    )
}

fn cluster_of(job: &RayJob, state: Option<&str>) -> RayCluster {
    let name = job
        .status
        .as_ref()
        .unwrap()
        .ray_cluster_name
        .clone()
        .unwrap();
    let mut cluster = ray_cluster_for_job(job, &name, "demo-abcde", true, false).unwrap();
    cluster.status = Some(RayClusterStatus {
        state: state.map(str::to_string),
        ..RayClusterStatus::default()
    });
    cluster
}

fn finished_submitter(kind: &str, at_seconds: i64) -> Job {
    Job {
        status: Some(JobStatus {
            conditions: Some(vec![JobCondition {
                type_: kind.into(),
                status: "True".into(),
                reason: Some("BackoffLimitExceeded".into()),
                message: Some("Job has reached the specified backoff limit".into()),
                last_transition_time: Some(at(at_seconds)),
                ..JobCondition::default()
            }]),
            ..JobStatus::default()
        }),
        ..Job::default()
    }
}

struct World {
    job: RayJob,
    config: LifecycleConfig,
    volcano: bool,
    cluster: Option<RayCluster>,
    submitter: Option<Job>,
    pod_group: Option<PodGroup>,
    queue: Option<Queue>,
    gang_pods: GangPods,
    nodes: Vec<NodeShape>,
    job_head_service: Option<Service>,
    ray_job: RayJobObservation,
    now: i64,
    validation_errors: Vec<String>,
}

impl World {
    fn new(job: RayJob) -> Self {
        World {
            job,
            config: LifecycleConfig::default(),
            volcano: false,
            cluster: None,
            submitter: None,
            pod_group: None,
            queue: Some(
                serde_json::from_value(json!({
                    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": "default"}, "spec": {}, "status": {"state": "Open"}}))
                .unwrap(),
            ),
            gang_pods: GangPods::default(),
            nodes: Vec::new(),
            job_head_service: None,
            ray_job: RayJobObservation::NotQueried,
            now: NOW,
            validation_errors: Vec::new(),
        }
    }

    fn decide(&self) -> Decision {
        let nodes = NodeKinds::from_shapes(self.nodes.iter().cloned());
        decide(&Snapshot {
            job: &self.job,
            now: Timestamp::from_second(self.now).unwrap(),
            config: &self.config,
            validation_errors: self.validation_errors.clone(),
            volcano: self.volcano,
            cluster: self.cluster.as_ref(),
            submitter: self.submitter.as_ref(),
            head_pod: None,
            pod_group: self.pod_group.as_ref(),
            sub_groups: true,
            queue: self.queue.as_ref(),
            gang_pods: self.gang_pods,
            nodes: &nodes,
            job_head_service: self.job_head_service.as_ref(),
            ray_job: self.ray_job.clone(),
            fresh: FreshSuffixes {
                cluster: "fghjk".into(),
                submission: "abcde".into(),
            },
        })
    }
}

fn status_of(decision: &Decision) -> Option<RayJobStatus> {
    decision.actions.iter().find_map(|a| match a {
        Action::UpdateStatus(s) => Some((**s).clone()),
        _ => None,
    })
}

fn kinds(decision: &Decision) -> Vec<&'static str> {
    decision
        .actions
        .iter()
        .map(|a| match a {
            Action::AddFinalizer => "AddFinalizer",
            Action::RemoveFinalizer => "RemoveFinalizer",
            Action::CreatePodGroup(_) => "CreatePodGroup",
            Action::ResizePodGroup(_) => "ResizePodGroup",
            Action::CreateRayCluster(_) => "CreateRayCluster",
            Action::CreateService(_) => "CreateService",
            Action::PatchService { .. } => "PatchService",
            Action::DeleteRayCluster { .. } => "DeleteRayCluster",
            Action::SuspendWorkerGroups { .. } => "SuspendWorkerGroups",
            Action::CreateSubmitterJob(_) => "CreateSubmitterJob",
            Action::DeleteSubmitterJob { .. } => "DeleteSubmitterJob",
            Action::SubmitRayJob { .. } => "SubmitRayJob",
            Action::StopRayJob { .. } => "StopRayJob",
            Action::DeleteRayJob => "DeleteRayJob",
            Action::UpdateStatus(_) => "UpdateStatus",
            Action::Event(_) => "Event",
        })
        .filter(|k| *k != "Event")
        .collect()
}

fn events(decision: &Decision) -> Vec<String> {
    decision
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Event(e) => Some(e.reason.clone()),
            _ => None,
        })
        .collect()
}

fn found(status: &str, end: Option<i64>) -> RayJobObservation {
    RayJobObservation::Found(RayJobDetails {
        status: status.into(),
        message: Some(format!("job is {status}")),
        start_time: Some((NOW - 30) * 1000),
        end_time: end.map(|e| e * 1000),
    })
}

#[test]
fn new_writes_identity_first_and_creates_the_gang_and_cluster_in_the_same_pass() {
    let mut job = job("");
    job.metadata.finalizers = None;
    let mut world = World::new(job);
    world.volcano = true;
    let decision = world.decide();
    assert_eq!(
        kinds(&decision),
        [
            "AddFinalizer",
            "UpdateStatus",
            "CreatePodGroup",
            "CreateRayCluster"
        ],
        "nothing is created before the identity it is named by is stored"
    );
    let Some(Action::CreateRayCluster(cluster)) = decision
        .actions
        .iter()
        .find(|a| matches!(a, Action::CreateRayCluster(_)))
    else {
        unreachable!()
    };
    assert_eq!(cluster.metadata.name.as_deref(), Some("demo-fghjk"));
    assert_eq!(
        events(&decision),
        ["CreatedPodGroup", "CreatedRayCluster"],
        "the creates are recorded, the step to Initializing is not"
    );
    let status = status_of(&decision).unwrap();
    assert_eq!(status.job_id.as_deref(), Some("demo-abcde"));
    assert_eq!(status.ray_cluster_name.as_deref(), Some("demo-fghjk"));
    assert_eq!(
        status.job_deployment_status.as_deref(),
        Some("Initializing")
    );
    assert_eq!(status.job_status.as_deref(), Some(""));
    assert_eq!(status.start_time, Some(at(NOW)));
    assert_eq!((status.failed, status.succeeded), (Some(0), Some(0)));
    assert_eq!(
        decision.requeue_after, None,
        "the new cluster's watch event wakes the next pass"
    );
}

#[test]
fn a_new_rayjob_on_a_selected_cluster_stops_after_its_identity() {
    let mut job = job("  clusterSelector: {ray.io/cluster: shared}");
    job.metadata.finalizers = None;
    let decision = World::new(job).decide();
    assert_eq!(
        kinds(&decision),
        ["AddFinalizer", "UpdateStatus"],
        "the selected cluster was not read by this pass"
    );
    assert!(
        events(&decision).is_empty(),
        "no RayClusterNotFound: {:?}",
        events(&decision)
    );
}

#[test]
fn new_uses_spec_job_id_and_selector_cluster_and_interactive_gets_no_id() {
    let world = World::new(job(
        "  jobId: mine\n  clusterSelector: {ray.io/cluster: shared}",
    ));
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_id.as_deref(), Some("mine"));
    assert_eq!(status.ray_cluster_name.as_deref(), Some("shared"));
    let world = World::new(job("  submissionMode: InteractiveMode"));
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_id, None);
}

#[test]
fn initializing_creates_the_pod_group_before_the_cluster_in_volcano_namespaces() {
    let mut world = World::new(initializing(job("")));
    world.volcano = true;
    let decision = world.decide();
    assert_eq!(kinds(&decision), ["CreatePodGroup", "CreateRayCluster"]);
    let Action::CreatePodGroup(pg) = &decision.actions[0] else {
        unreachable!()
    };
    assert_eq!(pg.metadata.name.as_deref(), Some("ray-demo-pg"));
    assert_eq!(
        pg.spec.min_member,
        Some(3),
        "head + 2 workers, not the submitter"
    );
    let resources: BTreeMap<_, _> = pg
        .spec
        .min_resources
        .clone()
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    assert_eq!(
        resources["cpu"], "2500m",
        "head 1 + 2×500m + submitter 500m"
    );
    let Action::CreateRayCluster(cluster) = &decision.actions[2] else {
        panic!("{:?}", decision.actions)
    };
    assert_eq!(cluster.metadata.name.as_deref(), Some("demo-fghjk"));
    let labels = cluster.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["ray.io/originated-from-crd"], "RayJob");
    assert_eq!(labels["ray.io/originated-from-cr-name"], "demo");
    assert_eq!(labels["ray.io/job-submission-mode"], "K8sJobMode");
    assert_eq!(labels["volcano.sh/queue-name"], "research");
    let annotations = cluster.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations["scheduling.k8s.io/group-name"], "ray-demo-pg");
    let owner = &cluster.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("RayJob", "job-uid")
    );
}

#[test]
fn outside_volcano_namespaces_there_is_no_pod_group() {
    let world = World::new(initializing(job("")));
    assert_eq!(kinds(&world.decide()), ["CreateRayCluster"]);
}

#[test]
fn initializing_mirrors_nothing_from_a_cluster_without_a_status_yet() {
    let mut world = World::new(initializing(job("")));
    let mut cluster = cluster_of(&world.job, None);
    cluster.status = None;
    world.cluster = Some(cluster);
    let decision = world.decide();
    assert!(kinds(&decision).is_empty(), "{:?}", kinds(&decision));
}

#[test]
fn initializing_waits_for_a_ready_cluster_copying_its_status() {
    let mut world = World::new(initializing(job("")));
    world.cluster = Some(cluster_of(&world.job, None));
    let decision = world.decide();
    assert_eq!(kinds(&decision), ["UpdateStatus"]);
    let status = status_of(&decision).unwrap();
    assert_eq!(
        status.job_deployment_status.as_deref(),
        Some("Initializing")
    );
    assert_eq!(status.ray_cluster_status, Some(RayClusterStatus::default()));
    assert_eq!(status.dashboard_url, None);
}

#[test]
fn a_change_of_the_mirrored_cluster_status_alone_is_written_at_most_two_seconds_late() {
    let mut started = initializing(job(""));
    started.status.as_mut().unwrap().start_time = Some(at(NOW - 1));
    let mut world = World::new(started);
    world.cluster = Some(cluster_of(&world.job, None));
    let held = world.decide();
    assert!(kinds(&held).is_empty(), "{:?}", kinds(&held));
    assert!(
        held.requeue_after
            .is_some_and(|after| after <= Duration::from_secs(2)),
        "{:?}",
        held.requeue_after
    );

    world.now = NOW + 1;
    let due = world.decide();
    assert_eq!(kinds(&due), ["UpdateStatus"]);
    assert_eq!(
        status_of(&due).unwrap().ray_cluster_status,
        Some(RayClusterStatus::default())
    );

    // A copy stored a second ago holds back the next change of the cluster's counts.
    world.now = NOW;
    let copied = RayClusterStatus {
        last_update_time: Some(at(NOW - 1)),
        ..RayClusterStatus::default()
    };
    world.job.status.as_mut().unwrap().ray_cluster_status = Some(copied);
    let mut counting = cluster_of(&world.job, None);
    counting.status.as_mut().unwrap().desired_worker_replicas = Some(2);
    world.cluster = Some(counting);
    assert!(kinds(&world.decide()).is_empty());

    // A transition is written at once, with the ready cluster's status in it as KubeRay has it.
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    let ready = world.decide();
    let status = status_of(&ready).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Running"));
    assert_eq!(
        status.ray_cluster_status.and_then(|s| s.state).as_deref(),
        Some("ready")
    );
}

#[test]
fn a_gang_whose_pods_are_still_being_made_is_no_wait_until_their_creation_fails() {
    let mut world = World::new(initializing(job("")));
    world.volcano = true;
    world.cluster = Some(cluster_of(&world.job, None));
    let mut pod_group = crate::sizing::ray_job_pod_group(&world.job).unwrap();
    // Volcano's first look at a new gang: no Pods yet.
    pod_group.status = Some(
        serde_json::from_value(json!({"phase": "Inqueue", "conditions": [{
            "type": "Unschedulable", "status": "True",
            "lastTransitionTime": at(NOW - 1), "reason": "NotEnoughTasks",
            "message": "Not enough valid tasks for gang-scheduling, valid: 0, min: 3"}]}))
        .unwrap(),
    );
    world.pod_group = Some(pod_group);
    world.gang_pods = GangPods {
        created: 1,
        bound: 0,
    };
    let decision = world.decide();
    assert!(events(&decision).is_empty(), "{:?}", events(&decision));
    let status = status_of(&decision).unwrap_or_else(|| world.job.status.clone().unwrap());
    assert_eq!(status.message, None);
    assert!(
        status
            .conditions
            .iter()
            .flatten()
            .all(|c| c.type_ != "GangPending"),
        "{:?}",
        status.conditions
    );

    // The cluster could not create the others: the gang waits for them, and says why.
    let mut cluster = cluster_of(&world.job, None);
    cluster.status = Some(crate::cluster::status::with_replica_failure(
        Default::default(),
        "FailedCreateWorkerPod",
        "create Pod w: exceeded quota: one-pod",
        &at(NOW),
    ));
    world.cluster = Some(cluster);
    let decision = world.decide();
    assert_eq!(events(&decision), ["WaitingForGang"]);
    let status = status_of(&decision).unwrap();
    let condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "GangPending")
        .expect("GangPending");
    assert!(
        condition
            .message
            .contains("and creating the others failed: create Pod w: exceeded quota: one-pod"),
        "{}",
        condition.message
    );
    assert!(
        status
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("Waiting for gang scheduling")),
        "{:?}",
        status.message
    );
}

#[test]
fn an_unschedulable_gang_is_explained_in_status_until_the_cluster_is_ready() {
    let mut world = World::new(initializing(job("")));
    world.volcano = true;
    world.cluster = Some(cluster_of(&world.job, None));
    let mut pod_group = crate::sizing::ray_job_pod_group(&world.job).unwrap();
    pod_group.status = Some(
        serde_json::from_value(json!({"phase": "Inqueue", "conditions": [{
            "type": "Unschedulable", "status": "True",
            "lastTransitionTime": at(NOW - 1), "reason": "NotEnoughResources",
            "message": "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable"}]}))
        .unwrap(),
    );
    world.pod_group = Some(pod_group.clone());
    // All three members exist (the message says so): the wait is for nodes.
    world.gang_pods = GangPods {
        created: 3,
        bound: 0,
    };
    let decision = world.decide();
    assert_eq!(kinds(&decision), ["UpdateStatus"]);
    // One Warning Event, the condition's: the cause with its numbers.
    assert_eq!(events(&decision), ["InsufficientNodeResources"]);
    let status = status_of(&decision).unwrap();
    assert_eq!(
        status.job_deployment_status.as_deref(),
        Some("Initializing")
    );
    let message = status.message.clone().unwrap();
    assert!(
        message.starts_with("Waiting for gang scheduling: Volcano cannot place all 3 Pods of PodGroup ray-demo-pg")
            && message.ends_with("NotEnoughResources: 3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable"),
        "{message}"
    );

    world.job.status = Some(status);
    let again = world.decide();
    assert!(again.actions.is_empty(), "same word, no write: {again:?}");

    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Running"));
    assert_eq!(status.message, None, "the explanation goes with the wait");

    world.cluster = Some(cluster_of(&world.job, None));
    world.pod_group = Some(crate::sizing::ray_job_pod_group(&world.job).unwrap());
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.message, None, "Volcano no longer objects");
}

#[test]
fn the_gang_pending_condition_names_the_cause_and_clears_when_the_gang_is_bound() {
    let mut world = World::new(initializing(job("")));
    world.volcano = true;
    world.cluster = Some(cluster_of(&world.job, None));
    world.pod_group = Some(crate::sizing::ray_job_pod_group(&world.job).unwrap());
    world.now = NOW;
    world.queue = Some(
        serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "default"}, "spec": {}, "status": {"state": "Closed"}}))
        .unwrap(),
    );
    let decision = world.decide();
    assert_eq!(events(&decision), ["QueueClosed"]);
    let status = status_of(&decision).unwrap();
    let conditions = status.conditions.clone().unwrap();
    assert_eq!(conditions.len(), 1);
    assert_eq!(
        (
            conditions[0].type_.as_str(),
            conditions[0].status.as_str(),
            conditions[0].reason.as_str()
        ),
        ("GangPending", "True", "QueueClosed")
    );
    assert!(
        conditions[0]
            .message
            .starts_with("queue research is Closed"),
        "{}",
        conditions[0].message
    );
    world.job.status = Some(status);
    assert!(world.decide().actions.is_empty(), "same cause, no write");

    // Volcano binds the gang: False with GangScheduled, and no Event.
    let mut bound = world.pod_group.clone().unwrap();
    bound.status = Some(serde_json::from_value(json!({"phase": "Running", "running": 3})).unwrap());
    world.pod_group = Some(bound);
    let decision = world.decide();
    assert!(events(&decision).is_empty(), "{decision:?}");
    let status = status_of(&decision).unwrap();
    let condition = &status.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "GangScheduled")
    );
    world.job.status = Some(status);
    assert!(world.decide().actions.is_empty());

    // A job that never waited gets no condition at all.
    let mut fresh = World::new(initializing(job("")));
    fresh.volcano = true;
    fresh.cluster = world.cluster.clone();
    fresh.pod_group = world.pod_group.clone();
    let status = status_of(&fresh.decide()).unwrap();
    assert_eq!(status.conditions, None);
}

#[test]
fn a_waiting_gang_condition_is_released_when_the_job_stops_holding_a_gang() {
    let mut world = World::new(initializing(job("")));
    world.volcano = true;
    world.cluster = Some(cluster_of(&world.job, None));
    world.pod_group = Some(crate::sizing::ray_job_pod_group(&world.job).unwrap());
    world.queue = None;
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(
        status.conditions.as_ref().unwrap()[0].reason,
        "QueueNotFound"
    );
    world.job.status = Some(status);
    world.job.spec.suspend = Some(true);
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Suspending"));
    let condition = &status.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (
            condition.status.as_str(),
            condition.reason.as_str(),
            condition.message.as_str()
        ),
        (
            "False",
            "GangReleased",
            "RayJob is Suspending: it holds no gang"
        )
    );
}

#[test]
fn a_ready_cluster_gets_the_submitter_and_running() {
    let mut world = World::new(initializing(job("")));
    world.volcano = true;
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    world.pod_group = Some(crate::sizing::ray_job_pod_group(&world.job).unwrap());
    let decision = world.decide();
    assert_eq!(kinds(&decision), ["CreateSubmitterJob", "UpdateStatus"]);
    assert_eq!(
        events(&decision),
        ["CreatedRayJobSubmitter"],
        "the submitter's creation is recorded, the step to Running is not"
    );
    let status = status_of(&decision).unwrap();
    assert_eq!(
        status.dashboard_url.as_deref(),
        Some("demo-fghjk-head-svc.ml.svc.cluster.local:8265")
    );
    assert_eq!(status.job_deployment_status.as_deref(), Some("Running"));
    let Action::CreateSubmitterJob(submitter) = &decision.actions[0] else {
        unreachable!()
    };
    assert_eq!(submitter.metadata.name.as_deref(), Some("demo"));
    let spec = submitter.spec.as_ref().unwrap();
    assert_eq!(spec.backoff_limit, Some(2));
    let pod = spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.scheduler_name.as_deref(), Some("volcano"));
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let annotations = spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap();
    assert_eq!(annotations["volcano.sh/task-spec"], "submittergroup");
    assert_eq!(annotations["scheduling.k8s.io/group-name"], "ray-demo-pg");
    let container = &pod.containers[0];
    assert_eq!(container.name, "ray-job-submitter");
    assert_eq!(container.image.as_deref(), Some("rayproject/ray:2.60.0"));
    assert_eq!(
        container.command.as_deref().unwrap(),
        ["/bin/bash", "-ce", "--"]
    );
    let args = &container.args.as_ref().unwrap()[0];
    assert!(args.starts_with("until python -c \"import urllib.request; r=urllib.request.urlopen('http://demo-fghjk-head-svc.ml.svc.cluster.local:8265/api/gcs_healthz', timeout=10)"), "{args}");
    assert!(args.contains("if ! ray job status --address http://demo-fghjk-head-svc.ml.svc.cluster.local:8265 demo-abcde >/dev/null 2>&1 ; then ray job submit --address http://demo-fghjk-head-svc.ml.svc.cluster.local:8265 --no-wait --submission-id demo-abcde -- python -c 'print(1)' ; fi ; ray job logs --address http://demo-fghjk-head-svc.ml.svc.cluster.local:8265 --follow demo-abcde"), "{args}");
    let env: Vec<(&str, &str)> = container
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or_default()))
        .collect();
    assert_eq!(
        env,
        [
            ("PYTHONUNBUFFERED", "1"),
            (
                "RAY_DASHBOARD_ADDRESS",
                "demo-fghjk-head-svc.ml.svc.cluster.local:8265"
            ),
            ("RAY_JOB_SUBMISSION_ID", "demo-abcde"),
        ]
    );
}

#[test]
fn submit_command_matches_kuberays_example() {
    let job = job(
        "  runtimeEnvYAML: \"pip: [requests]\"\n  entrypointNumCpus: 1\n  metadata: {owner: feas}\n  entrypointResources: '{\"a\": 1}'",
    );
    let tokens = submit_command(
        &job,
        SubmissionMode::K8sJob,
        "demo-x7k2p-head-svc.ml.svc.cluster.local:8265",
        "demo-q9z4m",
        0,
        true,
    )
    .unwrap();
    let text = tokens.join(" ");
    assert_eq!(
        text,
        "until python -c \"import urllib.request; r=urllib.request.urlopen('http://demo-x7k2p-head-svc.ml.svc.cluster.local:8265/api/gcs_healthz', timeout=10); exit(0 if b'success' in r.read() else 1)\" >/dev/null 2>&1 ; do echo \"Waiting for Ray Dashboard GCS to become healthy at http://demo-x7k2p-head-svc.ml.svc.cluster.local:8265 ...\" ; sleep 2 ; done ; if ! ray job status --address http://demo-x7k2p-head-svc.ml.svc.cluster.local:8265 demo-q9z4m >/dev/null 2>&1 ; then ray job submit --address http://demo-x7k2p-head-svc.ml.svc.cluster.local:8265 --no-wait --runtime-env-json \"{\\\"pip\\\":[\\\"requests\\\"]}\" --metadata-json \"{\\\"owner\\\":\\\"feas\\\"}\" --submission-id demo-q9z4m --entrypoint-num-cpus 1.000000 --entrypoint-resources \"{\\\"a\\\": 1}\" -- python -c 'print(1)' ; fi ; ray job logs --address http://demo-x7k2p-head-svc.ml.svc.cluster.local:8265 --follow demo-q9z4m"
    );
    let sidecar = submit_command(&job, SubmissionMode::Sidecar, "", "id", 8265, false)
        .unwrap()
        .join(" ");
    assert!(sidecar.contains("urlopen('http://localhost:8265/api/gcs_healthz'"));
    assert!(sidecar.ends_with("ray job submit --address http://127.0.0.1:8265 --runtime-env-json \"{\\\"pip\\\":[\\\"requests\\\"]}\" --metadata-json \"{\\\"owner\\\":\\\"feas\\\"}\" --submission-id id --entrypoint-num-cpus 1.000000 --entrypoint-resources \"{\\\"a\\\": 1}\" -- python -c 'print(1)' ;"), "{sidecar}");
    assert_eq!(
        submit_command(&job, SubmissionMode::Http, "", "id", 0, true),
        Err(SubmitCommandError::Mode("HTTPMode"))
    );
}

#[test]
fn metadata_needs_ray_2_6() {
    let mut job = job("  metadata: {owner: feas}");
    job.spec.ray_cluster_spec.as_mut().unwrap().ray_version = Some("2.5.0".into());
    assert_eq!(
        submit_command(&job, SubmissionMode::K8sJob, "x:8265", "id", 0, true),
        Err(SubmitCommandError::MetadataVersion(
            "the Ray version must be at least 2.6.0 to use the metadata field".into()
        ))
    );
}

#[test]
fn a_selected_cluster_gives_the_default_submitter_its_image() {
    let mut selected = job("");
    selected.spec.ray_cluster_spec = None;
    selected.spec.cluster_selector = Some(BTreeMap::from([(
        "ray.io/cluster".to_string(),
        "shared".to_string(),
    )]));
    let mut world = World::new(initializing(selected));
    world.job.status.as_mut().unwrap().ray_cluster_name = Some("shared".into());
    let mut cluster = cluster_of(&initializing(job("")), Some("ready"));
    cluster.metadata.name = Some("shared".into());
    cluster.metadata.owner_references = None;
    let head = &mut cluster.spec.head_group_spec.template.spec.as_mut().unwrap();
    head.containers[0].image = Some("registry.example/ray:own".into());
    head.image_pull_secrets = Some(vec![k8s_openapi::api::core::v1::LocalObjectReference {
        name: "pull".into(),
    }]);
    world.cluster = Some(cluster);
    let decision = world.decide();
    assert_eq!(kinds(&decision), ["CreateSubmitterJob", "UpdateStatus"]);
    let Action::CreateSubmitterJob(submitter) = &decision.actions[0] else {
        unreachable!()
    };
    let pod = submitter
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("registry.example/ray:own"),
        "the RayJob has no rayClusterSpec: the image comes from the cluster it runs on"
    );
    assert_eq!(pod.image_pull_secrets.as_ref().unwrap()[0].name, "pull");
}

#[test]
fn a_user_submitter_template_is_honoured_and_completed() {
    let job = job(r#"  submitterConfig: {backoffLimit: 5}
  submitterPodTemplate:
    metadata: {labels: {team: a}}
    spec:
      containers:
      - image: custom:1
        resources: {requests: {cpu: "2"}}"#);
    let cluster = job.spec.ray_cluster_spec.clone().unwrap();
    let submitter = submitter_job(&job, &cluster, "d:8265", "id", false, true).unwrap();
    let spec = submitter.spec.unwrap();
    assert_eq!(spec.backoff_limit, Some(5));
    let labels = spec.template.metadata.unwrap().labels.unwrap();
    assert_eq!(labels["team"], "a");
    assert_eq!(labels["ray.io/originated-from-crd"], "RayJob");
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    assert_eq!(
        pod.scheduler_name, None,
        "no Volcano outside opted-in namespaces"
    );
    let container = &pod.containers[0];
    assert_eq!(container.name, "ray-job-submitter");
    assert_eq!(container.image.as_deref(), Some("custom:1"));
    assert_eq!(container.command.as_deref().unwrap()[1], "-cel");
}

#[test]
fn interactive_waits_for_the_users_job_id() {
    let job = initializing(job("  submissionMode: InteractiveMode"));
    let mut world = World::new(job);
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    let decision = world.decide();
    assert!(
        events(&decision).is_empty(),
        "progress gets no Event: {:?}",
        events(&decision)
    );
    let status = status_of(&decision).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Waiting"));
    world.job.status = Some(status);
    let decision = world.decide();
    assert!(decision.actions.is_empty(), "{decision:?}");
    world.job.spec.job_id = Some("raysubmit_x".into());
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Running"));
    assert_eq!(status.job_id.as_deref(), Some("raysubmit_x"));
}

#[test]
fn http_mode_submits_when_ray_does_not_know_the_job() {
    let mut world = World::new(running(job(
        "  submissionMode: HTTPMode\n  runtimeEnvYAML: 'env_vars: {A: b}'",
    )));
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    world.ray_job = RayJobObservation::NotFound;
    let decision = world.decide();
    let Some((dashboard_url, request)) = decision.actions.iter().find_map(|a| match a {
        Action::SubmitRayJob {
            dashboard_url,
            request,
        } => Some((dashboard_url, request)),
        _ => None,
    }) else {
        panic!("{decision:?}")
    };
    assert_eq!(
        dashboard_url,
        "demo-fghjk-head-svc.ml.svc.cluster.local:8265"
    );
    assert_eq!(
        request,
        &json!({"entrypoint": "python -c 'print(1)'", "submission_id": "demo-abcde", "runtime_env": {"env_vars": {"A": "b"}}})
    );
    assert_eq!(decision.requeue_after, Some(DEFAULT_REQUEUE));
}

#[test]
fn running_polls_and_completes_only_once_the_submitter_finished() {
    let mut world = World::new(running(job("")));
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    world.job_head_service = Some(job_head_service(
        &world.job,
        world.cluster.as_ref().unwrap(),
        &crate::cluster::BuildOptions::default(),
    ));
    world.ray_job = found("SUCCEEDED", Some(NOW - 1));
    let decision = world.decide();
    let status = status_of(&decision).unwrap();
    assert_eq!(status.job_status.as_deref(), Some("SUCCEEDED"));
    assert_eq!(status.job_deployment_status.as_deref(), Some("Running"));
    assert_eq!(decision.requeue_after, Some(DEFAULT_REQUEUE));
    world.submitter = Some(finished_submitter("Complete", NOW));
    let decision = world.decide();
    let status = status_of(&decision).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Complete"));
    assert_eq!(status.succeeded, Some(1));
    assert_eq!(status.end_time, Some(at(NOW)));
    assert_eq!(status.message.as_deref(), Some("job is SUCCEEDED"));
    assert_eq!(
        status.ray_job_info.unwrap().end_time,
        Some(at(NOW - 1)),
        "Ray's epoch milliseconds become a Time"
    );
    assert_eq!(events(&decision), ["Complete"]);
}

#[test]
fn a_failed_ray_job_fails_with_app_failed_and_retries_within_backoff_limit() {
    let mut world = World::new(running(job("  backoffLimit: 1")));
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    world.submitter = Some(finished_submitter("Complete", NOW));
    world.ray_job = found("FAILED", Some(NOW - 1));
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Retrying"));
    assert_eq!(status.reason.as_deref(), Some("AppFailed"));
    assert_eq!(status.failed, Some(1));
    assert_eq!(status.end_time, None);

    // Second attempt fails too: failed 2 = backoffLimit + 1 → Failed for good.
    let mut second = running(job("  backoffLimit: 1"));
    second.status.as_mut().unwrap().failed = Some(1);
    world.job = second;
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Failed"));
    assert_eq!(status.failed, Some(2));
    assert_eq!(status.end_time, Some(at(NOW)));
}

#[test]
fn retrying_deletes_cluster_and_submitter_before_resetting_identity() {
    let mut job = running(job("  backoffLimit: 1"));
    job.status.as_mut().unwrap().job_deployment_status = Some("Retrying".into());
    job.status.as_mut().unwrap().failed = Some(1);
    let mut world = World::new(job);
    world.volcano = true;
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    world.submitter = Some(finished_submitter("Complete", NOW));
    world.pod_group = Some(crate::sizing::ray_job_pod_group(&world.job).unwrap());
    let decision = world.decide();
    assert_eq!(kinds(&decision), ["DeleteRayCluster", "DeleteSubmitterJob"]);
    assert!(decision.requeue_after.is_some());

    world.cluster = None;
    world.submitter = None;
    let decision = world.decide();
    assert_eq!(kinds(&decision), ["ResizePodGroup", "UpdateStatus"]);
    let Action::ResizePodGroup(PodGroupSize {
        min_member,
        min_resources,
        ..
    }) = &decision.actions[0]
    else {
        unreachable!()
    };
    assert_eq!((*min_member, min_resources.len()), (0, 0));
    let status = status_of(&decision).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some(""));
    assert_eq!((&status.job_id, &status.ray_cluster_name), (&None, &None));
    assert_eq!(status.failed, Some(1));

    // The next pass picks a new identity.
    world.job.status = Some(status);
    world.pod_group = None;
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(
        status.job_deployment_status.as_deref(),
        Some("Initializing")
    );
    assert_eq!(status.ray_cluster_name.as_deref(), Some("demo-fghjk"));
}

#[test]
fn a_cluster_the_rayjob_does_not_own_is_never_deleted() {
    let mut job = running(job("  clusterSelector: {ray.io/cluster: shared}"));
    job.status.as_mut().unwrap().job_deployment_status = Some("Retrying".into());
    job.status.as_mut().unwrap().ray_cluster_name = Some("shared".into());
    let mut world = World::new(job);
    let mut shared = cluster_of(&world.job, Some("ready"));
    shared.metadata.owner_references = Some(vec![OwnerReference::default()]);
    world.cluster = Some(shared);
    assert_eq!(kinds(&world.decide()), ["UpdateStatus"]);
}

#[test]
fn submitter_failure_without_a_terminal_ray_job_is_a_submission_failure() {
    let mut world = World::new(running(job("")));
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    world.submitter = Some(finished_submitter("Failed", NOW));
    world.ray_job = RayJobObservation::NotFound;
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("SubmissionFailed"));
    assert_eq!(
        status.message.as_deref(),
        Some(
            "Job submission has failed. Reason: BackoffLimitExceeded. Message: Job has reached the specified backoff limit"
        )
    );
}

#[test]
fn a_late_look_at_a_finished_submitter_asks_ray_first() {
    // The submitter ended an hour ago (e.g. raygate was down): KubeRay would fail the RayJob
    // by the 30 s rule before reading the job; raygate reads Ray's SUCCEEDED.
    let mut world = World::new(running(job("")));
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    world.submitter = Some(finished_submitter("Complete", NOW - 3600));
    world.ray_job = found("SUCCEEDED", Some(NOW - 3600));
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Complete"));
    // …and only a Ray job still running 30 s after its submitter ended fails.
    world.ray_job = found("RUNNING", None);
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_status.as_deref(), Some("FAILED"));
    assert_eq!(
        status.reason.as_deref(),
        Some("JobDeploymentStatusTransitionGracePeriodExceeded")
    );
    world.submitter = Some(finished_submitter("Complete", NOW - 10));
    let decision = world.decide();
    assert_eq!(
        status_of(&decision)
            .unwrap()
            .job_deployment_status
            .as_deref(),
        Some("Running")
    );
    assert_eq!(decision.requeue_after, Some(DEFAULT_REQUEUE));
}

#[test]
fn dashboard_outages_start_the_status_check_clock_and_time_out() {
    let mut world = World::new(running(job("  backoffLimit: 3")));
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    world.ray_job = RayJobObservation::Unreachable("connection refused".into());
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_status_check_failure_start_time, Some(at(NOW)));
    world.job.status = Some(status);
    world.now = NOW + 300;
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Failed"));
    assert_eq!(
        status.reason.as_deref(),
        Some("JobStatusCheckTimeoutExceeded")
    );
    assert_eq!(status.failed, Some(1), "not retried despite backoffLimit");
}

#[test]
fn deadlines_fail_the_job_and_wake_the_reconciler_in_time() {
    let mut world = World::new(initializing(job("  activeDeadlineSeconds: 30")));
    world.cluster = Some(cluster_of(&world.job, None));
    let decision = world.decide();
    assert_eq!(decision.requeue_after, Some(Duration::from_secs(21)));
    world.now = NOW + 20;
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("DeadlineExceeded"));
    assert!(
        status
            .message
            .unwrap()
            .starts_with("The RayJob has passed the activeDeadlineSeconds. StartTime: 2027-01-15 07:59:50 +0000 UTC. ActiveDeadlineSeconds: 30")
    );

    let mut world = World::new(initializing(job(
        "  preRunningDeadlineSeconds: 5\n  backoffLimit: 2",
    )));
    world.cluster = Some(cluster_of(&world.job, None));
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.reason.as_deref(), Some("PreRunningDeadlineExceeded"));
    assert_eq!(
        status.job_deployment_status.as_deref(),
        Some("Retrying"),
        "pre-running deadlines are retryable"
    );
}

#[test]
fn grace_period_after_a_terminal_job_status() {
    let mut job = running(job(""));
    let status = job.status.as_mut().unwrap();
    status.job_status = Some("SUCCEEDED".into());
    status.ray_job_info = Some(RayJobStatusInfo {
        start_time: None,
        end_time: Some(at(NOW - 301)),
    });
    let world = World::new(job);
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Complete"));
    assert_eq!(
        status.reason.as_deref(),
        Some("JobDeploymentStatusTransitionGracePeriodExceeded")
    );
}

#[test]
fn suspend_tears_down_and_resume_starts_over() {
    let mut world = World::new(running(job(
        "  suspend: true\n  shutdownAfterJobFinishes: true",
    )));
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Suspending"));
    world.job.status = Some(status);
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    assert_eq!(kinds(&world.decide()), ["DeleteRayCluster"]);
    world.cluster = None;
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some("Suspended"));
    world.job.status = Some(status);
    let decision = world.decide();
    assert!(decision.actions.is_empty() && decision.requeue_after.is_none());
    world.job.spec.suspend = Some(false);
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some(""));
}

fn finished_job(extra: &str, job_status: &str, deployment: &str) -> RayJob {
    let mut job = running(job(extra));
    let status = job.status.as_mut().unwrap();
    status.job_status = Some(job_status.into());
    status.job_deployment_status = Some(deployment.into());
    status.end_time = Some(at(NOW - 10));
    job
}

#[test]
fn shutdown_after_the_ttl_deletes_only_the_cluster() {
    let mut world = World::new(finished_job(
        "  shutdownAfterJobFinishes: true\n  ttlSecondsAfterFinished: 60",
        "SUCCEEDED",
        "Complete",
    ));
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    let decision = world.decide();
    assert!(kinds(&decision).is_empty());
    assert_eq!(decision.requeue_after, Some(Duration::from_secs(52)));
    world.now = NOW + 51;
    let decision = world.decide();
    assert_eq!(kinds(&decision), ["DeleteRayCluster"]);
    world.config.delete_ray_job_after_finish = true;
    assert_eq!(kinds(&world.decide()), ["DeleteRayJob"]);
}

#[test]
fn terminal_pod_group_follows_the_live_cluster_then_zeroes() {
    let mut world = World::new(finished_job("", "SUCCEEDED", "Complete"));
    world.volcano = true;
    world.pod_group = Some(crate::sizing::ray_job_pod_group(&world.job).unwrap());
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    let decision = world.decide();
    let Some(Action::ResizePodGroup(PodGroupSize {
        min_member,
        min_resources,
        ..
    })) = decision.actions.first()
    else {
        panic!("{decision:?}")
    };
    assert_eq!(*min_member, 3);
    assert_eq!(
        min_resources["cpu"].0, "2",
        "the finished submitter no longer counts"
    );
    world.cluster = None;
    let decision = world.decide();
    let Some(Action::ResizePodGroup(PodGroupSize { min_member, .. })) = decision.actions.first()
    else {
        panic!("{decision:?}")
    };
    assert_eq!(*min_member, 0);
}

#[test]
fn deletion_rules_pick_the_most_impactful_overdue_rule() {
    let rules = r#"  deletionStrategy:
    deletionRules:
    - {policy: DeleteWorkers, condition: {jobStatus: SUCCEEDED, ttlSeconds: 0}}
    - {policy: DeleteCluster, condition: {jobStatus: SUCCEEDED, ttlSeconds: 5}}
    - {policy: DeleteSelf, condition: {jobStatus: SUCCEEDED, ttlSeconds: 100}}
    - {policy: DeleteSelf, condition: {jobStatus: FAILED, ttlSeconds: 0}}"#;
    let mut world = World::new(finished_job(rules, "SUCCEEDED", "Complete"));
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    let decision = world.decide();
    assert_eq!(kinds(&decision), ["DeleteRayCluster"]);
    assert_eq!(decision.requeue_after, Some(Duration::from_secs(92)));
    world.now = NOW - 8;
    let decision = world.decide();
    let Some(Action::SuspendWorkerGroups { groups, .. }) = decision
        .actions
        .iter()
        .find(|a| matches!(a, Action::SuspendWorkerGroups { .. }))
    else {
        panic!("{decision:?}")
    };
    assert_eq!(groups, &[0]);
}

#[test]
fn legacy_policies_follow_the_job_status() {
    let legacy = "  deletionStrategy:\n    onSuccess: {policy: DeleteSelf}\n    onFailure: {policy: DeleteNone}";
    let world = World::new(finished_job(legacy, "SUCCEEDED", "Complete"));
    assert_eq!(kinds(&world.decide()), ["DeleteRayJob"]);
    let world = World::new(finished_job(legacy, "FAILED", "Failed"));
    assert!(kinds(&world.decide()).is_empty());
    let world = World::new(finished_job(legacy, "STOPPED", "Complete"));
    assert!(kinds(&world.decide()).is_empty());
}

#[test]
fn deletion_stops_a_running_ray_job_then_lets_go() {
    let mut job = running(job(""));
    job.metadata.deletion_timestamp = Some(at(NOW));
    let world = World::new(job);
    let decision = world.decide();
    assert_eq!(kinds(&decision), ["StopRayJob", "RemoveFinalizer"]);
    let mut done = finished_job("", "SUCCEEDED", "Complete");
    done.metadata.deletion_timestamp = Some(at(NOW));
    assert_eq!(kinds(&World::new(done).decide()), ["RemoveFinalizer"]);
    let mut foreign = running(job_without_finalizer());
    foreign.metadata.deletion_timestamp = Some(at(NOW));
    assert!(World::new(foreign).decide().actions.is_empty());
}

fn job_without_finalizer() -> RayJob {
    let mut job = job("");
    job.metadata.finalizers = None;
    job
}

#[test]
fn other_managers_are_left_alone() {
    let mut job = job_without_finalizer();
    job.spec.managed_by = Some("kueue.x-k8s.io/multikueue".into());
    let decision = World::new(job).decide();
    assert!(decision.actions.is_empty() && decision.requeue_after.is_none());
    let mut ours = job_without_finalizer();
    ours.spec.managed_by = Some("ray.io/kuberay-operator".into());
    assert_eq!(
        kinds(&World::new(ours).decide()),
        ["AddFinalizer", "UpdateStatus", "CreateRayCluster"]
    );
}

#[test]
fn validation_failed_is_left_once_the_spec_is_fixed() {
    let mut world = World::new(running(job("")));
    world.validation_errors = vec!["spec.entrypoint: Required value".into()];
    let decision = world.decide();
    let status = status_of(&decision).unwrap();
    assert_eq!(
        status.job_deployment_status.as_deref(),
        Some("ValidationFailed")
    );
    assert_eq!(status.reason.as_deref(), Some("ValidationFailed"));
    assert_eq!(
        status.message.as_deref(),
        Some("spec.entrypoint: Required value")
    );
    assert_eq!(decision.requeue_after, None);
    assert_eq!(events(&decision), ["ValidationFailed"]);
    world.job.status = Some(status);
    assert!(
        kinds(&world.decide()).is_empty(),
        "no rewrite while still invalid"
    );
    world.validation_errors.clear();
    let status = status_of(&world.decide()).unwrap();
    assert_eq!(status.job_deployment_status.as_deref(), Some(""));
    assert_eq!((status.reason, status.message), (None, None));
}

#[test]
fn unknown_submission_modes_fail_validation_with_the_field_named() {
    let world = World::new(job("  submissionMode: Carrier"));
    let status = status_of(&world.decide()).unwrap();
    assert!(
        status
            .message
            .unwrap()
            .starts_with("spec.submissionMode: Unsupported value: \"Carrier\"")
    );
}

#[test]
fn pod_group_drift_is_resynced_but_equal_quantities_are_not_drift() {
    let mut world = World::new(running(job("")));
    world.volcano = true;
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    world.ray_job = found("RUNNING", None);
    let mut pg = crate::sizing::ray_job_pod_group(&world.job).unwrap();
    pg.spec
        .min_resources
        .as_mut()
        .unwrap()
        .insert("cpu".into(), Quantity("2.5".into()));
    world.pod_group = Some(pg.clone());
    assert!(!kinds(&world.decide()).contains(&"ResizePodGroup"));
    pg.spec.min_member = Some(1);
    world.pod_group = Some(pg);
    assert_eq!(kinds(&world.decide())[0], "ResizePodGroup");
}

#[test]
fn sidecar_mode_puts_the_submitter_in_the_head_and_fails_on_its_exit_code() {
    let job = initializing(job("  submissionMode: SidecarMode"));
    let cluster = ray_cluster_for_job(&job, "demo-fghjk", "demo-abcde", true, false).unwrap();
    let head = cluster.spec.head_group_spec.template.spec.as_ref().unwrap();
    assert_eq!(head.containers.len(), 2);
    assert_eq!(head.containers[1].name, "ray-job-submitter");
    assert_eq!(head.restart_policy.as_deref(), Some("Never"));
    assert_eq!(
        cluster.metadata.annotations.as_ref().unwrap()["ray.io/disable-provisioned-head-restart"],
        "true"
    );
    assert!(
        !cluster
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key("scheduling.k8s.io/group-name"),
        "KubeRay tags the cluster object only in K8sJobMode"
    );
}

#[test]
fn suffixes_use_the_kubernetes_alphabet_and_differ_per_entropy() {
    let a = FreshSuffixes::from_entropy(0x1234_5678_9abc_def0);
    let b = FreshSuffixes::from_entropy(0x0fed_cba9_8765_4321);
    assert_ne!(a, b);
    for s in [&a.cluster, &a.submission, &b.cluster, &b.submission] {
        assert_eq!(s.len(), 5);
        assert!(s.bytes().all(|c| SUFFIX_ALPHABET.contains(&c)), "{s}");
    }
}

#[test]
fn merge_patch_nulls_removed_keys_recursively() {
    let old = json!({"a": 1, "b": {"x": 1, "y": 2}, "c": "gone"});
    let new = json!({"a": 1, "b": {"x": 3}});
    assert_eq!(
        merge_patch(&old, &new),
        json!({"b": {"x": 3, "y": null}, "c": null})
    );
}

#[test]
fn a_pass_reads_only_what_its_rayjob_needs() {
    let reads = Reads::of(&running(job("")), true).expect("raygate's RayJob");
    assert_eq!(
        reads,
        Reads {
            volcano: true,
            cluster: Some("demo-fghjk".into()),
            submitter: Some("demo".into()),
            pod_group: Some("ray-demo-pg".into()),
            head_pod_of: None,
            job_head_service: Some("demo-head-svc".into()),
            ray_job: Some((
                "demo-fghjk-head-svc.ml.svc.cluster.local:8265".into(),
                "demo-abcde".into()
            )),
            cluster_readiness: false,
        }
    );

    let plain = Reads::of(&initializing(job("")), false).expect("raygate's RayJob");
    assert!(!plain.volcano);
    assert_eq!(plain.pod_group, None);
    assert_eq!(plain.job_head_service, None, "read only while Running");
    assert_eq!(plain.ray_job, None, "asked only while Running");
    assert!(
        plain.cluster_readiness,
        "Initializing waits for its cluster"
    );

    let sidecar = Reads::of(&initializing(job("  submissionMode: SidecarMode")), true)
        .expect("raygate's RayJob");
    assert_eq!(sidecar.submitter, None);
    assert_eq!(sidecar.head_pod_of.as_deref(), Some("demo-fghjk"));

    let mut deleting = running(job(""));
    deleting.metadata.deletion_timestamp = Some(at(NOW));
    let reads = Reads::of(&deleting, true).expect("raygate's RayJob");
    assert!(!reads.volcano);
    assert_eq!(
        (reads.cluster, reads.submitter, reads.pod_group),
        (None, None, None),
        "a deleting RayJob only sheds its finalizer"
    );
    assert!(!reads.cluster_readiness);
    let mut deleting_early = initializing(job(""));
    deleting_early.metadata.deletion_timestamp = Some(at(NOW));
    let reads = Reads::of(&deleting_early, true).expect("raygate's RayJob");
    assert!(
        !reads.cluster_readiness,
        "a deleting RayJob waits for nothing"
    );
    let mut has_dashboard = initializing(job(""));
    if let Some(status) = has_dashboard.status.as_mut() {
        status.dashboard_url = Some("demo-fghjk-head-svc.ml.svc.cluster.local:8265".into());
    }
    let reads = Reads::of(&has_dashboard, true).expect("raygate's RayJob");
    assert!(
        !reads.cluster_readiness,
        "a cluster seen ready once is not waited for again"
    );

    assert_eq!(
        Reads::of(&job("  managedBy: kueue.x-k8s.io/multikueue"), true),
        None
    );
    assert!(Reads::of(&job("  managedBy: ray.io/kuberay-operator"), true).is_some());
}

#[test]
fn dashboard_is_asked_only_while_running() {
    assert_eq!(
        dashboard_query(&running(job(""))),
        Some((
            "demo-fghjk-head-svc.ml.svc.cluster.local:8265".into(),
            "demo-abcde".into()
        ))
    );
    assert_eq!(dashboard_query(&initializing(job(""))), None);
    assert_eq!(dashboard_query(&job("")), None);
}

#[test]
fn status_patches_omit_empty_strings_like_go() {
    let old = running(job("")).status.unwrap();
    let mut new = old.clone();
    new.job_status = Some(String::new());
    assert_eq!(status_patch(Some(&old), &new), json!({}));
    new.job_deployment_status = Some(String::new());
    new.job_id = None;
    assert_eq!(
        status_patch(Some(&old), &new),
        json!({"jobDeploymentStatus": null, "jobId": null})
    );
    assert_eq!(
        status_patch(None, &new)["rayClusterName"],
        json!("demo-fghjk")
    );
}

#[test]
fn the_rayjob_head_service_follows_the_current_cluster() {
    let mut world = World::new(running(job("")));
    let mut cluster = cluster_of(&world.job, Some("ready"));
    cluster.spec.head_service_annotations =
        Some([("cluster-only".to_string(), "x".to_string())].into());
    world.cluster = Some(cluster);
    let decision = world.decide();
    let created = decision
        .actions
        .iter()
        .find_map(|a| match a {
            Action::CreateService(svc) => Some((**svc).clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{decision:?}"));
    assert_eq!(created.metadata.name.as_deref(), Some("demo-head-svc"));
    assert_eq!(created.metadata.namespace.as_deref(), Some("ml"));
    assert_eq!(
        created.metadata.labels.clone().unwrap(),
        [
            ("ray.io/identifier", "demo-head"),
            ("ray.io/node-type", "head"),
            ("ray.io/originated-from-cr-name", "demo"),
            ("ray.io/originated-from-crd", "RayJob"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into()
    );
    assert_eq!(
        created.metadata.annotations, None,
        "headServiceAnnotations belong to the cluster's own Service"
    );
    let owner = &created.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("RayJob", "job-uid", Some(true))
    );
    let spec = created.spec.clone().unwrap();
    assert_eq!(
        spec.selector.clone().unwrap()["ray.io/cluster"],
        "demo-fghjk"
    );
    assert_eq!(
        spec.selector.clone().unwrap()["ray.io/identifier"],
        "demo-fghjk-head"
    );
    assert_eq!(
        spec.cluster_ip.as_deref(),
        Some("None"),
        "headless like the cluster's"
    );
    let ports: Vec<_> = spec.ports.unwrap().into_iter().map(|p| p.port).collect();
    assert_eq!(ports, [10001, 8265, 6379, 8080, 8000]);
    assert_eq!(events(&decision), ["CreatedService"]);

    // Steady: the live Service selects this cluster already.
    let mut live = created.clone();
    live.spec.as_mut().unwrap().cluster_ip = Some("None".into());
    world.job_head_service = Some(live.clone());
    let steady = world.decide();
    assert!(
        !kinds(&steady).iter().any(|k| k.ends_with("Service")),
        "{steady:?}"
    );

    // A later attempt's cluster: the selector moves, clusterIP is left alone.
    let mut next = running(job(""));
    next.status.as_mut().unwrap().ray_cluster_name = Some("demo-zzzzz".into());
    world.job = next;
    world.cluster = Some(cluster_of(&world.job, Some("ready")));
    let switched = world.decide();
    let (name, patch) = switched
        .actions
        .iter()
        .find_map(|a| match a {
            Action::PatchService { name, patch } => Some((name.clone(), patch.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{switched:?}"));
    assert_eq!(name, "demo-head-svc");
    assert_eq!(patch["spec"]["selector"]["ray.io/cluster"], "demo-zzzzz");
    assert_eq!(
        patch["spec"]["selector"]["ray.io/identifier"],
        "demo-zzzzz-head"
    );
    assert!(patch["spec"].get("clusterIP").is_none(), "{patch}");
    assert_eq!(patch["spec"]["ports"].as_array().map(Vec::len), Some(5));

    // clusterSelector mode: the user's cluster is never fronted by a RayJob Service.
    let mut selector = World::new(running(job(
        "  clusterSelector: {ray.io/cluster: demo-fghjk}",
    )));
    selector.cluster = Some(cluster_of(&selector.job, Some("ready")));
    assert!(!job_head_service_query(&selector.job));
    let decision = selector.decide();
    assert!(
        !kinds(&decision).iter().any(|k| k.ends_with("Service")),
        "{decision:?}"
    );
    assert!(job_head_service_query(&world.job));
}

#[test]
fn fields_unknown_to_raygates_types_reach_the_cluster_the_pods_and_the_submitter() {
    let typed = job(
        "  submitterPodTemplate:\n    spec:\n      restartPolicy: Never\n      containers:\n      - {name: submit, image: rayproject/ray:2.60.0}",
    );
    let mut raw = serde_json::to_value(&typed).unwrap();
    raw["spec"]["rayClusterSpec"]["futureClusterField"] = json!({"enabled": true});
    let head = &mut raw["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"];
    head["futurePodField"] = json!("head-value");
    head["containers"][0]["futureContainerField"] = json!(1);
    let worker = &mut raw["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"];
    worker["futurePodField"] = json!("worker-value");
    raw["spec"]["submitterPodTemplate"]["spec"]["futurePodField"] = json!("submitter-value");
    let job: RayJob = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&job).unwrap(),
        serde_json::to_value(&typed).unwrap(),
        "the typed model does not know these fields"
    );

    // RayJob → RayCluster: the raw rayClusterSpec plus raygate's changes.
    let cluster = ray_cluster_for_job(&job, "demo-fghjk", "demo-abcde", true, false).unwrap();
    let object = ray_cluster_object(&raw, &job, &cluster);
    assert_eq!(
        object["spec"]["futureClusterField"],
        json!({"enabled": true})
    );
    let head_template = &object["spec"]["headGroupSpec"]["template"]["spec"];
    assert_eq!(head_template["futurePodField"], "head-value");
    assert_eq!(head_template["containers"][0]["futureContainerField"], 1);
    assert_eq!(object["metadata"]["name"], "demo-fghjk");
    assert_eq!(object["metadata"]["ownerReferences"][0]["kind"], "RayJob");
    assert_eq!(
        object["metadata"]["labels"]["ray.io/originated-from-crd"],
        "RayJob"
    );
    assert_eq!(
        object["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
        "ray-demo-pg"
    );
    let mut without_unknown = object.clone();
    without_unknown["spec"]
        .as_object_mut()
        .unwrap()
        .remove("futureClusterField");
    let spec = &mut without_unknown["spec"]["headGroupSpec"]["template"]["spec"];
    spec.as_object_mut().unwrap().remove("futurePodField");
    spec["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("futureContainerField");
    without_unknown["spec"]["workerGroupSpecs"][0]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("futurePodField");
    assert_eq!(
        without_unknown,
        serde_json::to_value(&cluster).unwrap(),
        "apart from the unknown fields, exactly what the typed builder made"
    );

    // RayCluster → Pods: the stored cluster's templates plus raygate's changes.
    let mut stored: RayCluster = serde_json::from_value(object.clone()).unwrap();
    stored.metadata.uid = Some("cluster-uid".into());
    let mut raw_cluster = object.clone();
    raw_cluster["metadata"]["uid"] = json!("cluster-uid");
    let options = crate::cluster::BuildOptions::default();
    let head_pod = crate::cluster::build_pod(
        &stored,
        crate::cluster::build::PodRole::Head,
        "demo-fghjk-head-x",
        &options,
    );
    let head_object = crate::cluster::pod_object(&raw_cluster, &stored, &head_pod);
    assert_eq!(head_object["spec"]["futurePodField"], "head-value");
    assert_eq!(
        head_object["spec"]["containers"][0]["futureContainerField"],
        1
    );
    assert_eq!(
        head_object["spec"]["containers"][0]["command"][0],
        "/bin/bash"
    );
    assert_eq!(
        head_object["metadata"]["labels"]["ray.io/node-type"],
        "head"
    );
    assert_eq!(head_object["kind"], "Pod");
    let group = &stored.spec.worker_group_specs.as_ref().unwrap()[0];
    let worker_pod = crate::cluster::build_pod(
        &stored,
        crate::cluster::build::PodRole::Worker(group),
        "demo-fghjk-small-worker-x",
        &options,
    );
    let worker_object = crate::cluster::pod_object(&raw_cluster, &stored, &worker_pod);
    assert_eq!(worker_object["spec"]["futurePodField"], "worker-value");
    assert!(
        worker_object["spec"]["containers"][0]["args"][0]
            .as_str()
            .unwrap()
            .contains("ray start"),
        "{worker_object}"
    );

    // The user's submitter template.
    let submitter = submitter_job(
        &job,
        &stored.spec,
        "demo-fghjk-head-svc:8265",
        "demo-abcde",
        true,
        false,
    )
    .unwrap();
    let submitter_object = submitter_job_object(&raw, &job, &submitter);
    let pod_spec = &submitter_object["spec"]["template"]["spec"];
    assert_eq!(pod_spec["futurePodField"], "submitter-value");
    assert_eq!(pod_spec["schedulerName"], "volcano");
    assert_eq!(pod_spec["containers"][0]["name"], "submit");
    assert!(
        pod_spec["containers"][0]["args"][0]
            .as_str()
            .unwrap()
            .contains("ray job submit")
    );
}

/// Admission accepts exactly the runtime environments the submitter can send: both read them
/// with `runtime_env::read` (they once used two readers, and a tagged map such as
/// `!env {pip: [requests]}` was admitted and then failed at submission).
#[test]
fn admission_accepts_exactly_the_runtime_environments_the_submitter_can_send() {
    let refused = Err(());
    for (text, expected) in [
        ("pip: [requests]", Ok(Some(json!({"pip": ["requests"]})))),
        (
            "!env {pip: [requests]}",
            Ok(Some(json!({"pip": ["requests"]}))),
        ),
        (
            "env_vars: {A: !s b}",
            Ok(Some(json!({"env_vars": {"A": "b"}}))),
        ),
        (
            "base: &b {A: x}\nenv_vars: {<<: *b, B: y}",
            Ok(Some(
                json!({"base": {"A": "x"}, "env_vars": {"A": "x", "B": "y"}}),
            )),
        ),
        ("1: a", Ok(Some(json!({"1": "a"})))),
        ("~", Ok(None)),
        ("- pip", refused.clone()),
        ("!env [pip]", refused.clone()),
        ("pip: [requests", refused.clone()),
        ("x: .inf", refused.clone()),
        ("? [a]\n: b", refused.clone()),
    ] {
        let mut job = job("");
        job.spec.runtime_env_yaml = Some(text.to_string());
        let admitted = !crate::validation::validate_ray_job(&job, &Default::default())
            .iter()
            .any(|f| f.rule == "rayjob-runtime-env-yaml-invalid");
        let sent = submitter::runtime_env_json(&job);
        assert_eq!(admitted, sent.is_ok(), "{text:?}: {sent:?}");
        assert_eq!(sent.map_err(|_| ()), expected, "{text:?}");
    }
}

#[test]
fn only_a_rayjob_without_a_deployment_status_awaits_its_first_pass() {
    let new = job("");
    assert!(awaits_first_pass(&new));
    assert!(awaits_first_pass(&with_status(
        new.clone(),
        json!({"jobDeploymentStatus": ""})
    )));
    assert!(!awaits_first_pass(&initializing(new.clone())));
    assert!(!awaits_first_pass(&running(new.clone())));
    assert!(!awaits_first_pass(&with_status(
        new,
        json!({"jobDeploymentStatus": "Suspended"})
    )));
}

#[test]
fn only_a_raycluster_without_a_status_awaits_its_first_pass() {
    let job = initializing(job(""));
    let mut created = cluster_of(&job, None);
    assert!(!crate::cluster::awaits_first_pass(&created));
    created.status = None;
    assert!(crate::cluster::awaits_first_pass(&created));
    assert!(!crate::cluster::awaits_first_pass(&cluster_of(
        &job,
        Some("ready")
    )));
}

/// A schedulable node offering `cpu` and `memory`.
fn node(name: &str, cpu: &str, memory: &str) -> NodeShape {
    NodeShape {
        name: name.into(),
        allocatable: [("cpu", cpu), ("memory", memory)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
            .collect(),
        ..NodeShape::default()
    }
}

#[test]
fn a_gang_no_node_could_ever_hold_is_infeasible_until_a_node_that_can_joins() {
    let mut world = World::new(initializing(job("")));
    world.volcano = true;
    world.cluster = Some(cluster_of(&world.job, None));
    let mut pod_group = crate::sizing::ray_job_pod_group(&world.job).unwrap();
    pod_group.status = Some(
        serde_json::from_value(json!({"phase": "Pending", "conditions": [{
            "type": "Unschedulable", "status": "True",
            "lastTransitionTime": at(NOW - 1), "reason": "NotEnoughResources",
            "message": "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable"}]}))
        .unwrap(),
    );
    world.pod_group = Some(pod_group);
    world.gang_pods = GangPods {
        created: 3,
        bound: 0,
    };
    world.nodes = vec![node("tiny", "1m", "1Ki")];
    let decision = world.decide();
    assert_eq!(events(&decision), ["Infeasible"]);
    let condition = |decision: &Decision| {
        let status = status_of(decision).unwrap();
        let found = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "GangPending");
        found.cloned().expect("GangPending")
    };
    let infeasible = condition(&decision);
    assert_eq!(infeasible.reason, "Infeasible");
    assert!(
        infeasible.message.starts_with(
            "no node of this cluster could ever hold PodGroup ray-demo-pg, even empty: head Pod asks cpu "
        ) && infeasible.message.contains("; the largest node offers 1m (tiny)"),
        "{}",
        infeasible.message
    );
    world.job.status = status_of(&decision);

    // A node that could hold each Pod: the gang waits for free resources, not for the cluster.
    world.nodes.push(node("big", "64", "256Gi"));
    let decision = world.decide();
    assert_eq!(events(&decision), ["InsufficientNodeResources"]);
    assert_eq!(condition(&decision).reason, "InsufficientNodeResources");

    // No node known (before the Node watch lists, or a cluster scaled to zero): nothing is
    // judged infeasible.
    world.nodes.clear();
    assert_eq!(
        condition(&world.decide()).reason,
        "InsufficientNodeResources"
    );
}
