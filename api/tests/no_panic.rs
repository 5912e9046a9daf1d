//! Whatever the input, reading and checking manifests never panics.

use proptest::prelude::*;
use raygate_api::check::check_object;
use raygate_api::input::parse_documents;
use raygate_api::sizing;
use raygate_api::validation::{ReconcilerKind, ValidationContext};
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
