//! Shared parts of the in-cluster tests: the installation under test, as the environment
//! describes it (`RAYGATE_ENV_INSTALL`, `RAYGATE_IN_CLUSTER_NAMESPACE`, `RAYGATE_IMAGE`), and
//! the raygate Pods it runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client};
use raygate_e2e::{Env, TestNamespace};
use serde_json::{Value, json};

/// The environment, which must have raygate installed in-cluster.
///
/// # Panics
/// When the environment runs raygate as host processes (`RAYGATE_ENV_INSTALL=process`): these
/// tests would then test nothing of the installation.
pub fn in_cluster_env() -> Env {
    let env = Env::load();
    let mode = env.var("RAYGATE_ENV_INSTALL");
    assert!(
        mode == "helm" || mode == "manifests",
        "these tests need raygate installed in-cluster, but the environment runs it as `{mode}`: \
         start it with RAYGATE_ENV_INSTALL=helm tests/env/control-plane up (tests/run does)"
    );
    env
}

/// raygate's namespace.
pub fn namespace(env: &Env) -> String {
    env.var("RAYGATE_IN_CLUSTER_NAMESPACE").to_owned()
}

/// raygate's Pods (by the Deployment's selector).
pub async fn raygate_pods(env: &Env) -> Vec<Pod> {
    let client = env.client().await;
    let pods: Api<Pod> = Api::namespaced(client, &namespace(env));
    pods.list(&ListParams::default().labels(raygate_e2e::raygate::INSTALLATION_SELECTOR))
        .await
        .expect("list raygate's Pods")
        .items
}

/// Whether the Pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Admission load: dry-run creates of a Ray Pod in an opted-in namespace, one after another,
/// counting the refused ones (with `failurePolicy: Fail`, every moment without a serving
/// replica behind the Service is a refusal).
pub struct AdmissionLoad {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    errors: Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl AdmissionLoad {
    /// Starts the load in `ns`, which must be opted in.
    pub fn start(ns: &TestNamespace) -> AdmissionLoad {
        let pods: Api<Pod> = ns.api();
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "load-", "labels": {"ray.io/node-type": "worker", "ray.io/cluster": "load"}},
            "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]},
        }))
        .expect("a Pod");
        let (stop, sent, failed) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let (stop, sent, failed, errors) =
                (stop.clone(), sent.clone(), failed.clone(), errors.clone());
            async move {
                let params = PostParams {
                    dry_run: true,
                    ..PostParams::default()
                };
                while !stop.load(Ordering::Relaxed) {
                    sent.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = pods.create(&params, &pod).await {
                        failed.fetch_add(1, Ordering::Relaxed);
                        errors.lock().expect("errors").push(e.to_string());
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        });
        AdmissionLoad {
            stop,
            sent,
            failed,
            errors,
            task,
        }
    }

    /// Stops the load; returns (sent, failed, the errors).
    pub async fn finish(self) -> (usize, usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("load task");
        let errors = self.errors.lock().expect("errors").clone();
        (
            self.sent.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            errors,
        )
    }
}

/// One place the installation's CA bundle is injected: a webhook of raygate's two webhook
/// configurations or a `ray.io` CRD's conversion webhook.
pub struct InjectionTarget {
    /// What it is, for messages.
    pub what: String,
    /// The Service it calls, as `(name, namespace)`; `None` for a URL.
    pub service: Option<(String, String)>,
    /// Its `caBundle`, empty until injected.
    pub ca_bundle: Vec<u8>,
}

/// Every place raygate injects its CA bundle: the webhooks of both `raygate` webhook
/// configurations, then the conversion of `rayjobs.ray.io` and `rayclusters.ray.io`.
///
/// # Panics
/// When one of these objects cannot be read.
pub async fn injection_targets(client: &Client) -> Vec<InjectionTarget> {
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mutating = mutating.get("raygate").await.expect("mutating").webhooks;
    let validating = validating
        .get("raygate")
        .await
        .expect("validating")
        .webhooks;
    let mut targets: Vec<InjectionTarget> = mutating
        .unwrap_or_default()
        .into_iter()
        .map(|w| (w.name, w.client_config))
        .chain(
            validating
                .unwrap_or_default()
                .into_iter()
                .map(|w| (w.name, w.client_config)),
        )
        .map(|(name, config)| InjectionTarget {
            what: format!("webhook {name}"),
            service: config.service.map(|s| (s.name, s.namespace)),
            ca_bundle: config.ca_bundle.map(|b| b.0).unwrap_or_default(),
        })
        .collect();
    for name in ["rayjobs.ray.io", "rayclusters.ray.io"] {
        let config = crds
            .get(name)
            .await
            .expect("CRD")
            .spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .unwrap_or_default();
        targets.push(InjectionTarget {
            what: format!("conversion of {name}"),
            service: config.service.map(|s| (s.name, s.namespace)),
            ca_bundle: config.ca_bundle.map(|b| b.0).unwrap_or_default(),
        });
    }
    targets
}

/// The `ray.io` `kind` (RayJob, RayCluster) at `version` in `ns`.
pub fn ray_api(ns: &TestNamespace, version: &str, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("ray.io", version, kind),
        &format!("{}s", kind.to_lowercase()),
    );
    Api::namespaced_with(ns.client(), ns.name(), &resource)
}

/// Waits up to `within` for RayJob `name` in `ns` to end (`Complete` or `Failed`); its status.
///
/// # Panics
/// When it has not ended by then.
pub async fn rayjob_ended(ns: &TestNamespace, name: &str, within: Duration) -> Value {
    let rayjobs = ray_api(ns, "v1", "RayJob");
    ns.wait_for(&format!("RayJob {name} to end"), within, || async {
        let status = rayjobs.get(name).await?.data["status"].clone();
        Ok(matches!(
            status["jobDeploymentStatus"].as_str(),
            Some("Complete" | "Failed")
        )
        .then_some(status))
    })
    .await
}
