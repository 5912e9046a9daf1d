//! Why a gang is pending (docs/reconciler.md, "Why a gang is pending"): each cause is put in
//! place on the real control plane with Volcano binding, and the RayJob's `GangPending`
//! condition must name it, with its numbers, within [`LATENCY`] of the cause (measured from the
//! watch event that shows the cause in place to the watch event that shows the condition), then
//! clear once the cause is gone and the gang runs. Each test runs on kwok nodes of its own pool
//! with a reconciler of its own, as the gang tests do.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use raygate_api::queue_policy::QueuePolicy;
use raygate_api::ray::v1::RayJob;
use raygate_api::volcano::{PodGroup, Queue};
use raygate_e2e::cleanup::DeleteOnDrop;
use raygate_e2e::kubectl;
use raygate_e2e::nodes::{FakeNode, POOL_KEY, placement};
use raygate_e2e::reconciler::{PRIVATE_RECONCILER_LABEL, Reconciler};
use raygate_e2e::{Env, TestNamespace};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{RUN, create, ray_job};
use crate::gang::pinned;

/// Opted into Volcano, and reconciled by the test's own reconciler.
const OPT_IN: [(&str, &str); 2] = [
    ("raygate.io/scheduler", "volcano"),
    (PRIVATE_RECONCILER_LABEL, "true"),
];

/// The bound from a cause to its condition.
const LATENCY: Duration = Duration::from_secs(2);

/// How long Volcano's later cycles (one a second) may take to add detail to a verdict.
const DETAIL: Duration = Duration::from_secs(30);

/// Every version of one object a watch delivered, with when it arrived.
struct Recorder<K> {
    seen: Arc<Mutex<Vec<(Instant, K)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Recorder<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    /// Watches `name` through `api` from now on.
    fn start(api: Api<K>, name: &str) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let task = tokio::spawn(async move {
            let events = watcher::watcher(api, config);
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                if let Ok(Event::Apply(object) | Event::InitApply(object)) = event {
                    sink.lock()
                        .expect("recorder lock")
                        .push((Instant::now(), object));
                }
            }
        });
        Recorder { seen, task }
    }

    /// The first version at or after `since` that satisfies `pick`, and when it arrived;
    /// waits up to `timeout`.
    async fn first_after<T>(
        &self,
        ns: &TestNamespace,
        what: &str,
        since: Instant,
        timeout: Duration,
        pick: impl Fn(&K) -> Option<T>,
    ) -> (Instant, T) {
        ns.wait_for(what, timeout, || async {
            let seen = self.seen.lock().expect("recorder lock");
            Ok(seen
                .iter()
                .filter(|(at, _)| *at >= since)
                .find_map(|(at, object)| pick(object).map(|t| (*at, t))))
        })
        .await
    }
}

impl<K> Drop for Recorder<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The RayJob's `GangPending` condition.
fn gang_pending(job: &RayJob) -> Option<Condition> {
    job.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "GangPending")
        .cloned()
}

/// The condition once it is True with `reason`.
fn waiting_for(reason: &'static str) -> impl Fn(&RayJob) -> Option<Condition> {
    move |job| gang_pending(job).filter(|c| c.status == "True" && c.reason == reason)
}

/// The condition once it is False with `GangScheduled`.
fn scheduled(job: &RayJob) -> Option<Condition> {
    gang_pending(job).filter(|c| c.status == "False" && c.reason == "GangScheduled")
}

/// A Volcano queue of the test, deleted when dropped.
struct TestQueue {
    name: String,
    api: Api<Queue>,
    _deletion: DeleteOnDrop<Queue>,
}

impl TestQueue {
    /// Creates queue `name` with `spec` and waits until it is Open.
    async fn create(env: &Env, ns: &TestNamespace, name: &str, spec: Value) -> TestQueue {
        let config = env.kube_config().await;
        let api: Api<Queue> = Api::all(ns.client());
        let queue: Queue = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name}, "spec": spec,
        }))
        .expect("a valid Queue");
        api.create(&PostParams::default(), &queue)
            .await
            .unwrap_or_else(|e| panic!("creating queue {name}: {e}"));
        let queue = TestQueue {
            name: name.to_string(),
            api,
            _deletion: DeleteOnDrop::new(&config, name),
        };
        queue.wait_state(ns, &["Open"]).await;
        queue
    }

    async fn wait_state(&self, ns: &TestNamespace, states: &[&str]) -> Queue {
        ns.wait_for(
            &format!("queue {} to be {states:?}", self.name),
            Duration::from_secs(60),
            || async {
                let queue = self.api.get(&self.name).await?;
                let state = queue.status.as_ref().and_then(|s| s.state.clone());
                Ok(state
                    .filter(|s| states.contains(&s.as_str()))
                    .map(|_| queue))
            },
        )
        .await
    }

    /// Asks Volcano's queue controller to open or close the queue, as `vcctl queue operate`
    /// does: a `bus.volcano.sh` Command naming it.
    async fn command(&self, ns: &TestNamespace, action: &str) {
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
            ns.client(),
            ns.name(),
            &kube::api::ApiResource {
                group: "bus.volcano.sh".into(),
                version: "v1alpha1".into(),
                api_version: "bus.volcano.sh/v1alpha1".into(),
                kind: "Command".into(),
                plural: "commands".into(),
            },
        );
        let command: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
            "metadata": {"generateName": format!("{}-{}-", self.name, action.to_lowercase())},
            "action": action,
            "target": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                       "name": self.name, "uid": ""},
        }))
        .expect("a valid Command");
        api.create(&PostParams::default(), &command)
            .await
            .unwrap_or_else(|e| panic!("{action} {}: {e}", self.name));
    }

    async fn set_capability(&self, capability: Value) {
        self.api
            .patch(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"capability": capability}})),
            )
            .await
            .unwrap_or_else(|e| panic!("setting the capability of {}: {e}", self.name));
    }
}

/// A RayJob with one worker in `queue`, pinned to `pool`: minMember 2, minResources cpu 1250m,
/// memory 3272Mi (head 500m/2Gi, worker 250m/1Gi, submitter 500m/200Mi).
fn small_job(name: &str, queue: &str, pool: &str) -> RayJob {
    let mut job = pinned(
        ray_job(name, "python -c \"print('the gang ran')\"", 1, json!({})),
        pool,
    );
    job.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("volcano.sh/queue-name".into(), queue.into());
    job
}

/// A standalone RayCluster (head 500m/2Gi, one worker 250m/1Gi) in `queue`, pinned to `pool`:
/// it holds 750m of the queue once it runs.
fn blocker(name: &str, queue: &str, pool: &str) -> Value {
    let (selector, tolerations) = placement(pool);
    let pod = |container: &str, cpu: &str, memory: &str| {
        json!({"spec": {
            "nodeSelector": selector, "tolerations": tolerations,
            "containers": [{"name": container, "image": "rayproject/ray:2.60.0",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}})
    };
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "labels": {"volcano.sh/queue-name": queue}},
        "spec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {"rayStartParams": {}, "template": pod("ray-head", "500m", "2Gi")},
            "workerGroupSpecs": [{"groupName": "small", "replicas": 1, "minReplicas": 0,
                "maxReplicas": 1, "rayStartParams": {},
                "template": pod("ray-worker", "250m", "1Gi")}],
        },
    })
}

/// When the RayJob's PodGroup was first seen (it exists only once the gang does).
async fn pod_group_born(
    ns: &TestNamespace,
    groups: &Recorder<PodGroup>,
    since: Instant,
) -> Instant {
    groups
        .first_after(ns, "the RayJob's PodGroup", since, RUN, |_| Some(()))
        .await
        .0
}

fn report(what: &str, latency: Duration, condition: &Condition) {
    eprintln!(
        "{what}: {} after {latency:?}: {}",
        condition.reason, condition.message
    );
    assert!(
        latency <= LATENCY,
        "{what}: the condition took {latency:?}, more than {LATENCY:?}"
    );
}

/// The `gang` column of `kubectl get rayjob NAME`.
async fn gang_column(ns: &TestNamespace, name: &str) -> String {
    let table = kubectl::stdout(&["get", "rayjob", name, "-n", ns.name()]).await;
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    // Columns are aligned: the value starts where its header does (empty cells are blanks).
    let at = header
        .find("GANG")
        .unwrap_or_else(|| panic!("a GANG column:\n{table}"));
    let row = lines.next().unwrap_or_default();
    row.get(at..)
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A namespace with a reconciler and a queue of its own and one kwok node of `cpu` in its pool,
/// where [`small_job`] `name` has been created and its PodGroup has appeared.
struct OnOneNode {
    env: Env,
    ns: TestNamespace,
    pool: String,
    /// The RayJob's every version.
    recorder: Recorder<RayJob>,
    /// When the RayJob was created.
    start: Instant,
    /// When its PodGroup appeared.
    born: Instant,
    _reconciler: Reconciler,
    _queue: TestQueue,
    _node: FakeNode,
}

impl OnOneNode {
    async fn start(prefix: &str, name: &str, cpu: &str) -> OnOneNode {
        let env = Env::load();
        let ns = TestNamespace::with_labels(&env, prefix, &OPT_IN).await;
        let reconciler = Reconciler::start(&env, &ns, None).await;
        let queue = TestQueue::create(&env, &ns, ns.name(), json!({"weight": 1})).await;
        let pool = ns.name().to_string();
        let node = FakeNode::create(
            &env,
            &ns,
            &pool,
            0,
            &[("cpu", cpu), ("memory", "8Gi"), ("pods", "110")],
        )
        .await;
        let recorder = Recorder::start(ns.api::<RayJob>(), name);
        let groups = Recorder::start(ns.api::<PodGroup>(), &format!("ray-{name}-pg"));
        let start = Instant::now();
        create(&ns, &small_job(name, &queue.name, &pool)).await;
        let born = pod_group_born(&ns, &groups, start).await;
        OnOneNode {
            env,
            ns,
            pool,
            recorder,
            start,
            born,
            _reconciler: reconciler,
            _queue: queue,
            _node: node,
        }
    }
}

#[tokio::test]
async fn queue_causes_are_named_with_their_numbers_within_two_seconds_and_clear_when_the_gang_runs()
{
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "rayjob-pending-queue", &OPT_IN).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    let queue = TestQueue::create(
        &env,
        &ns,
        ns.name(),
        json!({"weight": 1, "reclaimable": false, "capability": {"cpu": "1500m", "memory": "16Gi"}}),
    )
    .await;
    // The blocker's pool, and the RayJob's (room for its whole gang and submitter).
    let blocker_pool = format!("{}-b", ns.name());
    let job_pool = ns.name().to_string();
    let _blocker_node = FakeNode::create(
        &env,
        &ns,
        &blocker_pool,
        0,
        &[("cpu", "1"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;
    let _job_node = FakeNode::create(
        &env,
        &ns,
        &job_pool,
        0,
        &[("cpu", "2"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;

    // Another gang holds 750m of the queue's 1500m.
    let clusters: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ns.client(),
        ns.name(),
        &kube::api::ApiResource::erase::<raygate_api::ray::v1::RayCluster>(&()),
    );
    clusters
        .create(
            &PostParams::default(),
            &serde_json::from_value(blocker("blocker", queue.name.as_str(), &blocker_pool))
                .expect("a RayCluster"),
        )
        .await
        .expect("create the blocker RayCluster");
    ns.wait_for("the queue to account the blocker's 750m", RUN, || async {
        let q = queue.api.get(&queue.name).await?;
        let allocated = q
            .status
            .and_then(|s| s.allocated)
            .and_then(|a| a.get("cpu").cloned());
        Ok(allocated.filter(|c| c.0 == "750m").map(|_| ()))
    })
    .await;

    // WaitingForQueueQuota: 1250m does not fit next to 750m in 1500m.
    let jobs = ns.api::<RayJob>();
    let recorder = Recorder::start(jobs.clone(), "wait");
    let groups = Recorder::start(ns.api::<PodGroup>(), "ray-wait-pg");
    let start = Instant::now();
    create(&ns, &small_job("wait", &queue.name, &job_pool)).await;
    let born = pod_group_born(&ns, &groups, start).await;
    let (at, condition) = recorder
        .first_after(
            &ns,
            "WaitingForQueueQuota",
            start,
            RUN,
            waiting_for("WaitingForQueueQuota"),
        )
        .await;
    report("queue used by another gang", at - born, &condition);
    assert!(
        condition
            .message
            .contains("cpu requested 1250m, allocated 750m of capability 1500m"),
        "{}",
        condition.message
    );
    assert_eq!(gang_column(&ns, "wait").await, "WaitingForQueueQuota");

    // QueueClosed: Volcano's queue controller closes it (Closing while it holds PodGroups).
    let queues = Recorder::start(queue.api.clone(), &queue.name);
    let before = Instant::now();
    queue.command(&ns, "CloseQueue").await;
    let (closed_at, state) = queues
        .first_after(&ns, "the queue to close", before, RUN, |q: &Queue| {
            q.status
                .as_ref()
                .and_then(|s| s.state.clone())
                .filter(|s| s != "Open")
        })
        .await;
    let (at, condition) = recorder
        .first_after(&ns, "QueueClosed", before, RUN, waiting_for("QueueClosed"))
        .await;
    report(
        "closed queue",
        at.saturating_duration_since(closed_at),
        &condition,
    );
    assert!(
        condition
            .message
            .starts_with(&format!("queue {} is {state}", queue.name)),
        "{}",
        condition.message
    );

    // Open again: back to the quota.
    let before = Instant::now();
    queue.command(&ns, "OpenQueue").await;
    let (opened_at, _) = queues
        .first_after(&ns, "the queue to open", before, RUN, |q: &Queue| {
            q.status
                .as_ref()
                .and_then(|s| s.state.clone())
                .filter(|s| s == "Open")
        })
        .await;
    let (at, condition) = recorder
        .first_after(
            &ns,
            "WaitingForQueueQuota again",
            before,
            RUN,
            waiting_for("WaitingForQueueQuota"),
        )
        .await;
    report(
        "reopened queue",
        at.saturating_duration_since(opened_at),
        &condition,
    );

    // ExceedsQueueCapability: the capability drops below the gang's 1250m.
    let before = Instant::now();
    queue
        .set_capability(json!({"cpu": "1", "memory": "16Gi"}))
        .await;
    let (lowered_at, _) = queues
        .first_after(&ns, "the lower capability", before, RUN, |q: &Queue| {
            q.spec
                .capability
                .as_ref()
                .and_then(|c| c.get("cpu"))
                .filter(|c| c.0 == "1")
                .map(|_| ())
        })
        .await;
    let (at, condition) = recorder
        .first_after(
            &ns,
            "ExceedsQueueCapability",
            before,
            RUN,
            waiting_for("ExceedsQueueCapability"),
        )
        .await;
    report(
        "capability below the gang",
        at.saturating_duration_since(lowered_at),
        &condition,
    );
    assert!(
        condition
            .message
            .contains("cpu requested 1250m, capability 1"),
        "{}",
        condition.message
    );
    assert_eq!(gang_column(&ns, "wait").await, "ExceedsQueueCapability");

    // Room for both: the gang is admitted, bound, and the condition clears.
    let before = Instant::now();
    queue
        .set_capability(json!({"cpu": "4", "memory": "16Gi"}))
        .await;
    let (at, condition) = recorder
        .first_after(&ns, "GangScheduled", before, RUN, scheduled)
        .await;
    eprintln!("cleared after {:?}: {}", at - before, condition.message);
    assert_eq!(gang_column(&ns, "wait").await, "GangScheduled");
    clusters
        .delete("blocker", &DeleteParams::default())
        .await
        .expect("delete the blocker");
}

#[tokio::test]
async fn node_causes_are_named_with_their_numbers_within_two_seconds_and_clear_when_the_gang_runs()
{
    // 600m: the head (500m) fits, the worker (250m) does not next to it.
    let one = OnOneNode::start("rayjob-pending-nodes", "tight", "600m").await;
    let (env, ns, recorder, pool) = (&one.env, &one.ns, &one.recorder, one.pool.clone());
    let (start, born) = (one.start, one.born);
    let (at, condition) = recorder
        .first_after(
            ns,
            "InsufficientNodeResources",
            start,
            RUN,
            waiting_for("InsufficientNodeResources"),
        )
        .await;
    report("nodes too small", at - born, &condition);
    assert!(
        condition
            .message
            .starts_with("no nodes can take the whole gang: 0 of minMember 2 Pods of PodGroup ray-tight-pg bound, 2 exist, minResources {cpu: 1250m, memory: 3272Mi}"),
        "{}",
        condition.message
    );
    // Volcano's first verdict may predate its node fit errors (a CI run saw "1 Pending; Pending:
    // 1 Unschedulable" alone); its next cycles name them, and the message follows.
    let (_, condition) = recorder
        .first_after(ns, "the node shortage named", at, DETAIL, |job| {
            waiting_for("InsufficientNodeResources")(job)
                .filter(|c| c.message.contains("; nodes lack cpu"))
        })
        .await;
    eprintln!("nodes too small, detailed: {}", condition.message);
    assert_eq!(gang_column(ns, "tight").await, "InsufficientNodeResources");

    // A second node: the gang is bound and the condition clears.
    let before = Instant::now();
    let _more = FakeNode::create(
        env,
        ns,
        &pool,
        1,
        &[("cpu", "1"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;
    let (at, condition) = recorder
        .first_after(ns, "GangScheduled", before, RUN, scheduled)
        .await;
    eprintln!("cleared after {:?}: {}", at - before, condition.message);
    assert!(
        condition.message.contains("2 of minMember 2 Pods"),
        "{}",
        condition.message
    );
}

#[tokio::test]
async fn a_gang_no_node_could_ever_hold_is_infeasible_until_a_template_or_a_node_can() {
    // 400m: neither the head (500m) nor the submitter (500m) fits, even on the empty node.
    let one = OnOneNode::start("rayjob-pending-infeasible", "never", "400m").await;
    let (env, ns, recorder, pool) = (&one.env, &one.ns, &one.recorder, one.pool.clone());
    let (start, born) = (one.start, one.born);
    let (at, condition) = recorder
        .first_after(ns, "Infeasible", start, RUN, waiting_for("Infeasible"))
        .await;
    report("no node could ever hold it", at - born, &condition);
    let head = format!("head Pod asks cpu 500m; the largest node offers 400m ({pool}-0)");
    assert!(
        condition.message.starts_with(
            "no node of this cluster could ever hold PodGroup ray-never-pg, even empty: "
        ) && condition.message.contains(&head),
        "{}",
        condition.message
    );
    assert_eq!(gang_column(ns, "never").await, "Infeasible");

    // A QueuePolicy names a node pool an autoscaler can add that could hold it: the gang is no
    // longer infeasible, only waiting for nodes (none of the pool exists).
    let config = env.kube_config().await;
    let policy_name = format!("{}-pool", ns.name());
    let _policy = DeleteOnDrop::<QueuePolicy>::new(&config, &policy_name);
    let policy: QueuePolicy = serde_json::from_value(json!({
        "apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy",
        "metadata": {"name": policy_name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name()}},
            "nodeTemplates": [{"name": "pool", "labels": {POOL_KEY: pool.as_str(), "type": "kwok"},
                "taints": [{"key": POOL_KEY, "value": pool.as_str(), "effect": "NoSchedule"}],
                "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}],
        },
    }))
    .expect("a QueuePolicy");
    let before = Instant::now();
    Api::<QueuePolicy>::all(ns.client())
        .create(&PostParams::default(), &policy)
        .await
        .expect("create the QueuePolicy");
    let (at, condition) = recorder
        .first_after(
            ns,
            "InsufficientNodeResources once a node template can hold it",
            before,
            RUN,
            waiting_for("InsufficientNodeResources"),
        )
        .await;
    eprintln!(
        "a node template can hold it, after {:?}: {}",
        at - before,
        condition.message
    );

    // A node that can hold it joins: nobody touches the RayJob, and its gang is bound.
    let before = Instant::now();
    let _big = FakeNode::create(
        env,
        ns,
        &pool,
        1,
        &[("cpu", "2"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;
    let (at, condition) = recorder
        .first_after(ns, "GangScheduled", before, RUN, scheduled)
        .await;
    eprintln!("moved on after {:?}: {}", at - before, condition.message);
    assert!(
        condition.message.contains("2 of minMember 2 Pods"),
        "{}",
        condition.message
    );
}

#[tokio::test]
async fn too_few_member_pods_wait_for_the_gang_and_clear_once_they_exist() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "rayjob-pending-members", &OPT_IN).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    let queue = TestQueue::create(&env, &ns, ns.name(), json!({"weight": 1})).await;
    let pool = ns.name().to_string();
    let _node = FakeNode::create(
        &env,
        &ns,
        &pool,
        0,
        &[("cpu", "2"), ("memory", "8Gi"), ("pods", "110")],
    )
    .await;
    // The namespace may hold one Pod: the head is created, the worker is refused.
    let quotas = ns.api::<k8s_openapi::api::core::v1::ResourceQuota>();
    quotas
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": {"name": "one-pod"}, "spec": {"hard": {"pods": "1"}},
            }))
            .expect("a ResourceQuota"),
        )
        .await
        .expect("create the quota");
    ns.wait_for("the quota to be counted", RUN, || async {
        let quota = quotas.get("one-pod").await?;
        Ok(quota
            .status
            .and_then(|s| s.hard)
            .filter(|h| h.contains_key("pods"))
            .map(|_| ()))
    })
    .await;
    let jobs = ns.api::<RayJob>();
    let recorder = Recorder::start(jobs.clone(), "few");
    let groups = Recorder::start(ns.api::<PodGroup>(), "ray-few-pg");
    let start = Instant::now();
    create(&ns, &small_job("few", &queue.name, &pool)).await;
    let born = pod_group_born(&ns, &groups, start).await;
    let (at, condition) = recorder
        .first_after(
            &ns,
            "WaitingForGang",
            start,
            RUN,
            waiting_for("WaitingForGang"),
        )
        .await;
    report("fewer Pods than minMember", at - born, &condition);
    assert!(
        condition
            .message
            .starts_with("1 of minMember 2 Pods of PodGroup ray-few-pg exist (0 bound)"),
        "{}",
        condition.message
    );
    // Volcano v1.14.1 reports this gang as NotEnoughResources, with its own counts
    // (docs/upstream.md, "Volcano: why a PodGroup waits"); they are quoted.
    assert!(
        condition.message.contains("1 Pending, 2 minAvailable"),
        "Volcano's numbers: {}",
        condition.message
    );

    // The quota goes: the worker is created, the gang is bound, the condition clears.
    let before = Instant::now();
    quotas
        .delete("one-pod", &DeleteParams::default())
        .await
        .expect("delete the quota");
    let (at, condition) = recorder
        .first_after(&ns, "GangScheduled", before, RUN, scheduled)
        .await;
    eprintln!("cleared after {:?}: {}", at - before, condition.message);
}
