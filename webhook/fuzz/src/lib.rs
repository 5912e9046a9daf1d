//! The harness of raygate's fuzz targets: the real admission router (the one `raygate webhook`
//! serves) over informer caches preloaded with a small but complete world, called in-process,
//! and the oracle every answer must satisfy.
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

use std::sync::OnceLock;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use http_body_util::BodyExt;
use raygate_api::keys;
use raygate_api::validation::ValidationContext;
use raygate_certs::CertResolver;
use raygate_webhook::{AppState, Caches, Draining, Limits, Metrics, Preloaded};
use serde_json::{Value, json};
use tower::ServiceExt;

pub mod structured;

/// Every path the admission router answers reviews on, conversion last.
pub const PATHS: [&str; 5] = [
    keys::MUTATE_PODS_PATH,
    keys::MUTATE_RAY_PATH,
    keys::VALIDATE_RAY_PATH,
    keys::VALIDATE_QUEUE_POLICY_PATH,
    keys::CONVERT_PATH,
];

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("the fuzz world is well-formed")
}

/// Opted-in namespace `ml` (default queue `batch`), unlabelled namespace `web`; Queues in every
/// state; RayJob `train` with its RayCluster, a standalone RayCluster `demo`; a Deny and a Warn
/// QueuePolicy. Enough for every branch of Pod onboarding and Ray object admission to be
/// reachable.
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
            from_json(json!({"name": "train-raycluster-x", "namespace": "ml", "uid": "c-train",
                "labels": {keys::ORIGINATED_FROM_CRD_LABEL: "RayJob", keys::ORIGINATED_FROM_CR_NAME_LABEL: "train"},
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train",
                                     "uid": "j-train", "controller": true}]})),
        ],
        ray_jobs: vec![from_json(json!({"name": "train", "namespace": "ml", "uid": "j-train",
            "labels": {keys::QUEUE_LABEL: "batch"}}))],
        jobs: vec![],
        queues: vec![
            queue("default", Some("Open"), json!({})),
            queue("batch", Some("Open"), json!({"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"})),
            queue("closed", Some("Closed"), json!({})),
            queue("fresh", None, json!({})),
        ],
        queue_policies: vec![
            from_json(json!({"apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy",
                "metadata": {"name": "ml-deny"},
                "spec": {"namespaceSelector": {"matchLabels": {"team": "ml"}}, "defaultQueue": "batch",
                         "allowedQueues": ["batch", "default", "closed", "fresh"], "requireQueue": false,
                         "allowedPriorityClasses": ["high", "low"], "maxMinMember": 16,
                         "maxMinResources": {"cpu": "64", "nvidia.com/gpu": "4"}, "enforcement": "Deny"}})),
            from_json(json!({"apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy",
                "metadata": {"name": "everyone-warn"},
                "spec": {"allowedQueues": ["batch"], "requireQueue": true, "enforcement": "Warn"}})),
        ],
    }
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    router: Router,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let validation = ValidationContext::default();
        raygate_webhook::ray::warm_up(&validation);
        let state = AppState {
            caches: Caches::preloaded(world()),
            certs: std::sync::Arc::new(CertResolver::new()),
            metrics: std::sync::Arc::new(Metrics::new()),
            validation: std::sync::Arc::new(validation),
            limits: Limits::default(),
            draining: Draining::default(),
        };
        Harness {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime"),
            router: raygate_webhook::router(state),
        }
    })
}

/// Posts `body` to `path` as `application/json`; the status and the answer's bytes.
pub fn post(path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let harness = harness();
    harness.runtime.block_on(async {
        let request = Request::post(path)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("a request");
        let response = harness
            .router
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
        (status, bytes.to_vec())
    })
}

/// Posts `body` to `path` and checks the answer against the oracle (panicking, which
/// libFuzzer reports as a crash, when it does not hold).
pub fn post_and_check(path: &str, body: Vec<u8>) {
    let sent: Option<Value> = serde_json::from_slice(&body).ok();
    let (status, answer) = post(path, body);
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
            } else {
                let review = check_admission(path, &answer, sent.as_ref());
                if let Some((object, patched)) = review {
                    check_idempotent(path, sent.expect("a review was read"), object, patched);
                }
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
        assert!(response.get("patch").is_none(), "{path}: a denial with a patch");
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
fn check_idempotent(path: &str, mut sent: Value, object: Value, patched: Value) {
    sent["request"]["object"] = patched.clone();
    let body = serde_json::to_vec(&sent).expect("JSON");
    let (status, answer) = post(path, body);
    assert_eq!(status, StatusCode::OK, "{path}: the re-review failed");
    let answer: Value = serde_json::from_slice(&answer).expect("a JSON answer");
    let response = &answer["response"];
    assert!(
        response.get("patch").is_none() && response["allowed"] == true,
        "{path}: not idempotent: after the first patch the object\n{patched}\n(was {object})\ngets {answer}"
    );
}
