//! Why an Initializing RayJob is still waiting for its Pods: what Volcano says about the gang.

use crate::volcano::{PodGroup, PodGroupCondition};

/// The RayJob `status.message` for a gang Volcano cannot schedule, or `None` when Volcano does
/// not report one (no PodGroup condition yet, the gang is scheduled or running).
///
/// Volcano keeps one condition per type and updates it in place, so a PodGroup that was once
/// unschedulable and then scheduled carries both; the one that changed last (ties: the later in
/// the list) is the current word.
pub fn gang_wait_message(pod_group: &PodGroup) -> Option<String> {
    let status = pod_group.status.as_ref()?;
    if matches!(status.phase.as_deref(), Some("Running" | "Completed")) {
        return None;
    }
    let latest = crate::pending::volcano_verdict(pod_group)?;
    Some(describe(pod_group, latest))
}

fn describe(pod_group: &PodGroup, condition: &PodGroupCondition) -> String {
    let name = pod_group.metadata.name.as_deref().unwrap_or_default();
    let min_member = pod_group.spec.min_member.unwrap_or(0);
    let queue = pod_group.spec.queue.as_deref().unwrap_or("default");
    let mut message = format!(
        "Waiting for gang scheduling: Volcano cannot place all {min_member} Pods of PodGroup {name} (queue {queue}) at once and binds none until it can"
    );
    let reason = condition.reason.as_deref().filter(|r| !r.is_empty());
    let detail = condition.message.as_deref().filter(|m| !m.is_empty());
    match (reason, detail) {
        (Some(reason), Some(detail)) => message.push_str(&format!(": {reason}: {detail}")),
        (Some(text), None) | (None, Some(text)) => message.push_str(&format!(": {text}")),
        (None, None) => {}
    }
    message
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::gang_wait_message;
    use crate::volcano::PodGroup;

    fn pod_group(status: serde_json::Value) -> PodGroup {
        serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "ray-demo-pg", "namespace": "ns"},
            "spec": {"minMember": 3, "queue": "gpu"},
            "status": status,
        }))
        .unwrap()
    }

    fn condition(type_: &str, status: &str, at: &str, message: &str) -> serde_json::Value {
        json!({"type": type_, "status": status, "lastTransitionTime": at,
               "reason": "NotEnoughResources", "message": message, "transitionID": "x"})
    }

    const GANG: &str = "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: 1 Unschedulable, 2 Schedulable";

    #[test]
    fn an_unschedulable_gang_is_explained_with_volcanos_words() {
        let pg = pod_group(json!({"phase": "Inqueue", "conditions": [
            condition("Unschedulable", "True", "2026-01-01T00:00:05Z", GANG)]}));
        assert_eq!(
            gang_wait_message(&pg).as_deref(),
            Some(
                "Waiting for gang scheduling: Volcano cannot place all 3 Pods of PodGroup ray-demo-pg (queue gpu) at once and binds none until it can: NotEnoughResources: 3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: 1 Unschedulable, 2 Schedulable"
            )
        );
    }

    #[test]
    fn no_condition_a_newer_scheduled_condition_or_a_running_gang_is_no_wait() {
        assert_eq!(
            gang_wait_message(&pod_group(json!({"phase": "Pending"}))),
            None
        );
        let rescheduled = pod_group(json!({"phase": "Inqueue", "conditions": [
            condition("Unschedulable", "True", "2026-01-01T00:00:05Z", GANG),
            condition("Scheduled", "True", "2026-01-01T00:00:09Z", "tasks in gang are ready to be scheduled")]}));
        assert_eq!(gang_wait_message(&rescheduled), None);
        let running = pod_group(json!({"phase": "Running", "conditions": [
            condition("Unschedulable", "True", "2026-01-01T00:00:05Z", GANG)]}));
        assert_eq!(gang_wait_message(&running), None);
        let cleared = pod_group(json!({"phase": "Inqueue", "conditions": [
            condition("Unschedulable", "False", "2026-01-01T00:00:05Z", "")]}));
        assert_eq!(gang_wait_message(&cleared), None);
    }

    #[test]
    fn a_newer_unschedulable_condition_wins_and_missing_texts_are_left_out() {
        let mut pg = pod_group(json!({"phase": "Inqueue", "conditions": [
            condition("Scheduled", "True", "2026-01-01T00:00:01Z", "ok"),
            {"type": "Unschedulable", "status": "True", "lastTransitionTime": "2026-01-01T00:00:02Z"}]}));
        assert_eq!(
            gang_wait_message(&pg).as_deref(),
            Some(
                "Waiting for gang scheduling: Volcano cannot place all 3 Pods of PodGroup ray-demo-pg (queue gpu) at once and binds none until it can"
            )
        );
        pg.spec.queue = None;
        assert!(gang_wait_message(&pg).unwrap().contains("(queue default)"));
    }
}
