//! Volcano: the default queue, gang scheduling with PodGroups, closed queues.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, PostParams,
};
use kube::{Api, ResourceExt};
use raygate_api::volcano::{PodGroup, PodGroupSpec, Queue, QueueSpec};
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{SETTLE, placement, pod, running_on_kwok};

/// How long "nothing is bound" is watched for (Volcano schedules every second).
const NOTHING_BOUND_FOR: Duration = Duration::from_secs(20);

/// Creates PodGroup `group` (minMember `min`, queue `queue`) and pods `<group>-<i>` for `members`.
async fn gang(
    ns: &TestNamespace,
    group: &str,
    min: i32,
    queue: &str,
    members: std::ops::Range<usize>,
) {
    if members.start == 0 {
        let pg = PodGroup {
            metadata: ObjectMeta {
                name: Some(group.into()),
                ..ObjectMeta::default()
            },
            spec: PodGroupSpec {
                min_member: Some(min),
                queue: Some(queue.into()),
                ..PodGroupSpec::default()
            },
            status: None,
        };
        ns.api::<PodGroup>()
            .create(&PostParams::default(), &pg)
            .await
            .expect("create PodGroup");
    }
    for i in members {
        let mut member = pod(&format!("{group}-{i}"), Some("volcano"), "1");
        member.metadata.labels = Some(BTreeMap::from([(
            "smoke-gang".to_string(),
            group.to_string(),
        )]));
        member.metadata.annotations = Some(BTreeMap::from([
            (
                "scheduling.k8s.io/group-name".to_string(),
                group.to_string(),
            ),
            ("volcano.sh/task-spec".to_string(), "worker".to_string()),
        ]));
        ns.api::<Pod>()
            .create(&PostParams::default(), &member)
            .await
            .expect("create gang member");
    }
}

/// The gang's pods as `(name, phase, node)`.
async fn members(ns: &TestNamespace, group: &str) -> anyhow::Result<Vec<Pod>> {
    Ok(ns
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("smoke-gang={group}")))
        .await?
        .items)
}

/// Waits until all `n` members run on kwok nodes.
async fn wait_all_running(ns: &TestNamespace, group: &str, n: usize) {
    ns.wait_for(
        &format!("all {n} pods of gang {group} bound and Running on kwok nodes"),
        SETTLE,
        || async {
            let pods = members(ns, group).await?;
            Ok((pods.len() == n && pods.iter().all(running_on_kwok)).then_some(()))
        },
    )
    .await;
}

/// Asserts that no member of the gang gets a node for [`NOTHING_BOUND_FOR`].
async fn assert_none_bound(ns: &TestNamespace, group: &str) {
    let deadline = tokio::time::Instant::now() + NOTHING_BOUND_FOR;
    while tokio::time::Instant::now() < deadline {
        let bound: Vec<_> = members(ns, group)
            .await
            .expect("list gang members")
            .iter()
            .map(placement)
            .filter(|(_, _, node)| !node.is_empty())
            .collect();
        assert!(
            bound.is_empty(),
            "pods of gang {group} were bound: {bound:?}\n{}",
            ns.dump().await
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn default_queue_is_open() {
    let env = Env::load();
    let queue = Api::<Queue>::all(env.client().await)
        .get("default")
        .await
        .expect("queue default");
    assert_eq!(queue.status.and_then(|s| s.state).as_deref(), Some("Open"));
}

#[tokio::test]
async fn gang_of_three_with_min_member_three_runs() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-gang3").await;
    gang(&ns, "gang3", 3, "default", 0..3).await;
    wait_all_running(&ns, "gang3", 3).await;
}

#[tokio::test]
async fn gang_of_three_with_min_member_four_waits_for_a_fourth() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-gang4").await;
    gang(&ns, "gang4", 4, "default", 0..3).await;
    assert_none_bound(&ns, "gang4").await;
    // Control: the gang size was the only obstacle.
    gang(&ns, "gang4", 4, "default", 3..4).await;
    wait_all_running(&ns, "gang4", 4).await;
}

/// Sends a `bus.volcano.sh` Command (`CloseQueue` / `OpenQueue`) for `queue`, as
/// `vcctl queue operate` does.
async fn queue_command(ns: &TestNamespace, queue: &Queue, action: &str) {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "bus.volcano.sh",
        "v1alpha1",
        "Command",
    ));
    let commands: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    let owner = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "name": queue.name_any(), "uid": queue.uid(), "controller": true, "blockOwnerDeletion": true});
    let command: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
        "metadata": {"generateName": format!("{}-{}-", queue.name_any(), action.to_lowercase()),
                     "ownerReferences": [owner]},
        "target": owner,
        "action": action,
    }))
    .unwrap();
    commands
        .create(&PostParams::default(), &command)
        .await
        .expect("create Command");
}

async fn wait_queue_state(
    ns: &TestNamespace,
    queues: &Api<Queue>,
    name: &str,
    state: &str,
) -> Queue {
    ns.wait_for(&format!("queue {name} to be {state}"), SETTLE, || async {
        let queue = queues.get(name).await?;
        let current = queue.status.as_ref().and_then(|s| s.state.as_deref());
        Ok((current == Some(state)).then_some(queue.clone()))
    })
    .await
}

#[tokio::test]
async fn closed_queue_binds_nothing() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-closed").await;
    let queues: Api<Queue> = Api::all(ns.client());
    let name = ns.name().to_string();
    let queue = Queue {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        spec: serde_json::from_value::<QueueSpec>(json!({"weight": 1, "reclaimable": true}))
            .unwrap(),
        status: None,
    };
    queues
        .create(&PostParams::default(), &queue)
        .await
        .expect("create queue");
    let queue = wait_queue_state(&ns, &queues, &name, "Open").await;
    queue_command(&ns, &queue, "CloseQueue").await;
    wait_queue_state(&ns, &queues, &name, "Closed").await;

    gang(&ns, "closed", 1, &name, 0..1).await;
    assert_none_bound(&ns, "closed").await;
    // Control: the closed queue was the only obstacle.
    queue_command(&ns, &queue, "OpenQueue").await;
    wait_all_running(&ns, "closed", 1).await;

    ns.api::<Pod>()
        .delete("closed-0", &DeleteParams::default())
        .await
        .expect("delete pod");
    ns.api::<PodGroup>()
        .delete("closed", &DeleteParams::default())
        .await
        .expect("delete PodGroup");
    queues
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete queue");
}
