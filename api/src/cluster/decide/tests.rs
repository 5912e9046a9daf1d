use k8s_openapi::api::core::v1::{PodCondition, PodStatus, ServiceSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use std::sync::LazyLock;
use std::time::Duration;

use super::*;
use crate::cluster::status::{STATE_READY, STATE_SUSPENDED};
use crate::validation::ReconcilerKind;

const CLUSTER: &str = r#"
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: demo, namespace: team, uid: u-1, generation: 3, labels: {volcano.sh/queue-name: q}}
spec:
  rayVersion: "2.60.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.60.0
          resources: {requests: {cpu: "1", memory: 2Gi}}
  workerGroupSpecs:
  - groupName: small
    replicas: 2
    minReplicas: 0
    maxReplicas: 5
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.60.0
          resources: {requests: {cpu: "2", memory: 1Gi}}
"#;

fn cluster() -> RayCluster {
    serde_saphyr::from_str(CLUSTER).unwrap_or_else(|e| panic!("bad test YAML: {e}"))
}

fn now() -> Time {
    Time(Timestamp::from_second(1_800_000_000).expect("a valid time"))
}

fn ctx() -> ValidationContext {
    ValidationContext {
        reconciler: ReconcilerKind::Raygate,
        ..ValidationContext::default()
    }
}

/// A Pod as the API server would show it, built from what the plan would create.
fn existing(pod: &Pod, phase: &str, ready: bool, uid: &str) -> Pod {
    let mut pod = pod.clone();
    pod.metadata.uid = Some(uid.to_string());
    pod.status = Some(PodStatus {
        phase: Some(phase.to_string()),
        pod_ip: Some("10.0.0.1".to_string()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".to_string(),
            status: if ready { "True" } else { "False" }.to_string(),
            ..PodCondition::default()
        }]),
        ..PodStatus::default()
    });
    pod
}

fn service(c: &RayCluster) -> Service {
    let mut svc = build::build_head_service(c, &BuildOptions::default());
    svc.spec = Some(ServiceSpec {
        cluster_ip: Some("None".to_string()),
        ..svc.spec.unwrap_or_default()
    });
    svc
}

/// What a test looks at: the writes (no Events, no status write), the Events, and the status
/// after the pass (the stored one when the decision does not rewrite it).
#[derive(Debug)]
struct Plan {
    actions: Vec<Action>,
    events: Vec<EventNote>,
    status: RayClusterStatus,
}

fn outline(c: &RayCluster, decision: Decision<Action>) -> Plan {
    let mut plan = Plan {
        actions: Vec::new(),
        events: Vec::new(),
        status: c.status.clone().unwrap_or_default(),
    };
    assert_eq!(decision.requeue_after, Some(STEADY_REQUEUE));
    for action in decision.actions {
        match action {
            Action::Event(note) => plan.events.push(note),
            Action::UpdateStatus(status) => plan.status = *status,
            write => plan.actions.push(write),
        }
    }
    plan
}

fn plan(
    c: &RayCluster,
    pods: &[Pod],
    svc: Option<&Service>,
    pg: Option<&PodGroup>,
    volcano: bool,
) -> Plan {
    plan_in(c, pods, svc, pg, Some(&open_queue()), volcano)
}

fn open_queue() -> Queue {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "default"}, "spec": {}, "status": {"state": "Open"}}))
    .expect("a queue")
}

static NO_NODES: LazyLock<NodeKinds> = LazyLock::new(NodeKinds::default);

/// What a pass observes outside Volcano, with no failed write: `pods` and `head_service` at
/// `now`. Tests of other observations change the fields they are about.
fn observed<'a>(pods: &'a [Pod], head_service: Option<&'a Service>, now: &'a Time) -> Snapshot<'a> {
    Snapshot {
        pods,
        head_service,
        worker_service: None,
        pod_group: None,
        queue: None,
        nodes: &NO_NODES,
        volcano: false,
        sub_groups: true,
        now,
        failed_write: None,
    }
}

fn plan_in(
    c: &RayCluster,
    pods: &[Pod],
    svc: Option<&Service>,
    pg: Option<&PodGroup>,
    queue: Option<&Queue>,
    volcano: bool,
) -> Plan {
    let now = now();
    // With the head Service, a multi-host cluster's headless worker Service exists too (a test
    // of its creation passes neither).
    let headless = build::build_headless_worker_service(c);
    let decision = decide(
        c,
        &Snapshot {
            pod_group: pg,
            queue,
            volcano,
            worker_service: svc.map(|_| &headless),
            ..observed(pods, svc, &now)
        },
        &ctx(),
        &BuildOptions::default(),
    );
    outline(c, decision)
}

fn created(plan: &Plan) -> Vec<Pod> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod(p) => Some((**p).clone()),
            _ => None,
        })
        .collect()
}

fn created_services(plan: &Plan) -> Vec<Service> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateService(svc) => Some((**svc).clone()),
            _ => None,
        })
        .collect()
}

fn deleted(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// Applies the plan's `LabelPod` actions to the Pods they name (and whose UID they name).
fn apply_labels(plan: &Plan, pods: &mut [Pod]) {
    for action in &plan.actions {
        if let Action::LabelPod { name, uid, labels } = action {
            let pod = pods
                .iter_mut()
                .find(|p| p.metadata.name.as_ref() == Some(name))
                .expect("a labelled Pod exists");
            assert_eq!(&pod.metadata.uid, uid, "the UID precondition of {name}");
            pod.metadata
                .labels
                .get_or_insert_with(Default::default)
                .extend(labels.clone());
        }
    }
}

/// Runs the cluster until nothing is left to do, every created Pod becoming Running/Ready.
fn converge(c: &RayCluster, pods: &mut Vec<Pod>) {
    let svc = service(c);
    for round in 0..5 {
        let p = plan(c, pods, Some(&svc), None, false);
        if p.actions.is_empty() {
            return;
        }
        let gone = deleted(&p);
        pods.retain(|pod| !gone.contains(pod.metadata.name.as_ref().expect("name")));
        apply_labels(&p, pods);
        for (i, pod) in created(&p).iter().enumerate() {
            pods.push(existing(pod, "Running", true, &format!("uid-{round}-{i}")));
        }
    }
    panic!("no convergence after 5 rounds");
}

#[test]
fn a_new_cluster_in_a_volcano_namespace_gets_service_then_podgroup_then_pods() {
    let c = cluster();
    let p = plan(&c, &[], None, None, true);
    assert!(
        matches!(p.actions[0], Action::CreateService(_)),
        "{:?}",
        p.actions[0]
    );
    let Action::CreatePodGroup(pg) = &p.actions[1] else {
        panic!("second action is not the PodGroup: {:?}", p.actions[1]);
    };
    assert_eq!(pg.metadata.name.as_deref(), Some("ray-demo-pg"));
    assert_eq!(pg.spec.min_member, Some(3));
    assert_eq!(pg.spec.queue.as_deref(), Some("q"));
    let pods = created(&p);
    assert_eq!(pods.len(), 3);
    assert_eq!(p.actions.len(), 5);
    for pod in &pods {
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.scheduler_name.as_deref(), Some("volcano"));
        let annotations = pod.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(annotations["scheduling.k8s.io/group-name"], "ray-demo-pg");
        assert_eq!(
            pod.metadata.labels.as_ref().expect("labels")["volcano.sh/queue-name"],
            "q"
        );
    }
    let tasks: BTreeSet<&str> = pods
        .iter()
        .map(|p| p.metadata.annotations.as_ref().expect("a")["volcano.sh/task-spec"].as_str())
        .collect();
    assert_eq!(tasks, BTreeSet::from(["headgroup", "small"]));
    // The creating pass writes no status: the next one, started by the Pods' watch events,
    // does, from the Pods it sees.
    assert_eq!(p.status, RayClusterStatus::default());
    let pending: Vec<Pod> = pods
        .iter()
        .enumerate()
        .map(|(i, pod)| existing(pod, "Pending", false, &format!("uid-{i}")))
        .collect();
    let svc = service(&c);
    let pg = p.actions.iter().find_map(|a| match a {
        Action::CreatePodGroup(pg) => Some((**pg).clone()),
        _ => None,
    });
    let p = plan(&c, &pending, Some(&svc), pg.as_ref(), true);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.status.desired_worker_replicas, Some(2));
    assert_eq!(
        p.status.desired_cpu.as_ref().map(|q| q.0.as_str()),
        Some("5")
    );
    assert_eq!(
        p.status.desired_memory.as_ref().map(|q| q.0.as_str()),
        Some("4Gi")
    );
    assert_eq!(p.status.observed_generation, Some(3));
    assert_eq!(p.status.state, None);
}

#[test]
fn an_unlabelled_namespace_gets_no_podgroup_and_no_volcano_metadata() {
    let p = plan(&cluster(), &[], None, None, false);
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::CreatePodGroup(_)))
    );
    for pod in created(&p) {
        assert_eq!(pod.spec.as_ref().expect("spec").scheduler_name, None);
        let annotations = pod.metadata.annotations.unwrap_or_default();
        assert!(
            annotations
                .keys()
                .all(|k| k.starts_with("ray.io/upgrade-") || k == "ray.io/kuberay-version"),
            "{annotations:?}"
        );
    }
}

#[test]
fn a_rayjob_cluster_joins_the_rayjob_gang_and_gets_no_podgroup() {
    let mut c = cluster();
    let labels = c.metadata.labels.get_or_insert_default();
    labels.insert("ray.io/originated-from-crd".into(), "RayJob".into());
    labels.insert("ray.io/originated-from-cr-name".into(), "job".into());
    let p = plan(&c, &[], None, None, true);
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::CreatePodGroup(_)))
    );
    for pod in created(&p) {
        let annotations = pod.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(annotations["scheduling.k8s.io/group-name"], "ray-job-pg");
        let labels = pod.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels["ray.io/originated-from-cr-name"], "job");
    }
}

#[test]
fn ready_pods_make_the_cluster_ready_and_nothing_more_is_done() {
    let c = cluster();
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    assert_eq!(pods.len(), 3);
    let svc = service(&c);
    let p = plan(&c, &pods, Some(&svc), None, false);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.status.state.as_deref(), Some(STATE_READY));
    assert_eq!(p.status.ready_worker_replicas, Some(2));
    assert_eq!(p.status.available_worker_replicas, Some(2));
    let head = p.status.head.as_ref().expect("head");
    assert_eq!(head.service_name.as_deref(), Some("demo-head-svc"));
    assert_eq!(head.pod_ip.as_deref(), Some("10.0.0.1"));
    assert_eq!(head.service_ip.as_deref(), Some("10.0.0.1"));
    assert_eq!(
        p.status.endpoints.as_ref().expect("endpoints")["dashboard"],
        "8265"
    );
    let conditions = p.status.conditions.as_ref().expect("conditions");
    let provisioned = conditions
        .iter()
        .find(|c| c.type_ == "RayClusterProvisioned")
        .expect("c");
    assert_eq!(provisioned.status, "True");
    assert_eq!(provisioned.reason, "AllPodRunningAndReadyFirstTime");
    assert!(
        p.status
            .state_transition_times
            .as_ref()
            .expect("t")
            .contains_key("ready")
    );
}

#[test]
fn the_ready_status_is_due_exactly_when_the_clusters_next_pass_writes_it() {
    let c = cluster();
    let svc = service(&c);
    // In each case below the cheap gate a RayJob pass checks first gives the same answer as
    // the full decision, so a pass it stops misses no ready status.
    let due = |c: &RayCluster, pods: &[Pod]| {
        let now = now();
        let due = ready_status_due(
            c,
            &observed(pods, Some(&svc), &now),
            &ctx(),
            &BuildOptions::default(),
        );
        assert_eq!(ready_may_be_due(c, pods), due.is_some());
        due
    };
    let mut ready = Vec::new();
    converge(&c, &mut ready);
    let written = plan(&c, &ready, Some(&svc), None, false).status;
    assert_eq!(written.state.as_deref(), Some(STATE_READY));
    assert_eq!(due(&c, &ready), Some(written.clone()));

    // One worker not Ready yet: the cluster's pass writes no ready status, nor is one due.
    let mut one_not_ready = ready.clone();
    let worker = (one_not_ready.iter_mut())
        .find(|p| status::node_type(p) == Some(WORKER_NODE_TYPE))
        .expect("a worker");
    *worker = existing(worker, "Running", false, "uid-late");
    assert_eq!(due(&c, &one_not_ready), None);
    assert_eq!(due(&c, &[]), None);

    // A worker on its way out, not Ready, is not one of the Pods that make the cluster ready.
    let mut leaving = ready.clone();
    let mut old = existing(&one_not_ready[0], "Running", false, "uid-old");
    old.metadata.name = Some("leaving".into());
    old.metadata.deletion_timestamp = Some(now());
    leaving.push(old);
    let written_leaving = plan(&c, &leaving, Some(&svc), None, false).status;
    assert_eq!(written_leaving.state.as_deref(), Some(STATE_READY));
    assert_eq!(due(&c, &leaving), Some(written_leaving));

    // Once the cluster's own write is stored, there is nothing left to act on early.
    let mut stored = c.clone();
    stored.status = Some(written);
    assert_eq!(due(&stored, &ready), None);

    // Nor for a cluster another controller runs: its status is that controller's to write.
    let mut elsewhere = c.clone();
    elsewhere.spec.managed_by = Some("kueue.x-k8s.io/multikueue".into());
    assert_eq!(due(&elsewhere, &ready), None);
}

#[test]
fn not_ready_pods_keep_the_cluster_provisioning() {
    let c = cluster();
    let p = plan(&c, &[], None, None, false);
    let pods: Vec<Pod> = created(&p)
        .iter()
        .enumerate()
        .map(|(i, pod)| existing(pod, "Pending", false, &format!("u{i}")))
        .collect();
    let svc = service(&c);
    let p = plan(&c, &pods, Some(&svc), None, false);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.status.state, None);
    assert_eq!(p.status.ready_worker_replicas, Some(0));
    let head = p
        .status
        .conditions
        .as_ref()
        .expect("c")
        .iter()
        .find(|c| c.type_ == "HeadPodReady")
        .cloned()
        .expect("HeadPodReady");
    assert_eq!(head.status, "False");
}

#[test]
fn the_progress_of_a_cluster_coming_up_is_written_at_most_two_seconds_late_and_ready_at_once() {
    let mut c = cluster();
    c.metadata.creation_timestamp = Some(now());
    let p = plan(&c, &[], None, None, false);
    let mut pods: Vec<Pod> = created(&p)
        .iter()
        .enumerate()
        .map(|(i, pod)| existing(pod, "Pending", false, &format!("u{i}")))
        .collect();
    let svc = service(&c);
    let decide_at = |c: &RayCluster, pods: &[Pod], second: i64| {
        let at = Time(Timestamp::from_second(1_800_000_000 + second).expect("a valid time"));
        decide(
            c,
            &observed(pods, Some(&svc), &at),
            &ctx(),
            &BuildOptions::default(),
        )
    };
    let writes_status = |d: &Decision<Action>| {
        d.actions
            .iter()
            .any(|a| matches!(a, Action::UpdateStatus(_)))
    };

    // One second after creation: the first counts wait for the second that is due.
    let held = decide_at(&c, &pods, 1);
    assert!(!writes_status(&held), "{:?}", held.actions);
    assert_eq!(held.requeue_after, Some(Duration::from_secs(2)));
    // Two seconds after: written.
    let due = decide_at(&c, &pods, 2);
    assert!(writes_status(&due), "{:?}", due.actions);

    // Ready within the interval: written at once.
    for pod in &mut pods {
        *pod = existing(
            pod,
            "Running",
            true,
            pod.metadata.uid.as_deref().unwrap_or_default(),
        );
    }
    let ready = decide_at(&c, &pods, 1);
    let Some(Action::UpdateStatus(status)) = ready
        .actions
        .iter()
        .find(|a| matches!(a, Action::UpdateStatus(_)))
    else {
        panic!("ready is written at once: {:?}", ready.actions);
    };
    assert_eq!(status.state.as_deref(), Some(STATE_READY));

    // A Pod that fails to be made is said at once too.
    let failed = decide(
        &c,
        &Snapshot {
            failed_write: Some(FailedWrite {
                reason: "FailedCreateHeadPod",
                message: "pods is forbidden: exceeded quota",
            }),
            ..observed(&[], Some(&svc), &now())
        },
        &ctx(),
        &BuildOptions::default(),
    );
    assert!(writes_status(&failed), "{:?}", failed.actions);
}

/// SidecarMode: a job shorter than the head's first readiness pass ends the submitter sidecar
/// before the Pod was ever Ready; the Pod stays not Ready (ContainersNotReady) while Ray runs.
#[test]
fn a_head_whose_finished_submitter_sidecar_keeps_it_not_ready_still_makes_the_cluster_ready() {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    };
    let c = cluster();
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let status = |name: &str, ready: bool, terminated: bool| ContainerStatus {
        name: name.to_string(),
        ready,
        state: Some(ContainerState {
            terminated: terminated.then(|| ContainerStateTerminated {
                exit_code: 0,
                ..ContainerStateTerminated::default()
            }),
            running: (!terminated).then(ContainerStateRunning::default),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    };
    let head = pods
        .iter_mut()
        .find(|p| crate::cluster::status::node_type(p) == Some("head"))
        .expect("head");
    let pod_status = head.status.as_mut().expect("status");
    pod_status.conditions.as_mut().expect("conditions")[0].status = "False".to_string();
    pod_status.container_statuses = Some(vec![
        status("ray-head", true, false),
        status("ray-job-submitter", false, true),
    ]);
    let svc = service(&c);
    let p = plan(&c, &pods, Some(&svc), None, false);
    assert_eq!(p.status.state.as_deref(), Some(STATE_READY));

    // Not while the Ray container itself is not ready, nor while the submitter still runs.
    for statuses in [
        vec![
            status("ray-head", false, false),
            status("ray-job-submitter", false, true),
        ],
        vec![
            status("ray-head", true, false),
            status("ray-job-submitter", false, false),
        ],
    ] {
        let mut pods = pods.clone();
        let head = pods
            .iter_mut()
            .find(|p| crate::cluster::status::node_type(p) == Some("head"))
            .expect("head");
        head.status.as_mut().expect("status").container_statuses = Some(statuses);
        let p = plan(&c, &pods, Some(&svc), None, false);
        assert_eq!(p.status.state, None);
    }
}

#[test]
fn scaling_up_and_down_follows_replicas_clamped_into_min_max() {
    let mut c = cluster();
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    c.spec.worker_group_specs.as_mut().expect("g")[0].replicas = Some(9);
    converge(&c, &mut pods);
    assert_eq!(pods.len(), 1 + 5, "clamped to maxReplicas");
    c.spec.worker_group_specs.as_mut().expect("g")[0].replicas = Some(1);
    let svc = service(&c);
    let p = plan(&c, &pods, Some(&svc), None, false);
    assert_eq!(deleted(&p).len(), 4);
    assert!(created(&p).is_empty());
    converge(&c, &mut pods);
    assert_eq!(pods.len(), 2);
    let names: BTreeSet<_> = pods.iter().map(|p| p.metadata.name.clone()).collect();
    assert_eq!(names.len(), 2);
}

#[test]
fn num_of_hosts_multiplies_and_suspended_groups_have_no_pods() {
    let mut c = cluster();
    c.spec.worker_group_specs.as_mut().expect("g")[0].num_of_hosts = Some(2);
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    assert_eq!(pods.len(), 1 + 4);
    c.spec.worker_group_specs.as_mut().expect("g")[0].suspend = Some(true);
    converge(&c, &mut pods);
    assert_eq!(pods.len(), 1);
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    assert_eq!(p.status.desired_worker_replicas, Some(0));
}

#[test]
fn workers_to_delete_are_deleted_and_replaced() {
    let mut c = cluster();
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let victim = pods
        .iter()
        .find(|p| node_type(p) == Some("worker"))
        .and_then(|p| p.metadata.name.clone())
        .expect("a worker");
    c.spec.worker_group_specs.as_mut().expect("g")[0].scale_strategy =
        Some(crate::ray::v1::ScaleStrategy {
            workers_to_delete: Some(vec![victim.clone()]),
        });
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    assert_eq!(deleted(&p), std::slice::from_ref(&victim));
    assert_eq!(created(&p).len(), 1);
    assert_ne!(
        created(&p)[0].metadata.name.as_deref(),
        Some(victim.as_str())
    );
}

#[test]
fn a_stale_view_asks_for_the_same_names_again() {
    let c = cluster();
    let first = created(&plan(&c, &[], None, None, false));
    let again = created(&plan(&c, &[], None, None, false));
    let names = |pods: &[Pod]| -> Vec<Option<String>> {
        pods.iter().map(|p| p.metadata.name.clone()).collect()
    };
    assert_eq!(names(&first), names(&again));
}

#[test]
fn failed_pods_are_deleted_before_being_replaced_and_terminating_heads_are_awaited() {
    let c = cluster();
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let worker = pods
        .iter_mut()
        .find(|p| node_type(p) == Some("worker"))
        .expect("worker");
    worker.status.as_mut().expect("s").phase = Some("Failed".to_string());
    let failed = worker.metadata.name.clone().expect("name");
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    assert_eq!(deleted(&p), [failed]);
    assert!(created(&p).is_empty());
    converge(&c, &mut pods);
    assert_eq!(pods.len(), 3);

    let head = pods
        .iter_mut()
        .find(|p| node_type(p) == Some("head"))
        .expect("head");
    head.metadata.deletion_timestamp = Some(now());
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
}

#[test]
fn suspend_deletes_every_pod_zeroes_the_podgroup_and_reports_suspended() {
    let mut c = cluster();
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let pg = sizing::ray_cluster_pod_group(&c).expect("pg");
    c.spec.suspend = Some(true);
    let p = plan(&c, &pods, Some(&service(&c)), Some(&pg), true);
    assert_eq!(deleted(&p).len(), 3);
    assert!(p.actions.iter().any(|a| matches!(a, Action::ResizePodGroup(PodGroupSize { min_member: 0, min_resources, .. }) if min_resources.is_empty())));
    let suspending = p
        .status
        .conditions
        .as_ref()
        .expect("c")
        .iter()
        .find(|c| c.type_ == "RayClusterSuspending")
        .cloned()
        .expect("s");
    assert_eq!(suspending.status, "True");
    let p = plan(&c, &[], Some(&service(&c)), Some(&pg), false);
    assert_eq!(p.status.state.as_deref(), Some(STATE_SUSPENDED));
}

#[test]
fn the_podgroup_is_resized_only_on_drift() {
    let c = cluster();
    let mut pg = sizing::ray_cluster_pod_group(&c).expect("pg");
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let p = plan(&c, &pods, Some(&service(&c)), Some(&pg), true);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    pg.spec
        .min_resources
        .as_mut()
        .expect("r")
        .insert("cpu".into(), Quantity("5000m".into()));
    let p = plan(&c, &pods, Some(&service(&c)), Some(&pg), true);
    assert!(
        p.actions.is_empty(),
        "equal quantities are no drift: {:?}",
        p.actions
    );
    pg.spec.min_member = Some(7);
    let p = plan(&c, &pods, Some(&service(&c)), Some(&pg), true);
    assert!(
        matches!(
            &p.actions[..],
            [Action::ResizePodGroup(PodGroupSize { min_member: 3, .. })]
        ),
        "{:?}",
        p.actions
    );
}

#[test]
fn the_clusters_own_gang_gets_the_gang_pending_condition_and_an_event() {
    let mut c = cluster();
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    // The cluster has run before (a pass creating the first Pods of a cluster without any
    // status writes none). Only the head exists: Volcano's job validation finds too few
    // members.
    c.status = Some(RayClusterStatus::default());
    pods.retain(|p| node_type(p) == Some(HEAD_NODE_TYPE));
    for pod in &mut pods {
        pod.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert("scheduling.k8s.io/group-name".into(), "ray-demo-pg".into());
    }
    let mut pg = sizing::ray_cluster_pod_group(&c).expect("pg");
    pg.status = Some(
        serde_json::from_value(serde_json::json!({"phase": "Inqueue", "conditions": [{
            "type": "Unschedulable", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
            "reason": "NotEnoughTasks",
            "message": "Not enough valid tasks for gang-scheduling, valid: 1, min: 3"}]}))
        .expect("status"),
    );
    let gang = |p: &Plan| {
        p.status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "GangPending")
            .cloned()
    };
    // The pass makes the missing workers: they are on their way, not a cause.
    let p = plan(&c, &pods, Some(&service(&c)), Some(&pg), true);
    assert_eq!(created(&p).len(), 2);
    assert_eq!(gang(&p), None);
    assert!(p.events.iter().all(|e| !e.warning), "{:?}", p.events);
    // Their creation failed (the status says so): now the gang waits for them, and says why.
    c.status = Some(status::with_replica_failure(
        RayClusterStatus::default(),
        "FailedCreateWorkerPod",
        "create Pod demo-small-worker-x: exceeded quota: one-pod",
        &now(),
    ));
    let p = plan(&c, &pods, Some(&service(&c)), Some(&pg), true);
    let waiting = gang(&p).expect("GangPending");
    assert_eq!(
        (waiting.status.as_str(), waiting.reason.as_str()),
        ("True", "WaitingForGang")
    );
    assert!(
        waiting
            .message
            .starts_with("1 of minMember 3 Pods of PodGroup ray-demo-pg exist (0 bound): Volcano binds none until all 3 exist, and creating the others failed: create Pod demo-small-worker-x: exceeded quota: one-pod"),
        "{}",
        waiting.message
    );
    assert!(
        p.events
            .iter()
            .any(|e| e.warning && e.reason == "WaitingForGang"),
        "{:?}",
        p.events
    );
    // Kept as it is by later passes (HeadPodReady and the others are rebuilt every pass).
    c.status = Some(status::finish(p.status.clone(), &now()));
    let again = plan(&c, &pods, Some(&service(&c)), Some(&pg), true);
    assert_eq!(gang(&again), Some(waiting));
    assert!(again.events.iter().all(|e| e.reason != "WaitingForGang"));
    // Suspended: released.
    c.spec.suspend = Some(true);
    let released = plan(&c, &pods, Some(&service(&c)), Some(&pg), true);
    let condition = gang(&released).expect("GangPending");
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "GangReleased")
    );
    // Without the queue: named.
    c.spec.suspend = None;
    let missing = plan_in(&c, &pods, Some(&service(&c)), Some(&pg), None, true);
    assert_eq!(
        gang(&missing).map(|c| c.reason),
        Some("QueueNotFound".to_string())
    );
}

#[test]
fn an_invalid_cluster_gets_no_children_and_a_failed_status() {
    let mut c = cluster();
    c.spec.gcs_fault_tolerance_options = Some(Default::default());
    let p = plan(&c, &[], None, None, true);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.status.state.as_deref(), Some("failed"));
    assert!(
        p.status
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("gcsFaultToleranceOptions")),
        "{:?}",
        p.status.reason
    );
    assert_eq!(p.status.observed_generation, Some(3));
}

#[test]
fn workers_of_a_removed_group_are_deleted() {
    let mut c = cluster();
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    c.spec.worker_group_specs = Some(vec![]);
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    assert_eq!(deleted(&p).len(), 2);
}

#[test]
fn the_status_patch_nulls_owned_fields_left_unset() {
    let status = RayClusterStatus {
        ready_worker_replicas: Some(1),
        ..RayClusterStatus::default()
    };
    let patch = status::merge_patch(&status);
    assert_eq!(patch["status"]["readyWorkerReplicas"], 1);
    assert!(patch["status"]["head"].is_null());
    assert!(
        patch["status"]
            .as_object()
            .expect("o")
            .contains_key("state")
    );
}

#[test]
fn unchanged_status_is_not_rewritten() {
    let c = cluster();
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    let mut c2 = c.clone();
    c2.status = Some(status::finish(p.status.clone(), &now()));
    let later = Time(Timestamp::from_second(1_800_000_100).expect("time"));
    let p2 = decide(
        &c2,
        &observed(&pods, Some(&service(&c)), &later),
        &ctx(),
        &BuildOptions::default(),
    );
    assert!(p2.actions.is_empty(), "{:?}", p2.actions);
}

#[test]
fn children_are_created_in_the_cluster_namespace() {
    let c = cluster();
    let p = plan(&c, &[], None, None, false);
    let svc = p.actions.iter().find_map(|a| match a {
        Action::CreateService(s) => Some(s.metadata.clone()),
        _ => None,
    });
    assert_eq!(
        svc.map(|m: ObjectMeta| m.namespace),
        Some(Some("team".to_string()))
    );
}

/// The decision for a new cluster (nothing exists yet) after `failed_write`.
fn decide_new(c: &RayCluster, failed_write: Option<FailedWrite<'_>>) -> Decision<Action> {
    decide(
        c,
        &Snapshot {
            failed_write,
            ..observed(&[], None, &now())
        },
        &ctx(),
        &BuildOptions::default(),
    )
}

#[test]
fn each_write_is_followed_by_the_event_it_earns() {
    let decision = decide_new(&cluster(), None);
    let steps: Vec<String> = decision
        .actions
        .iter()
        .map(|a| match a {
            Action::CreateService(_) => "CreateService".to_string(),
            Action::CreatePod(pod) => format!("CreatePod {}", status::node_type(pod).unwrap_or("")),
            Action::Event(note) => format!("Event {}", note.reason),
            Action::UpdateStatus(_) => "UpdateStatus".to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        steps,
        [
            "CreateService",
            "Event CreatedService",
            "CreatePod head",
            "Event CreatedHeadPod",
            "CreatePod worker",
            "Event CreatedWorkerPod",
            "CreatePod worker",
            "Event CreatedWorkerPod",
        ]
    );
}

#[test]
fn a_failed_write_becomes_the_replica_failure_condition_and_nothing_else() {
    use crate::decision::Action as _;
    let c = cluster();
    let first = plan(&c, &[], None, None, false);
    let pod = first
        .actions
        .iter()
        .find(|a| matches!(a, Action::CreatePod(p) if status::node_type(p) == Some("worker")))
        .expect("a worker Pod is created");
    let reason = pod.failure_reason().expect("a create can fail");
    assert_eq!(reason, "FailedCreateWorkerPod");
    let decision = decide_new(
        &c,
        Some(FailedWrite {
            reason,
            message: "create Pod x: forbidden",
        }),
    );
    let [Action::UpdateStatus(status)] = decision.actions.as_slice() else {
        panic!("{:?}", decision.actions)
    };
    let condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "ReplicaFailure")
        .expect("ReplicaFailure");
    assert_eq!(condition.reason, "FailedCreateWorkerPod");
    assert_eq!(condition.message, "create Pod x: forbidden");
}

/// (replica name, replica index, host index) of each worker Pod, sorted.
fn replicas_of(pods: &[Pod]) -> Vec<(String, String, String)> {
    let mut rows: Vec<_> = pods
        .iter()
        .filter(|p| node_type(p) == Some("worker"))
        .map(|p| {
            let label = |k: &str| {
                keys::value_in(p.metadata.labels.as_ref(), k)
                    .unwrap_or("-")
                    .to_string()
            };
            (
                label(keys::REPLICA_NAME_LABEL),
                label(keys::REPLICA_INDEX_LABEL),
                label(keys::HOST_INDEX_LABEL),
            )
        })
        .collect();
    rows.sort();
    rows
}

fn multi_host(replicas: i32) -> RayCluster {
    let mut c = cluster();
    let group = &mut c.spec.worker_group_specs.as_mut().expect("g")[0];
    group.num_of_hosts = Some(2);
    group.replicas = Some(replicas);
    c
}

#[test]
fn multi_host_pods_are_labelled_with_their_replica_and_host() {
    let c = multi_host(2);
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let rows = replicas_of(&pods);
    assert_eq!(rows.len(), 4);
    let names: BTreeSet<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names.len(), 2, "{rows:?}");
    for name in &names {
        assert!(name.starts_with("small-") && name.len() == "small-".len() + 5);
        let hosts: Vec<&str> = rows
            .iter()
            .filter(|r| r.0 == *name)
            .map(|r| r.2.as_str())
            .collect();
        assert_eq!(hosts, ["0", "1"]);
    }
    let indices: BTreeSet<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(indices, BTreeSet::from(["0", "1"]));
    // A stale view asks for the same Pods, names and labels alike.
    let again = created(&plan(&c, &[], None, None, false));
    let first = created(&plan(&c, &[], None, None, false));
    assert_eq!(again, first);
}

#[test]
fn a_lost_host_is_replaced_in_its_replica_and_scaling_down_removes_whole_replicas() {
    let mut c = multi_host(2);
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let before = replicas_of(&pods);
    let lost = pods
        .iter()
        .position(|p| {
            keys::value_in(p.metadata.labels.as_ref(), keys::HOST_INDEX_LABEL) == Some("1")
                && keys::value_in(p.metadata.labels.as_ref(), keys::REPLICA_INDEX_LABEL)
                    == Some("1")
        })
        .expect("host 1 of replica 1");
    pods.remove(lost);
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    let replacement = replicas_of(&created(&p));
    assert_eq!(
        replacement,
        before
            .iter()
            .filter(|r| r.1 == "1" && r.2 == "1")
            .cloned()
            .collect::<Vec<_>>()
    );
    converge(&c, &mut pods);
    assert_eq!(replicas_of(&pods), before);

    // Down to one replica: both Pods of one replica go, none of the other.
    c.spec.worker_group_specs.as_mut().expect("g")[0].replicas = Some(1);
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    let gone: Vec<&Pod> = pods
        .iter()
        .filter(|pod| deleted(&p).contains(pod.metadata.name.as_ref().expect("name")))
        .collect();
    assert_eq!(gone.len(), 2);
    assert_eq!(
        keys::value_in(gone[0].metadata.labels.as_ref(), keys::REPLICA_NAME_LABEL),
        keys::value_in(gone[1].metadata.labels.as_ref(), keys::REPLICA_NAME_LABEL)
    );
    assert!(created(&p).is_empty());
}

#[test]
fn multi_host_pods_in_no_replica_are_labelled_into_replicas_where_they_run() {
    // Pods an older raygate made: no replica labels at all. None is deleted or made again.
    let c = multi_host(2);
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    for pod in &mut pods {
        let labels = pod.metadata.labels.as_mut().expect("labels");
        for key in [
            keys::REPLICA_NAME_LABEL,
            keys::REPLICA_INDEX_LABEL,
            keys::HOST_INDEX_LABEL,
        ] {
            labels.remove(key);
        }
    }
    let names = |pods: &[Pod]| -> BTreeSet<String> {
        pods.iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    };
    let before = names(&pods);
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    assert!(deleted(&p).is_empty(), "{:?}", deleted(&p));
    assert!(created(&p).is_empty(), "{:?}", created(&p));
    let noted = p
        .events
        .iter()
        .filter(|note| note.reason == "LabelledWorkerPod" && !note.warning)
        .count();
    assert_eq!(noted, 4, "{:?}", p.events);
    apply_labels(&p, &mut pods);
    let rows = replicas_of(&pods);
    let replicas: BTreeSet<(&str, &str)> =
        rows.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect();
    assert_eq!(replicas.len(), 2, "{rows:?}");
    assert_eq!(
        replicas.iter().map(|r| r.1).collect::<Vec<_>>(),
        ["0", "1"],
        "{rows:?}"
    );
    for (name, _) in &replicas {
        let hosts: Vec<&str> = rows
            .iter()
            .filter(|r| r.0 == *name)
            .map(|r| r.2.as_str())
            .collect();
        assert_eq!(hosts, ["0", "1"], "{rows:?}");
    }
    // Labelled, the cluster is as it should be: nothing more to do to its Pods.
    converge(&c, &mut pods);
    assert_eq!(names(&pods), before);

    // One unlabelled Pod next to a whole replica: a replica of its own at the next free index,
    // whose missing host is then made.
    let c = multi_host(2);
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let stray = pods
        .iter_mut()
        .find(|p| {
            keys::value_in(p.metadata.labels.as_ref(), keys::REPLICA_INDEX_LABEL) == Some("1")
        })
        .expect("a Pod of replica 1");
    let stray_name = stray.metadata.name.clone().expect("name");
    let labels = stray.metadata.labels.as_mut().expect("labels");
    labels.remove(keys::REPLICA_NAME_LABEL);
    labels.remove(keys::REPLICA_INDEX_LABEL);
    labels.remove(keys::HOST_INDEX_LABEL);
    pods.retain(|p| {
        keys::value_in(p.metadata.labels.as_ref(), keys::REPLICA_INDEX_LABEL) != Some("1")
            || p.metadata.name.as_deref() == Some(&stray_name)
    });
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    assert!(deleted(&p).is_empty(), "{:?}", deleted(&p));
    let labelled: Vec<&BTreeMap<String, String>> = p
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::LabelPod { name, labels, .. } if *name == stray_name => Some(labels),
            _ => None,
        })
        .collect();
    assert_eq!(labelled.len(), 1, "{:?}", p.actions);
    assert_eq!(labelled[0][keys::REPLICA_INDEX_LABEL], "1");
    assert_eq!(labelled[0][keys::HOST_INDEX_LABEL], "0");
    let made = replicas_of(&created(&p));
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(
        (made[0].0.as_str(), made[0].1.as_str(), made[0].2.as_str()),
        (labelled[0][keys::REPLICA_NAME_LABEL].as_str(), "1", "1")
    );
}

#[test]
fn without_sub_groups_in_the_crd_the_podgroup_keeps_only_its_size() {
    let c = multi_host(2);
    let now = now();
    let decide_with = |pg: Option<&PodGroup>, sub_groups: bool| {
        outline(
            &c,
            decide(
                &c,
                &Snapshot {
                    pod_group: pg,
                    volcano: true,
                    sub_groups,
                    ..observed(&[], None, &now)
                },
                &ctx(),
                &BuildOptions::default(),
            ),
        )
    };
    let create = |plan: &Plan| {
        plan.actions.iter().find_map(|a| match a {
            Action::CreatePodGroup(pg) => Some(pg.spec.clone()),
            _ => None,
        })
    };
    let with = create(&decide_with(None, true)).expect("a PodGroup");
    let policies = with.sub_group_policy.clone().expect("sub-groups");
    assert_eq!(policies[0].min_sub_groups, Some(2));
    let without = create(&decide_with(None, false)).expect("a PodGroup");
    assert_eq!(without.sub_group_policy, None);
    assert_eq!(
        (without.min_member, without.min_resources),
        (with.min_member, with.min_resources.clone())
    );

    // A live PodGroup without the field (pruned by the CRD) is no drift then, but is where the
    // CRD has it, and the resize sets the policies.
    let mut live = sizing::ray_cluster_pod_group(&c).expect("pg");
    live.spec.sub_group_policy = None;
    let resizes = |plan: &Plan| -> Vec<PodGroupSize> {
        plan.actions
            .iter()
            .filter_map(|a| match a {
                Action::ResizePodGroup(size) => Some(size.clone()),
                _ => None,
            })
            .collect()
    };
    assert!(resizes(&decide_with(Some(&live), false)).is_empty());
    let resized = resizes(&decide_with(Some(&live), true));
    assert_eq!(resized.len(), 1);
    assert_eq!(resized[0].sub_group_policy.as_ref(), Some(&policies));
}

#[test]
fn pods_kept_as_the_reconciler_caches_them_give_the_same_plans() {
    let trimmed = |pods: &[Pod]| -> Vec<Pod> {
        pods.iter()
            .cloned()
            .map(|mut pod| {
                crate::observed::keep_what_decisions_read(&mut pod);
                pod
            })
            .collect()
    };
    let same_plans = |c: &RayCluster, pods: &[Pod], scenario: &str| {
        let svc = service(c);
        let full = plan(c, pods, Some(&svc), None, true);
        let kept = plan(c, &trimmed(pods), Some(&svc), None, true);
        assert_eq!(format!("{full:?}"), format!("{kept:?}"), "{scenario}");
    };
    let mut c = cluster();
    let first = created(&plan(&c, &[], None, None, true));
    let pending: Vec<Pod> = first
        .iter()
        .enumerate()
        .map(|(i, pod)| existing(pod, "Pending", false, &format!("u{i}")))
        .collect();
    same_plans(&c, &pending, "Pods coming up");

    let mut pods = Vec::new();
    converge(&c, &mut pods);
    same_plans(&c, &pods, "a ready cluster");

    let mut failed = pods.clone();
    let worker = failed
        .iter_mut()
        .find(|p| node_type(p) == Some("worker"))
        .expect("a worker");
    worker.status.as_mut().expect("status").phase = Some("Failed".to_string());
    same_plans(&c, &failed, "a failed worker");

    c.spec.worker_group_specs.as_mut().expect("groups")[0].replicas = Some(1);
    same_plans(&c, &pods, "scaled down");
    c.spec.worker_group_specs.as_mut().expect("groups")[0].num_of_hosts = Some(2);
    same_plans(&c, &pods, "multi-host replicas to label");
}

fn recreating(mut c: RayCluster) -> RayCluster {
    c.spec.upgrade_strategy = Some(crate::ray::v1::RayClusterUpgradeStrategy {
        type_: Some("Recreate".to_string()),
    });
    c
}

fn set_images(c: &mut RayCluster, image: &str) {
    c.spec
        .head_group_spec
        .template
        .spec
        .as_mut()
        .expect("spec")
        .containers[0]
        .image = Some(image.to_string());
    for group in c.spec.worker_group_specs.iter_mut().flatten() {
        group.template.spec.as_mut().expect("spec").containers[0].image = Some(image.to_string());
    }
}

fn head_of(pods: &[Pod]) -> &Pod {
    pods.iter()
        .find(|p| node_type(p) == Some("head") && !is_terminating(p))
        .expect("a live head")
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    keys::value_in(pod.metadata.annotations.as_ref(), key)
}

#[test]
fn the_head_pod_is_stamped_with_the_spec_it_was_made_from() {
    let c = recreating(cluster());
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let head = head_of(&pods);
    let hash = upgrade::spec_hash(&c);
    assert_eq!(hash.len(), 16);
    assert_eq!(
        annotation(head, upgrade::RECREATE_HASH_ANNOTATION),
        Some(hash.as_str())
    );
    assert_eq!(
        annotation(head, upgrade::OPERATOR_VERSION_ANNOTATION),
        Some(format!("raygate/{}", env!("CARGO_PKG_VERSION")).as_str())
    );
    for worker in pods.iter().filter(|p| node_type(p) == Some("worker")) {
        assert_eq!(annotation(worker, upgrade::RECREATE_HASH_ANNOTATION), None);
    }
    // The same spec always hashes alike; the image is part of it.
    assert_eq!(upgrade::spec_hash(&recreating(cluster())), hash);
    let mut changed = c.clone();
    set_images(&mut changed, "rayproject/ray:2.61.0");
    assert_ne!(upgrade::spec_hash(&changed), hash);
}

#[test]
fn a_recreate_upgrade_replaces_every_pod_workers_first_then_makes_them_from_the_new_spec() {
    let mut c = recreating(cluster());
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let svc = service(&c);
    assert!(plan(&c, &pods, Some(&svc), None, false).actions.is_empty());

    set_images(&mut c, "rayproject/ray:2.61.0");
    let p = plan(&c, &pods, Some(&svc), None, false);
    assert!(
        created(&p).is_empty(),
        "nothing is created in the pass that deletes"
    );
    let gone = deleted(&p);
    assert_eq!(gone.len(), 3);
    assert_eq!(
        gone.last().map(String::as_str),
        head_of(&pods).metadata.name.as_deref(),
        "the head goes last"
    );
    assert!(
        p.events
            .iter()
            .all(|e| e.reason == "DeletedPod" && e.message.contains("upgradeStrategy is Recreate"))
    );

    // A pass that stopped after the workers: the head still has its old stamp, so the next
    // pass deletes it too.
    let mut half_done: Vec<Pod> = pods
        .iter()
        .filter(|p| node_type(p) == Some("head"))
        .cloned()
        .collect();
    let p = plan(&c, &half_done, Some(&svc), None, false);
    assert_eq!(
        deleted(&p),
        [head_of(&half_done).metadata.name.clone().expect("name")]
    );
    assert!(created(&p).is_empty());

    // While the old head terminates, no second head is made and nothing is deleted again.
    half_done[0].metadata.deletion_timestamp = Some(now());
    let p = plan(&c, &half_done, Some(&svc), None, false);
    assert!(deleted(&p).is_empty());
    assert!(created(&p).iter().all(|pod| node_type(pod) != Some("head")));

    // Once the old Pods are gone, the new ones are made from the new spec and stay.
    pods.clear();
    converge(&c, &mut pods);
    assert_eq!(pods.len(), 3);
    for pod in &pods {
        let image = pod.spec.as_ref().expect("spec").containers[0]
            .image
            .as_deref();
        assert_eq!(image, Some("rayproject/ray:2.61.0"));
    }
    assert_eq!(
        annotation(head_of(&pods), upgrade::RECREATE_HASH_ANNOTATION),
        Some(upgrade::spec_hash(&c).as_str())
    );
    assert!(plan(&c, &pods, Some(&svc), None, false).actions.is_empty());
}

#[test]
fn scaling_and_the_fields_queueing_systems_edit_recreate_nothing() {
    let mut c = recreating(cluster());
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let before = upgrade::spec_hash(&c);
    let group = &mut c.spec.worker_group_specs.as_mut().expect("g")[0];
    group.replicas = Some(3);
    group.min_replicas = Some(1);
    group.max_replicas = Some(4);
    let mut suspended = c.clone();
    suspended.spec.worker_group_specs.as_mut().expect("g")[0].suspend = Some(true);
    assert_eq!(upgrade::spec_hash(&suspended), before, "a group's suspend");
    let group = &mut c.spec.worker_group_specs.as_mut().expect("g")[0];
    group.scale_strategy = Some(crate::ray::v1::ScaleStrategy {
        workers_to_delete: Some(vec!["gone".to_string()]),
    });
    let template = group.template.spec.as_mut().expect("spec");
    template.tolerations = Some(vec![Default::default()]);
    template.scheduling_gates = Some(vec![Default::default()]);
    c.spec
        .head_group_spec
        .template
        .spec
        .as_mut()
        .expect("spec")
        .tolerations = Some(vec![Default::default()]);
    assert_eq!(upgrade::spec_hash(&c), before);
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    assert!(deleted(&p).is_empty(), "{:?}", p.actions);
    assert_eq!(created(&p).len(), 1, "scaling up still adds a worker");
}

#[test]
fn without_the_recreate_strategy_a_spec_change_leaves_the_pods_alone() {
    for strategy in [None, Some("None")] {
        let mut c = cluster();
        c.spec.upgrade_strategy = strategy.map(|t| crate::ray::v1::RayClusterUpgradeStrategy {
            type_: Some(t.to_string()),
        });
        let mut pods = Vec::new();
        converge(&c, &mut pods);
        set_images(&mut c, "rayproject/ray:2.61.0");
        let p = plan(&c, &pods, Some(&service(&c)), None, false);
        assert!(p.actions.is_empty(), "{strategy:?}: {:?}", p.actions);
    }
}

#[test]
fn a_head_stamped_by_another_operator_or_not_at_all_is_restamped_not_recreated() {
    let c = recreating(cluster());
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let stamps: [&[(&str, &str)]; 3] = [
        &[
            ("ray.io/upgrade-strategy-recreate-hash", "kuberay-hash"),
            ("ray.io/kuberay-version", "v1.5.0"),
        ],
        &[("ray.io/kuberay-version", "raygate/0.0.1")],
        &[],
    ];
    for stamp in stamps {
        let mut pods = pods.clone();
        let head = pods
            .iter_mut()
            .find(|p| node_type(p) == Some("head"))
            .expect("head");
        head.metadata.annotations = Some(
            stamp
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        );
        let p = plan(&c, &pods, Some(&service(&c)), None, false);
        assert!(deleted(&p).is_empty(), "{stamp:?}: {:?}", p.actions);
        let head = head_of(&pods);
        let [
            Action::AnnotatePod {
                name,
                uid,
                annotations,
            },
        ] = p.actions.as_slice()
        else {
            panic!("{stamp:?}: {:?}", p.actions);
        };
        assert_eq!(Some(name), head.metadata.name.as_ref());
        assert_eq!(uid, &head.metadata.uid);
        assert_eq!(annotations, &upgrade::head_stamp(&c));
    }
}

#[test]
fn a_cluster_with_a_multi_host_group_gets_a_headless_worker_service_once() {
    let c = multi_host(2);
    let first = plan(&c, &[], None, None, false);
    let names: Vec<Option<String>> = created_services(&first)
        .iter()
        .map(|s| s.metadata.name.clone())
        .collect();
    assert_eq!(
        names,
        [
            Some("demo-head-svc".to_string()),
            Some("demo-headless".to_string())
        ]
    );
    let headless = &created_services(&first)[1];
    let spec = headless.spec.as_ref().expect("spec");
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(spec.publish_not_ready_addresses, Some(true));
    assert_eq!(spec.ports, None);
    assert_eq!(
        spec.selector,
        Some(BTreeMap::from([
            ("ray.io/cluster".to_string(), "demo".to_string()),
            ("ray.io/node-type".to_string(), "worker".to_string()),
        ]))
    );
    let labels = headless.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels["ray.io/headless-worker-svc"], "demo");
    assert_eq!(labels["ray.io/node-type"], "worker");
    assert_eq!(
        headless.metadata.owner_references.as_ref().expect("owner")[0].uid,
        "u-1"
    );
    assert!(
        first
            .events
            .iter()
            .any(|e| e.reason == "CreatedService" && e.message.ends_with("/demo-headless"))
    );

    // Made once: with both Services there, neither is asked for again.
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let again = plan(&c, &pods, Some(&service(&c)), None, false);
    assert!(created_services(&again).is_empty(), "{:?}", again.actions);

    // A head Service alone: only the headless one is made.
    let now = now();
    let only_head = outline(
        &c,
        decide(
            &c,
            &observed(&pods, Some(&service(&c)), &now),
            &ctx(),
            &BuildOptions::default(),
        ),
    );
    let names: Vec<Option<String>> = created_services(&only_head)
        .iter()
        .map(|s| s.metadata.name.clone())
        .collect();
    assert_eq!(names, [Some("demo-headless".to_string())]);

    // Single-host clusters have none.
    assert_eq!(
        created_services(&plan(&cluster(), &[], None, None, false)).len(),
        1
    );
}

fn autoscaled() -> RayCluster {
    let mut c = cluster();
    c.spec.enable_in_tree_autoscaling = Some(true);
    c
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn rbac_writes(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateServiceAccount(o) => {
                Some(format!("ServiceAccount {}", name_of(&o.metadata)))
            }
            Action::CreateRole(o) => Some(format!("Role {}", name_of(&o.metadata))),
            Action::CreateRoleBinding(o) => Some(format!("RoleBinding {}", name_of(&o.metadata))),
            _ => None,
        })
        .collect()
}

#[test]
fn an_autoscaled_head_is_preceded_by_what_its_autoscaler_acts_with() {
    let c = autoscaled();
    let p = plan(&c, &[], Some(&service(&c)), None, false);
    assert_eq!(
        rbac_writes(&p),
        ["ServiceAccount demo", "Role demo", "RoleBinding demo"]
    );
    let first_rbac = p
        .actions
        .iter()
        .position(|a| matches!(a, Action::CreateServiceAccount(_)))
        .expect("a ServiceAccount");
    let head = p
        .actions
        .iter()
        .position(|a| matches!(a, Action::CreatePod(pod) if is_head(pod)))
        .expect("a head");
    assert!(first_rbac < head, "{:?}", p.actions);
    assert_eq!(
        p.events
            .iter()
            .filter(|e| e.reason.starts_with("CreatedRole") || e.reason == "CreatedServiceAccount")
            .map(|e| e.message.as_str())
            .collect::<Vec<_>>(),
        [
            "Created service account team/demo",
            "Created role team/demo",
            "Created role binding team/demo"
        ]
    );
    // While the head lives nothing is asked again; without autoscaling nothing is asked at all.
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    assert!(rbac_writes(&plan(&c, &pods, Some(&service(&c)), None, false)).is_empty());
    assert!(rbac_writes(&plan(&cluster(), &[], Some(&service(&c)), None, false)).is_empty());

    // A head template that names its ServiceAccount: its user makes it, raygate binds it.
    let mut named = autoscaled();
    named
        .spec
        .head_group_spec
        .template
        .spec
        .as_mut()
        .expect("spec")
        .service_account_name = Some("team-ray".into());
    let p = plan(&named, &[], Some(&service(&named)), None, false);
    assert_eq!(rbac_writes(&p), ["Role demo", "RoleBinding demo"]);
    let Some(Action::CreateRoleBinding(binding)) = p
        .actions
        .iter()
        .find(|a| matches!(a, Action::CreateRoleBinding(_)))
    else {
        panic!("a RoleBinding");
    };
    assert_eq!(
        binding.subjects.as_ref().expect("subjects")[0].name,
        "team-ray"
    );
    assert_eq!(
        created(&p)
            .iter()
            .find(|pod| is_head(pod))
            .and_then(|pod| pod.spec.as_ref()?.service_account_name.clone())
            .as_deref(),
        Some("team-ray")
    );
}

#[test]
fn with_autoscaling_only_the_workers_the_autoscaler_names_are_removed() {
    let mut c = autoscaled();
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    assert_eq!(pods.len(), 1 + 2);
    // Fewer replicas alone removes nobody: the autoscaler names whom.
    c.spec.worker_group_specs.as_mut().expect("g")[0].replicas = Some(1);
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    assert!(deleted(&p).is_empty(), "{:?}", p.actions);
    assert!(created(&p).is_empty());
    let victim = pods
        .iter()
        .filter(|p| node_type(p) == Some("worker"))
        .map(|p| p.metadata.name.clone().expect("name"))
        .max()
        .expect("a worker");
    c.spec.worker_group_specs.as_mut().expect("g")[0].scale_strategy =
        Some(crate::ray::v1::ScaleStrategy {
            workers_to_delete: Some(vec![victim.clone()]),
        });
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    assert_eq!(deleted(&p), std::slice::from_ref(&victim));
    assert!(created(&p).is_empty(), "replicas 1 is what remains");
    // Scaling up works as without autoscaling.
    c.spec.worker_group_specs.as_mut().expect("g")[0].scale_strategy = None;
    c.spec.worker_group_specs.as_mut().expect("g")[0].replicas = Some(4);
    converge(&c, &mut pods);
    assert_eq!(pods.len(), 1 + 4);
}

#[test]
fn naming_one_host_of_a_multi_host_replica_removes_the_whole_replica() {
    let mut c = multi_host(2);
    c.spec.enable_in_tree_autoscaling = Some(true);
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let named = pods
        .iter()
        .find(|p| {
            keys::value_in(p.metadata.labels.as_ref(), keys::REPLICA_INDEX_LABEL) == Some("0")
        })
        .expect("a host of replica 0")
        .clone();
    let replica = keys::value_in(named.metadata.labels.as_ref(), keys::REPLICA_NAME_LABEL)
        .expect("a replica");
    let group = &mut c.spec.worker_group_specs.as_mut().expect("g")[0];
    group.replicas = Some(1);
    group.scale_strategy = Some(crate::ray::v1::ScaleStrategy {
        workers_to_delete: Some(vec![named.metadata.name.clone().expect("name")]),
    });
    let p = plan(&c, &pods, Some(&service(&c)), None, false);
    let mut expected: Vec<String> = pods
        .iter()
        .filter(|p| {
            keys::value_in(p.metadata.labels.as_ref(), keys::REPLICA_NAME_LABEL) == Some(replica)
        })
        .map(|p| p.metadata.name.clone().expect("name"))
        .collect();
    let mut gone = deleted(&p);
    expected.sort();
    gone.sort();
    assert_eq!(gone, expected);
    assert_eq!(gone.len(), 2);
    assert!(created(&p).is_empty());
}

fn token_secret_writes(p: &Plan) -> Vec<&str> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateAuthSecret { name } => Some(name.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_token_authenticated_head_is_preceded_by_its_token_secret() {
    let mut c = cluster();
    c.spec.auth_options = Some(crate::ray::v1::AuthOptions {
        mode: Some("token".into()),
        ..Default::default()
    });
    let p = plan(&c, &[], Some(&service(&c)), None, false);
    assert_eq!(token_secret_writes(&p), ["demo"]);
    let secret = p
        .actions
        .iter()
        .position(|a| matches!(a, Action::CreateAuthSecret { .. }))
        .expect("a Secret");
    let first_pod = p
        .actions
        .iter()
        .position(|a| matches!(a, Action::CreatePod(_)))
        .expect("Pods");
    assert!(secret < first_pod, "{:?}", p.actions);
    // KubeRay records no Event for it; neither does raygate (the Secret is no secret, its
    // content is).
    assert!(p.events.iter().all(|e| !e.message.contains("Secret")));

    // While the head lives it is not asked for again.
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    assert!(token_secret_writes(&plan(&c, &pods, Some(&service(&c)), None, false)).is_empty());

    // A Secret the user names is the user's to make.
    c.spec.auth_options.as_mut().expect("auth").secret_name = Some("team-token".into());
    assert!(token_secret_writes(&plan(&c, &[], Some(&service(&c)), None, false)).is_empty());
}

#[test]
fn a_head_that_asks_for_an_ingress_is_preceded_by_it() {
    let mut c = cluster();
    c.spec.head_group_spec.enable_ingress = Some(true);
    let p = plan(&c, &[], Some(&service(&c)), None, false);
    let ingress = p
        .actions
        .iter()
        .position(|a| matches!(a, Action::CreateIngress(i) if name_of(&i.metadata) == "demo-head-ingress"))
        .expect("an Ingress");
    let head = p
        .actions
        .iter()
        .position(|a| matches!(a, Action::CreatePod(pod) if is_head(pod)))
        .expect("a head");
    assert!(ingress < head, "{:?}", p.actions);
    assert!(
        p.events.iter().any(|e| e.reason == "CreatedIngress"
            && e.message == "Created ingress team/demo-head-ingress"),
        "{:?}",
        p.events
    );
    let mut pods = Vec::new();
    converge(&c, &mut pods);
    let again = plan(&c, &pods, Some(&service(&c)), None, false);
    assert!(
        !again
            .actions
            .iter()
            .any(|a| matches!(a, Action::CreateIngress(_)))
    );
    let without = plan(&cluster(), &[], Some(&service(&c)), None, false);
    assert!(
        !without
            .actions
            .iter()
            .any(|a| matches!(a, Action::CreateIngress(_)))
    );
}
