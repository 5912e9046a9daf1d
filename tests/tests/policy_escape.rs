//! QueuePolicies without escape (docs/queue-policy.md, "Policy without escape") on the real
//! control plane, through the environment's own raygate webhook: a namespace owner — an
//! impersonated user whose RBAC lets them edit their Namespaces and create Pods, PodGroups and
//! RayJobs in them — tries each way around a QueuePolicy and is refused with raygate's message,
//! while a cluster admin (group `system:masters`) changes the opt-in label. Run inside the
//! environment:
//! `tests/env/control-plane exec -- cargo test -p raygate-e2e --test policy_escape`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use raygate_api::keys;
use raygate_api::queue_policy::{QueuePolicy, QueuePolicySpec};
use raygate_e2e::cleanup::DeleteOnDrop;
use raygate_e2e::{Env, TestNamespace};
use serde_json::{Value, json};

/// How long the webhook's caches may take to see a new policy.
const SETTLE: Duration = Duration::from_secs(60);
/// Label tying the test's namespaces to its policy.
const MARKER: &str = "e2e.raygate.io/policy-escape";

/// A client that acts as `user` in `group` (the admin may impersonate anyone).
async fn impersonating(env: &Env, user: &str, group: &str) -> Client {
    let mut config = env.kube_config().await;
    config.auth_info.impersonate = Some(user.to_string());
    config.auth_info.impersonate_groups = Some(vec![group.to_string()]);
    Client::try_from(config).expect("an impersonating client")
}

/// The namespace owner's RBAC: get and edit their Namespaces (by name), and create Pods,
/// PodGroups and RayJobs in them.
async fn grant_owner(admin: &Client, name: &str, user: &str, namespaces: &[&str]) {
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"], "resourceNames": namespaces,
                   "verbs": ["get", "patch", "update"]}],
    }))
    .expect("a ClusterRole");
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("creating the namespace-edit ClusterRole");
    let subject = json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]);
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subject,
    }))
    .expect("a ClusterRoleBinding");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding the namespace-edit ClusterRole");
    for ns in namespaces {
        let role: Role = serde_json::from_value(json!({
            "metadata": {"name": "owner"},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]},
                {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": ["create", "get", "list", "delete"]},
                {"apiGroups": ["ray.io"], "resources": ["rayjobs", "rayclusters"], "verbs": ["create", "get", "list", "delete"]},
            ],
        }))
        .expect("a Role");
        Api::<Role>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &role)
            .await
            .expect("creating the owner Role");
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": "owner"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "owner"},
            "subjects": subject,
        }))
        .expect("a RoleBinding");
        Api::<RoleBinding>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &binding)
            .await
            .expect("binding the owner Role");
    }
}

/// `kubectl label namespace NS CHANGE --overwrite`, as `as` (with `--as-group`) when given.
async fn label(ns: &str, change: &str, identity: Option<(&str, &str)>) -> Result<(), String> {
    let mut args = vec!["label", "namespace", ns, change, "--overwrite"];
    let (as_user, as_group);
    if let Some((user, group)) = identity {
        as_user = format!("--as={user}");
        as_group = format!("--as-group={group}");
        args.extend([as_user.as_str(), as_group.as_str()]);
    }
    let output = raygate_e2e::kubectl::run(&args).await;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

fn api(client: &Client, ns: &str, group: &str, version: &str, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Creates `object` in `ns` as `client` (a server-side dry run when `dry_run`); the API
/// server's message when refused.
async fn create(client: &Client, ns: &str, object: &Value, dry_run: bool) -> Result<(), String> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
    let params = PostParams {
        dry_run,
        field_manager: Some("raygate-e2e".into()),
    };
    match api(client, ns, group, version, kind)
        .create(&params, &dynamic)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(error) => panic!("creating a {kind} in {ns}: {error}"),
    }
}

fn pod(name: &str, annotations: Value, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations, "labels": labels},
        "spec": {"schedulerName": keys::VOLCANO_SCHEDULER_NAME,
                 "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]},
    })
}

fn pod_group(name: &str, queue: &str) -> Value {
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"queue": queue, "minMember": 1},
    })
}

/// A RayJob no controller runs (`spec.managedBy` MultiKueue), in `queue` by label.
fn ray_job(name: &str, queue: &str) -> Value {
    let container = |name: &str| {
        json!({"name": name, "image": "rayproject/ray:2.60.0",
               "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}})
    };
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name, "labels": {keys::QUEUE_LABEL: queue}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "HTTPMode",
            "managedBy": keys::MULTIKUEUE_MANAGED_BY,
            "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": {"containers": [container("ray-head")]}}},
                "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 1,
                    "template": {"spec": {"containers": [container("ray-worker")]}}}],
            },
        },
    })
}

fn refused(result: Result<(), String>, what: &str, expected: &[&str]) {
    let message = match result {
        Ok(()) => panic!("{what}: admitted, but the namespace owner must be refused"),
        Err(message) => message,
    };
    for part in expected {
        assert!(message.contains(part), "{what}: {message:?} lacks {part:?}");
    }
}

#[tokio::test]
async fn a_namespace_owner_cannot_escape_queue_policies_and_a_cluster_admin_moves_the_label() {
    let env = Env::load();
    let opted_in = TestNamespace::with_labels(
        &env,
        "escape-in",
        &[(keys::NAMESPACE_OPT_IN_LABEL, "volcano")],
    )
    .await;
    let marker = opted_in.name().to_string();
    let plain = TestNamespace::with_labels(&env, "escape-out", &[(MARKER, &marker)]).await;
    let admin = opted_in.client();
    let name = format!("{marker}-owner");
    // The test's cluster-scoped objects, deleted when it ends (a tuple drops its first first).
    let config = env.kube_config().await;
    let _cleanup = (
        DeleteOnDrop::<QueuePolicy>::new(&config, &name),
        DeleteOnDrop::<ClusterRoleBinding>::new(&config, &name),
        DeleteOnDrop::<ClusterRole>::new(&config, &name),
    );
    label(opted_in.name(), &format!("{MARKER}={marker}"), None)
        .await
        .expect("the admin marks the opted-in namespace");

    let allowed = format!("{marker}-team");
    let forbidden = format!("{marker}-gpu");
    let mut spec: QueuePolicySpec =
        serde_json::from_value(json!({"allowedQueues": [allowed]})).expect("a policy spec");
    spec.namespace_selector =
        Some(serde_json::from_value(json!({"matchLabels": {MARKER: marker}})).expect("a selector"));
    Api::<QueuePolicy>::all(admin.clone())
        .create(&PostParams::default(), &QueuePolicy::new(&name, spec))
        .await
        .expect("creating the QueuePolicy");

    let user = format!("alice-{marker}");
    let group = format!("team-{marker}");
    grant_owner(&admin, &name, &user, &[opted_in.name(), plain.name()]).await;
    let owner = impersonating(&env, &user, &group).await;
    let identity = Some((user.as_str(), group.as_str()));
    let not_allowed = |ns: &str, queue: &str| {
        format!(
            "queue \"{queue}\" is not allowed in namespace \"{ns}\" by QueuePolicy \"{name}\" (allowed: {allowed})"
        )
    };

    // The webhook's policy cache has the new policy once a forbidden PodGroup is refused.
    plain
        .wait_for("the policy in raygate's cache", SETTLE, || async {
            let result = create(&owner, plain.name(), &pod_group("probe", &forbidden), true).await;
            Ok(result.is_err().then_some(()))
        })
        .await;

    // 1. Removing the opt-in label, or changing its value, or adding it: refused.
    let guard = |change: &str| {
        format!(
            "admission webhook \"namespaces.validate.raygate.io\" denied the request: metadata.labels[raygate.io/scheduler]: {change}: user \"{user}\" may not change raygate's opt-in label, which decides whether QueuePolicies and gang scheduling govern the namespace; ask a cluster admin (group system:masters, raygate's --namespace-label-admins) to change it"
        )
    };
    let remove = format!("{}-", keys::NAMESPACE_OPT_IN_LABEL);
    refused(
        label(opted_in.name(), &remove, identity).await,
        "removing the opt-in label",
        &[&guard("cannot remove label raygate.io/scheduler=volcano")],
    );
    refused(
        label(opted_in.name(), "raygate.io/scheduler=off", identity).await,
        "relabelling the namespace",
        &[&guard(
            "cannot change label raygate.io/scheduler from \"volcano\" to \"off\"",
        )],
    );
    refused(
        label(plain.name(), "raygate.io/scheduler=volcano", identity).await,
        "opting a namespace in",
        &[&guard("cannot add label raygate.io/scheduler=volcano")],
    );
    // The owner's RBAC is enough: another label of the same Namespace changes.
    label(opted_in.name(), "team=a", identity)
        .await
        .expect("the owner edits their namespace's other labels");

    // 2. A Volcano Pod in the unlabelled namespace, by annotation (what Volcano's PodGroup
    // controller reads) or with only the label (Volcano's default queue then): refused.
    let pods = "admission webhook \"volcanopods.validate.raygate.io\" denied the request";
    refused(
        create(
            &owner,
            plain.name(),
            &pod(
                "by-annotation",
                json!({keys::NAMESPACE_QUEUE_ANNOTATION: forbidden}),
                json!({}),
            ),
            false,
        )
        .await,
        "a Volcano Pod with a forbidden queue annotation",
        &[
            pods,
            &format!(
                "metadata.annotations[scheduling.volcano.sh/queue-name]: {}",
                not_allowed(plain.name(), &forbidden)
            ),
        ],
    );
    refused(
        create(
            &owner,
            plain.name(),
            &pod("by-label", json!({}), json!({keys::QUEUE_LABEL: forbidden})),
            false,
        )
        .await,
        "a Volcano Pod with only a queue label",
        &[
            pods,
            "queue \"default\" (no scheduling.volcano.sh/queue-name annotation: Volcano's default queue) is not allowed",
        ],
    );

    // 3. A RayJob with the queue label in the unlabelled namespace: refused.
    refused(
        create(&owner, plain.name(), &ray_job("escape", &forbidden), false).await,
        "a RayJob with a forbidden queue label",
        &[&format!(
            "metadata.labels[volcano.sh/queue-name]: {}",
            not_allowed(plain.name(), &forbidden)
        )],
    );

    // 4. A PodGroup written directly, in either namespace: refused.
    for ns in [plain.name(), opted_in.name()] {
        refused(
            create(&owner, ns, &pod_group("direct", &forbidden), false).await,
            &format!("a PodGroup in queue {forbidden} in {ns}"),
            &[
                "admission webhook \"podgroups.validate.raygate.io\" denied the request",
                &format!("spec.queue: {}", not_allowed(ns, &forbidden)),
            ],
        );
    }

    // Controls: the allowed queue is open to the owner by each route.
    let pod_in_queue = pod(
        "allowed",
        json!({keys::NAMESPACE_QUEUE_ANNOTATION: allowed}),
        json!({}),
    );
    create(&owner, plain.name(), &pod_in_queue, false)
        .await
        .expect("a Volcano Pod in the allowed queue");
    create(&owner, plain.name(), &pod_group("allowed", &allowed), false)
        .await
        .expect("a PodGroup in the allowed queue");
    create(&owner, plain.name(), &ray_job("allowed", &allowed), true)
        .await
        .expect("a RayJob in the allowed queue");
    // Volcano's controller gives the Pod its PodGroup, which the PodGroup webhook admits.
    let pods_api: Api<Pod> = Api::namespaced(admin.clone(), plain.name());
    plain
        .wait_for("the allowed Pod's PodGroup", SETTLE, || async {
            let pod = pods_api.get("allowed").await?;
            Ok(pod
                .metadata
                .annotations
                .unwrap_or_default()
                .get(keys::POD_GROUP_ANNOTATION)
                .cloned())
        })
        .await;

    // A cluster admin moves the label both ways.
    label(opted_in.name(), &remove, None)
        .await
        .expect("the cluster admin removes the opt-in label");
    label(opted_in.name(), "raygate.io/scheduler=volcano", None)
        .await
        .expect("the cluster admin restores the opt-in label");
}
