use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::crd;

// ---------------------------------------------------------------------------------------------
// The difference table against the CRD schemas

/// The schema of `version` of `kind` from raygate's CRDs, as JSON.
fn schema(kind: &str, version: &str) -> Value {
    let crd = crd::ray_crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .expect("CRD of kind");
    let version = crd
        .spec
        .versions
        .into_iter()
        .find(|v| v.name == version)
        .expect("served version");
    serde_json::to_value(version.schema.unwrap().open_api_v3_schema.unwrap()).unwrap()
}

fn child_schemas(node: &Value) -> Vec<(String, &Value)> {
    let mut out = Vec::new();
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        out.extend(props.iter().map(|(k, v)| (k.clone(), v)));
    }
    out
}

/// Property paths (`a.b[*].c`) present in `wide` and not in `narrow`, not descending below one.
fn missing_paths(wide: &Value, narrow: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    for (name, wide_child) in child_schemas(wide) {
        let path = join(prefix, &name);
        let Some(narrow_child) = narrow.get("properties").and_then(|p| p.get(&name)) else {
            out.insert(path);
            continue;
        };
        match (wide_child.get("items"), narrow_child.get("items")) {
            (Some(wide_items), Some(narrow_items)) => {
                missing_paths(wide_items, narrow_items, &format!("{path}[*]"), out)
            }
            _ => missing_paths(wide_child, narrow_child, &path, out),
        }
    }
}

/// Paths required in `strict` but not in `lax`, among the properties both have.
fn extra_required(strict: &Value, lax: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    let required = |node: &Value| -> BTreeSet<String> {
        node.get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    for name in required(strict).difference(&required(lax)) {
        out.insert(join(prefix, name));
    }
    for (name, strict_child) in child_schemas(strict) {
        let Some(lax_child) = lax.get("properties").and_then(|p| p.get(&name)) else {
            continue;
        };
        let path = join(prefix, &name);
        match (strict_child.get("items"), lax_child.get("items")) {
            (Some(s), Some(l)) => extra_required(s, l, &format!("{path}[*]"), out),
            _ => extra_required(strict_child, lax_child, &path, out),
        }
    }
}

#[test]
fn v1_only_fields_are_exactly_what_the_v1_schema_adds_to_v1alpha1() {
    for kind in ["RayJob", "RayCluster"] {
        let mut v1_only = BTreeSet::new();
        missing_paths(
            &schema(kind, "v1"),
            &schema(kind, "v1alpha1"),
            "",
            &mut v1_only,
        );
        assert_eq!(
            v1_only_paths(kind),
            v1_only.into_iter().collect::<Vec<_>>(),
            "{kind}: the conversion table must list every v1-only field of the CRD"
        );
        let mut alpha_only = BTreeSet::new();
        missing_paths(
            &schema(kind, "v1alpha1"),
            &schema(kind, "v1"),
            "",
            &mut alpha_only,
        );
        assert!(
            alpha_only.is_empty(),
            "{kind}: v1alpha1 fields missing from v1: {alpha_only:?}"
        );
    }
}

#[test]
fn placeholders_are_exactly_the_fields_only_v1alpha1_requires_without_a_default() {
    for kind in ["RayJob", "RayCluster"] {
        let mut required = BTreeSet::new();
        extra_required(
            &schema(kind, "v1alpha1"),
            &schema(kind, "v1"),
            "",
            &mut required,
        );
        assert_eq!(
            required_only_in_v1alpha1_paths(kind),
            required.into_iter().collect::<Vec<_>>(),
            "{kind}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Examples

fn full_v1_job() -> Value {
    json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "demo", "namespace": "team-a", "uid": "1234", "resourceVersion": "7",
            "labels": {"volcano.sh/queue-name": "q"},
        },
        "spec": {
            "activeDeadlineSeconds": 600,
            "submissionMode": "HTTPMode",
            "backoffLimit": 2,
            "submitterConfig": {"backoffLimit": 3},
            "managedBy": "ray.io/kuberay-operator",
            "deletionStrategy": {"deletionRules": [
                {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 30}}
            ]},
            "preRunningDeadlineSeconds": 120,
            "shutdownAfterJobFinishes": true,
            "rayClusterSpec": full_v1_cluster_spec(),
        },
        "status": {
            "jobStatus": "RUNNING",
            "jobDeploymentStatus": "Running",
            "reason": "DeadlineExceeded",
            "succeeded": 0,
            "failed": 1,
            "rayJobInfo": {"startTime": "2026-01-01T00:00:00Z"},
            "jobStatusCheckFailureStartTime": "2026-01-01T00:00:01Z",
            "conditions": [{"type": "GangPending", "status": "False", "reason": "GangScheduled",
                            "message": "bound", "lastTransitionTime": "2026-01-01T00:00:02Z"}],
            "rayClusterStatus": full_v1_cluster_status(),
        }
    })
}

fn full_v1_cluster_spec() -> Value {
    json!({
        "upgradeStrategy": {"type": "Recreate"},
        "authOptions": {"mode": "token"},
        "managedBy": "ray.io/kuberay-operator",
        "gcsFaultToleranceOptions": {"redisAddress": "redis:6379"},
        "historyServerOptions": {"anything": 1},
        "networkPolicy": {"enabled": true},
        "tlsOptions": {"enabled": true},
        "rayVersion": "2.60.0",
        "enableInTreeAutoscaling": true,
        "autoscalerOptions": {
            "image": "rayproject/ray:2.60.0", "version": "v2",
            "command": ["ray"], "args": ["autoscale"],
        },
        "headGroupSpec": {
            "ingressOptions": {"host": "x"},
            "resources": {"CPU": "0"},
            "labels": {"zone": "a"},
            "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0"}]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "gpu", "replicas": 1, "minReplicas": 0, "maxReplicas": 4,
                "suspend": false, "idleTimeoutSeconds": 60, "priority": 5,
                "resources": {"GPU": "1"}, "labels": {"acc": "h100"}, "numOfHosts": 2,
                "rayStartParams": {"num-gpus": "1"},
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]}},
            },
            {
                "groupName": "cpu", "minReplicas": 0, "maxReplicas": 1,
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]}},
            }
        ],
    })
}

fn full_v1_cluster_status() -> Value {
    json!({
        "state": "ready",
        "conditions": [{"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
                        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "stateTransitionTimes": {"ready": "2026-01-01T00:00:00Z"},
        "head": {"podIP": "10.0.0.1", "serviceIP": "10.0.0.2", "podName": "demo-head", "serviceName": "demo-head-svc"},
    })
}

fn full_v1_cluster() -> Value {
    json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "demo", "namespace": "team-a", "uid": "42", "annotations": {"keep": "me"}},
        "spec": full_v1_cluster_spec(),
        "status": full_v1_cluster_status(),
    })
}

fn down(object: &Value) -> Value {
    convert(object.clone(), RayVersion::V1alpha1).expect("converts to v1alpha1")
}

fn up(object: &Value) -> Value {
    convert(object.clone(), RayVersion::V1).expect("converts to v1")
}

/// Whether `path` (with `[*]` for list items) holds a value in `object`.
fn has_path(object: &Value, path: &str) -> bool {
    fn walk(value: &Value, parts: &[&str]) -> bool {
        let Some((first, rest)) = parts.split_first() else {
            return true;
        };
        let (name, each) = match first.strip_suffix("[*]") {
            Some(name) => (name, true),
            None => (*first, false),
        };
        match value.get(name) {
            Some(Value::Array(items)) if each => items.iter().any(|i| walk(i, rest)),
            Some(inner) if !each => walk(inner, rest),
            _ => false,
        }
    }
    walk(object, &path.split('.').collect::<Vec<_>>())
}

#[test]
fn full_objects_carry_every_v1_only_field() {
    for (kind, object) in [("RayJob", full_v1_job()), ("RayCluster", full_v1_cluster())] {
        for path in v1_only_paths(kind) {
            // RayJob's copy of the cluster status and spec are covered through the nested paths.
            assert!(has_path(&object, &path), "{kind} example lacks {path}");
        }
    }
}

#[test]
fn v1alpha1_form_has_no_v1_only_field_and_satisfies_the_v1alpha1_schema() {
    for object in [full_v1_job(), full_v1_cluster()] {
        let kind = object["kind"].as_str().unwrap().to_owned();
        let alpha = down(&object);
        assert_eq!(alpha["apiVersion"], "ray.io/v1alpha1");
        for path in v1_only_paths(&kind) {
            assert!(!has_path(&alpha, &path), "{kind}: {path} left in v1alpha1");
        }
        let mut pruned = alpha.clone();
        let removed = crd::prune_unknown_fields(RAY_V1ALPHA1, &kind, &mut pruned).unwrap();
        assert!(
            removed.is_empty(),
            "{kind}: v1alpha1 would prune {removed:?}"
        );
        let errors: Vec<_> = crd::validate_schema(RAY_V1ALPHA1, &kind, &alpha)
            .into_iter()
            .filter(|f| f.is_error())
            .map(|f| f.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{kind}: v1alpha1 schema rejects {errors:?}"
        );
        assert_eq!(up(&alpha), object, "{kind}: v1 -> v1alpha1 -> v1");
    }
}

#[test]
fn kept_fields_live_in_the_reserved_annotation_and_nothing_else_in_metadata_changes() {
    let object = full_v1_cluster();
    let alpha = down(&object);
    let mut metadata = alpha["metadata"].clone();
    let kept: Value = serde_json::from_str(
        metadata["annotations"][keys::V1_FIELDS_ANNOTATION]
            .as_str()
            .expect("annotation"),
    )
    .unwrap();
    assert_eq!(kept["spec"]["workerGroupSpecs"]["gpu"]["numOfHosts"], 2);
    assert_eq!(
        kept["spec"]["workerGroupSpecs"]["cpu"]["$absent"],
        json!(["rayStartParams"])
    );
    assert_eq!(kept["status"]["head"]["podName"], "demo-head");
    metadata["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(keys::V1_FIELDS_ANNOTATION);
    assert_eq!(metadata, object["metadata"]);
}

#[test]
fn an_update_through_v1alpha1_keeps_v1_only_fields_by_group_name() {
    let object = full_v1_job();
    let mut alpha = down(&object);
    // The user edits the entrypoint, swaps the worker groups and removes the autoscaler options.
    alpha["spec"]["entrypoint"] = json!("python new.py");
    alpha["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        .as_array_mut()
        .unwrap()
        .reverse();
    alpha["spec"]["rayClusterSpec"]
        .as_object_mut()
        .unwrap()
        .remove("autoscalerOptions");
    let v1 = up(&alpha);
    assert_eq!(v1["spec"]["entrypoint"], "python new.py");
    assert_eq!(v1["spec"]["backoffLimit"], 2);
    assert_eq!(
        v1["spec"]["deletionStrategy"],
        object["spec"]["deletionStrategy"]
    );
    let workers = v1["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        .as_array()
        .unwrap();
    assert_eq!(workers[0]["groupName"], "cpu");
    assert!(workers[0].get("rayStartParams").is_none());
    assert_eq!(workers[1]["groupName"], "gpu");
    assert_eq!(workers[1]["numOfHosts"], 2);
    assert_eq!(workers[1]["labels"], json!({"acc": "h100"}));
    assert!(
        v1["spec"]["rayClusterSpec"]
            .get("autoscalerOptions")
            .is_none()
    );
    assert!(v1["metadata"].get("annotations").is_none());
}

#[test]
fn a_placeholder_the_user_filled_in_stays() {
    let mut object = full_v1_job();
    object["spec"].as_object_mut().unwrap().remove("entrypoint");
    let mut alpha = down(&object);
    assert_eq!(alpha["spec"]["entrypoint"], "");
    assert_eq!(
        alpha["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"],
        json!({})
    );
    alpha["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"] = json!({"num-cpus": "0"});
    let v1 = up(&alpha);
    assert!(v1["spec"].get("entrypoint").is_none());
    assert_eq!(
        v1["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"],
        json!({"num-cpus": "0"})
    );
}

#[test]
fn null_metadata_or_annotations_are_read_as_absent() {
    // Helm renders an `annotations:` block with empty values as null; kubectl sends it and the
    // API server reads it as no annotations. convert once refused such objects.
    for metadata in [json!({"name": "demo", "annotations": null}), json!(null)] {
        let mut object = full_v1_job();
        object["metadata"] = metadata.clone();
        let alpha = down(&object);
        assert!(
            alpha["metadata"]["annotations"][keys::V1_FIELDS_ANNOTATION].is_string(),
            "{metadata}: {alpha}"
        );
        let v1 = up(&alpha);
        assert_eq!(v1["spec"]["backoffLimit"], 2, "{metadata}");
        assert!(v1["metadata"].get("annotations").is_none(), "{metadata}");
    }
}

#[test]
fn a_stale_annotation_on_a_v1_object_is_replaced() {
    let mut object = full_v1_cluster();
    object["metadata"]["annotations"][keys::V1_FIELDS_ANNOTATION] =
        json!(r#"{"spec":{"managedBy":"stale"}}"#);
    let v1 = up(&down(&object));
    assert_eq!(v1["spec"]["managedBy"], "ray.io/kuberay-operator");
    assert!(
        v1["metadata"]["annotations"]
            .get(keys::V1_FIELDS_ANNOTATION)
            .is_none()
    );
}

#[test]
fn a_v1alpha1_object_without_the_annotation_converts_by_its_api_version_only() {
    let alpha = json!({
        "apiVersion": "ray.io/v1alpha1", "kind": "RayJob",
        "metadata": {"name": "old", "namespace": "ns"},
        "spec": {"entrypoint": "python x.py", "rayClusterSpec": {"headGroupSpec": {
            "rayStartParams": {}, "template": {"spec": {"containers": []}}}}}
    });
    let mut expected = alpha.clone();
    expected["apiVersion"] = json!("ray.io/v1");
    assert_eq!(up(&alpha), expected);
    assert_eq!(down(&expected), alpha);
}

#[test]
fn unconvertible_objects_get_field_errors() {
    let err = |object: Value, desired| convert(object, desired).unwrap_err().to_string();
    assert_eq!(
        err(json!([1]), RayVersion::V1),
        "the object must be a JSON object, found array"
    );
    assert_eq!(
        err(
            json!({"apiVersion": "ray.io/v2", "kind": "RayJob"}),
            RayVersion::V1
        ),
        "apiVersion: Unsupported value: \"ray.io/v2\": supported values: \"ray.io/v1\", \"ray.io/v1alpha1\""
    );
    assert_eq!(
        err(
            json!({"apiVersion": "ray.io/v1", "kind": "RayService"}),
            RayVersion::V1alpha1
        ),
        "kind: Unsupported value: \"RayService\": supported values: \"RayCluster\", \"RayJob\""
    );
    let mut duplicate = full_v1_cluster();
    duplicate["spec"]["workerGroupSpecs"][1]["groupName"] = json!("gpu");
    assert_eq!(
        err(duplicate, RayVersion::V1alpha1),
        "spec.workerGroupSpecs[0].groupName: Invalid value: Duplicate value: \"gpu\": ray.io/v1alpha1 can keep v1-only fields (idleTimeoutSeconds, labels, numOfHosts, priority, resources, suspend) only of uniquely named items; rename it"
    );
    let mut broken = down(&full_v1_cluster());
    broken["metadata"]["annotations"][keys::V1_FIELDS_ANNOTATION] = json!("{not json");
    assert!(err(broken, RayVersion::V1).starts_with(
        "metadata.annotations[raygate.io/v1-fields]: Invalid value: not the JSON raygate writes"
    ));
    let mut not_object = down(&full_v1_cluster());
    not_object["metadata"]["annotations"][keys::V1_FIELDS_ANNOTATION] = json!("[1]");
    assert_eq!(
        err(not_object, RayVersion::V1),
        "metadata.annotations[raygate.io/v1-fields]: Invalid value: must be a JSON object, found array; remove the annotation to drop the kept v1-only fields"
    );
}

// ---------------------------------------------------------------------------------------------
// ConversionReview

fn review(desired: &str, objects: Vec<Value>) -> ConversionReview {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "desiredAPIVersion": desired, "objects": objects}
    }))
    .unwrap()
}

fn response(review: ConversionReview) -> Value {
    serde_json::to_value(review).unwrap()
}

#[test]
fn a_review_answers_every_object_in_order_with_the_desired_version() {
    let objects = vec![full_v1_job(), down(&full_v1_cluster()), full_v1_cluster()];
    let out = response(convert_review(review(RAY_V1ALPHA1, objects.clone())));
    assert_eq!(out["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(out["kind"], "ConversionReview");
    assert_eq!(
        out["response"]["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(out["response"]["result"]["status"], "Success");
    let converted = out["response"]["convertedObjects"].as_array().unwrap();
    assert_eq!(converted.len(), 3);
    for (input, output) in objects.iter().zip(converted) {
        assert_eq!(output["apiVersion"], RAY_V1ALPHA1);
        for field in ["name", "namespace", "uid"] {
            assert_eq!(output["metadata"][field], input["metadata"][field]);
        }
        assert_eq!(output["kind"], input["kind"]);
    }
    assert_eq!(converted[1], objects[1]);
}

#[test]
fn a_failing_object_fails_the_review_with_its_reason_and_keeps_the_uid() {
    let objects = vec![
        full_v1_job(),
        json!({"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "svc", "namespace": "a"}}),
    ];
    let out = response(convert_review(review(RAY_V1ALPHA1, objects)));
    assert_eq!(
        out["response"]["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(out["response"]["result"]["status"], "Failure");
    assert_eq!(
        out["response"]["result"]["message"],
        "raygate cannot convert to ray.io/v1alpha1: objects[1] (RayService a/svc): kind: Unsupported value: \"RayService\": supported values: \"RayCluster\", \"RayJob\""
    );
}

#[test]
fn malformed_reviews_fail_clearly() {
    let out = response(convert_review(review("ray.io/v2", vec![full_v1_job()])));
    assert_eq!(out["response"]["result"]["status"], "Failure");
    assert_eq!(
        out["response"]["result"]["message"],
        "desiredAPIVersion: Unsupported value: \"ray.io/v2\": supported values: \"ray.io/v1\", \"ray.io/v1alpha1\""
    );
    let out = response(convert_review_json(b"{\"kind\": \"ConversionReview\"}"));
    assert_eq!(out["response"]["result"]["status"], "Failure");
    assert!(
        out["response"]["result"]["message"]
            .as_str()
            .unwrap()
            .starts_with("malformed ConversionReview")
    );
    let out = response(convert_review_json(b"\x00garbage"));
    assert_eq!(out["response"]["result"]["status"], "Failure");
}

#[test]
fn offline_conversion_passes_other_kinds_through() {
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}});
    let alpha = down(&full_v1_job());
    let out = convert_documents(vec![other.clone(), alpha], RayVersion::V1).unwrap();
    assert_eq!(out[0], other);
    assert_eq!(out[1], full_v1_job());
    let errors = convert_documents(
        vec![other, json!({"apiVersion": "ray.io/v1alpha1", "kind": "RayJob", "metadata": {"annotations": {"raygate.io/v1-fields": "1"}}})],
        RayVersion::V1,
    )
    .unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0, 2);
}

// ---------------------------------------------------------------------------------------------
// Property tests

/// Small arbitrary JSON, for the content of fields conversion must carry without looking.
fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z0-9 ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z$]{1,6}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Adds each of `fields` with probability 1/2 (or always, with `all`), with arbitrary content.
fn arb_fields(
    fields: &'static [&'static str],
    all: bool,
) -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((any::<bool>(), arb_json()), fields.len()).prop_map(move |values| {
        fields
            .iter()
            .zip(values)
            .filter(|(_, (present, _))| all || *present)
            .map(|(name, (_, value))| ((*name).to_owned(), value))
            .collect()
    })
}

/// Fields both versions share (and one neither knows), so pass-through is tested too.
fn arb_common(fields: &'static [&'static str]) -> impl Strategy<Value = Map<String, Value>> {
    arb_fields(fields, false)
}

fn merge(mut base: Map<String, Value>, extra: Map<String, Value>) -> Map<String, Value> {
    base.extend(extra);
    base
}

fn arb_string_map() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-z-]{1,6}", "[a-z0-9]{0,4}", 0..3)
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k, Value::String(v))).collect()))
}

fn arb_group(level_v1: bool, all: bool, head: bool) -> impl Strategy<Value = Map<String, Value>> {
    let v1_only: &'static [&'static str] = if head {
        HEAD_GROUP_SPEC.v1_only
    } else {
        WORKER_GROUP_SPEC.v1_only
    };
    (
        arb_fields(v1_only, all),
        arb_common(&[
            "replicas",
            "minReplicas",
            "maxReplicas",
            "serviceType",
            "futureField",
        ]),
        prop::option::of(arb_string_map()),
        any::<bool>(),
    )
        .prop_map(move |(v1_only, common, start_params, present)| {
            let mut group = merge(common, if level_v1 { v1_only } else { Map::new() });
            group.insert(
                "template".to_owned(),
                json!({"spec": {"containers": [{"name": "ray", "image": "rayproject/ray"}]}}),
            );
            // v1alpha1 requires rayStartParams; v1 may omit it.
            match start_params {
                Some(params) => {
                    group.insert("rayStartParams".to_owned(), params);
                }
                None if !level_v1 || (present && !all) => {
                    group.insert("rayStartParams".to_owned(), json!({}));
                }
                None => {}
            }
            group
        })
}

fn arb_cluster_spec(v1: bool, all: bool) -> impl Strategy<Value = Value> {
    (
        arb_fields(RAY_CLUSTER_SPEC.v1_only, all),
        arb_common(&[
            "rayVersion",
            "enableInTreeAutoscaling",
            "suspend",
            "futureField",
        ]),
        prop::option::of((
            arb_fields(AUTOSCALER_OPTIONS.v1_only, all),
            arb_common(&["image", "upscalingMode"]),
        )),
        arb_group(v1, all, true),
        prop::collection::vec(arb_group(v1, all, false), 0..4),
        any::<bool>(),
    )
        .prop_map(
            move |(v1_only, common, autoscaler, head, workers, has_workers)| {
                let mut spec = merge(common, if v1 { v1_only } else { Map::new() });
                if let Some((v1_only, common)) = autoscaler {
                    let options = merge(common, if v1 { v1_only } else { Map::new() });
                    spec.insert("autoscalerOptions".to_owned(), Value::Object(options));
                }
                spec.insert("headGroupSpec".to_owned(), Value::Object(head));
                if has_workers || all {
                    let workers: Vec<Value> = workers
                        .into_iter()
                        .enumerate()
                        .map(|(i, mut w)| {
                            w.insert("groupName".to_owned(), json!(format!("group-{i}")));
                            Value::Object(w)
                        })
                        .collect();
                    spec.insert("workerGroupSpecs".to_owned(), Value::Array(workers));
                }
                Value::Object(spec)
            },
        )
}

fn arb_cluster_status(v1: bool, all: bool) -> impl Strategy<Value = Value> {
    (
        arb_fields(RAY_CLUSTER_STATUS.v1_only, all),
        arb_common(&["state", "readyWorkerReplicas", "desiredCPU", "reason"]),
        prop::option::of((
            arb_fields(HEAD_INFO.v1_only, all),
            arb_common(&["podIP", "serviceIP"]),
        )),
    )
        .prop_map(move |(v1_only, common, head)| {
            let mut status = merge(common, if v1 { v1_only } else { Map::new() });
            if let Some((v1_only, common)) = head {
                let head = merge(common, if v1 { v1_only } else { Map::new() });
                status.insert("head".to_owned(), Value::Object(head));
            }
            Value::Object(status)
        })
}

fn arb_metadata() -> impl Strategy<Value = Value> {
    (
        "[a-z]{1,8}",
        "[a-z]{1,8}",
        prop::option::of(arb_string_map()),
        prop::option::of(
            prop::collection::btree_map("[a-z./]{1,10}", "[a-z0-9]{0,4}", 1..3)
                .prop_map(|m| json!(m)),
        ),
    )
        .prop_map(|(name, namespace, labels, annotations)| {
            let mut metadata =
                json!({"name": name, "namespace": namespace, "uid": "u-1", "generation": 3});
            if let Some(labels) = labels {
                metadata["labels"] = labels;
            }
            if let Some(annotations) = annotations {
                metadata["annotations"] = annotations;
            }
            metadata
        })
}

fn arb_job(v1: bool, all: bool) -> impl Strategy<Value = Value> {
    (
        arb_metadata(),
        arb_fields(RAY_JOB_SPEC.v1_only, all),
        arb_common(&[
            "shutdownAfterJobFinishes",
            "suspend",
            "runtimeEnvYAML",
            "futureField",
        ]),
        prop::option::of("[a-z .]{0,12}"),
        prop::option::of(arb_cluster_spec(v1, all)),
        prop::option::of((
            arb_fields(RAY_JOB_STATUS.v1_only, all),
            arb_common(&["jobStatus", "jobDeploymentStatus", "message"]),
            prop::option::of(arb_cluster_status(v1, all)),
        )),
    )
        .prop_map(
            move |(metadata, v1_only, common, entrypoint, cluster, status)| {
                let mut spec = merge(common, if v1 { v1_only } else { Map::new() });
                match entrypoint {
                    Some(entrypoint) => {
                        spec.insert("entrypoint".to_owned(), json!(entrypoint));
                    }
                    None if !v1 => {
                        spec.insert("entrypoint".to_owned(), json!(""));
                    }
                    None => {}
                }
                if let Some(cluster) = cluster {
                    spec.insert("rayClusterSpec".to_owned(), cluster);
                }
                let mut object = json!({
                    "apiVersion": if v1 { RAY_V1 } else { RAY_V1ALPHA1 },
                    "kind": "RayJob", "metadata": metadata, "spec": spec,
                });
                if let Some((v1_only, common, cluster_status)) = status {
                    let mut status = merge(common, if v1 { v1_only } else { Map::new() });
                    if let Some(cluster_status) = cluster_status {
                        status.insert("rayClusterStatus".to_owned(), cluster_status);
                    }
                    object["status"] = Value::Object(status);
                }
                object
            },
        )
}

fn arb_cluster(v1: bool, all: bool) -> impl Strategy<Value = Value> {
    (
        arb_metadata(),
        arb_cluster_spec(v1, all),
        prop::option::of(arb_cluster_status(v1, all)),
    )
        .prop_map(move |(metadata, spec, status)| {
            let mut object = json!({
                "apiVersion": if v1 { RAY_V1 } else { RAY_V1ALPHA1 },
                "kind": "RayCluster", "metadata": metadata, "spec": spec,
            });
            if let Some(status) = status {
                object["status"] = status;
            }
            object
        })
}

fn arb_v1(all: bool) -> impl Strategy<Value = Value> {
    prop_oneof![arb_job(true, all), arb_cluster(true, all)]
}

/// v1alpha1 objects: as a client writes them, and as raygate serves them (with the annotation).
fn arb_v1alpha1() -> impl Strategy<Value = Value> {
    prop_oneof![
        arb_job(false, false),
        arb_cluster(false, false),
        arb_v1(false).prop_map(|v1| down(&v1)),
    ]
}

/// What must not change in a conversion: kind, name, namespace, uid and metadata but
/// annotations.
fn assert_identity_kept(input: &Value, output: &Value) {
    assert_eq!(input["kind"], output["kind"]);
    let strip = |v: &Value| {
        let mut m = v["metadata"].clone();
        m.as_object_mut().unwrap().remove("annotations");
        m
    };
    assert_eq!(strip(input), strip(output));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn v1_to_v1alpha1_to_v1_is_the_identity(object in arb_v1(false)) {
        let alpha = down(&object);
        assert_identity_kept(&object, &alpha);
        let kind = object["kind"].as_str().unwrap();
        for path in v1_only_paths(kind) {
            prop_assert!(!has_path(&alpha, &path), "{} left in v1alpha1", path);
        }
        prop_assert_eq!(up(&alpha), object);
    }

    #[test]
    fn v1_objects_with_every_v1_only_field_survive_v1alpha1(object in arb_v1(true)) {
        let kind = object["kind"].as_str().unwrap();
        let alpha = down(&object);
        for path in v1_only_paths(kind) {
            prop_assert!(!has_path(&alpha, &path), "{} left in v1alpha1", path);
        }
        prop_assert_eq!(up(&alpha), object);
    }

    #[test]
    fn v1alpha1_to_v1_to_v1alpha1_is_the_identity(object in arb_v1alpha1()) {
        let v1 = up(&object);
        assert_identity_kept(&object, &v1);
        prop_assert_eq!(down(&v1), object);
    }

    #[test]
    fn reviews_never_panic_and_keep_count_and_order(objects in prop::collection::vec(prop_oneof![arb_v1(false), arb_v1alpha1(), arb_json()], 0..5), to_v1 in any::<bool>()) {
        let desired = if to_v1 { RAY_V1 } else { RAY_V1ALPHA1 };
        let out = response(convert_review(review(desired, objects.clone())));
        let result = &out["response"]["result"]["status"];
        if result == "Success" {
            let converted = out["response"]["convertedObjects"].as_array().unwrap();
            prop_assert_eq!(converted.len(), objects.len());
            for (input, output) in objects.iter().zip(converted) {
                prop_assert_eq!(&output["apiVersion"], desired);
                assert_identity_kept(input, output);
            }
        } else {
            prop_assert_eq!(result, "Failure");
            prop_assert!(!out["response"]["result"]["message"].as_str().unwrap().is_empty());
        }
    }
}
