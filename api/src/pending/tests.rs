use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::*;
use crate::volcano::{PodGroup, Queue};

fn pod_group(status: Value) -> PodGroup {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "ray-demo-pg", "namespace": "ns"},
        "spec": {"minMember": 3, "queue": "gpu", "minResources": {"cpu": "2", "memory": "4Gi"}},
        "status": status,
    }))
    .unwrap()
}

fn queue(spec: Value, status: Value) -> Queue {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "gpu"},
        "spec": spec,
        "status": status,
    }))
    .unwrap()
}

fn open() -> Queue {
    queue(json!({"weight": 1}), json!({"state": "Open"}))
}

fn unschedulable(reason: &str, message: &str) -> Value {
    json!({"type": "Unschedulable", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z",
           "reason": reason, "message": message, "transitionID": "x"})
}

const PODS: GangPods = GangPods {
    created: 3,
    bound: 0,
};

fn waiting(state: GangState) -> (&'static str, String) {
    match state {
        GangState::Waiting { reason, message } => (reason, message),
        other => panic!("not waiting: {other:?}"),
    }
}

#[test]
fn a_missing_queue_is_named() {
    let state = gang_state(
        &pod_group(json!({"phase": "Pending"})),
        None,
        PODS,
        None,
        &[],
    );
    let (reason, message) = waiting(state);
    assert_eq!(reason, QUEUE_NOT_FOUND);
    assert_eq!(
        message,
        "PodGroup ray-demo-pg names queue gpu, which does not exist: Volcano schedules none of its 3 Pods; create the queue or set the label volcano.sh/queue-name to an existing one"
    );
}

#[test]
fn a_closed_or_closing_queue_holds_a_pending_gang() {
    for state in ["Closed", "Closing", "Unknown"] {
        let q = queue(json!({}), json!({"state": state}));
        let (reason, message) =
            waiting(gang_state(&pod_group(json!({})), Some(&q), PODS, None, &[]));
        assert_eq!(reason, QUEUE_CLOSED);
        assert_eq!(
            message,
            format!(
                "queue gpu is {state}: Volcano admits no new gang from it, so PodGroup ray-demo-pg (3 Pods, minResources {{cpu: 2, memory: 4Gi}}) stays Pending until the queue is Open"
            )
        );
    }
    // An admitted gang is past the queue's admission.
    let q = queue(json!({}), json!({"state": "Closed"}));
    let inqueue = pod_group(json!({"phase": "Inqueue"}));
    assert_eq!(
        gang_state(&inqueue, Some(&q), PODS, None, &[]),
        GangState::Undetermined
    );
}

#[test]
fn a_gang_beyond_the_capability_is_never_admitted() {
    let q = queue(
        json!({"capability": {"cpu": "1500m", "memory": "8Gi"}}),
        json!({"state": "Open", "allocated": {"cpu": "0"}}),
    );
    let state = gang_state(
        &pod_group(json!({"phase": "Pending"})),
        Some(&q),
        PODS,
        None,
        &[],
    );
    let (reason, message) = waiting(state);
    assert_eq!(reason, EXCEEDS_QUEUE_CAPABILITY);
    assert_eq!(
        message,
        "PodGroup ray-demo-pg needs more than queue gpu may ever hold (cpu requested 2, capability 1500m): Volcano never admits it; lower the gang's resources or raise spec.capability of queue gpu"
    );
}

#[test]
fn a_gang_that_fits_the_capability_but_not_next_to_the_allocation_waits_for_quota() {
    let q = queue(
        json!({"capability": {"cpu": "3", "memory": "8Gi"}, "deserved": {"cpu": "2"},
               "guarantee": {"resource": {"cpu": "1"}}}),
        json!({"state": "Open", "allocated": {"cpu": "1500m", "memory": "1Gi"}}),
    );
    let state = gang_state(
        &pod_group(json!({"phase": "Pending"})),
        Some(&q),
        PODS,
        None,
        &[],
    );
    let (reason, message) = waiting(state);
    assert_eq!(reason, WAITING_FOR_QUEUE_QUOTA);
    assert_eq!(
        message,
        "queue gpu has too little left for PodGroup ray-demo-pg (cpu requested 2, allocated 1500m of capability 3): it waits until the queue's running gangs free enough; deserved {cpu: 2}; guarantee {cpu: 1}"
    );
}

#[test]
fn room_reserved_by_admitted_gangs_is_quota_once_volcano_refuses() {
    let q = queue(
        json!({"capability": {"cpu": "3"}}),
        json!({"state": "Open", "inqueue": 1}),
    );
    // Volcano has not looked yet: nothing is claimed.
    let fresh = pod_group(json!({"phase": "Pending"}));
    assert_eq!(
        gang_state(&fresh, Some(&q), PODS, None, &[]),
        GangState::Undetermined
    );
    let refused = pod_group(json!({"phase": "Pending", "conditions": [unschedulable(
        "NotEnoughResources", "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable")]}));
    let (reason, message) = waiting(gang_state(&refused, Some(&q), PODS, None, &[]));
    assert_eq!(reason, WAITING_FOR_QUEUE_QUOTA);
    assert_eq!(
        message,
        "PodGroup ray-demo-pg requests {cpu: 2, memory: 4Gi} and queue gpu (capability {cpu: 3}, allocated {}) reserves the rest for its 1 admitted gang(s) that are not yet running (Volcano: 3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable)"
    );
}

#[test]
fn a_pending_gang_the_queue_admits_is_held_by_the_clusters_free_resources() {
    let refused = pod_group(json!({"phase": "Pending", "conditions": [unschedulable(
        "NotEnoughResources", "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable")]}));
    let (reason, message) = waiting(gang_state(&refused, Some(&open()), PODS, None, &[]));
    assert_eq!(reason, INSUFFICIENT_NODE_RESOURCES);
    assert_eq!(
        message,
        "Volcano does not admit PodGroup ray-demo-pg from queue gpu: the cluster's free resources fall short of its minResources {cpu: 2, memory: 4Gi} (Volcano: 3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable)"
    );
}

#[test]
fn an_admitted_gang_the_nodes_cannot_take_names_the_short_resources() {
    let volcano = "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: 1 Unschedulable, 2 Schedulable. Origin reason is ray-demo-worker-x: 0/4 nodes are unavailable: 1 Insufficient cpu, 1 Insufficient example.com/fpga, 3 node(s) didn't match Pod's node affinity/selector.";
    let pg = pod_group(
        json!({"phase": "Inqueue", "conditions": [unschedulable("NotEnoughResources", volcano)]}),
    );
    let pods = GangPods {
        created: 3,
        bound: 0,
    };
    let (reason, message) = waiting(gang_state(&pg, Some(&open()), pods, None, &[]));
    assert_eq!(reason, INSUFFICIENT_NODE_RESOURCES);
    assert_eq!(
        message,
        format!(
            "no nodes can take the whole gang: 0 of minMember 3 Pods of PodGroup ray-demo-pg bound, 3 exist, minResources {{cpu: 2, memory: 4Gi}}; nodes lack cpu (on 1 node(s)), example.com/fpga (on 1 node(s)) (Volcano: {volcano})"
        )
    );
}

#[test]
fn too_few_member_pods_wait_for_the_gang_once_volcano_says_so_and_their_creation_failed() {
    let pg = pod_group(json!({"phase": "Inqueue", "conditions": [unschedulable(
        "NotEnoughTasks", "Not enough valid tasks for gang-scheduling, valid: 1, min: 3")]}));
    let one = GangPods {
        created: 1,
        bound: 0,
    };
    let quota = "create Pod ray-demo-worker-x: pods \"ray-demo-worker-x\" is forbidden: exceeded quota: one-pod";
    let (reason, message) = waiting(gang_state(&pg, Some(&open()), one, Some(quota), &[]));
    assert_eq!(reason, WAITING_FOR_GANG);
    assert_eq!(
        message,
        format!(
            "1 of minMember 3 Pods of PodGroup ray-demo-pg exist (0 bound): Volcano binds none until all 3 exist, and creating the others failed: {quota} (Volcano: Not enough valid tasks for gang-scheduling, valid: 1, min: 3)"
        )
    );
    // Volcano v1.14 says NotEnoughResources when Pods are missing: the count decides.
    let missing = pod_group(json!({"phase": "Inqueue", "conditions": [unschedulable(
        "NotEnoughResources", "2/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 2 minAvailable")]}));
    assert_eq!(
        waiting(gang_state(&missing, Some(&open()), one, Some(quota), &[])).0,
        WAITING_FOR_GANG
    );
    // Without a failure the Pods are on their way (every start has this moment): no claim.
    assert_eq!(
        gang_state(&pg, Some(&open()), one, None, &[]),
        GangState::Undetermined
    );
    assert_eq!(
        gang_state(&missing, Some(&open()), one, None, &[]),
        GangState::Undetermined
    );
    // Volcano counted before the last Pods arrived: no claim until it looks again.
    assert_eq!(
        gang_state(&pg, Some(&open()), PODS, None, &[]),
        GangState::Undetermined
    );
}

#[test]
fn only_a_gang_volcano_has_not_bound_waits_on_its_queue() {
    let closed = queue(json!({"weight": 1}), json!({"state": "Closed"}));
    let tiny = queue(
        json!({"capability": {"cpu": "1"}}),
        json!({"state": "Open"}),
    );
    for phase in ["Running", "Completed"] {
        let bound = pod_group(json!({"phase": phase}));
        assert!(!waits_on_queue(&bound), "{phase}");
        // Whatever the queue says, the gang's state is the same: no queue change concerns it.
        let states: Vec<GangState> = [None, Some(&closed), Some(&tiny), Some(&open())]
            .into_iter()
            .map(|queue| gang_state(&bound, queue, PODS, None, &[]))
            .collect();
        assert!(states.iter().all(|s| s == &states[0]), "{states:?}");
    }
    assert!(waits_on_queue(&pod_group(json!({"phase": "Inqueue"}))));
    for status in [json!({}), json!({"phase": "Pending"})] {
        let unbound = pod_group(status.clone());
        assert!(waits_on_queue(&unbound), "{status}");
        assert_ne!(
            gang_state(&unbound, Some(&closed), PODS, None, &[]),
            gang_state(&unbound, Some(&open()), PODS, None, &[]),
            "{status}"
        );
    }
}

#[test]
fn a_bound_or_running_gang_is_scheduled_and_a_newer_scheduled_condition_wins() {
    let running = pod_group(json!({"phase": "Running"}));
    assert_eq!(
        gang_state(&running, None, PODS, None, &[]),
        GangState::Clear {
            reason: GANG_SCHEDULED,
            message: "Volcano bound the gang: 0 of minMember 3 Pods of PodGroup ray-demo-pg are on nodes (phase Running)".into()
        }
    );
    let bound = GangPods {
        created: 3,
        bound: 3,
    };
    let inqueue = pod_group(json!({"phase": "Inqueue"}));
    assert!(matches!(
        gang_state(&inqueue, Some(&open()), bound, None, &[]),
        GangState::Clear {
            reason: GANG_SCHEDULED,
            ..
        }
    ));
    let rescheduled = pod_group(json!({"phase": "Inqueue", "conditions": [
        unschedulable("NotEnoughResources", "x"),
        {"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:09Z",
         "reason": "tasks in gang are ready to be scheduled"}]}));
    assert_eq!(
        gang_state(&rescheduled, Some(&open()), PODS, None, &[]),
        GangState::Undetermined
    );
}

#[test]
fn pods_are_counted_by_their_group_annotation() {
    let pod = |group: &str, node: Option<&str>, deleting: bool| -> Pod {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"containers": [], "nodeName": node},
        }))
        .unwrap();
        if deleting {
            pod.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        }
        pod
    };
    let pods = [
        pod("ray-demo-pg", Some("n1"), false),
        pod("ray-demo-pg", None, false),
        pod("ray-demo-pg", Some("n1"), true),
        pod("ray-other-pg", Some("n1"), false),
    ];
    let counted = GangPods {
        created: 2,
        bound: 1,
    };
    assert_eq!(GangPods::of(&pods, "ray-demo-pg"), counted);
    let kept = pods.map(|mut pod| {
        crate::observed::keep_what_decisions_read(&mut pod);
        pod
    });
    assert_eq!(
        GangPods::of(&kept, "ray-demo-pg"),
        counted,
        "as the reconciler caches them"
    );
}

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn condition(status: &str, reason: &str, second: i64) -> Condition {
    Condition {
        type_: CONDITION_GANG_PENDING.into(),
        status: status.into(),
        reason: reason.into(),
        message: "m".into(),
        last_transition_time: at(second),
        observed_generation: None,
    }
}

#[test]
fn the_condition_is_set_kept_in_place_and_cleared_only_where_it_was_true() {
    let other = Condition {
        type_: "HeadPodReady".into(),
        ..condition("True", "HeadPodRunningAndReady", 1)
    };
    let closed = GangState::Waiting {
        reason: QUEUE_CLOSED,
        message: "closed".into(),
    };
    let set = with_gang_condition(std::slice::from_ref(&other), &closed, &at(5));
    assert_eq!(set.len(), 2);
    assert_eq!(set[0], other);
    assert_eq!(
        (
            set[1].status.as_str(),
            set[1].reason.as_str(),
            set[1].message.as_str()
        ),
        ("True", QUEUE_CLOSED, "closed")
    );
    assert_eq!(set[1].last_transition_time, at(5));
    // Same cause, new numbers: the message changes, the transition time does not.
    let later = GangState::Waiting {
        reason: QUEUE_CLOSED,
        message: "still closed".into(),
    };
    let kept = with_gang_condition(&set, &later, &at(9));
    assert_eq!(kept[1].last_transition_time, at(5));
    assert_eq!(kept[1].message, "still closed");
    assert_eq!(
        with_gang_condition(&kept, &GangState::Undetermined, &at(9)),
        kept
    );
    let scheduled = GangState::Clear {
        reason: GANG_SCHEDULED,
        message: "bound".into(),
    };
    let cleared = with_gang_condition(&kept, &scheduled, &at(12));
    assert_eq!(
        (cleared[1].status.as_str(), cleared[1].reason.as_str()),
        ("False", GANG_SCHEDULED)
    );
    assert_eq!(cleared[1].last_transition_time, at(12));
    // Never waited, or already clear: nothing is written.
    assert_eq!(
        with_gang_condition(std::slice::from_ref(&other), &scheduled, &at(12)),
        vec![other.clone()]
    );
    assert_eq!(
        with_gang_condition(&cleared, &released("Complete"), &at(20)),
        cleared
    );
}

#[test]
fn a_warning_event_marks_each_new_cause() {
    let closed = [condition("True", QUEUE_CLOSED, 1)];
    let quota = [condition("True", WAITING_FOR_QUEUE_QUOTA, 2)];
    let clear = [condition("False", GANG_SCHEDULED, 3)];
    let event = pending_event(&[], &closed).unwrap();
    assert!(event.warning);
    assert_eq!(
        (event.reason.as_str(), event.message.as_str()),
        (QUEUE_CLOSED, "m")
    );
    assert_eq!(pending_event(&closed, &closed), None);
    assert_eq!(
        pending_event(&closed, &quota).map(|e| e.reason),
        Some(WAITING_FOR_QUEUE_QUOTA.to_string())
    );
    assert_eq!(pending_event(&quota, &clear), None);
    assert!(pending_event(&clear, &quota).is_some());
}

#[test]
fn long_volcano_messages_are_cut_at_a_character_boundary() {
    let long = "é".repeat(3000);
    let pg = pod_group(
        json!({"phase": "Inqueue", "conditions": [unschedulable("NotEnoughResources", &long)]}),
    );
    let (_, message) = waiting(gang_state(&pg, Some(&open()), PODS, None, &[]));
    assert!(message.len() <= MAX_MESSAGE + '…'.len_utf8());
    assert!(message.ends_with('…'));
}

fn head_too_big() -> Infeasibility {
    Infeasibility {
        field: "spec.rayClusterSpec.headGroupSpec.template.spec".into(),
        pod: Some(crate::feasibility::PodKind::Head),
        cause: crate::feasibility::Cause::Resource {
            resource: "cpu".into(),
            asks: "64".parse().unwrap(),
            largest: Some(("2".parse().unwrap(), "real-1".into())),
        },
    }
}

#[test]
fn a_gang_no_node_could_ever_hold_is_infeasible_at_once_whatever_volcano_says() {
    let infeasible = [head_too_big()];
    // Before Volcano has looked at the gang, and after it found no room: the nodes prove it.
    let fresh = pod_group(json!({"phase": "Pending"}));
    let volcano =
        "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable";
    let refused = pod_group(
        json!({"phase": "Pending", "conditions": [unschedulable("NotEnoughResources", volcano)]}),
    );
    for pg in [fresh, refused] {
        let (reason, message) = waiting(gang_state(&pg, Some(&open()), PODS, None, &infeasible));
        assert_eq!(reason, INFEASIBLE);
        assert_eq!(
            message,
            "no node of this cluster could ever hold PodGroup ray-demo-pg, even empty: head Pod asks cpu 64; the largest node offers 2 (real-1); it waits until a node that can joins the cluster"
        );
    }
    // A missing queue is named first: fixing the nodes alone would not start the gang.
    let (reason, _) = waiting(gang_state(
        &pod_group(json!({"phase": "Pending"})),
        None,
        PODS,
        None,
        &infeasible,
    ));
    assert_eq!(reason, QUEUE_NOT_FOUND);
    // A gang Volcano bound is bound, whatever the nodes look like now.
    let bound = GangPods {
        created: 3,
        bound: 3,
    };
    let state = gang_state(
        &pod_group(json!({"phase": "Running"})),
        Some(&open()),
        bound,
        None,
        &infeasible,
    );
    assert!(
        matches!(state, GangState::Clear { reason, .. } if reason == GANG_SCHEDULED),
        "{state:?}"
    );
}
