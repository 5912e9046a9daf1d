//! What raygate's reconciler adds to a cluster for in-tree autoscaling, token authentication
//! and worker start-up, differentially: the same RayCluster run by the live KubeRay operator in
//! one namespace and by raygate's reconciler in another gets the same autoscaler ServiceAccount,
//! Role and RoleBinding, the same token Secret (but its random token), and head and worker Pods
//! with the same autoscaler container, `wait-gcs-ready` init container (but its script, which
//! raygate writes itself) and token environment. Token authentication is compared next to
//! KubeRay v1.6 and later (v1.5 does not run it).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::ListParams;
use kube::{Resource, ResourceExt};
use raygate_e2e::kuberay::KubeRay;
use raygate_e2e::{Env, TestNamespace};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{KUBERAY, SETTLE, container, create};

const CLUSTER: &str = "elastic";

/// What KubeRay v1.7 adds that the environment's older peers (`RAYGATE_KUBERAY` 1.5, 1.6) do
/// not: the autoscaler's own start command in its environment, for `autoscalerOptions.args` to
/// run. Left out of raygate's side when the peer predates v1.7.
const SINCE_V1_7: &[&str] = &["KUBERAY_GEN_AUTOSCALER_START_CMD"];

/// The environment's KubeRay release (`RAYGATE_KUBERAY_VERSION`, e.g. `v1.6.2`) as
/// `(major, minor)`.
fn peer_release(env: &Env) -> (u32, u32) {
    let version = env.var("RAYGATE_KUBERAY_VERSION").trim_start_matches('v');
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The first KubeRay release that runs token authentication (`authOptions`); v1.5 ignores it.
const TOKEN_AUTH_SINCE: (u32, u32) = (1, 6);

/// The service-account token volume the API server adds has a random name: not compared.
fn added_by_the_api_server(volume: &str) -> bool {
    volume.starts_with("kube-api-access-")
}

/// The RayCluster both operators run, with token authentication when `token_auth`.
fn cluster(token_auth: bool) -> Value {
    let mut cluster = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": CLUSTER},
        "spec": {
            "rayVersion": "2.60.0",
            "enableInTreeAutoscaling": true,
            "autoscalerOptions": {"version": "v2", "idleTimeoutSeconds": 30,
                                  "env": [{"name": "AUTOSCALER_LOG", "value": "debug"}]},
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                container("ray-head", "500m", "1Gi", None)]}}},
            "workerGroupSpecs": [{
                "groupName": "small", "replicas": 1, "minReplicas": 0, "maxReplicas": 2,
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker", "250m", "1Gi", None)]}}
            }]
        }
    });
    if token_auth {
        cluster["spec"]["authOptions"] = json!({"mode": "token"});
    }
    cluster
}

/// The object `name` of type `K` once it exists.
async fn object<K>(ns: &TestNamespace, name: &str) -> K
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    let api = ns.api::<K>();
    ns.wait_for(
        &format!("{} {name}", K::kind(&Default::default())),
        SETTLE,
        || async { Ok(api.get_opt(name).await?) },
    )
    .await
}

/// The Pod of `node_type` once it exists.
async fn pod(ns: &TestNamespace, node_type: &str) -> Pod {
    let api = ns.api::<Pod>();
    let selector = format!("ray.io/cluster={CLUSTER},ray.io/node-type={node_type}");
    ns.wait_for(&format!("the {node_type} Pod"), SETTLE, || async {
        let pods = api.list(&ListParams::default().labels(&selector)).await?;
        Ok(pods.items.into_iter().next())
    })
    .await
}

/// Labels and owner, as both operators set them.
fn identity<K: Resource>(object: &K) -> Value {
    let owner = object
        .owner_references()
        .first()
        .map(|o| json!([o.kind, o.name, o.controller, o.block_owner_deletion]));
    json!({"labels": object.labels(), "owner": owner})
}

/// A container as compared: environment as a map by name (order is not behaviour) without the
/// variables in `left_out`, mounts without the API server's.
fn container_view(container: &Container, with_args: bool, left_out: &[&str]) -> Value {
    let env: BTreeMap<String, Value> = container
        .env
        .iter()
        .flatten()
        .filter(|e| !left_out.contains(&e.name.as_str()))
        .map(|e| (e.name.clone(), json!([e.value, e.value_from])))
        .collect();
    let mounts: Vec<_> = container
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| !added_by_the_api_server(&m.name))
        .collect();
    json!({
        "name": container.name,
        "image": container.image,
        "imagePullPolicy": container.image_pull_policy,
        "command": container.command,
        "args": if with_args { json!(container.args) } else { Value::Null },
        "env": env,
        "resources": container.resources,
        "volumeMounts": mounts,
    })
}

fn named<'a>(containers: &'a [Container], name: &str) -> &'a Container {
    containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name} in {containers:?}"))
}

/// What the two operators' Pods must share, without the environment variables in `left_out`;
/// the Pod's namespace (each test's own) reads `NAMESPACE`.
fn pod_view(pod: &Pod, left_out: &[&str]) -> Value {
    let namespace = pod.namespace().unwrap_or_default();
    let view = pod_fields(pod, left_out).to_string();
    serde_json::from_str(&view.replace(&namespace, "NAMESPACE")).expect("the same JSON")
}

fn pod_fields(pod: &Pod, left_out: &[&str]) -> Value {
    let spec = pod.spec.as_ref().expect("a spec");
    let ray = &spec.containers[0];
    let token_env: BTreeMap<String, Value> = ray
        .env
        .iter()
        .flatten()
        .filter(|e| e.name.starts_with("RAY_AUTH") || e.name == "RAY_enable_autoscaler_v2")
        .map(|e| (e.name.clone(), json!([e.value, e.value_from])))
        .collect();
    let init: Vec<Value> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| container_view(c, false, left_out))
        .collect();
    let autoscaler = spec
        .containers
        .iter()
        .any(|c| c.name == "autoscaler")
        .then(|| container_view(named(&spec.containers, "autoscaler"), true, left_out));
    json!({
        "serviceAccountName": spec.service_account_name,
        "restartPolicy": spec.restart_policy,
        "containers": spec.containers.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
        "rayEnv": token_env,
        "initContainers": init,
        "autoscaler": autoscaler,
        "volumes": spec
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.clone())
            .filter(|name| !added_by_the_api_server(name))
            .collect::<Vec<_>>(),
    })
}

async fn account_view(ns: &TestNamespace) -> Value {
    identity(&object::<ServiceAccount>(ns, CLUSTER).await)
}

async fn role_view(ns: &TestNamespace) -> Value {
    let role = object::<Role>(ns, CLUSTER).await;
    json!([identity(&role), role.rules])
}

/// The subjects' namespace is each test namespace: compared as "the cluster's own".
async fn binding_view(ns: &TestNamespace) -> Value {
    let binding = object::<RoleBinding>(ns, CLUSTER).await;
    let subjects: Vec<Value> = binding
        .subjects
        .iter()
        .flatten()
        .map(|s| json!([s.kind, s.name, s.namespace.as_deref() == Some(ns.name())]))
        .collect();
    json!([identity(&binding), binding.role_ref, subjects])
}

/// The token itself is random: only its length is compared.
async fn secret_view(ns: &TestNamespace) -> Value {
    let secret = object::<Secret>(ns, CLUSTER).await;
    let data = secret.data.clone().unwrap_or_default();
    let token = data.get("auth_token").map_or(0, |t| t.0.len());
    let keys: Vec<&String> = data.keys().collect();
    json!([identity(&secret), secret.type_, keys, token])
}

#[tokio::test]
async fn raygate_adds_what_kuberay_adds_for_autoscaling_tokens_and_worker_start_up() {
    let env = Env::load();
    // Neither namespace is opted into Volcano: the Pods are compared as each operator makes
    // them, without raygate's onboarding.
    let by_kuberay = TestNamespace::with_labels(&env, "coexist-diff-kr", &[KUBERAY]).await;
    let by_raygate = TestNamespace::with_labels(&env, "coexist-diff-rg", &[]).await;
    let _kuberay = KubeRay::start(&env, &[&by_kuberay], None).await;
    let release = peer_release(&env);
    let token_auth = release >= TOKEN_AUTH_SINCE;
    create(&by_kuberay, cluster(token_auth)).await;
    create(&by_raygate, cluster(token_auth)).await;

    let compared = [
        (
            "ServiceAccount",
            account_view(&by_raygate).await,
            account_view(&by_kuberay).await,
        ),
        (
            "Role",
            role_view(&by_raygate).await,
            role_view(&by_kuberay).await,
        ),
        (
            "RoleBinding",
            binding_view(&by_raygate).await,
            binding_view(&by_kuberay).await,
        ),
    ];
    for (what, ours, theirs) in compared {
        assert_eq!(ours, theirs, "{what}: raygate's (left), KubeRay's (right)");
    }
    if token_auth {
        assert_eq!(
            secret_view(&by_raygate).await,
            secret_view(&by_kuberay).await,
            "token Secret: raygate's (left), KubeRay's (right)"
        );
    }
    let left_out = if release < (1, 7) { SINCE_V1_7 } else { &[] };
    for node_type in ["head", "worker"] {
        assert_eq!(
            pod_view(&pod(&by_raygate, node_type).await, left_out),
            pod_view(&pod(&by_kuberay, node_type).await, &[]),
            "the {node_type} Pod: raygate's (left), KubeRay's (right)"
        );
    }
}
