//! QueuePolicy on the real control plane: the CRD is installed, its status is kept by raygate's
//! status controller, and raygate's webhook enforces policies and Volcano queue rules on Ray
//! objects. Run inside the environment:
//! `tests/env/control-plane exec -- cargo test -p raygate-e2e --test queue_policy`.
//!
//! QueuePolicies and Queues are cluster-scoped: every one created here has a unique name and a
//! namespace selector that matches only this test's namespaces, and is deleted at the end.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client, ResourceExt};
use raygate_api::keys;
use raygate_api::queue_policy::{QueuePolicy, QueuePolicySpec};
use raygate_api::volcano::Queue;
use raygate_e2e::{Env, TestNamespace};
use raygate_reconciler::controllers::queue_policy;
use raygate_reconciler::{Config, Context, Metrics, Shutdown};
use serde_json::{Value, json};

/// How long a status or cache change may take to show.
const SETTLE: Duration = Duration::from_secs(60);
/// Label tying a test's namespaces to its policies.
const MARKER: &str = "e2e.raygate.io/queue-policy";

fn policy(name: &str, marker: &str, spec: serde_json::Value) -> QueuePolicy {
    let mut spec: QueuePolicySpec = serde_json::from_value(spec).expect("a policy spec");
    spec.namespace_selector =
        Some(serde_json::from_value(json!({"matchLabels": {MARKER: marker}})).expect("a selector"));
    QueuePolicy::new(name, spec)
}

async fn label_namespace(client: &Client, name: &str, key: &str, value: Option<&str>) {
    Api::<Namespace>::all(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("labelling namespace {name}: {e}"));
}

/// Waits until the policy's status reads `(observedGeneration, matchedNamespaces)`.
async fn wait_status(
    ns: &TestNamespace,
    policies: &Api<QueuePolicy>,
    name: &str,
    want: (i64, i32),
) {
    ns.wait_for(
        &format!("QueuePolicy {name} status {want:?}"),
        SETTLE,
        || async {
            let policy = policies.get(name).await?;
            let status = policy.status.unwrap_or_default();
            Ok((status.observed_generation == Some(want.0)
                && status.matched_namespaces == Some(want.1))
            .then_some(()))
        },
    )
    .await;
}

#[tokio::test]
async fn status_reports_observed_generation_and_matched_namespaces() {
    let env = Env::load();
    // A non-default opt-in label (`--namespace-label`): only it opts namespaces in.
    let opt_in = ("qp.example.com/gang", "on");
    let a = TestNamespace::with_labels(&env, "qp-status-a", &[opt_in]).await;
    let marker = a.name().to_string();
    let client = a.client();
    label_namespace(&client, a.name(), MARKER, Some(&marker)).await;
    let b = TestNamespace::with_labels(&env, "qp-status-b", &[opt_in, (MARKER, &marker)]).await;
    // Selected but not opted in: never counted.
    let _c = TestNamespace::with_labels(&env, "qp-status-c", &[(MARKER, &marker)]).await;
    // Selected, and labelled with raygate's default opt-in label, which is not the one in force.
    let default_label = (keys::NAMESPACE_OPT_IN_LABEL, keys::NAMESPACE_OPT_IN_VALUE);
    let _d =
        TestNamespace::with_labels(&env, "qp-status-d", &[default_label, (MARKER, &marker)]).await;

    let (stop, shutdown) = Shutdown::new();
    let config = Config {
        opt_in_label: format!("{}={}", opt_in.0, opt_in.1)
            .parse()
            .expect("a label"),
        ..Config::default()
    };
    let context = Context::start(client.clone(), config, Arc::new(Metrics::new()), shutdown)
        .await
        .expect("the Namespace cache starts");
    let controller = tokio::spawn(queue_policy::run(context));

    let policies: Api<QueuePolicy> = Api::all(client.clone());
    let name = format!("{marker}-status");
    policies
        .create(&PostParams::default(), &policy(&name, &marker, json!({})))
        .await
        .expect("create QueuePolicy");
    wait_status(&a, &policies, &name, (1, 2)).await;

    // A spec change is observed.
    policies
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"allowedQueues": ["default"]}})),
        )
        .await
        .expect("patch QueuePolicy");
    wait_status(&a, &policies, &name, (2, 2)).await;

    // A namespace leaving Volcano scheduling is no longer counted, without any policy change.
    label_namespace(&client, b.name(), opt_in.0, None).await;
    wait_status(&a, &policies, &name, (2, 1)).await;

    policies
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete QueuePolicy");
    stop.fire();
    tokio::time::timeout(Duration::from_secs(30), controller)
        .await
        .expect("the controller stops on shutdown")
        .expect("the controller task does not panic");
}

// ------------------------------------------------------------------ admission (raygate webhook)

/// A Queue named `name` with `capability`, once Volcano has opened it.
async fn open_queue(ns: &TestNamespace, name: &str, capability: serde_json::Value) -> Queue {
    open_queue_with(ns, name, json!({"capability": capability})).await
}

/// Creates the queue `name` with `spec` (beside a weight and `reclaimable`) and waits until it
/// is Open.
async fn open_queue_with(ns: &TestNamespace, name: &str, spec: serde_json::Value) -> Queue {
    let queues: Api<Queue> = Api::all(ns.client());
    let mut queue = json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": true},
    });
    for (key, value) in spec.as_object().into_iter().flatten() {
        queue["spec"][key] = value.clone();
    }
    let queue: Queue = serde_json::from_value(queue).expect("a Queue");
    queues
        .create(&PostParams::default(), &queue)
        .await
        .unwrap_or_else(|e| panic!("creating queue {name}: {e}"));
    wait_queue_state(ns, name, "Open").await
}

async fn wait_queue_state(ns: &TestNamespace, name: &str, state: &str) -> Queue {
    let queues: Api<Queue> = Api::all(ns.client());
    ns.wait_for(&format!("queue {name} to be {state}"), SETTLE, || async {
        let queue = queues.get(name).await?;
        let current = queue.status.as_ref().and_then(|s| s.state.as_deref());
        Ok((current == Some(state)).then_some(queue.clone()))
    })
    .await
}

/// Closes `queue` with a `bus.volcano.sh` Command, as `vcctl queue operate -a close` does.
async fn close_queue(ns: &TestNamespace, queue: &Queue) {
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
        "metadata": {"generateName": format!("{}-closequeue-", queue.name_any()),
                     "ownerReferences": [owner]},
        "target": owner,
        "action": "CloseQueue",
    }))
    .expect("a Command");
    commands
        .create(&PostParams::default(), &command)
        .await
        .expect("create Command");
    wait_queue_state(ns, &queue.name_any(), "Closed").await;
}

async fn delete_queue(client: &Client, name: &str) {
    let _ = Api::<Queue>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

/// A RayJob in HTTPMode (no submitter) handed to MultiKueue, so that no reconciler in the
/// environment ever touches it: one head and `workers` workers, 1 CPU and 1Gi each.
fn ray_job(name: &str, queue: Option<&str>, workers: i32) -> Value {
    let mut job = json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "HTTPMode",
            "managedBy": keys::MULTIKUEUE_MANAGED_BY,
            "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": {"containers": [
                    {"name": "ray-head", "image": "rayproject/ray:2.60.0",
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}},
                "workerGroupSpecs": [{"groupName": "w", "replicas": workers, "minReplicas": 0,
                    "maxReplicas": 100, "template": {"spec": {"containers": [
                    {"name": "ray-worker", "image": "rayproject/ray:2.60.0",
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}],
            },
        },
    });
    if let Some(queue) = queue {
        job["metadata"]["labels"] = json!({ keys::QUEUE_LABEL: queue });
    }
    job
}

fn ray_jobs(ns: &TestNamespace) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("ray.io", "v1", "RayJob"));
    Api::namespaced_with(ns.client(), ns.name(), &resource)
}

/// Creates `object` (a server-side dry run when `dry_run`), returning the stored object or the
/// API server's message.
async fn create(ns: &TestNamespace, object: &Value, dry_run: bool) -> Result<Value, String> {
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
    let params = PostParams {
        dry_run,
        field_manager: Some("raygate-e2e".into()),
    };
    match ray_jobs(ns).create(&params, &dynamic).await {
        Ok(stored) => Ok(serde_json::to_value(stored).expect("serialisable")),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(e) => Err(format!("transport error: {e}")),
    }
}

/// Polls until creating `object` is denied with a message ending in `expected` (the webhook's
/// caches may lag behind a queue or policy change for a moment). Returns the full message.
async fn wait_denied(ns: &TestNamespace, object: &Value, expected: &str) -> String {
    ns.wait_for(
        &format!("a denial ending in {expected:?}"),
        SETTLE,
        || async {
            match create(ns, object, true).await {
                Err(message) if message.ends_with(expected) => Ok(Some(message)),
                Err(message) => anyhow::bail!("denied with another message: {message}"),
                Ok(_) => anyhow::bail!("admitted"),
            }
        },
    )
    .await
}

/// `kubectl <args>` with the admin kubeconfig and `stdin`; (success, stdout, stderr).
async fn kubectl(env: &Env, args: &[&str], stdin: &Value) -> (bool, String, String) {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.to_string().as_bytes())
        .await
        .expect("write stdin");
    drop(input);
    let output = child.wait_with_output().await.expect("kubectl ends");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn opted_in_namespace(env: &Env, prefix: &str) -> TestNamespace {
    let ns = TestNamespace::with_labels(
        env,
        prefix,
        &[(keys::NAMESPACE_OPT_IN_LABEL, keys::NAMESPACE_OPT_IN_VALUE)],
    )
    .await;
    label_namespace(&ns.client(), ns.name(), MARKER, Some(ns.name())).await;
    ns
}

#[tokio::test]
async fn closed_queue_is_refused() {
    let env = Env::load();
    let ns = opted_in_namespace(&env, "qp-closed").await;
    let name = format!("{}-closed", ns.name());
    let queue = open_queue(&ns, &name, json!({})).await;
    let job = ray_job("closed", Some(&name), 1);
    // Control: the same RayJob is admitted while the queue is open.
    ns.wait_for("admission to an open queue", SETTLE, || async {
        create(&ns, &job, true)
            .await
            .map(Some)
            .map_err(anyhow::Error::msg)
    })
    .await;
    close_queue(&ns, &queue).await;
    wait_denied(
        &ns,
        &job,
        &format!(
            "metadata.labels[volcano.sh/queue-name]: queue \"{name}\" is Closed: Volcano admits new PodGroups only to an Open queue; choose another queue or reopen it"
        ),
    )
    .await;
    delete_queue(&ns.client(), &name).await;
}

#[tokio::test]
async fn oversize_gang_is_refused() {
    let env = Env::load();
    let ns = opted_in_namespace(&env, "qp-oversize").await;
    let name = format!("{}-small", ns.name());
    open_queue(&ns, &name, json!({"cpu": "4", "memory": "64Gi"})).await;
    // Head + 4 workers: 5 CPUs in a queue capped at 4.
    let message = wait_denied(
        &ns,
        &ray_job("big", Some(&name), 4),
        &format!(
            "spec.rayClusterSpec: the gang needs cpu 5 but queue \"{name}\" has capability cpu 4 (1 over): Volcano can never admit this PodGroup; shrink the cluster or choose a bigger queue"
        ),
    )
    .await;
    assert!(message.contains("denied the request"), "{message}");
    // Control: head + 3 workers fit exactly.
    create(&ns, &ray_job("fits", Some(&name), 3), true)
        .await
        .expect("a gang at the queue's capability is admitted");
    delete_queue(&ns.client(), &name).await;
}

#[tokio::test]
async fn a_gang_above_its_parent_queues_capability_is_admitted_with_a_warning() {
    let env = Env::load();
    let ns = opted_in_namespace(&env, "qp-parent").await;
    let parent = format!("{}-org", ns.name());
    let child = format!("{}-team", ns.name());
    open_queue(&ns, &parent, json!({"cpu": "4", "memory": "64Gi"})).await;
    open_queue_with(&ns, &child, json!({"parent": parent})).await;
    // Head + 4 workers: 5 CPUs in a queue whose parent caps its subtree at 4.
    let mut job = ray_job("big", Some(&child), 4);
    job["metadata"]["namespace"] = json!(ns.name());
    let warning = format!(
        "Warning: spec.rayClusterSpec: the gang needs cpu 5 but queue \"{child}\"'s ancestor queue \"{parent}\" has capability cpu 4 (1 over): where Volcano enforces the queue hierarchy (capacity plugin, enableHierarchy) it can never admit this PodGroup"
    );
    let stderr = ns
        .wait_for("the parent's capability warning", SETTLE, || async {
            let (ok, _, stderr) =
                kubectl(&env, &["create", "--dry-run=server", "-f", "-"], &job).await;
            anyhow::ensure!(ok, "refused: {stderr}");
            Ok(stderr.contains(&warning).then_some(stderr))
        })
        .await;
    assert!(
        !stderr.contains("volcano-gang-exceeds-capability"),
        "{stderr}"
    );
    // Control: head + 3 workers fit the parent's capability: no warning.
    let mut fits = ray_job("fits", Some(&child), 3);
    fits["metadata"]["namespace"] = json!(ns.name());
    let (ok, _, stderr) = kubectl(&env, &["create", "--dry-run=server", "-f", "-"], &fits).await;
    assert!(ok && !stderr.contains("ancestor queue"), "{stderr}");
    delete_queue(&ns.client(), &child).await;
    delete_queue(&ns.client(), &parent).await;
}

#[tokio::test]
async fn disallowed_queue_is_refused_and_warn_mode_only_warns() {
    let env = Env::load();
    let ns = opted_in_namespace(&env, "qp-allowed").await;
    let (allowed, other) = (format!("{}-a", ns.name()), format!("{}-b", ns.name()));
    open_queue(&ns, &allowed, json!({})).await;
    open_queue(&ns, &other, json!({})).await;
    let policies: Api<QueuePolicy> = Api::all(ns.client());
    let policy_name = format!("{}-allowed", ns.name());
    policies
        .create(
            &PostParams::default(),
            &policy(&policy_name, ns.name(), json!({"allowedQueues": [allowed]})),
        )
        .await
        .expect("create QueuePolicy");
    let violation = format!(
        "metadata.labels[volcano.sh/queue-name]: queue \"{other}\" is not allowed in namespace \"{}\" by QueuePolicy \"{policy_name}\" (allowed: {allowed})",
        ns.name()
    );
    let job = ray_job("elsewhere", Some(&other), 1);
    wait_denied(&ns, &job, &violation).await;
    create(&ns, &ray_job("here", Some(&allowed), 1), true)
        .await
        .expect("the allowed queue is admitted");

    // Audit mode: the same RayJob is admitted, and kubectl shows the violation as a warning.
    policies
        .patch(
            &policy_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"enforcement": "Warn"}})),
        )
        .await
        .expect("switch the policy to Warn");
    let mut job = job;
    job["metadata"]["namespace"] = json!(ns.name());
    let warning =
        format!("Warning: {violation} (QueuePolicy \"{policy_name}\" is in Warn mode: admitted)");
    ns.wait_for("a Warn-mode admission with a warning", SETTLE, || async {
        let (ok, _, stderr) = kubectl(&env, &["create", "--dry-run=server", "-f", "-"], &job).await;
        Ok((ok && stderr.contains(&warning)).then_some(()))
    })
    .await;
    policies
        .delete(&policy_name, &DeleteParams::default())
        .await
        .expect("delete QueuePolicy");
    delete_queue(&ns.client(), &allowed).await;
    delete_queue(&ns.client(), &other).await;
}

#[tokio::test]
async fn queue_label_change_on_a_rayjob_with_a_live_cluster_is_refused() {
    let env = Env::load();
    let ns = opted_in_namespace(&env, "qp-relabel").await;
    let (first, second) = (format!("{}-a", ns.name()), format!("{}-b", ns.name()));
    open_queue(&ns, &first, json!({})).await;
    open_queue(&ns, &second, json!({})).await;
    let jobs = ray_jobs(&ns);
    let job = ray_job("relabel", Some(&first), 1);
    ns.wait_for("the RayJob to be created", SETTLE, || async {
        create(&ns, &job, false)
            .await
            .map(Some)
            .map_err(anyhow::Error::msg)
    })
    .await;
    let relabel =
        |queue: &str| Patch::Merge(json!({"metadata": {"labels": {keys::QUEUE_LABEL: queue}}}));
    // Before the reconciler has started it, the queue may still change.
    jobs.patch("relabel", &PatchParams::default(), &relabel(&second))
        .await
        .expect("a RayJob without a cluster may change queue");
    jobs.patch("relabel", &PatchParams::default(), &relabel(&first))
        .await
        .expect("and change back");
    // What the reconciler writes once the cluster exists, through the status subresource.
    jobs.patch_status(
        "relabel",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "jobDeploymentStatus": "Running", "rayClusterName": "relabel-x7k2p"}})),
    )
    .await
    .expect("set the RayJob's status");
    match jobs
        .patch("relabel", &PatchParams::default(), &relabel(&second))
        .await
    {
        Err(kube::Error::Api(status)) => assert!(
            status.message.ends_with(&format!(
                "metadata.labels[volcano.sh/queue-name]: cannot change from \"{first}\" to \"{second}\" while the RayJob has a live RayCluster \"relabel-x7k2p\" (status.jobDeploymentStatus Running): its PodGroup keeps the value it was created with; delete and re-create the RayJob to change it"
            )),
            "{}",
            status.message
        ),
        other => panic!("the queue change was not refused: {other:?}"),
    }
    // Other edits of the running RayJob still pass.
    jobs.patch(
        "relabel",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
    )
    .await
    .expect("an unrelated label change is admitted");
    delete_queue(&ns.client(), &first).await;
    delete_queue(&ns.client(), &second).await;
}

#[tokio::test]
async fn default_queue_comes_from_the_namespace_then_the_policy() {
    let env = Env::load();
    let ns = opted_in_namespace(&env, "qp-default").await;
    let (annotated, from_policy) = (format!("{}-ns", ns.name()), format!("{}-qp", ns.name()));
    open_queue(&ns, &annotated, json!({})).await;
    open_queue(&ns, &from_policy, json!({})).await;
    let policies: Api<QueuePolicy> = Api::all(ns.client());
    let policy_name = format!("{}-default", ns.name());
    policies
        .create(
            &PostParams::default(),
            &policy(
                &policy_name,
                ns.name(),
                json!({"defaultQueue": from_policy}),
            ),
        )
        .await
        .expect("create QueuePolicy");
    let queue_of = |stored: &Value| stored["metadata"]["labels"][keys::QUEUE_LABEL].clone();
    let unlabelled = ray_job("unlabelled", None, 1);
    ns.wait_for("the policy's default queue", SETTLE, || async {
        let stored = create(&ns, &unlabelled, true)
            .await
            .map_err(anyhow::Error::msg)?;
        Ok((queue_of(&stored) == json!(from_policy)).then_some(()))
    })
    .await;
    Api::<Namespace>::all(ns.client())
        .patch(
            ns.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                keys::NAMESPACE_QUEUE_ANNOTATION: annotated}}})),
        )
        .await
        .expect("annotate the namespace");
    let stored = ns
        .wait_for("the namespace's default queue", SETTLE, || async {
            let stored = create(&ns, &unlabelled, false)
                .await
                .map_err(anyhow::Error::msg)?;
            if queue_of(&stored) == json!(annotated) {
                return Ok(Some(stored));
            }
            ray_jobs(&ns)
                .delete("unlabelled", &DeleteParams::default())
                .await?;
            Ok(None)
        })
        .await;
    assert_eq!(queue_of(&stored), json!(annotated));
    // An explicit label is never replaced.
    let stored = create(&ns, &ray_job("labelled", Some(&from_policy), 1), true)
        .await
        .expect("admitted");
    assert_eq!(queue_of(&stored), json!(from_policy));
    policies
        .delete(&policy_name, &DeleteParams::default())
        .await
        .expect("delete QueuePolicy");
    delete_queue(&ns.client(), &annotated).await;
    delete_queue(&ns.client(), &from_policy).await;
}

#[tokio::test]
async fn invalid_queue_policies_are_refused() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "qp-invalid").await;
    let policies: Api<QueuePolicy> = Api::all(ns.client());
    let dry_run = PostParams {
        dry_run: true,
        field_manager: None,
    };
    let cases = [
        (
            json!({"defaultQueue": "c", "allowedQueues": ["a", "b"]}),
            "spec.defaultQueue: queue \"c\" is not in spec.allowedQueues [a, b]: every object defaulted to it would be denied",
        ),
        (
            json!({"namespaceSelector": {"matchExpressions": [
                {"key": "team", "operator": "Near", "values": ["a"]}]}}),
            "spec.namespaceSelector.matchExpressions[0].operator: Unsupported value: \"Near\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\"",
        ),
    ];
    for (spec, expected) in cases {
        let spec: QueuePolicySpec = serde_json::from_value(spec).expect("a spec");
        let candidate = QueuePolicy::new(&format!("{}-bad", ns.name()), spec);
        match policies.create(&dry_run, &candidate).await {
            Err(kube::Error::Api(status)) => assert!(
                status.message.ends_with(expected),
                "expected {expected:?}, got {:?}",
                status.message
            ),
            other => panic!("an invalid QueuePolicy was not refused: {other:?}"),
        }
    }
    // Control: a valid policy is admitted.
    let valid: QueuePolicySpec =
        serde_json::from_value(json!({"defaultQueue": "a", "allowedQueues": ["a", "b"]}))
            .expect("a spec");
    policies
        .create(
            &dry_run,
            &QueuePolicy::new(&format!("{}-good", ns.name()), valid),
        )
        .await
        .expect("a valid QueuePolicy is admitted");
}

/// A RayJob of [`ray_job`]'s shape that raygate's reconciler runs: feasibility concerns the
/// Pods this cluster makes, and a RayJob managed elsewhere (MultiKueue) makes none here.
fn reconciled_ray_job(name: &str, workers: i32) -> Value {
    let mut job = ray_job(name, None, workers);
    job["spec"]
        .as_object_mut()
        .expect("a spec")
        .remove("managedBy");
    job
}

/// The RayJob: its head asks for 64 CPUs, more than any node the head may use (the real
/// nodes: the kwok nodes' taint is not tolerated) has, and its four workers for 8 GPUs each, on
/// an environment without any GPU.
fn infeasible_ray_job(name: &str) -> Value {
    let mut job = reconciled_ray_job(name, 4);
    let cluster = &mut job["spec"]["rayClusterSpec"];
    cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] =
        json!("64");
    cluster["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = json!({
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "8"},
        "limits": {"nvidia.com/gpu": "8"}});
    job
}

/// The start of the feasibility finding about [`infeasible_ray_job`]'s head (the largest
/// node's CPUs follow).
const HEAD_TOO_BIG: &str = "spec.rayClusterSpec.headGroupSpec.template.spec: head Pod asks cpu 64; the largest node offers ";

/// The feasibility finding about [`infeasible_ray_job`]'s workers.
const NO_GPU: &str = "spec.rayClusterSpec.workerGroupSpecs[0].template.spec: worker group \"w\" Pod asks nvidia.com/gpu 8; no node offers nvidia.com/gpu";

#[tokio::test]
async fn an_infeasible_ray_job_is_admitted_with_a_warning() {
    let env = Env::load();
    let ns = opted_in_namespace(&env, "qp-infeasible-warn").await;
    let mut job = infeasible_ray_job("too-big");
    job["metadata"]["namespace"] = json!(ns.name());
    let warning = format!("Warning: {HEAD_TOO_BIG}");
    // The webhook is Ready only once its Node cache has synced: the first answer has it.
    let (ok, _, stderr) = kubectl(&env, &["create", "-f", "-"], &job).await;
    assert!(ok, "an infeasible RayJob is admitted by default: {stderr}");
    assert!(stderr.contains(&warning), "{stderr}");
    assert!(stderr.contains(&format!("Warning: {NO_GPU}")), "{stderr}");
    assert!(
        stderr.contains(&format!("{HEAD_TOO_BIG}2 (real-")),
        "the largest node the head may use is a real node with 2 CPUs: {stderr}"
    );
    ray_jobs(&ns)
        .get("too-big")
        .await
        .expect("the infeasible RayJob is stored");
    // Control: a RayJob that fits gets no feasibility warning.
    let mut fits = reconciled_ray_job("fits", 1);
    fits["metadata"]["namespace"] = json!(ns.name());
    let (ok, _, stderr) = kubectl(&env, &["create", "-f", "-"], &fits).await;
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("Pod asks"), "{stderr}");
    // The same infeasible RayJob handed to MultiKueue makes no Pod here: nothing to warn about.
    let mut elsewhere = infeasible_ray_job("elsewhere");
    elsewhere["metadata"]["namespace"] = json!(ns.name());
    elsewhere["spec"]["managedBy"] = json!(keys::MULTIKUEUE_MANAGED_BY);
    let (ok, _, stderr) = kubectl(&env, &["create", "-f", "-"], &elsewhere).await;
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("Pod asks"), "{stderr}");
}

#[tokio::test]
async fn raygate_validate_cluster_warns_as_the_webhook_does_against_the_live_nodes() {
    // The environment must be up: its API server is the cluster.
    let _env = Env::load();
    let dir = std::env::temp_dir().join(format!("raygate-e2e-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let file = dir.join("too-big.yaml");
    let manifest = serde_json::to_string(&infeasible_ray_job("too-big")).expect("JSON");
    std::fs::write(&file, manifest).expect("the manifest");
    let file = file.to_string_lossy().into_owned();
    // KUBECONFIG is the environment's, as kubectl's is.
    let output = raygate_e2e::raygate::run(&["validate", "--cluster", "-f", &file]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "warnings only: {stdout}{stderr}"
    );
    assert!(
        stdout.contains(&format!(
            "Warning: rayjob.ray.io/too-big: {HEAD_TOO_BIG}2 (real-"
        )),
        "the head's largest node is a real node with 2 CPUs, as the webhook says: {stdout}"
    );
    assert!(
        stdout.contains(&format!("Warning: rayjob.ray.io/too-big: {NO_GPU}")),
        "{stdout}"
    );
}

/// A QueuePolicy of `ns`'s own with `infeasible: Deny`: its API, its name and the end of the
/// message of what it denies.
async fn deny_infeasible(ns: &TestNamespace) -> (Api<QueuePolicy>, String, String) {
    let policies: Api<QueuePolicy> = Api::all(ns.client());
    let policy_name = format!("{}-infeasible", ns.name());
    policies
        .create(
            &PostParams::default(),
            &policy(&policy_name, ns.name(), json!({"infeasible": "Deny"})),
        )
        .await
        .expect("create QueuePolicy");
    let suffix = format!(
        "(QueuePolicy \"{policy_name}\" denies what can never be scheduled: infeasible: Deny)"
    );
    (policies, policy_name, suffix)
}

#[tokio::test]
async fn a_deny_policy_refuses_an_infeasible_ray_job_and_nothing_is_created() {
    let env = Env::load();
    let ns = opted_in_namespace(&env, "qp-infeasible-deny").await;
    let (policies, policy_name, suffix) = deny_infeasible(&ns).await;
    let job = infeasible_ray_job("too-big");
    let message = wait_denied(&ns, &job, &suffix).await;
    assert!(message.contains(HEAD_TOO_BIG), "{message}");
    assert!(message.contains(NO_GPU), "{message}");
    // Not only a dry run: the real request is denied the same way, and nothing exists.
    let refused = create(&ns, &job, false)
        .await
        .expect_err("an infeasible RayJob is denied under infeasible: Deny");
    assert!(refused.ends_with(&suffix), "{refused}");
    for (group, version, kind) in [
        ("ray.io", "v1", "RayJob"),
        ("ray.io", "v1", "RayCluster"),
        ("scheduling.volcano.sh", "v1beta1", "PodGroup"),
    ] {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
        let listed = api
            .list(&Default::default())
            .await
            .unwrap_or_else(|e| panic!("listing {kind}: {e}"));
        assert!(listed.items.is_empty(), "no {kind} was created");
    }
    // Control: a RayJob that fits is admitted under the same policy.
    create(&ns, &reconciled_ray_job("fits", 1), true)
        .await
        .expect("a feasible RayJob is admitted");
    // A node pool an autoscaler can add, named by the policy, can hold it: admitted, though no
    // node of the cluster could.
    let gpu_pool = json!({"spec": {"nodeTemplates": [{"name": "gpu-pool",
        "allocatable": {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8"}}]}});
    policies
        .patch(
            &policy_name,
            &PatchParams::default(),
            &Patch::Merge(&gpu_pool),
        )
        .await
        .expect("add a node template");
    ns.wait_for(
        "the infeasible RayJob admitted once a node template can hold it",
        SETTLE,
        || async {
            match create(&ns, &job, true).await {
                Ok(_) => Ok(Some(())),
                Err(message) => anyhow::bail!("still denied: {message}"),
            }
        },
    )
    .await;
    policies
        .delete(&policy_name, &DeleteParams::default())
        .await
        .expect("delete QueuePolicy");
}

#[tokio::test]
async fn each_kind_of_infeasibility_is_named_at_apply() {
    let env = Env::load();
    let ns = opted_in_namespace(&env, "qp-infeasible-kinds").await;
    let (policies, policy_name, suffix) = deny_infeasible(&ns).await;
    let edited = |edit: &dyn Fn(&mut Value)| {
        let mut job = reconciled_ray_job("kind", 1);
        edit(&mut job["spec"]);
        job
    };
    let kwok_taint = env.var("RAYGATE_KWOK_NODE_TAINT");
    let cases: Vec<(&str, Value, String)> = vec![
        (
            "a nodeSelector no node matches",
            edited(&|spec| {
                spec["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] =
                    json!({"disktype": "none-here"});
            }),
            "worker group \"w\" Pod: no node matches its nodeSelector disktype=none-here".into(),
        ),
        (
            "required node affinity no node matches",
            edited(&|spec| {
                spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["affinity"] = json!({
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["s390x"]}]}]}}});
            }),
            "head Pod: no node matches its required node affinity".into(),
        ),
        (
            "taints not tolerated (the kwok nodes')",
            edited(&|spec| {
                spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] =
                    json!({"type": "kwok"});
            }),
            "head Pod: no node tolerated: node ".into(),
        ),
        (
            "a multi-host group larger than the nodes it may use",
            edited(&|spec| {
                let group = &mut spec["rayClusterSpec"]["workerGroupSpecs"][0];
                group["replicas"] = json!(2);
                group["numOfHosts"] = json!(2);
                group["template"]["spec"]["nodeSelector"] = json!({"type": "real"});
                group["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] =
                    json!("1500m");
            }),
            "worker group \"w\" needs 4 Pods at once; the nodes they may run on hold at most 2 of them, even empty".into(),
        ),
        (
            "a submitter Pod no node matches",
            edited(&|spec| {
                spec["submissionMode"] = json!("K8sJobMode");
                spec["submitterPodTemplate"] = json!({"spec": {"restartPolicy": "Never",
                    "nodeSelector": {"role": "none-here"},
                    "containers": [{"name": "submit", "image": "rayproject/ray:2.60.0",
                        "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}}}]}});
            }),
            "submitter Pod: no node matches its nodeSelector role=none-here".into(),
        ),
    ];
    for (i, (what, job, cause)) in cases.iter().enumerate() {
        // The first waits for the webhook's caches to have the policy.
        let message = if i == 0 {
            wait_denied(&ns, job, &suffix).await
        } else {
            create(&ns, job, true)
                .await
                .expect_err(&format!("{what}: denied under infeasible: Deny"))
        };
        assert!(message.ends_with(&suffix), "{what}: {message}");
        assert!(
            message.contains(cause.as_str()),
            "{what}: expected {cause:?} in {message}"
        );
        if what.starts_with("taints") {
            assert!(
                message.contains(kwok_taint),
                "{what}: names the kwok taint: {message}"
            );
        }
    }
    policies
        .delete(&policy_name, &DeleteParams::default())
        .await
        .expect("delete QueuePolicy");
}
