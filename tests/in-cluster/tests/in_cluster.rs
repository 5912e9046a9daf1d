//! raygate installed in-cluster exactly as a user installs it (`helm install` of manifests/chart
//! or `kubectl apply --server-side` of `raygate manifests`, by `tests/env/control-plane up` with
//! `RAYGATE_ENV_INSTALL`): two replicas Ready on the real nodes, the API server calling the
//! webhooks through raygate's Service with raygate's own CA, and each of raygate's three jobs
//! done by the installation — admission, conversion, a RayJob run end to end.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use raygate_e2e::TestNamespace;
use raygate_in_cluster_e2e::{
    in_cluster_env, injection_targets, is_ready, namespace, ray_api, raygate_pods, rayjob_ended,
};
use serde_json::json;

const OPT_IN: [(&str, &str); 1] = [("raygate.io/scheduler", "volcano")];
const SETTLE: Duration = Duration::from_secs(120);

#[tokio::test]
async fn two_replicas_run_ready_on_the_real_nodes_as_raygates_own_user() {
    let env = in_cluster_env();
    let ns = namespace(&env);
    let deployments: Api<Deployment> = Api::namespaced(env.client().await, &ns);
    let deployment = deployments
        .get("raygate")
        .await
        .expect("Deployment raygate");
    let status = deployment.status.expect("status");
    assert_eq!(status.ready_replicas, Some(2), "{status:?}");
    let pods = raygate_pods(&env).await;
    assert_eq!(pods.len(), 2, "two replicas");
    let real = env.real_nodes();
    let mut nodes = Vec::new();
    for pod in &pods {
        assert!(is_ready(pod), "{:?}", pod.status);
        let spec = pod.spec.as_ref().expect("spec");
        let node = spec.node_name.clone().expect("bound");
        assert!(real.contains(&node), "{node} is not a real node: {real:?}");
        nodes.push(node);
        let container = &spec.containers[0];
        assert_eq!(container.image.as_deref(), Some(env.var("RAYGATE_IMAGE")));
        let security = spec.security_context.as_ref().expect("securityContext");
        assert_eq!(security.run_as_user, Some(raygate_api::manifests::RUN_AS));
        // The container really started (no restarts: it did not crash on start-up).
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .expect("statuses");
        assert_eq!(statuses[0].restart_count, 0, "{:?}", statuses[0]);
    }
    nodes.sort();
    nodes.dedup();
    assert_eq!(
        nodes.len(),
        2,
        "the replicas are spread over both real nodes"
    );
}

#[tokio::test]
async fn the_api_server_calls_the_webhooks_through_the_service_with_raygates_own_ca() {
    let env = in_cluster_env();
    let client = env.client().await;
    let ns = namespace(&env);
    let secret: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = secret
        .get("raygate-webhook-cert")
        .await
        .expect("the self-managed Secret");
    assert!(secret.data.is_some_and(|d| !d.is_empty()));
    let mut bundles = Vec::new();
    for target in injection_targets(&client).await {
        assert_eq!(
            target.service,
            Some(("raygate".to_owned(), ns.clone())),
            "{} calls raygate's Service",
            target.what
        );
        assert!(
            !target.ca_bundle.is_empty(),
            "{} has no caBundle",
            target.what
        );
        bundles.push(target.ca_bundle);
    }
    assert_eq!(
        bundles.len(),
        10,
        "8 webhooks (3 of them the escape guards of docs/queue-policy.md) and 2 conversions"
    );
    assert!(
        bundles.windows(2).all(|w| w[0] == w[1]),
        "one CA bundle everywhere"
    );
}

#[tokio::test]
async fn an_invalid_rayjob_is_refused_at_kubectl_apply_by_the_installation() {
    let env = in_cluster_env();
    let ns = TestNamespace::with_labels(&env, "incluster-invalid", &OPT_IN).await;
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../manifests/examples/invalid-rayjob-duplicate-worker-groups.yaml"
    );
    let output = raygate_e2e::kubectl::run(&["apply", "-n", ns.name(), "-f", example]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "accepted: {stderr}");
    assert!(
        stderr.contains("rayobjects.validate.raygate.io")
            && stderr.contains("spec.rayClusterSpec.workerGroupSpecs[1].groupName: worker group names must be unique"),
        "{stderr}"
    );
}

/// The RayCluster and Pod KubeRay would create (KubeRay is not running: the namespace's Ray
/// objects are left to it, so only the webhook acts on the Pod).
#[tokio::test]
async fn a_ray_pod_in_an_opted_in_namespace_is_onboarded_by_the_installation() {
    let env = in_cluster_env();
    let ns = TestNamespace::with_labels(
        &env,
        "incluster-onboard",
        &[OPT_IN[0], ("raygate.io/reconciler", "kuberay")],
    )
    .await;
    let clusters = ray_api(&ns, "v1", "RayCluster");
    let cluster: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "demo"},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray-head", "image": "rayproject/ray:2.60.0",
             "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}},
    }))
    .expect("a RayCluster");
    let cluster = clusters
        .create(&PostParams::default(), &cluster)
        .await
        .expect("RayCluster created");
    let pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "demo-head",
            "labels": {"ray.io/cluster": "demo", "ray.io/node-type": "head", "ray.io/group": "headgroup",
                       "app.kubernetes.io/created-by": "kuberay-operator"},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "demo",
                                 "uid": cluster.metadata.uid.clone().expect("uid"),
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0",
                                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    }))
    .expect("a Pod");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = ns.api();
    // The webhook's caches learn of the new RayCluster by watch: give them a moment.
    let created = ns
        .wait_for("the head Pod to be onboarded", SETTLE, || async {
            let created = pods
                .create(
                    &PostParams {
                        dry_run: true,
                        ..PostParams::default()
                    },
                    &pod,
                )
                .await?;
            Ok(created
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("scheduling.k8s.io/group-name"))
                .then_some(created))
        })
        .await;
    let spec = created.spec.expect("spec");
    assert_eq!(spec.scheduler_name.as_deref(), Some("volcano"));
    let annotations = created.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations
            .get("scheduling.k8s.io/group-name")
            .map(String::as_str),
        Some("ray-demo-pg")
    );
    assert_eq!(
        annotations.get("volcano.sh/task-spec").map(String::as_str),
        Some("headgroup")
    );
}

#[tokio::test]
async fn a_v1alpha1_raycluster_converts_through_the_service() {
    let env = in_cluster_env();
    let ns = TestNamespace::new(&env, "incluster-convert").await;
    let api = ray_api(&ns, "v1alpha1", "RayCluster");
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1alpha1", "kind": "RayCluster",
        "metadata": {"name": "old"},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            {"name": "ray-head", "image": "rayproject/ray:2.60.0"}]}}}},
    }))
    .expect("a RayCluster");
    // Stored as v1: the API server converts on write and back on read, through raygate.
    let created = api
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &object,
        )
        .await
        .expect("the v1alpha1 RayCluster is converted and admitted");
    assert_eq!(created.types.expect("types").api_version, "ray.io/v1alpha1");
    assert_eq!(
        created.data["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["name"],
        "ray-head"
    );
}

#[tokio::test]
async fn a_rayjob_runs_to_completion_on_the_real_nodes_under_the_installed_reconciler() {
    let env = in_cluster_env();
    let ns = TestNamespace::on_real_nodes(&env, "incluster-rayjob", &OPT_IN).await;
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../manifests/examples/rayjob.yaml"
    );
    raygate_e2e::kubectl::stdout(&["apply", "-n", ns.name(), "-f", example]).await;
    let status = rayjob_ended(&ns, "rayjob-sample", SETTLE * 3).await;
    assert_eq!(status["jobDeploymentStatus"], "Complete", "{status}");
    assert_eq!(status["jobStatus"], "SUCCEEDED", "{status}");
}
