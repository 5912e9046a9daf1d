//! The whole system under a non-default opt-in label (`--namespace-label`): one `raygate run`
//! started with it, registered through the webhook configurations `raygate manifests` renders
//! with it, onboards a Ray Pod through the API server, enforces a QueuePolicy at admission and
//! builds a RayCluster's PodGroup, all in a namespace that carries only that label.
//!
//! The registration is the rendered one with two test-only changes: its own names (the
//! environment's webhooks are called `raygate`), and every `namespaceSelector` narrowed to the
//! test's namespace, so this process never reviews another test's objects. The cluster-wide
//! QueuePolicy webhook is left out for the same reason (the environment's own checks policies).

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Client, ResourceExt};
use raygate_api::keys;
use raygate_api::queue_policy::QueuePolicy;
use raygate_api::volcano::PodGroup;
use raygate_e2e::cleanup::delete_on_drop;
use raygate_e2e::ray::Dashboard;
use raygate_e2e::reconciler::PRIVATE_RECONCILER_LABEL;
use raygate_e2e::{Env, TestNamespace, free_ports};
use serde_json::{Value, json};

/// The opt-in label this test's raygate runs with.
const OPT_IN: (&str, &str) = ("e2e.example.com/gang", "on");
/// How long each step may take.
const SETTLE: Duration = Duration::from_secs(60);

/// The admission webhook configurations `raygate manifests --namespace-label` renders for a
/// webhook at `url`.
async fn rendered_webhooks(url: &str) -> Vec<Value> {
    let label = format!("{}={}", OPT_IN.0, OPT_IN.1);
    let output = raygate_e2e::raygate::run(&[
        "manifests",
        "--namespace-label",
        &label,
        "--webhook-configurations",
        "--webhook-url",
        url,
    ])
    .await;
    assert!(
        output.status.success(),
        "raygate manifests: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_saphyr::from_multiple::<Value>(&String::from_utf8_lossy(&output.stdout))
        .expect("raygate manifests prints YAML documents")
}

/// The label keys a webhook's `namespaceSelector` names.
fn selector_keys(webhook: &Value) -> Vec<String> {
    let selector = &webhook["namespaceSelector"];
    let matched = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flat_map(|labels| labels.keys().cloned());
    let expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["key"].as_str().map(str::to_string));
    matched.chain(expressions).collect()
}

/// The rendered configuration, renamed to `name` and narrowed to namespace `ns`, without the
/// webhooks that have no namespace selector (the cluster-scoped QueuePolicy one).
fn narrowed(mut configuration: Value, name: &str, ns: &str) -> Value {
    configuration["metadata"]["name"] = json!(name);
    let webhooks = configuration["webhooks"]
        .as_array_mut()
        .expect("a configuration has webhooks");
    webhooks.retain(|webhook| webhook.get("namespaceSelector").is_some());
    for webhook in webhooks {
        let expressions = webhook["namespaceSelector"]
            .as_object_mut()
            .expect("a selector object")
            .entry("matchExpressions")
            .or_insert_with(|| json!([]));
        expressions
            .as_array_mut()
            .expect("matchExpressions is a list")
            .push(json!({"key": keys::NAMESPACE_NAME_LABEL, "operator": "In", "values": [ns]}));
    }
    configuration
}

async fn create_dynamic(client: &Client, object: Value) -> anyhow::Result<DynamicObject> {
    let api_version = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let namespace = object["metadata"]["namespace"].as_str().map(str::to_string);
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), &ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    Ok(api
        .create(&PostParams::default(), &serde_json::from_value(object)?)
        .await?)
}

fn ray_cluster(ns: &str, name: &str) -> Value {
    let container = |name: &str| {
        json!({"name": name, "image": "rayproject/ray:2.60.0",
               "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}})
    };
    json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
            "workerGroupSpecs": [{
                "groupName": "cpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("ray-worker")]}}
            }]
        }
    })
}

/// Deletes the test's cluster-scoped objects when dropped: its webhook registrations (before
/// its namespace goes, whose deletion they would otherwise review) and its QueuePolicy.
struct ClusterScoped {
    config: kube::Config,
    registration: String,
    policy: String,
}

impl Drop for ClusterScoped {
    fn drop(&mut self) {
        delete_on_drop::<MutatingWebhookConfiguration>(&self.config, &self.registration);
        delete_on_drop::<ValidatingWebhookConfiguration>(&self.config, &self.registration);
        delete_on_drop::<QueuePolicy>(&self.config, &self.policy);
    }
}

fn scheduler(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref())
}

#[tokio::test]
async fn a_non_default_opt_in_label_onboards_governs_and_gangs_end_to_end() {
    let env = Env::load();
    // Only the non-default label: the environment's own webhook and reconciler (default label,
    // and kept away by the private label) leave this namespace alone.
    let ns = TestNamespace::with_labels(
        &env,
        "opt-in-label",
        &[OPT_IN, (PRIVATE_RECONCILER_LABEL, "true")],
    )
    .await;
    let client = ns.client();
    let [port, ops_port] = free_ports();

    // Rendered manifests: every namespace selector names the label in force, none the default.
    let rendered = rendered_webhooks(&format!("https://127.0.0.1:{port}")).await;
    let scoped: Vec<&Value> = rendered
        .iter()
        .flat_map(|c| c["webhooks"].as_array().into_iter().flatten())
        .filter(|w| w.get("namespaceSelector").is_some())
        .collect();
    assert!(scoped.len() >= 3, "{rendered:?}");
    for webhook in &scoped {
        // The escape webhooks see every namespace; the label guard names the label in its
        // matchConditions instead.
        if webhook["namespaceSelector"]["matchExpressions"]
            .as_array()
            .is_some_and(|e| e.len() == 1)
        {
            let conditions = webhook["matchConditions"].to_string();
            assert!(
                !conditions.contains(keys::NAMESPACE_OPT_IN_LABEL),
                "{webhook}"
            );
            if webhook["name"] == "namespaces.validate.raygate.io" {
                assert!(conditions.contains(OPT_IN.0), "{webhook}");
            }
            continue;
        }
        let keys = selector_keys(webhook);
        assert!(keys.contains(&OPT_IN.0.to_string()), "{webhook}");
        assert!(
            !keys.contains(&keys::NAMESPACE_OPT_IN_LABEL.to_string()),
            "{webhook}"
        );
    }

    let name = format!("raygate-{}", ns.name());
    let policy = format!("{}-max-members", ns.name());
    let _cleanup = ClusterScoped {
        config: env.kube_config().await,
        registration: name.clone(),
        policy: policy.clone(),
    };
    for configuration in &rendered {
        let kind = configuration["kind"].as_str().unwrap_or_default();
        create_dynamic(&client, narrowed(configuration.clone(), &name, ns.name()))
            .await
            .unwrap_or_else(|e| panic!("registering the {kind}: {e}"));
    }

    let label = format!("{}={}", OPT_IN.0, OPT_IN.1);
    let log_path = std::path::Path::new(env.var("RAYGATE_LOGS"))
        .join(format!("raygate-run-{}.log", ns.name()));
    let mut raygate =
        raygate_e2e::raygate::run_on_loopback(&env, ns.name(), port, ops_port, &log_path)
            .args(["--namespace-label", &label])
            .arg(format!("--mutating-webhook-configuration={name}"))
            .arg(format!("--validating-webhook-configuration={name}"))
            .args(["--watch-namespaces", ns.name()])
            .args(["--ray-dashboard-address", env.ray_dashboard()])
            .spawn()
            .expect("starting raygate run");
    let log_text = || std::fs::read_to_string(&log_path).unwrap_or_default();

    // Ready, with its CA injected into both registrations.
    let ops = Dashboard::new(&format!("http://127.0.0.1:{ops_port}"));
    ns.wait_for("raygate run ready", SETTLE, || async {
        Ok((ops.get("/readyz").await?.status == 200).then_some(()))
    })
    .await;
    ns.wait_for("the CA bundle in both registrations", SETTLE, || async {
        let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .get(&name)
            .await?;
        let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .get(&name)
            .await?;
        let injected = mutating
            .webhooks
            .iter()
            .flatten()
            .all(|w| w.client_config.ca_bundle.is_some())
            && validating
                .webhooks
                .iter()
                .flatten()
                .all(|w| w.client_config.ca_bundle.is_some());
        Ok(injected.then_some(()))
    })
    .await;

    // Onboarding: a Ray Pod created by hand gets its gang through the API server's call.
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "by-hand-worker", "labels": {
            keys::RAY_CLUSTER_LABEL: "by-hand",
            keys::RAY_NODE_TYPE_LABEL: "worker",
            keys::RAY_GROUP_LABEL: "cpu",
        }},
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]}
    }))
    .expect("a Pod");
    let created = ns
        .api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating a Ray Pod: {e}\n{}", log_text()));
    assert_eq!(scheduler(&created), Some(keys::VOLCANO_SCHEDULER_NAME));
    assert_eq!(
        created.annotations().get(keys::POD_GROUP_ANNOTATION),
        Some(&keys::pod_group_name("by-hand"))
    );
    assert_eq!(
        created.annotations().get(keys::TASK_SPEC_ANNOTATION),
        Some(&"cpu".to_string())
    );

    // Governance: a QueuePolicy selecting this namespace refuses a gang above its limit.
    let queue_policies = Api::<QueuePolicy>::all(client.clone());
    queue_policies
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "raygate.io/v1alpha1",
                "kind": "QueuePolicy",
                "metadata": {"name": policy},
                "spec": {
                    "namespaceSelector": {"matchLabels": {keys::NAMESPACE_NAME_LABEL: ns.name()}},
                    "maxMinMember": 1,
                },
            }))
            .expect("a QueuePolicy"),
        )
        .await
        .expect("creating the QueuePolicy");
    let refused = create_dynamic(&client, ray_cluster(ns.name(), "too-big"))
        .await
        .expect_err("the QueuePolicy refuses a gang of 2");
    let message = refused.to_string();
    assert!(
        message.contains(&format!("QueuePolicy \"{policy}\"")) && message.contains("maxMinMember"),
        "{message}"
    );
    queue_policies
        .delete(&policy, &Default::default())
        .await
        .expect("deleting the QueuePolicy");

    // Gang: the reconciler builds the cluster's PodGroup and Pods that join it.
    ns.wait_for("the QueuePolicy gone from the cache", SETTLE, || async {
        match create_dynamic(&client, ray_cluster(ns.name(), "gang")).await {
            Ok(_) => Ok(Some(())),
            Err(e) if e.to_string().contains("maxMinMember") => Ok(None),
            Err(e) => Err(e),
        }
    })
    .await;
    let pod_group = ns
        .wait_for("the RayCluster's PodGroup", SETTLE, || async {
            Ok(ns
                .api::<PodGroup>()
                .get_opt(&keys::pod_group_name("gang"))
                .await?)
        })
        .await;
    assert_eq!(pod_group.spec.min_member, Some(2));
    let pods = ns
        .wait_for("the RayCluster's two Pods", SETTLE, || async {
            let pods = ns
                .api::<Pod>()
                .list(
                    &kube::api::ListParams::default()
                        .labels(&format!("{}=gang", keys::RAY_CLUSTER_LABEL)),
                )
                .await?
                .items;
            Ok((pods.len() == 2).then_some(pods))
        })
        .await;
    for pod in &pods {
        assert_eq!(scheduler(pod), Some(keys::VOLCANO_SCHEDULER_NAME));
        assert_eq!(
            pod.annotations().get(keys::POD_GROUP_ANNOTATION),
            Some(&keys::pod_group_name("gang"))
        );
    }
    assert!(
        matches!(raygate.try_wait(), Ok(None)),
        "raygate run exited:\n{}",
        log_text()
    );
}
