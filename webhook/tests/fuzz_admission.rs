//! Fuzzing the admission and conversion handlers in-process: arbitrary bodies (raw bytes,
//! arbitrary JSON, and AdmissionReviews whose objects are random mutations of realistic Ray
//! Pods, RayJobs, RayClusters and QueuePolicies) go through the real router, and every answer
//! must be well-formed: 200 with an AdmissionReview (or ConversionReview) that echoes the uid,
//! or 400 with a reason. Never a panic, never a 5xx.
//!
//! The budget is `PROPTEST_CASES` (default 256 per property here, so that `cargo test` stays
//! quick); a long run: `PROPTEST_CASES=20000 cargo test -p raygate-webhook --test fuzz_admission`.
//! This is the quick, stable-toolchain version in the normal suite; the coverage-guided
//! libFuzzer targets (with a richer world and a stronger oracle) are in `webhook/fuzz/`.

use std::sync::Arc;

use axum::body::Body;
use http_body_util::BodyExt;
use hyper::{Request, StatusCode};
use proptest::prelude::*;
use raygate_api::validation::ValidationContext;
use raygate_certs::CertResolver;
use raygate_webhook::{AppState, Caches, Draining, Limits, Metrics, Preloaded};
use serde_json::{Map, Value, json};
use tower::ServiceExt;

const ADMISSION_PATHS: [&str; 4] = [
    "/mutate/pods",
    "/mutate/ray",
    "/validate/ray",
    "/validate/queuepolicy",
];

fn router() -> axum::Router {
    raygate_webhook::router(AppState {
        caches: Caches::preloaded(Preloaded::default()),
        certs: Arc::new(CertResolver::new()),
        metrics: Arc::new(Metrics::new()),
        validation: Arc::new(ValidationContext::default()),
        limits: Limits::default(),
        draining: Draining::default(),
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Posts `body` to `path` and checks the answer's shape; returns the status.
async fn post_and_check(router: &axum::Router, path: &str, body: Vec<u8>) -> StatusCode {
    let sent: Option<Value> = serde_json::from_slice(&body).ok();
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
    match status {
        StatusCode::OK => {
            let answer: Value = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("{path}: 200 without JSON ({e}): {bytes:?}"));
            if path == "/convert" {
                // A ConversionReview answer carries the request's apiVersion and kind.
                assert!(answer["kind"].is_string(), "{path}: {answer}");
                assert!(answer["apiVersion"].is_string(), "{path}: {answer}");
            } else {
                assert_eq!(answer["kind"], "AdmissionReview", "{path}: {answer}");
                assert_eq!(
                    answer["apiVersion"], "admission.k8s.io/v1",
                    "{path}: {answer}"
                );
            }
            let response = &answer["response"];
            assert!(response.is_object(), "{path}: no response: {answer}");
            // A ConversionReview too malformed to read is answered with a Failure result and
            // no uid (the API server never sends one); every other answer echoes the uid.
            let unreadable_conversion =
                path == "/convert" && response["result"]["status"] == "Failure";
            if let Some(uid) = sent
                .as_ref()
                .filter(|_| !unreadable_conversion)
                .and_then(|s| s.get("request"))
                .and_then(|r| r.get("uid"))
                .and_then(Value::as_str)
            {
                assert_eq!(response["uid"], uid, "{path}: uid not echoed: {answer}");
            }
            if path != "/convert" {
                assert!(response["allowed"].is_boolean(), "{path}: {answer}");
                if let Some(patch) = response.get("patch") {
                    assert_eq!(response["patchType"], "JSONPatch", "{path}: {answer}");
                    assert!(patch.is_string(), "{path}: {answer}");
                }
            }
        }
        StatusCode::BAD_REQUEST => {
            assert!(
                !String::from_utf8_lossy(&bytes).trim().is_empty(),
                "{path}: 400 without a reason"
            );
        }
        other => panic!(
            "{path}: unexpected {other}: {}",
            String::from_utf8_lossy(&bytes)
        ),
    }
    status
}

/// Arbitrary JSON, a few levels deep, with keys that the handlers look for.
fn arb_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("apiVersion".to_string()),
        Just("kind".to_string()),
        Just("metadata".to_string()),
        Just("spec".to_string()),
        Just("name".to_string()),
        Just("labels".to_string()),
        Just("annotations".to_string()),
        Just("ownerReferences".to_string()),
        Just("containers".to_string()),
        Just("workerGroupSpecs".to_string()),
        Just("rayClusterSpec".to_string()),
        Just("uid".to_string()),
        "[a-zA-Z./-]{0,12}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,16}".prop_map(Value::from),
        Just(Value::from("ray.io/v1")),
        Just(Value::from("RayJob")),
        Just(Value::from("head")),
        Just(Value::from("-1")),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn ray_head_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": "demo-head-", "namespace": "ml",
            "labels": {"ray.io/node-type": "head", "ray.io/cluster": "demo", "ray.io/group": "headgroup",
                       "app.kubernetes.io/created-by": "kuberay-operator"},
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "demo",
                                 "uid": "c-1", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0",
                                 "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]}
    })
}

fn ray_job() -> Value {
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "train", "namespace": "ml", "labels": {"volcano.sh/queue-name": "batch"}},
        "spec": {"entrypoint": "python train.py", "shutdownAfterJobFinishes": true,
                 "rayClusterSpec": {
                     "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                         {"name": "ray-head", "image": "rayproject/ray:2.60.0",
                          "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]}}},
                     "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 1, "maxReplicas": 4,
                         "template": {"spec": {"containers": [{"name": "ray-worker",
                             "image": "rayproject/ray:2.60.0-gpu",
                             "resources": {"limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}}}]}}}]}}
    })
}

fn queue_policy() -> Value {
    json!({
        "apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy", "metadata": {"name": "p"},
        "spec": {"namespaceSelector": {"matchLabels": {"team": "ml"}}, "defaultQueue": "batch",
                 "allowedQueues": ["batch"], "enforcement": "Deny"}
    })
}

/// Replaces the value at a random path of `base` (chosen by `steps`) with `replacement`.
fn mutate(mut base: Value, steps: &[usize], replacement: Value) -> Value {
    let mut pointer = String::new();
    let mut node = &base;
    for step in steps {
        let (token, child) = match node {
            Value::Object(map) if !map.is_empty() => {
                let (key, child) = map.iter().nth(step % map.len()).expect("in range");
                (key.replace('~', "~0").replace('/', "~1"), child)
            }
            Value::Array(items) if !items.is_empty() => {
                let index = step % items.len();
                (index.to_string(), &items[index])
            }
            _ => break,
        };
        pointer.push('/');
        pointer.push_str(&token);
        node = child;
    }
    if let Some(target) = base.pointer_mut(&pointer) {
        *target = replacement;
    }
    base
}

fn kind_of(object: &Value) -> Value {
    match object.get("kind").and_then(Value::as_str) {
        Some("Pod") => json!({"group": "", "version": "v1", "kind": "Pod"}),
        Some("QueuePolicy") => {
            json!({"group": "raygate.io", "version": "v1alpha1", "kind": "QueuePolicy"})
        }
        Some(kind) => json!({"group": "ray.io", "version": "v1", "kind": kind}),
        None => json!({"group": "ray.io", "version": "v1", "kind": "RayCluster"}),
    }
}

/// An AdmissionReview around a mutated realistic object, with a random operation and dry run.
fn arb_review() -> impl Strategy<Value = Value> {
    let base = prop_oneof![Just(ray_head_pod()), Just(ray_job()), Just(queue_policy())];
    (
        base,
        prop::collection::vec(any::<usize>(), 0..7),
        arb_json(),
        prop_oneof![Just("CREATE"), Just("UPDATE"), Just("DELETE"), Just("CONNECT"), Just("")],
        any::<bool>(),
        any::<bool>(),
        "[a-f0-9-]{0,36}",
    )
        .prop_map(|(base, steps, replacement, operation, dry_run, old, uid)| {
            let object = if steps.is_empty() {
                base
            } else {
                mutate(base, &steps, replacement)
            };
            json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": uid, "kind": kind_of(&object),
                    "resource": {"group": "ray.io", "version": "v1", "resource": "rayjobs"},
                    "namespace": object.pointer("/metadata/namespace").cloned().unwrap_or(Value::Null),
                    "name": object.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
                    "operation": operation,
                    "userInfo": {"username": "fuzz"},
                    "oldObject": if old { object.clone() } else { Value::Null },
                    "object": object,
                    "dryRun": dry_run,
                }
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_get_a_well_formed_answer(body in prop::collection::vec(any::<u8>(), 0..512), path in 0usize..5) {
        let router = router();
        let path = ADMISSION_PATHS.get(path).copied().unwrap_or("/convert");
        runtime().block_on(post_and_check(&router, path, body));
    }

    #[test]
    fn arbitrary_json_gets_a_well_formed_answer(value in arb_json(), path in 0usize..5) {
        let router = router();
        let path = ADMISSION_PATHS.get(path).copied().unwrap_or("/convert");
        let body = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": value})).expect("JSON");
        runtime().block_on(async {
            post_and_check(&router, path, body).await;
            post_and_check(&router, path, serde_json::to_vec(&value).expect("JSON")).await;
        });
    }

    #[test]
    fn mutated_reviews_get_a_well_formed_answer(review in arb_review()) {
        let router = router();
        let body = serde_json::to_vec(&review).expect("JSON");
        runtime().block_on(async {
            for path in ADMISSION_PATHS {
                post_and_check(&router, path, body.clone()).await;
            }
        });
    }
}

#[test]
fn realistic_reviews_are_answered_200() {
    // The oracle above accepts 400; make sure valid reviews really reach the handlers.
    let router = router();
    for object in [ray_head_pod(), ray_job(), queue_policy()] {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": kind_of(&object),
                        "resource": {"group": "ray.io", "version": "v1", "resource": "x"},
                        "namespace": "ml", "operation": "CREATE", "userInfo": {"username": "u"},
                        "object": object, "dryRun": false}});
        let body = serde_json::to_vec(&review).expect("JSON");
        let status = runtime().block_on(post_and_check(&router, "/validate/ray", body));
        assert_eq!(status, StatusCode::OK);
    }
}
