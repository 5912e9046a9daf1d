use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::test_support::managed;

/// Plans compare by their Debug form (PodGroup has no PartialEq).
macro_rules! assert_plan {
    ($left:expr, $right:expr $(, $($msg:tt)+)?) => {
        assert_eq!(format!("{:?}", $left), format!("{:?}", $right) $(, $($msg)+)?)
    };
}

const OWN: &str = "raygate-reconciler";

fn job(yaml: &str) -> RayJob {
    serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}"))
}

fn cluster(yaml: &str) -> RayCluster {
    serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}"))
}

const CLUSTER_SPEC: &str = r#"
    headGroupSpec:
      template:
        spec:
          containers:
          - name: ray-head
            resources:
              requests: {cpu: "1", memory: 2Gi}
    workerGroupSpecs:
    - groupName: small
      replicas: 2
      minReplicas: 0
      maxReplicas: 5
      numOfHosts: 2
      template:
        spec:
          containers:
          - name: ray-worker
            resources:
              requests: {cpu: 500m, memory: 1Gi, nvidia.com/gpu: "1"}
"#;

fn ray_job(extra_spec: &str, status: &str) -> RayJob {
    job(&format!(
        r#"
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: demo
  namespace: ml
  uid: u-1
  labels: {{volcano.sh/queue-name: research}}
spec:
  entrypoint: python train.py
{extra_spec}
  rayClusterSpec:
{CLUSTER_SPEC}
{status}
"#
    ))
}

fn live_cluster(extra_meta: &str) -> RayCluster {
    cluster(&format!(
        r#"
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: demo-abcde
  namespace: ml
{extra_meta}
spec:
{CLUSTER_SPEC}
"#
    ))
}

fn standalone(extra_spec: &str) -> RayCluster {
    cluster(&format!(
        r#"
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: raycluster
  namespace: ml
  uid: u-2
spec:
{extra_spec}
{CLUSTER_SPEC}
"#
    ))
}

fn resources(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// A PodGroup as raygate created it, with the given size.
fn ours(min_member: i32, min: &[(&str, &str)]) -> PodGroup {
    let mut pg = PodGroup::new("ray-demo-pg", Default::default());
    pg.spec.min_member = Some(min_member);
    pg.spec.min_resources = Some(resources(min));
    pg.spec.sub_group_policy = (min_member > 0).then(policies);
    pg.metadata.labels = Some(BTreeMap::from([(
        keys::MANAGED_BY_LABEL.to_string(),
        keys::MANAGED_BY_RAYGATE.to_string(),
    )]));
    pg
}

fn observed<'a>(pod_group: Option<&'a PodGroup>, cluster: Option<&'a RayCluster>) -> Snapshot<'a> {
    Snapshot {
        pod_group,
        cluster,
        own_manager: OWN,
        sub_groups: true,
        pods: &[],
    }
}

/// The sub-group policies of the fixtures' cluster spec (one 2-host group of 2 replicas).
fn policies() -> Vec<SubGroupPolicySpec> {
    let job = ray_job("", "");
    sizing::sub_group_policies(job.spec.ray_cluster_spec.as_ref().expect("a cluster spec"))
}

/// head 1 CPU/2Gi + 2 replicas × 2 hosts × (500m, 1Gi, 1 GPU)
const CLUSTER_GANG: &[(&str, &str)] = &[("cpu", "3"), ("memory", "6Gi"), ("nvidia.com/gpu", "4")];
/// the cluster plus the default submitter (500m, 200Mi)
const JOB_GANG: &[(&str, &str)] = &[
    ("cpu", "3500m"),
    ("memory", "6344Mi"),
    ("nvidia.com/gpu", "4"),
];

#[test]
fn the_namespace_label_chooses_the_reconciler_and_the_flag_is_the_default() {
    let labels = |v: &str| BTreeMap::from([(keys::RECONCILER_LABEL.to_string(), v.to_string())]);
    assert_eq!(
        namespace_reconciler(None, ReconcilerKind::Raygate),
        Ok(ReconcilerKind::Raygate)
    );
    assert_eq!(
        namespace_reconciler(Some(&BTreeMap::new()), ReconcilerKind::Kuberay),
        Ok(ReconcilerKind::Kuberay)
    );
    assert_eq!(
        namespace_reconciler(Some(&labels("kuberay")), ReconcilerKind::Raygate),
        Ok(ReconcilerKind::Kuberay)
    );
    assert_eq!(
        namespace_reconciler(Some(&labels("raygate")), ReconcilerKind::Kuberay),
        Ok(ReconcilerKind::Raygate)
    );
    let err = namespace_reconciler(Some(&labels("KubeRay")), ReconcilerKind::Raygate).unwrap_err();
    assert!(
        err.contains("raygate.io/reconciler") && err.contains("\"KubeRay\""),
        "{err}"
    );
}

#[test]
fn a_new_rayjob_gets_raygates_podgroup_without_the_submitter_in_min_member() {
    let plan = change(Owner::RayJob(&ray_job("", "")), &observed(None, None));
    let Change::Create(pg) = plan else {
        panic!("expected Create, got {plan:?}")
    };
    assert_plan!(pg.metadata.name.as_deref(), Some("ray-demo-pg"));
    assert_plan!(pg.spec.min_member, Some(5));
    assert!(sizing::pod_group_holds_gang(
        &pg.spec,
        5,
        &resources(JOB_GANG),
        Some(&policies())
    ));
    assert_plan!(pg.spec.queue.as_deref(), Some("research"));
    let owner = &pg.metadata.owner_references.as_ref().unwrap()[0];
    assert_plan!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("RayJob", "demo")
    );
    assert_plan!(
        pg.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::MANAGED_BY_LABEL))
            .map(String::as_str),
        Some(keys::MANAGED_BY_RAYGATE)
    );
}

#[test]
fn a_running_rayjob_follows_its_spec() {
    let running = "status: {jobDeploymentStatus: Running}";
    let pg = ours(5, JOB_GANG);
    assert_plan!(
        change(
            Owner::RayJob(&ray_job("", running)),
            &observed(Some(&pg), None)
        ),
        Change::InSync
    );
    let drifted = ours(3, &[("cpu", "1")]);
    assert_plan!(
        change(
            Owner::RayJob(&ray_job("", running)),
            &observed(Some(&drifted), None)
        ),
        Change::Resize(PodGroupSize {
            name: "ray-demo-pg".into(),
            min_member: 5,
            min_resources: resources(JOB_GANG),
            sub_group_policy: Some(policies()),
        })
    );
}

/// A worker Pod of the fixtures' 2-host group `small`, with the replica name KubeRay gives it
/// under RayMultiHostIndexing (`None`: made without the gate), terminating or not.
fn small_worker(name: &str, replica: Option<&str>, terminating: bool) -> Pod {
    let mut labels = BTreeMap::from([
        (
            keys::RAY_CLUSTER_LABEL.to_string(),
            "demo-abcde".to_string(),
        ),
        (keys::RAY_NODE_TYPE_LABEL.to_string(), "worker".to_string()),
        (keys::RAY_GROUP_LABEL.to_string(), "small".to_string()),
    ]);
    if let Some(replica) = replica {
        labels.insert(keys::REPLICA_NAME_LABEL.to_string(), replica.to_string());
    }
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.to_string());
    pod.metadata.labels = Some(labels);
    pod.metadata.deletion_timestamp = terminating.then_some(Time(Timestamp::UNIX_EPOCH));
    pod
}

/// `(matchLabelKeys, subGroupSize, minSubGroups)` of each policy.
fn splits(policies: &[SubGroupPolicySpec]) -> Vec<(Vec<String>, Option<i32>, Option<i32>)> {
    policies
        .iter()
        .map(|p| {
            (
                p.match_label_keys.clone().unwrap_or_default(),
                p.sub_group_size,
                p.min_sub_groups,
            )
        })
        .collect()
}

#[test]
fn a_multi_host_group_kuberay_made_without_replica_names_is_one_sub_group_of_the_whole_group() {
    let by_replica = vec![(vec![keys::REPLICA_NAME_LABEL.to_string()], Some(2), Some(2))];
    let whole = vec![(vec![keys::RAY_GROUP_LABEL.to_string()], Some(4), Some(1))];
    let job = ray_job("", "status: {jobDeploymentStatus: Running}");
    let created = |pods: &[Pod]| {
        let plan = change(
            Owner::RayJob(&job),
            &Snapshot {
                pods,
                ..observed(None, None)
            },
        );
        let Change::Create(pg) = plan else {
            panic!("expected Create, got {plan:?}")
        };
        splits(pg.spec.sub_group_policy.as_deref().unwrap_or_default())
    };
    // Before any Pod, and with KubeRay v1.7's labels: whole replicas.
    assert_eq!(created(&[]), by_replica);
    let indexed = [
        small_worker("w-1", Some("small-abcde"), false),
        small_worker("w-2", Some("small-abcde"), false),
    ];
    assert_eq!(created(&indexed), by_replica);
    // One Pod without a replica name (KubeRay v1.5 without the gate): the whole group, all 4
    // of its required Pods, as one sub-group; minMember and minResources stay.
    let unindexed = [
        small_worker("w-1", Some("small-abcde"), false),
        small_worker("w-2", None, false),
    ];
    assert_eq!(created(&unindexed), whole);
    // A terminating Pod without one does not count: its replacement decides.
    let leaving = [
        small_worker("w-1", Some("small-abcde"), false),
        small_worker("w-2", None, true),
    ];
    assert_eq!(created(&leaving), by_replica);

    // An existing per-replica PodGroup is resized to the whole-group policy, and back.
    let pg = ours(5, JOB_GANG);
    let resized = change(
        Owner::RayJob(&job),
        &Snapshot {
            pods: &unindexed,
            ..observed(Some(&pg), None)
        },
    );
    let Change::Resize(size) = resized else {
        panic!("expected Resize, got {resized:?}")
    };
    assert_eq!(
        (size.min_member, size.min_resources),
        (5, resources(JOB_GANG))
    );
    assert_eq!(
        splits(size.sub_group_policy.as_deref().unwrap_or_default()),
        whole
    );
    let mut fallen_back = ours(5, JOB_GANG);
    fallen_back.spec.sub_group_policy = size.sub_group_policy;
    assert_plan!(
        change(
            Owner::RayJob(&job),
            &Snapshot {
                pods: &unindexed,
                ..observed(Some(&fallen_back), None)
            },
        ),
        Change::InSync
    );
    let back = change(
        Owner::RayJob(&job),
        &Snapshot {
            pods: &indexed,
            ..observed(Some(&fallen_back), None)
        },
    );
    let Change::Resize(size) = back else {
        panic!("expected Resize, got {back:?}")
    };
    assert_eq!(
        splits(size.sub_group_policy.as_deref().unwrap_or_default()),
        by_replica
    );

    // A standalone cluster decides by its own Pods the same way.
    let plan = change(
        Owner::RayCluster(&standalone("")),
        &Snapshot {
            pods: &unindexed,
            ..observed(None, None)
        },
    );
    let Change::Create(pg) = plan else {
        panic!("expected Create, got {plan:?}")
    };
    assert_eq!(
        splits(pg.spec.sub_group_policy.as_deref().unwrap_or_default()),
        whole
    );
}

#[test]
fn http_mode_counts_no_submitter_resources() {
    let plan = change(
        Owner::RayJob(&ray_job("  submissionMode: HTTPMode", "")),
        &observed(None, None),
    );
    let Change::Create(pg) = plan else {
        panic!("expected Create, got {plan:?}")
    };
    assert!(sizing::pod_group_holds_gang(
        &pg.spec,
        5,
        &resources(CLUSTER_GANG),
        Some(&policies())
    ));
}

#[test]
fn suspension_and_deletion_zero_the_group_and_create_none() {
    let pg = ours(5, JOB_GANG);
    let zero = Change::Resize(PodGroupSize {
        name: "ray-demo-pg".into(),
        min_member: 0,
        min_resources: BTreeMap::new(),
        sub_group_policy: Some(Vec::new()),
    });
    for (spec, status) in [
        ("  suspend: true", ""),
        ("", "status: {jobDeploymentStatus: Suspending}"),
        ("", "status: {jobDeploymentStatus: Suspended}"),
    ] {
        let job = ray_job(spec, status);
        assert_plan!(
            change(Owner::RayJob(&job), &observed(Some(&pg), None)),
            zero,
            "{spec} {status}"
        );
        assert_plan!(
            change(Owner::RayJob(&job), &observed(None, None)),
            Change::InSync
        );
    }
    let mut deleting = ray_job("", "status: {jobDeploymentStatus: Running}");
    deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    assert_plan!(
        change(Owner::RayJob(&deleting), &observed(Some(&pg), None)),
        zero
    );
    // Already zero (Volcano dropped the empty fields): nothing to write.
    let mut zeroed = ours(0, &[]);
    zeroed.spec.min_member = None;
    zeroed.spec.min_resources = None;
    assert_plan!(
        change(Owner::RayJob(&deleting), &observed(Some(&zeroed), None)),
        Change::InSync
    );
}

#[test]
fn a_finished_rayjob_holds_only_its_live_cluster() {
    let pg = ours(5, JOB_GANG);
    let complete = ray_job("", "status: {jobDeploymentStatus: Complete}");
    let cluster = live_cluster("");
    assert_plan!(
        change(
            Owner::RayJob(&complete),
            &observed(Some(&pg), Some(&cluster))
        ),
        Change::Resize(PodGroupSize {
            name: "ray-demo-pg".into(),
            min_member: 5,
            min_resources: resources(CLUSTER_GANG),
            sub_group_policy: Some(policies()),
        })
    );
    for status in ["Complete", "Failed", "Retrying"] {
        let job = ray_job("", &format!("status: {{jobDeploymentStatus: {status}}}"));
        assert_plan!(
            change(Owner::RayJob(&job), &observed(Some(&pg), None)),
            Change::Resize(PodGroupSize {
                name: "ray-demo-pg".into(),
                min_member: 0,
                min_resources: BTreeMap::new(),
                sub_group_policy: Some(Vec::new()),
            }),
            "{status}"
        );
    }
    let mut deleting = live_cluster("");
    deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    assert!(matches!(
        change(
            Owner::RayJob(&complete),
            &observed(Some(&pg), Some(&deleting))
        ),
        Change::Resize(PodGroupSize { min_member: 0, .. })
    ));
}

/// A RayJob run on an existing cluster (`clusterSelector`), which has no gang of its own.
fn selector_job() -> RayJob {
    job(r#"
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: demo, namespace: ml}
spec:
  entrypoint: python x.py
  clusterSelector: {ray.io/cluster: shared}
"#)
}

#[test]
fn a_rayjob_on_an_existing_cluster_is_skipped_with_a_reason() {
    let job = selector_job();
    let plan = change(Owner::RayJob(&job), &observed(None, None));
    let Change::Skipped { message } = plan else {
        panic!("expected Skipped, got {plan:?}")
    };
    assert!(message.contains("clusterSelector"), "{message}");
}

#[test]
fn a_standalone_cluster_gets_its_own_group_zeroed_while_suspended() {
    let plan = change(Owner::RayCluster(&standalone("")), &observed(None, None));
    let Change::Create(pg) = plan else {
        panic!("expected Create, got {plan:?}")
    };
    assert_plan!(pg.metadata.name.as_deref(), Some("ray-raycluster-pg"));
    assert!(sizing::pod_group_holds_gang(
        &pg.spec,
        5,
        &resources(CLUSTER_GANG),
        Some(&policies())
    ));
    let mut live = ours(5, CLUSTER_GANG);
    live.metadata.name = Some("ray-raycluster-pg".into());
    assert_plan!(
        change(
            Owner::RayCluster(&standalone("    suspend: true")),
            &observed(Some(&live), None)
        ),
        Change::Resize(PodGroupSize {
            name: "ray-raycluster-pg".into(),
            min_member: 0,
            min_resources: BTreeMap::new(),
            sub_group_policy: Some(Vec::new()),
        })
    );
}

#[test]
fn a_rayjobs_cluster_has_no_group_of_its_own() {
    let mut owned = standalone("");
    owned.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "ray.io/v1".into(),
            kind: "RayJob".into(),
            name: "demo".into(),
            uid: "u-1".into(),
            controller: Some(true),
            ..Default::default()
        },
    ]);
    assert_eq!(cluster_ray_job(&owned), Some("demo"));
    assert_plan!(
        change(Owner::RayCluster(&owned), &observed(None, None)),
        Change::InSync
    );
    let cluster = live_cluster(
        "  labels: {ray.io/originated-from-crd: RayJob, ray.io/originated-from-cr-name: demo}",
    );
    assert_plan!(
        change(Owner::RayCluster(&cluster), &observed(None, None)),
        Change::InSync
    );
}

#[test]
fn kuberays_own_volcano_adapter_is_detected_and_left_alone() {
    let job = ray_job("", "status: {jobDeploymentStatus: Initializing}");
    // A group under raygate's name that raygate did not create.
    let mut foreign = ours(5, JOB_GANG);
    foreign.metadata.labels = None;
    let plan = change(Owner::RayJob(&job), &observed(Some(&foreign), None));
    assert!(
        matches!(&plan, Change::KubeRayGangScheduled { message } if message.contains("ray-demo-pg")),
        "{plan:?}"
    );
    // raygate's group, re-sized by another manager.
    let mut resized = ours(5, JOB_GANG);
    resized.metadata.managed_fields = Some(vec![
        managed(OWN, serde_json::json!({"f:spec": {"f:minMember": {}}})),
        managed(
            "vc-scheduler",
            serde_json::json!({"f:status": {"f:phase": {}}}),
        ),
        managed(
            "kuberay-operator",
            serde_json::json!({"f:spec": {"f:minResources": {"f:cpu": {}}}}),
        ),
    ]);
    let plan = change(Owner::RayJob(&job), &observed(Some(&resized), None));
    assert!(
        matches!(&plan, Change::KubeRayGangScheduled { message } if message.contains("\"kuberay-operator\"")),
        "{plan:?}"
    );
    // Only raygate and Volcano's status writes: raygate's.
    resized.metadata.managed_fields.as_mut().unwrap().pop();
    assert_plan!(
        change(Owner::RayJob(&job), &observed(Some(&resized), None)),
        Change::InSync
    );
    // A RayJob cluster annotated for a group: KubeRay's K8sJobMode adapter.
    let annotated = live_cluster("  annotations: {scheduling.k8s.io/group-name: ray-demo-pg}");
    let plan = change(
        Owner::RayJob(&job),
        &observed(Some(&resized), Some(&annotated)),
    );
    assert!(
        matches!(plan, Change::KubeRayGangScheduled { .. }),
        "{plan:?}"
    );
}

#[test]
fn pod_groups_kept_as_the_reconciler_caches_them_give_the_same_changes() {
    let job = ray_job("", "status: {jobDeploymentStatus: Running}");
    let status = managed(
        "vc-controller-manager",
        serde_json::json!({"f:status": {"f:phase": {}, "f:running": {}}}),
    );
    let own = managed(
        OWN,
        serde_json::json!({"f:metadata": {"f:labels": {}}, "f:spec": {"f:minMember": {},
                           "f:minResources": {"f:cpu": {}}, "f:queue": {}}}),
    );
    let foreign_size = managed(
        "kuberay-operator",
        serde_json::json!({"f:spec": {"f:minMember": {}}}),
    );
    let foreign_queue = managed("kubectl", serde_json::json!({"f:spec": {"f:queue": {}}}));
    let cases = [
        vec![own.clone(), status.clone()],
        vec![own.clone(), status.clone(), foreign_size],
        vec![own, foreign_queue, status],
        vec![],
    ];
    for (size, fields) in [(5, JOB_GANG), (3, &[("cpu", "1")][..])] {
        for (case, entries) in cases.iter().enumerate() {
            let mut pg = ours(size, fields);
            pg.metadata.managed_fields = Some(entries.clone());
            let mut kept = pg.clone();
            crate::observed::keep_gang_size_owners(&mut kept);
            let plan = change(Owner::RayJob(&job), &observed(Some(&kept), None));
            assert_plan!(
                plan,
                change(Owner::RayJob(&job), &observed(Some(&pg), None)),
                "{entries:?}"
            );
            // Only the second case has another manager sizing the gang.
            assert_eq!(
                matches!(plan, Change::KubeRayGangScheduled { .. }),
                case == 1,
                "{plan:?}"
            );
        }
    }
}

/// The reasons and requeues of [`decide`]'s actions, in order.
fn outline(decision: &Decision<Action>) -> (Vec<String>, Option<std::time::Duration>) {
    let steps = decision
        .actions
        .iter()
        .map(|action| match action {
            Action::CreatePodGroup(pg) => {
                format!("create {}", pg.metadata.name.as_deref().unwrap_or_default())
            }
            Action::ResizePodGroup(size) => format!("resize {} {}", size.name, size.min_member),
            Action::Event(note) => format!("{} {}: {}", note.warning, note.reason, note.message),
        })
        .collect();
    (steps, decision.requeue_after)
}

#[test]
fn each_change_is_a_write_followed_by_its_event_or_a_warning_that_waits_for_a_change() {
    let (steps, requeue) = outline(&decide(
        Owner::RayJob(&ray_job("", "")),
        &observed(None, None),
    ));
    assert_eq!(
        steps,
        [
            "create ray-demo-pg",
            "false CreatedPodGroup: Created PodGroup ray-demo-pg (minMember 5)"
        ]
    );
    assert_eq!(requeue, Some(STEADY_REQUEUE));

    let drifted = ours(3, &[("cpu", "1")]);
    let (steps, requeue) = outline(&decide(
        Owner::RayJob(&ray_job("", "status: {jobDeploymentStatus: Running}")),
        &observed(Some(&drifted), None),
    ));
    assert_eq!(
        steps,
        [
            "resize ray-demo-pg 5",
            "false UpdatedPodGroup: PodGroup ray-demo-pg resized to minMember 5"
        ]
    );
    assert_eq!(requeue, Some(STEADY_REQUEUE));

    let in_sync = ours(5, JOB_GANG);
    let (steps, requeue) = outline(&decide(
        Owner::RayJob(&ray_job("", "status: {jobDeploymentStatus: Running}")),
        &observed(Some(&in_sync), None),
    ));
    assert!(steps.is_empty(), "{steps:?}");
    assert_eq!(requeue, Some(STEADY_REQUEUE));

    let (steps, requeue) = outline(&decide(
        Owner::RayJob(&selector_job()),
        &observed(None, None),
    ));
    assert_eq!(steps.len(), 1);
    assert!(
        steps[0].starts_with(&format!("true {REASON_SKIPPED}: ")),
        "{steps:?}"
    );
    assert_eq!(requeue, None);
}

#[test]
fn failed_writes_carry_kuberays_reasons() {
    use crate::decision::Action as _;
    let create = Action::CreatePodGroup(Box::new(ours(5, JOB_GANG)));
    assert_eq!(create.failure_reason(), Some("FailedToCreatePodGroup"));
    assert!(create.event().is_none());
    let event = Action::Event(EventNote::normal("CreatedPodGroup", "x"));
    assert_eq!(event.failure_reason(), None);
    assert_eq!(
        event.event().map(|n| n.reason.as_str()),
        Some("CreatedPodGroup")
    );
}
