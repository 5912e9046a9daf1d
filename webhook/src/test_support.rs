//! What the fuzz targets (`webhook/fuzz/`) and the in-process property test
//! (`webhook/tests/fuzz_admission.rs`) share, so that the two cannot drift apart: the preloaded
//! world, realistic objects of every kind the webhooks see, the AdmissionReview around them,
//! and the oracle every answer must satisfy. Only built with the `test-support` feature.
//!
//! The oracle, for any body on any admission or conversion path:
//! * the answer is 200 with an AdmissionReview (ConversionReview on `/convert`) that echoes the
//!   request's uid, or 400 with a reason; never a panic, never a 5xx, never anything else;
//! * a denial carries a `Failure` status with an HTTP-style code and a message;
//! * a patch comes only from a mutating path, with `patchType: JSONPatch`, is base64 JSON and
//!   applies cleanly to the object under review (the API server rejects the whole request
//!   otherwise);
//! * mutation is idempotent (the webhooks are registered with `reinvocationPolicy: IfNeeded`):
//!   reviewing the patched object again yields no further patch.
//!
//! A violation panics with the path, the answer and what was wrong: libFuzzer reports it as a
//! crash, the test harness as a failure.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use http_body_util::BodyExt;
use raygate_api::keys;
use raygate_api::validation::ValidationContext;
use raygate_certs::CertResolver;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::{AppState, Caches, Draining, Limits, Metrics, Preloaded};

/// Every path the admission router answers reviews on, conversion last.
pub const PATHS: [&str; 5] = [
    keys::MUTATE_PODS_PATH,
    keys::MUTATE_RAY_PATH,
    keys::VALIDATE_RAY_PATH,
    keys::VALIDATE_QUEUE_POLICY_PATH,
    keys::CONVERT_PATH,
];

/// The admission paths (every path but `/convert`).
pub const ADMISSION_PATHS: [&str; 4] = [PATHS[0], PATHS[1], PATHS[2], PATHS[3]];

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("the test world is well-formed")
}

/// Opted-in namespace `ml` (default queue `batch`), unlabelled namespace `web`; Queues in every
/// state; RayJob `train` with its RayCluster and KubeRay submitter Job, a standalone RayCluster
/// `demo`; a Deny and a Warn QueuePolicy. Enough for every branch of Pod onboarding and Ray
/// object admission to be reachable.
pub fn world() -> Preloaded {
    let queue = |name: &str, state: Option<&str>, capability: Value| {
        let mut queue = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name}, "spec": {"weight": 1, "capability": capability}});
        if let Some(state) = state {
            queue["status"] = json!({"state": state});
        }
        from_json(queue)
    };
    Preloaded {
        namespaces: vec![
            from_json(json!({"metadata": {"name": "ml",
                "labels": {keys::NAMESPACE_OPT_IN_LABEL: keys::NAMESPACE_OPT_IN_VALUE, "team": "ml"},
                "annotations": {keys::NAMESPACE_QUEUE_ANNOTATION: "batch"}}})),
            from_json(json!({"metadata": {"name": "web", "labels": {"team": "web"}}})),
        ],
        ray_clusters: vec![
            from_json(json!({"name": "demo", "namespace": "ml", "uid": "c-demo",
                "labels": {keys::QUEUE_LABEL: "batch", keys::PRIORITY_CLASS_LABEL: "high"}})),
            from_json(
                json!({"name": "train-raycluster-x", "namespace": "ml", "uid": "c-train",
                "labels": {keys::ORIGINATED_FROM_CRD_LABEL: "RayJob", keys::ORIGINATED_FROM_CR_NAME_LABEL: "train"},
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train",
                                     "uid": "j-train", "controller": true}]}),
            ),
        ],
        ray_jobs: vec![from_json(
            json!({"name": "train", "namespace": "ml", "uid": "j-train",
            "labels": {keys::QUEUE_LABEL: "batch"}}),
        )],
        // KubeRay's submitter Job of `train`: what makes its unlabelled Pod a submitter.
        jobs: vec![from_json(
            json!({"name": "train", "namespace": "ml", "uid": "job-1",
            "labels": {keys::ORIGINATED_FROM_CRD_LABEL: "RayJob", keys::ORIGINATED_FROM_CR_NAME_LABEL: "train"},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train",
                                 "uid": "j-train", "controller": true}]}),
        )],
        queues: vec![
            queue("default", Some("Open"), json!({})),
            queue(
                "batch",
                Some("Open"),
                json!({"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"}),
            ),
            queue("closed", Some("Closed"), json!({})),
            queue("fresh", None, json!({})),
        ],
        queue_policies: vec![
            from_json(
                json!({"apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy",
                "metadata": {"name": "ml-deny"},
                "spec": {"namespaceSelector": {"matchLabels": {"team": "ml"}}, "defaultQueue": "batch",
                         "allowedQueues": ["batch", "default", "closed", "fresh"], "requireQueue": false,
                         "allowedPriorityClasses": ["high", "low"], "maxMinMember": 16,
                         "maxMinResources": {"cpu": "64", "nvidia.com/gpu": "4"}, "enforcement": "Deny"}}),
            ),
            from_json(
                json!({"apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy",
                "metadata": {"name": "everyone-warn"},
                "spec": {"allowedQueues": ["batch"], "requireQueue": true, "enforcement": "Warn"}}),
            ),
        ],
        nodes: vec![from_json(
            json!({"metadata": {"name": "node-1"}, "status": {"allocatable":
            {"cpu": "128", "memory": "1Ti", "ephemeral-storage": "1Ti", "nvidia.com/gpu": "8"}}}),
        )],
    }
}

/// The admission router `raygate webhook` serves, over caches preloaded with [`world`], with
/// the CRD schemas already loaded.
pub fn router() -> Router {
    let validation = ValidationContext::default();
    crate::ray::warm_up(&validation);
    crate::router(AppState {
        caches: Caches::preloaded(world()),
        certs: Arc::new(CertResolver::new()),
        metrics: Arc::new(Metrics::new()),
        validation: Arc::new(validation),
        opt_in: Arc::default(),
        more_metrics: None,
        limits: Limits::default(),
        draining: Draining::default(),
    })
}

fn container(name: &str, resources: Value) -> Value {
    json!({"name": name, "image": "rayproject/ray:2.60.0", "resources": resources})
}

/// A Ray Pod as KubeRay creates it: `node_type` (`head`/`worker`) of group `group` of the
/// RayCluster `cluster` (uid `owner_uid`) in namespace `ml`.
pub fn kuberay_pod(node_type: &str, group: &str, cluster: &str, owner_uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": format!("{cluster}-{group}-"), "namespace": "ml",
            "labels": {keys::RAY_NODE_TYPE_LABEL: node_type, keys::RAY_CLUSTER_LABEL: cluster,
                       keys::RAY_GROUP_LABEL: group, "app.kubernetes.io/created-by": "kuberay-operator"},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster,
                                 "uid": owner_uid, "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": [container(&format!("ray-{node_type}"),
            json!({"requests": {"cpu": "1", "memory": "1Gi"}}))]}})
}

/// The head Pod of the standalone RayCluster `demo` of [`world`].
pub fn head_pod() -> Value {
    kuberay_pod("head", keys::HEAD_TASK, "demo", "c-demo")
}

/// A worker Pod of the RayCluster that RayJob `train` of [`world`] owns.
pub fn worker_pod() -> Value {
    kuberay_pod("worker", "small", "train-raycluster-x", "c-train")
}

/// The submitter Pod of RayJob `train` (K8sJobMode), owned by its batch Job.
pub fn submitter_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "train-", "namespace": "ml",
            "labels": {keys::ORIGINATED_FROM_CRD_LABEL: "RayJob",
                       keys::ORIGINATED_FROM_CR_NAME_LABEL: "train",
                       "batch.kubernetes.io/job-name": "train"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                 "uid": "job-1", "controller": true}]},
        "spec": {"restartPolicy": "Never", "containers": [
            container("ray-job-submitter", json!({"requests": {"cpu": "500m", "memory": "200Mi"}}))]}})
}

fn ray_cluster_spec() -> Value {
    json!({
        "rayVersion": "2.60.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
            container("ray-head", json!({"requests": {"cpu": "2", "memory": "8Gi"}}))]}}},
        "workerGroupSpecs": [{"groupName": "small", "replicas": 2, "minReplicas": 1, "maxReplicas": 4,
            "numOfHosts": 1, "rayStartParams": {}, "template": {"spec": {"containers": [
                container("ray-worker", json!({"limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}}))]}}}]
    })
}

/// RayJob `train` in namespace `ml`, queue `batch`: a head and a GPU worker group.
pub fn ray_job() -> Value {
    json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "train", "namespace": "ml", "labels": {keys::QUEUE_LABEL: "batch"}},
        "spec": {"entrypoint": "python train.py", "shutdownAfterJobFinishes": true,
                 "rayClusterSpec": ray_cluster_spec()}})
}

/// RayCluster `demo` in namespace `ml`, queue `batch`, priority class `high`.
pub fn ray_cluster() -> Value {
    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "demo", "namespace": "ml",
                     "labels": {keys::QUEUE_LABEL: "batch", keys::PRIORITY_CLASS_LABEL: "high"}},
        "spec": ray_cluster_spec()})
}

/// A Deny QueuePolicy for the namespaces of team `ml`.
pub fn queue_policy() -> Value {
    json!({"apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy",
        "metadata": {"name": "p"},
        "spec": {"namespaceSelector": {"matchLabels": {"team": "ml"}}, "defaultQueue": "batch",
                 "allowedQueues": ["batch"], "maxMinResources": {"cpu": "8"}, "enforcement": "Deny"}})
}

/// The group/version/kind of an object's `apiVersion` and `kind`, as the API server sends it
/// in a review's `request.kind`.
pub fn gvk_of(object: &Value) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    json!({"group": group, "version": version, "kind": object["kind"].as_str().unwrap_or("")})
}

/// The `request` of an AdmissionReview, as the API server fills it in.
#[derive(Clone, Debug)]
pub struct ReviewRequest {
    /// `uid`, echoed in the answer.
    pub uid: String,
    /// `kind` (a group/version/kind object).
    pub kind: Value,
    /// `namespace`; absent when `None`.
    pub namespace: Option<Value>,
    /// `operation`.
    pub operation: String,
    /// `object`.
    pub object: Value,
    /// `oldObject`; absent when `None`.
    pub old_object: Option<Value>,
    /// `dryRun`; absent when `None`.
    pub dry_run: Option<bool>,
    /// `subResource`; absent when `None`.
    pub sub_resource: Option<String>,
}

impl ReviewRequest {
    /// The CREATE of `object`, in its own namespace, of its own kind.
    pub fn create(uid: &str, object: Value) -> Self {
        ReviewRequest {
            uid: uid.to_string(),
            kind: gvk_of(&object),
            namespace: object.pointer("/metadata/namespace").cloned(),
            operation: "CREATE".to_string(),
            object,
            old_object: None,
            dry_run: Some(false),
            sub_resource: None,
        }
    }

    /// The whole `admission.k8s.io/v1` AdmissionReview.
    pub fn to_review(&self) -> Value {
        let mut request = json!({
            "uid": self.uid,
            "kind": self.kind,
            "resource": {"group": self.kind["group"], "version": self.kind["version"], "resource": "x"},
            "name": self.object.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
            "operation": self.operation,
            "userInfo": {"username": "system:serviceaccount:ray-system:kuberay-operator"},
            "object": self.object,
        });
        if let Some(namespace) = &self.namespace {
            request["namespace"] = namespace.clone();
        }
        if let Some(old_object) = &self.old_object {
            request["oldObject"] = old_object.clone();
        }
        if let Some(dry_run) = self.dry_run {
            request["dryRun"] = json!(dry_run);
        }
        if let Some(sub_resource) = &self.sub_resource {
            request["subResource"] = json!(sub_resource);
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    }

    /// The AdmissionReview as a request body.
    pub fn to_body(&self) -> Vec<u8> {
        serde_json::to_vec(&self.to_review()).expect("JSON")
    }
}

/// Posts `body` to `path` as `application/json`; the status and the answer's bytes.
pub async fn post(router: &Router, path: &str, body: Vec<u8>) -> (StatusCode, Bytes) {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("a request");
    let response = router
        .clone()
        .oneshot(request)
        .await
        .expect("the router is infallible");
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("a response body")
        .to_bytes();
    (status, bytes)
}

/// Posts `body` to `path` and checks the answer against the oracle (see the module
/// documentation), panicking when it does not hold; returns the status (200 or 400).
pub async fn post_and_check(router: &Router, path: &str, body: Vec<u8>) -> StatusCode {
    let sent: Option<Value> = serde_json::from_slice(&body).ok();
    let (status, answer) = post(router, path, body).await;
    match status {
        StatusCode::OK => {
            let answer: Value = serde_json::from_slice(&answer).unwrap_or_else(|e| {
                panic!(
                    "{path}: 200 without JSON ({e}): {}",
                    String::from_utf8_lossy(&answer)
                )
            });
            if path == keys::CONVERT_PATH {
                check_conversion(&answer, sent.as_ref());
            } else if let Some((object, patched)) = check_admission(path, &answer, sent.as_ref()) {
                let sent = sent.expect("a review was read");
                check_idempotent(router, path, sent, object, patched).await;
            }
        }
        StatusCode::BAD_REQUEST => assert!(
            !String::from_utf8_lossy(&answer).trim().is_empty(),
            "{path}: 400 without a reason"
        ),
        other => panic!(
            "{path}: unexpected {other}: {}",
            String::from_utf8_lossy(&answer)
        ),
    }
    status
}

fn check_conversion(answer: &Value, sent: Option<&Value>) {
    assert!(answer["kind"].is_string(), "/convert: {answer}");
    assert!(answer["apiVersion"].is_string(), "/convert: {answer}");
    let response = &answer["response"];
    assert!(response.is_object(), "/convert: no response: {answer}");
    // A ConversionReview too malformed to read is answered with a Failure result and no uid
    // (the API server never sends one); every other answer echoes the uid.
    if response["result"]["status"] != "Failure"
        && let Some(uid) = sent
            .and_then(|s| s.get("request"))
            .and_then(|r| r.get("uid"))
            .and_then(Value::as_str)
    {
        assert_eq!(response["uid"], uid, "/convert: uid not echoed: {answer}");
    }
}

/// Checks an admission answer; for an applied patch, the object and the patched object.
fn check_admission(path: &str, answer: &Value, sent: Option<&Value>) -> Option<(Value, Value)> {
    assert_eq!(answer["kind"], "AdmissionReview", "{path}: {answer}");
    assert_eq!(
        answer["apiVersion"], "admission.k8s.io/v1",
        "{path}: {answer}"
    );
    let response = &answer["response"];
    let request = sent.and_then(|s| s.get("request"));
    let uid = request.and_then(|r| r.get("uid")).and_then(Value::as_str);
    assert_eq!(
        response["uid"].as_str(),
        uid,
        "{path}: uid not echoed: {answer}"
    );
    let allowed = response["allowed"]
        .as_bool()
        .unwrap_or_else(|| panic!("{path}: no allowed: {answer}"));
    if !allowed {
        let status = &response["status"];
        assert_eq!(status["status"], "Failure", "{path}: {answer}");
        let code = status["code"].as_u64().unwrap_or(0);
        assert!((400..600).contains(&code), "{path}: code {code}: {answer}");
        assert!(
            status["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{path}: a denial without a message: {answer}"
        );
        assert!(
            response.get("patch").is_none(),
            "{path}: a denial with a patch"
        );
        return None;
    }
    let patch = response.get("patch")?;
    assert!(
        path.starts_with("/mutate/"),
        "{path}: a validating webhook answered with a patch: {answer}"
    );
    assert_eq!(response["patchType"], "JSONPatch", "{path}: {answer}");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(patch.as_str().expect("patch is a string"))
        .unwrap_or_else(|e| panic!("{path}: patch is not base64 ({e}): {answer}"));
    let operations: json_patch::Patch = serde_json::from_slice(&decoded)
        .unwrap_or_else(|e| panic!("{path}: patch is not a JSON patch ({e}): {answer}"));
    assert!(!operations.0.is_empty(), "{path}: an empty patch: {answer}");
    let object = request
        .and_then(|r| r.get("object"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut patched = object.clone();
    if let Err(error) = json_patch::patch(&mut patched, &operations) {
        panic!(
            "{path}: the patch does not apply to the object ({error}):\npatch {}\nobject {object}",
            String::from_utf8_lossy(&decoded)
        );
    }
    Some((object, patched))
}

/// The same review with the patched object must be allowed without a further patch.
async fn check_idempotent(
    router: &Router,
    path: &str,
    mut sent: Value,
    object: Value,
    patched: Value,
) {
    sent["request"]["object"] = patched.clone();
    let body = serde_json::to_vec(&sent).expect("JSON");
    let (status, answer) = post(router, path, body).await;
    assert_eq!(status, StatusCode::OK, "{path}: the re-review failed");
    let answer: Value = serde_json::from_slice(&answer).expect("a JSON answer");
    let response = &answer["response"];
    assert!(
        response.get("patch").is_none() && response["allowed"] == true,
        "{path}: not idempotent: after the first patch the object\n{patched}\n(was {object})\ngets {answer}"
    );
}
