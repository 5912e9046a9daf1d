//! Fuzzing the admission and conversion handlers in-process: arbitrary bodies (raw bytes,
//! arbitrary JSON, and AdmissionReviews whose objects are random mutations of realistic Ray
//! Pods, RayJobs, RayClusters and QueuePolicies) go through the real router over the shared
//! preloaded world, and every answer must satisfy the oracle of
//! `raygate_webhook::test_support` (the one the libFuzzer targets in `webhook/fuzz/` check
//! against): 200 with an AdmissionReview (or ConversionReview) that echoes the uid, or 400 with
//! a reason; denials with a code and a message; patches only from mutating paths, applicable
//! and idempotent. Never a panic, never a 5xx.
//!
//! The budget is `PROPTEST_CASES` (default 256 per property here, so that `cargo test` stays
//! quick); a long run: `PROPTEST_CASES=20000 cargo test -p raygate-webhook --test fuzz_admission`.
//! This is the quick, stable-toolchain version in the normal suite; the coverage-guided
//! libFuzzer targets are in `webhook/fuzz/`.

use axum::Router;
use hyper::StatusCode;
use proptest::prelude::*;
use raygate_webhook::test_support::{self, ADMISSION_PATHS, PATHS, ReviewRequest, post_and_check};
use serde_json::{Map, Value, json};

fn router() -> Router {
    test_support::router()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
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

/// The realistic objects of the shared world, one of each kind the webhooks see.
fn realistic_objects() -> [Value; 6] {
    [
        test_support::head_pod(),
        test_support::worker_pod(),
        test_support::submitter_pod(),
        test_support::ray_job(),
        test_support::ray_cluster(),
        test_support::queue_policy(),
    ]
}

/// An AdmissionReview around a mutated realistic object, with a random operation, dry run and
/// old object.
fn arb_review() -> impl Strategy<Value = Vec<u8>> {
    (
        0..realistic_objects().len(),
        prop::collection::vec(any::<usize>(), 0..7),
        arb_json(),
        prop_oneof![
            Just("CREATE"),
            Just("UPDATE"),
            Just("DELETE"),
            Just("CONNECT"),
            Just("")
        ],
        any::<bool>(),
        any::<bool>(),
        "[a-f0-9-]{0,36}",
    )
        .prop_map(|(base, steps, replacement, operation, dry_run, old, uid)| {
            let base = realistic_objects()[base].clone();
            let object = if steps.is_empty() {
                base
            } else {
                mutate(base, &steps, replacement)
            };
            let mut request = ReviewRequest::create(&uid, object.clone());
            request.operation = operation.to_string();
            request.dry_run = Some(dry_run);
            request.old_object = Some(if old { object } else { Value::Null });
            request.to_body()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_get_a_well_formed_answer(body in prop::collection::vec(any::<u8>(), 0..512), path in 0..PATHS.len()) {
        let router = router();
        runtime().block_on(post_and_check(&router, PATHS[path], body));
    }

    #[test]
    fn arbitrary_json_gets_a_well_formed_answer(value in arb_json(), path in 0..PATHS.len()) {
        let router = router();
        let path = PATHS[path];
        let body = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": value})).expect("JSON");
        runtime().block_on(async {
            post_and_check(&router, path, body).await;
            post_and_check(&router, path, serde_json::to_vec(&value).expect("JSON")).await;
        });
    }

    #[test]
    fn mutated_reviews_get_a_well_formed_answer(body in arb_review()) {
        let router = router();
        runtime().block_on(async {
            for path in ADMISSION_PATHS {
                post_and_check(&router, path, body.clone()).await;
            }
        });
    }
}

#[test]
fn realistic_reviews_are_answered_200_on_every_admission_path() {
    // The oracle accepts 400; make sure valid reviews really reach the handlers.
    let router = router();
    runtime().block_on(async {
        for object in realistic_objects() {
            let body = ReviewRequest::create("u-1", object).to_body();
            for path in ADMISSION_PATHS {
                let status = post_and_check(&router, path, body.clone()).await;
                assert_eq!(status, StatusCode::OK, "{path}");
            }
        }
    });
}

#[test]
fn ray_pods_in_the_opted_in_namespace_are_patched() {
    // The idempotence half of the oracle only runs on a patch: make sure the shared world
    // and objects produce one.
    let router = router();
    runtime().block_on(async {
        for pod in [test_support::head_pod(), test_support::worker_pod()] {
            let body = ReviewRequest::create("u-1", pod).to_body();
            let (status, answer) = test_support::post(&router, "/mutate/pods", body).await;
            assert_eq!(status, StatusCode::OK);
            let answer: Value = serde_json::from_slice(&answer).expect("JSON");
            assert_eq!(answer["response"]["patchType"], "JSONPatch", "{answer}");
        }
    });
}

#[test]
fn a_ray_pod_without_a_spec_object_is_denied_rather_than_given_a_patch_that_cannot_apply() {
    // Found by the oracle: `add /spec/schedulerName` was sent for a Pod whose spec was an
    // array, a string or missing, and the API server would have rejected the patch.
    let router = router();
    runtime().block_on(async {
        for spec in [
            Some(json!(["RayJob"])),
            Some(json!("x")),
            Some(Value::Null),
            None,
        ] {
            let mut pod = test_support::head_pod();
            match &spec {
                Some(spec) => pod["spec"] = spec.clone(),
                None => {
                    pod.as_object_mut().expect("an object").remove("spec");
                }
            }
            let body = ReviewRequest::create("u-1", pod).to_body();
            let status = post_and_check(&router, "/mutate/pods", body.clone()).await;
            assert_eq!(status, StatusCode::OK, "spec {spec:?}");
            let (_, answer) = test_support::post(&router, "/mutate/pods", body).await;
            let answer: Value = serde_json::from_slice(&answer).expect("JSON");
            let response = &answer["response"];
            assert_eq!(response["allowed"], false, "spec {spec:?}: {answer}");
            assert_eq!(response["status"]["code"], 400, "{answer}");
            assert!(
                response["status"]["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("request.object.spec: Required value")),
                "{answer}"
            );
        }
    });
}
