use serde_json::{Value, json};

use super::metadata::{LAST_APPLIED_ANNOTATION, TOTAL_ANNOTATION_SIZE_LIMIT, rules};
use super::*;

fn job(metadata: Value, spec: Value) -> Value {
    json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata, "spec": spec})
}

fn cluster_spec() -> Value {
    json!({"headGroupSpec": {"template": {"spec": {"containers": [
        {"name": "head", "image": "rayproject/ray:2.60.0",
         "resources": {"requests": {"cpu": 1, "memory": "2Gi"}}}]}}}})
}

fn valid_job() -> Value {
    job(
        json!({"name": "demo"}),
        json!({"entrypoint": "python x.py", "rayClusterSpec": cluster_spec()}),
    )
}

fn report(object: Value, fields: FieldValidation) -> ObjectReport {
    check_manifest(object, &ValidationContext::default(), fields)
        .expect("judged")
        .report
}

fn errors(object: Value) -> Vec<(String, String, String)> {
    report(object, FieldValidation::Strict)
        .findings
        .into_iter()
        .filter(Finding::is_error)
        .map(|f| (f.rule, f.field, f.message))
        .collect()
}

fn first_error(object: Value) -> (String, String, String) {
    errors(object).into_iter().next().expect("an error")
}

#[test]
fn a_valid_job_is_valid() {
    let report = report(valid_job(), FieldValidation::Strict);
    assert!(report.valid, "{:?}", report.findings);
}

#[test]
fn kubectl_validate_values_are_accepted_as_kubectl_accepts_them() {
    for (value, expected) in [
        ("strict", FieldValidation::Strict),
        ("true", FieldValidation::Strict),
        ("Strict", FieldValidation::Strict),
        ("warn", FieldValidation::Warn),
        ("ignore", FieldValidation::Ignore),
        ("false", FieldValidation::Ignore),
    ] {
        assert_eq!(value.parse::<FieldValidation>(), Ok(expected), "{value}");
    }
    assert_eq!(FieldValidation::default(), FieldValidation::Strict);
    let err = "yes".parse::<FieldValidation>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid - validate option \"yes\"; must be one of: strict (or true), warn, ignore (or false)"
    );
}

#[test]
fn unknown_fields_follow_the_validate_mode() {
    let mut object = valid_job();
    object["spec"]["entrypont"] = json!("x");
    object["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]
        ["request"] = json!({"cpu": 1});
    let strict = report(object.clone(), FieldValidation::Strict);
    assert!(!strict.valid);
    let unknown: Vec<_> = strict
        .findings
        .iter()
        .filter(|f| f.rule == UNKNOWN_FIELD)
        .map(|f| (f.severity, f.field.as_str(), f.message.as_str()))
        .collect();
    let nested = "spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].resources.request";
    // Sorted as the API server lists them, not in document order.
    assert_eq!(
        unknown,
        [
            (
                crate::finding::Severity::Error,
                "spec.entrypont",
                "strict decoding error: unknown field \"spec.entrypont\""
            ),
            (
                crate::finding::Severity::Error,
                nested,
                &*format!("strict decoding error: unknown field \"{nested}\"")
            ),
        ]
    );
    let warn = report(object.clone(), FieldValidation::Warn);
    assert!(warn.valid, "{:?}", warn.findings);
    assert!(warn.findings.iter().any(|f| f.rule == UNKNOWN_FIELD
        && !f.is_error()
        && f.message == "unknown field \"spec.entrypont\""));
    let ignore = report(object, FieldValidation::Ignore);
    assert!(ignore.valid);
    assert!(!ignore.findings.iter().any(|f| f.rule == UNKNOWN_FIELD));
}

#[test]
fn preserved_subtrees_are_not_strict_but_embedded_metadata_is() {
    let mut object = valid_job();
    // `rayStartParams` values and `runtimeEnvYAML` are free; an embedded template's metadata is
    // reduced to five fields in the CRD.
    object["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["metadata"] =
        json!({"labels": {"a": "b"}, "generateName": "x-"});
    let found = errors(object);
    assert_eq!(
        found
            .iter()
            .map(|(_, field, _)| field.as_str())
            .collect::<Vec<_>>(),
        ["spec.rayClusterSpec.headGroupSpec.template.metadata.generateName"]
    );
    let mut preserved = valid_job();
    preserved["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]
        ["limits"] = json!({"example.com/foo": 1});
    assert!(report(preserved, FieldValidation::Strict).valid);
}

#[test]
fn unknown_fields_written_null_are_accepted_as_kubectl_apply_accepts_them() {
    let mut object = valid_job();
    let head = &mut object["spec"]["rayClusterSpec"]["headGroupSpec"];
    head["template"]["metadata"] = json!({"creationTimestamp": null});
    head["template"]["spec"]["containers"][0]["foo"] = Value::Null;
    object["spec"]["foo"] = Value::Null;
    object["metadata"]["foo"] = Value::Null;
    assert!(errors(object.clone()).is_empty());
    // Not null: refused.
    object["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["metadata"] =
        json!({"creationTimestamp": "2020-01-01T00:00:00Z"});
    let fields: Vec<_> = errors(object).into_iter().map(|(_, f, _)| f).collect();
    assert_eq!(
        fields,
        ["spec.rayClusterSpec.headGroupSpec.template.metadata.creationTimestamp"]
    );
}

#[test]
fn root_metadata_fields_are_objectmeta_s() {
    let mut object = valid_job();
    object["metadata"]["lables"] = json!({"a": "b"});
    object["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u", "controler": true}]);
    let fields: Vec<_> = errors(object).into_iter().map(|(_, f, _)| f).collect();
    assert_eq!(
        fields,
        ["metadata.lables", "metadata.ownerReferences[0].controler"]
    );
}

#[test]
fn a_missing_name_is_the_api_server_s_error_alone() {
    let found = errors(job(json!({}), valid_job()["spec"].clone()));
    assert_eq!(
        found,
        [(
            rules::NAME_REQUIRED.to_string(),
            "metadata.name".to_string(),
            "Required value: name or generateName is required".to_string()
        )]
    );
    let generated = report(
        job(
            json!({"generateName": "demo-"}),
            valid_job()["spec"].clone(),
        ),
        FieldValidation::Strict,
    );
    assert!(generated.valid, "{:?}", generated.findings);
}

#[test]
fn a_null_label_or_annotation_value_is_the_empty_string_as_stored() {
    let meta = json!({"name": "demo", "labels": {"team": null}, "annotations": {"note": null}});
    let checked = report(
        job(meta, valid_job()["spec"].clone()),
        FieldValidation::Strict,
    );
    assert!(checked.valid, "{:?}", checked.findings);
    // An invalid key is still named, whatever its value.
    let (rule, field, _) = first_error(job(
        json!({"name": "demo", "labels": {"-team": null}}),
        valid_job()["spec"].clone(),
    ));
    assert_eq!(
        (rule.as_str(), field.as_str()),
        (rules::LABEL_INVALID, "metadata.labels")
    );
}

#[test]
fn names_are_dns_1123_subdomains_and_kuberay_s_rules_come_after() {
    let (rule, field, message) =
        first_error(job(json!({"name": "Demo_1"}), valid_job()["spec"].clone()));
    assert_eq!(
        (rule.as_str(), field.as_str()),
        (rules::NAME_INVALID, "metadata.name")
    );
    assert!(
        message.starts_with(
            "Invalid value: \"Demo_1\": a lowercase RFC 1123 subdomain must consist of"
        ),
        "{message}"
    );
    // A valid subdomain that is no DNS-1035 label: KubeRay's webhook rule.
    let (rule, _, _) = first_error(job(json!({"name": "demo.v2"}), valid_job()["spec"].clone()));
    assert_eq!(rule, "rayjob-name-not-dns1035");
    let long = "a".repeat(254);
    let found = errors(job(json!({"name": long}), valid_job()["spec"].clone()));
    assert_eq!(
        found[0].2,
        format!("Invalid value: \"{long}\": must be no more than 253 characters")
    );
}

#[test]
fn generate_names_may_end_in_a_dash() {
    let bad = errors(job(
        json!({"generateName": "Demo-"}),
        valid_job()["spec"].clone(),
    ));
    assert_eq!(bad[0].0, rules::GENERATE_NAME_INVALID);
    assert_eq!(bad[0].1, "metadata.generateName");
    let namespace = errors(job(
        json!({"name": "demo", "namespace": "ML"}),
        valid_job()["spec"].clone(),
    ));
    assert_eq!(namespace[0].0, rules::NAMESPACE_INVALID);
}

#[test]
fn labels_and_annotations_are_checked_with_apimachinery_s_texts() {
    let spec = valid_job()["spec"].clone();
    let found = errors(job(
        json!({"name": "demo", "labels": {"bad key": "x"}}),
        spec.clone(),
    ));
    assert_eq!(
        found[0],
        (
            rules::LABEL_INVALID.to_string(),
            "metadata.labels".to_string(),
            "Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string()
        )
    );
    let value = "v".repeat(64);
    let found = errors(job(
        json!({"name": "demo", "labels": {"a": value}}),
        spec.clone(),
    ));
    assert_eq!(
        found[0].2,
        format!("Invalid value: \"{value}\": must be no more than 63 bytes")
    );
    // Annotation keys are checked lowercased, and printed as written.
    assert!(
        report(
            job(
                json!({"name": "demo", "annotations": {"Example.COM/Key": "x"}}),
                spec.clone()
            ),
            FieldValidation::Strict
        )
        .valid
    );
    let found = errors(job(
        json!({"name": "demo", "annotations": {"a/b/c": "x"}}),
        spec,
    ));
    assert_eq!(found[0].0, rules::ANNOTATION_INVALID);
    assert!(
        found[0]
            .2
            .starts_with("Invalid value: \"a/b/c\": a valid label key must consist")
    );
}

#[test]
fn metadata_of_the_wrong_type_cannot_be_read() {
    let spec = valid_job()["spec"].clone();
    let found = errors(job(
        json!({"name": "demo", "labels": {"version": 2}}),
        spec.clone(),
    ));
    assert_eq!(
        found,
        [(
            rules::METADATA_TYPE.to_string(),
            "metadata.labels".to_string(),
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of \
             type string"
                .to_string()
        )]
    );
    let found = errors(job(
        json!({"name": 7, "uid": true, "annotations": ["a"], "finalizers": [{"a": 1}]}),
        spec,
    ));
    let unmarshal = |what: &str| format!("json: cannot unmarshal {what}");
    assert_eq!(
        found.iter().map(|f| f.2.as_str()).collect::<Vec<_>>(),
        [
            unmarshal("number into Go struct field ObjectMeta.metadata.name of type string"),
            unmarshal("bool into Go struct field ObjectMeta.metadata.uid of type types.UID"),
            unmarshal(
                "array into Go struct field ObjectMeta.metadata.annotations of type \
                 map[string]string"
            ),
            unmarshal("object into Go struct field ObjectMeta.metadata.finalizers of type string"),
        ]
    );
}

/// An object whose only annotation's value has `len` bytes.
fn annotated(len: usize) -> Value {
    let mut object = valid_job();
    object["metadata"]["annotations"] = json!({"a": "x".repeat(len)});
    object
}

#[test]
fn annotations_count_the_copy_kubectl_apply_adds() {
    // Written annotations within the limit, but not with kubectl apply's copy of the object.
    let (rule, field, message) = first_error(annotated(TOTAL_ANNOTATION_SIZE_LIMIT - 10_000));
    assert_eq!(
        (rule.as_str(), field.as_str()),
        (rules::ANNOTATIONS_TOO_LONG, "metadata.annotations")
    );
    assert!(
        message.starts_with("Too long: may not be more than 262144 bytes; "),
        "{message}"
    );
    assert!(message.contains(LAST_APPLIED_ANNOTATION), "{message}");
    assert!(report(annotated(100_000), FieldValidation::Strict).valid);
    // The exact boundary: the copy holds the annotation, so each byte counts twice.
    let base = {
        let object = annotated(0);
        let copy = serde_json::to_string(&{
            let mut c = object.clone();
            c["metadata"]["annotations"] = json!({"a": ""});
            c
        })
        .unwrap();
        "a".len() + LAST_APPLIED_ANNOTATION.len() + copy.len() + 1
    };
    let fits = (TOTAL_ANNOTATION_SIZE_LIMIT - base) / 2;
    assert!(report(annotated(fits), FieldValidation::Strict).valid);
    assert!(!report(annotated(fits + 1), FieldValidation::Strict).valid);
}

#[test]
fn an_existing_last_applied_annotation_is_replaced_not_counted() {
    let mut object = annotated(0);
    object["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = json!("x".repeat(200_000));
    assert!(report(object, FieldValidation::Strict).valid);
}

#[test]
fn unserved_ray_versions_and_kinds_are_kubectl_s_error() {
    let mut object = valid_job();
    object["apiVersion"] = json!("ray.io/v2");
    let checked = check_manifest(
        object,
        &ValidationContext::default(),
        FieldValidation::Strict,
    )
    .expect("judged");
    assert!(checked.typed.is_none() && checked.pod_group().is_none());
    let found = checked.report;
    assert!(!found.valid);
    assert_eq!(found.findings.len(), 1);
    assert_eq!(found.findings[0].rule, NO_KIND_MATCH);
    assert_eq!(
        found.findings[0].message,
        "no matches for kind \"RayJob\" in version \"ray.io/v2\": raygate's CRDs serve ray.io/v1 and ray.io/v1alpha1 RayJob and RayCluster"
    );
    assert_eq!(found.name.as_deref(), Some("demo"));
    let mut object = valid_job();
    object["kind"] = json!("RayJobs");
    assert!(
        first_error(object)
            .2
            .starts_with("no matches for kind \"RayJobs\" in version \"ray.io/v1\"")
    );
    let mut object = valid_job();
    object["apiVersion"] = json!("ray.io");
    assert_eq!(first_error(object).0, NO_KIND_MATCH);
}

#[test]
fn other_groups_and_kuberay_only_kinds_are_not_judged() {
    let ctx = ValidationContext::default();
    for object in [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        json!({"apiVersion": "ray.iox/v1", "kind": "RayJob"}),
        json!({"apiVersion": "ray.io/v1", "kind": "RayService"}),
        json!({"kind": "RayJob"}),
    ] {
        assert!(!judges(&object), "{object}");
        assert!(check_manifest(object, &ctx, FieldValidation::Strict).is_none());
    }
    assert!(judges(
        &json!({"apiVersion": "ray.io/v3", "kind": "RayService"})
    ));
}

#[test]
fn every_rule_is_catalogued() {
    let catalogue = include_str!("../../../docs/validation-rules.md");
    for rule in [
        NO_KIND_MATCH,
        UNKNOWN_FIELD,
        rules::METADATA_TYPE,
        rules::NAME_REQUIRED,
        rules::NAME_INVALID,
        rules::GENERATE_NAME_INVALID,
        rules::NAMESPACE_INVALID,
        rules::LABEL_INVALID,
        rules::ANNOTATION_INVALID,
        rules::ANNOTATIONS_TOO_LONG,
    ] {
        assert!(
            catalogue.contains(&format!("| `{rule}` |")),
            "{rule} is missing from docs/validation-rules.md"
        );
    }
}
