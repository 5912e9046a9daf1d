//! Whatever the input, reading and checking manifests never panics.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;
use raygate_api::admission::{self, Operation, RayObjectReview};
use raygate_api::apply::{FieldValidation, check_manifest};
use raygate_api::check::check_object;
use raygate_api::feasibility::{NodeKinds, NodeShape};
use raygate_api::input::parse_documents;
use raygate_api::keys;
use raygate_api::queue_policy::QueuePolicy;
use raygate_api::settings::OptInLabel;
use raygate_api::sizing;
use raygate_api::validation::{ReconcilerKind, ValidationContext};
use raygate_api::volcano::Queue;
use serde_json::{Value, json};

fn contexts() -> [ValidationContext; 2] {
    [
        ValidationContext::default(),
        ValidationContext {
            reconciler: ReconcilerKind::Raygate,
            ..ValidationContext::default()
        },
    ]
}

/// Any JSON value, biased towards the keys and shapes Ray manifests use.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("spec".to_string()),
        Just("rayClusterSpec".to_string()),
        Just("headGroupSpec".to_string()),
        Just("workerGroupSpecs".to_string()),
        Just("template".to_string()),
        Just("containers".to_string()),
        Just("resources".to_string()),
        Just("requests".to_string()),
        Just("cpu".to_string()),
        Just("replicas".to_string()),
        Just("minReplicas".to_string()),
        Just("numOfHosts".to_string()),
        Just("deletionStrategy".to_string()),
        Just("deletionRules".to_string()),
        Just("submissionMode".to_string()),
        Just("metadata".to_string()),
        Just("name".to_string()),
        "[a-zA-Z]{1,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        Just(json!("1Gi")),
        Just(json!("500m")),
        Just(json!("K8sJobMode")),
    ];
    leaf.prop_recursive(6, 128, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn ray_object() -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just("ray.io/v1"), Just("ray.io/v1alpha1")],
        prop_oneof![Just("RayJob"), Just("RayCluster")],
        json_value(),
        json_value(),
    )
        .prop_map(|(api_version, kind, spec, metadata)| {
            json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec})
        })
}

fn check_everything(value: &Value) {
    for ctx in contexts() {
        if let Some(checked) = check_object(value.clone(), &ctx) {
            assert_eq!(
                checked.report.valid,
                !checked.report.findings.iter().any(|f| f.is_error())
            );
            match &checked.typed {
                Some(raygate_api::check::Typed::RayJob(job)) => {
                    let _ = sizing::ray_job_pod_group(job);
                }
                Some(raygate_api::check::Typed::RayCluster(cluster)) => {
                    let _ = sizing::ray_cluster_pod_group(cluster);
                }
                None => {}
            }
        }
        for fields in [
            FieldValidation::Strict,
            FieldValidation::Warn,
            FieldValidation::Ignore,
        ] {
            if let Some(checked) = check_manifest(value.clone(), &ctx, fields) {
                let report = checked.report;
                assert_eq!(report.valid, !report.findings.iter().any(|f| f.is_error()));
            }
        }
    }
}

/// Reviews `object` (and `old`, as an UPDATE) in an opted-in namespace with a closed queue,
/// a capped queue, two policies and two nodes: the answer is always consistent, never a panic.
fn review_everything(object: &Value, old: &Value) {
    let nodes = NodeKinds::from_shapes(
        [
        json!({"metadata": {"name": "small", "labels": {"zone": "a"}},
               "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
               "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}}}),
        json!({"metadata": {"name": "gpu"}, "status": {"allocatable": {"cpu": "1e3", "nvidia.com/gpu": "8"}}}),
    ]
        .iter()
        .map(|n| NodeShape::of(&serde_json::from_value(n.clone()).expect("a Node"))),
    );
    let queues: BTreeMap<String, Arc<Queue>> = [
        json!({"metadata": {"name": "default"}, "spec": {}, "status": {"state": "Open"}}),
        json!({"metadata": {"name": "capped"}, "spec": {"capability": {"cpu": "2"}}}),
        json!({"metadata": {"name": "shut"}, "spec": {}, "status": {"state": "Closed"}}),
    ]
    .into_iter()
    .map(|q| {
        let queue: Queue = serde_json::from_value(q).expect("a queue");
        (
            queue.metadata.name.clone().unwrap_or_default(),
            Arc::new(queue),
        )
    })
    .collect();
    let policies: Vec<Arc<QueuePolicy>> = [
        json!({"metadata": {"name": "a"}, "spec": {"allowedQueues": ["capped", "default"],
               "defaultQueue": "capped", "maxMinMember": 3, "maxMinResources": {"memory": "1Gi"}}}),
        json!({"metadata": {"name": "b"}, "spec": {"requireQueue": true, "enforcement": "Warn",
               "allowedPriorityClasses": ["high"]}}),
    ]
    .into_iter()
    .map(|p| Arc::new(serde_json::from_value(p).expect("a policy")))
    .collect();
    let namespace = ObjectMeta {
        name: Some("ml".into()),
        labels: Some(BTreeMap::from([(
            keys::NAMESPACE_OPT_IN_LABEL.to_string(),
            keys::NAMESPACE_OPT_IN_VALUE.to_string(),
        )])),
        ..ObjectMeta::default()
    };
    for (operation, old_object) in [(Operation::Create, None), (Operation::Update, Some(old))] {
        for ctx in contexts() {
            let decision = admission::review_ray_object(RayObjectReview {
                operation,
                object: object.clone(),
                old_object: old_object.cloned(),
                namespace: &namespace,
                opt_in: &OptInLabel::default(),
                queues: &queues,
                policies: &policies,
                nodes: &nodes,
                context: &ctx,
            });
            assert_eq!(decision.allowed(), decision.denial().is_none());
            if let Some(patch) = &decision.patch {
                let mut patched = object.clone();
                assert!(json_patch::patch(&mut patched, patch).is_ok(), "{patch:?}");
            }
        }
    }
}

fn labelled_ray_object() -> impl Strategy<Value = Value> {
    (
        ray_object(),
        prop_oneof![
            Just(None),
            Just(Some("capped")),
            Just(Some("shut")),
            Just(Some("nope"))
        ],
        prop_oneof![
            Just(None),
            Just(Some("Running")),
            Just(Some("Complete")),
            Just(Some(""))
        ],
    )
        .prop_map(|(mut object, queue, deployment)| {
            if let Some(queue) = queue
                && let Some(metadata) = object["metadata"].as_object_mut()
            {
                metadata.insert("labels".into(), json!({ keys::QUEUE_LABEL: queue }));
            }
            if let Some(status) = deployment {
                object["status"] = json!({"jobDeploymentStatus": status, "rayClusterName": "c"});
            }
            object
        })
}

proptest! {
    // Each case is eight full reviews (CREATE and UPDATE, two contexts, old and new object).
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn arbitrary_admission_reviews_never_panic(
        object in labelled_ray_object(),
        old in labelled_ray_object(),
    ) {
        review_everything(&object, &old);
    }

    #[test]
    fn arbitrary_queue_policies_never_panic(spec in json_value()) {
        let policy = json!({"apiVersion": "raygate.io/v1alpha1", "kind": "QueuePolicy",
                            "metadata": {"name": "p"}, "spec": spec});
        let decision = admission::review_queue_policy(&policy);
        prop_assert_eq!(decision.allowed(), decision.denial().is_none());
        prop_assert!(decision.patch.is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn arbitrary_text_never_panics(text in "(?s).{0,400}") {
        if let Ok(docs) = parse_documents("fuzz", &text) {
            for doc in docs {
                check_everything(&doc.value);
            }
        }
    }

    #[test]
    fn yaml_like_text_never_panics(text in "([a-zA-Z]{1,6}: ?(\\[|\\{|-|\\||>|&a|\\*a|!!str|\"|'|[0-9.eE+-]{1,6}|[a-z]{0,5})\n {0,4}){0,20}") {
        if let Ok(docs) = parse_documents("fuzz.yaml", &text) {
            for doc in docs {
                check_everything(&doc.value);
            }
        }
    }

    #[test]
    fn arbitrary_ray_objects_never_panic(value in ray_object()) {
        check_everything(&value);
        let text = serde_json::to_string(&value).unwrap_or_default();
        prop_assert!(parse_documents("fuzz.json", &text).is_ok());
    }
}

#[test]
fn hostile_yaml_is_refused_not_expanded() {
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n";
    // Either refused by the parser's budget or read; never a hang or a crash.
    if let Ok(docs) = parse_documents("bomb.yaml", bomb) {
        for doc in docs {
            check_everything(&doc.value);
        }
    }
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    assert!(parse_documents("deep.json", &deep).is_err());
    let deep_yaml = format!("{}x", "- ".repeat(10_000));
    assert!(parse_documents("deep.yaml", &deep_yaml).is_err());
}
