//! The API server's own checks of a custom resource's `metadata`, before the CRD schema and any
//! webhook: reading it as an `ObjectMeta` (type errors, unknown fields) and apimachinery's
//! `ValidateObjectMetaAccessor` with `NameIsDNSSubdomain`, the name rule of custom resources, each
//! with the API server's message.

use serde_json::{Map, Value};

use crate::finding::{Compat, Finding};
use crate::validation::k8s::{
    Texts, is_dns1123_label, is_dns1123_subdomain, is_label_key, is_label_value,
};

/// The most bytes all annotations of an object may hold together (keys and values;
/// apimachinery's `TotalAnnotationSizeLimitB`).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The annotation client-side `kubectl apply` (its default) writes on every object it applies:
/// the object itself as JSON, which counts towards [`TOTAL_ANNOTATION_SIZE_LIMIT`].
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Rule names of the metadata findings.
pub mod rules {
    /// **Error.** A `metadata` field of the wrong JSON type: the API server cannot read it.
    pub const METADATA_TYPE: &str = "metadata-type";
    /// **Error.** Neither `name` nor `generateName`.
    pub const NAME_REQUIRED: &str = "metadata-name-required";
    /// **Error.** A `name` that is not a DNS-1123 subdomain.
    pub const NAME_INVALID: &str = "metadata-name-invalid";
    /// **Error.** A `generateName` that cannot start a DNS-1123 subdomain.
    pub const GENERATE_NAME_INVALID: &str = "metadata-generate-name-invalid";
    /// **Error.** A `namespace` that is not a DNS-1123 label.
    pub const NAMESPACE_INVALID: &str = "metadata-namespace-invalid";
    /// **Error.** A label key or value apimachinery refuses.
    pub const LABEL_INVALID: &str = "metadata-label-invalid";
    /// **Error.** An annotation key that is not a qualified name.
    pub const ANNOTATION_INVALID: &str = "metadata-annotation-invalid";
    /// **Error.** Annotations over [`super::TOTAL_ANNOTATION_SIZE_LIMIT`] bytes together.
    pub const ANNOTATIONS_TOO_LONG: &str = "metadata-annotations-too-long";
}

/// What the API server finds in an object's `metadata`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetadataCheck {
    /// Type errors first (the object cannot be read), then `ObjectMeta` validation, in the API
    /// server's order.
    pub findings: Vec<Finding>,
    /// Fields `ObjectMeta` does not have (`metadata.lables`), in document order.
    pub unknown_fields: Vec<String>,
}

impl MetadataCheck {
    /// Whether the object has neither a name nor a `generateName`.
    pub fn name_missing(&self) -> bool {
        self.findings.iter().any(|f| f.rule == rules::NAME_REQUIRED)
    }
}

/// The JSON fields of `ObjectMeta`.
const OBJECT_META_FIELDS: [&str; 15] = [
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];

/// The JSON fields of an `OwnerReference`.
const OWNER_REFERENCE_FIELDS: [&str; 6] = [
    "apiVersion",
    "blockOwnerDeletion",
    "controller",
    "kind",
    "name",
    "uid",
];

/// The JSON fields of a `ManagedFieldsEntry`.
const MANAGED_FIELDS_ENTRY_FIELDS: [&str; 7] = [
    "apiVersion",
    "fieldsType",
    "fieldsV1",
    "manager",
    "operation",
    "subresource",
    "time",
];

/// The `ObjectMeta` fields that hold one string, with their Go types.
const STRING_FIELDS: [(&str, &str); 6] = [
    ("generateName", "string"),
    ("name", "string"),
    ("namespace", "string"),
    ("resourceVersion", "string"),
    ("selfLink", "string"),
    ("uid", "types.UID"),
];

/// Makes each `null` label and annotation value of `object` the empty string, as the API server
/// stores it: it reads a custom resource's `metadata` into Go's `ObjectMeta`, whose
/// `map[string]string` members take `null` as their zero value (`team: null` is stored as
/// `team: ""`, and accepted).
pub fn empty_null_values(object: &mut Value) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    for key in ["labels", "annotations"] {
        let values = meta.get_mut(key).and_then(Value::as_object_mut);
        for value in values.into_iter().flat_map(|map| map.values_mut()) {
            if value.is_null() {
                *value = Value::String(String::new());
            }
        }
    }
}

/// Checks `object["metadata"]` as the API server does when a custom resource is created.
/// `object` is the whole object as written: the annotations' size counts the
/// [`LAST_APPLIED_ANNOTATION`] `kubectl apply` adds, a copy of the object.
pub fn check_metadata(object: &Value) -> MetadataCheck {
    let empty = Map::new();
    let meta = object
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut check = MetadataCheck::default();
    unknown_fields(meta, &mut check.unknown_fields);
    type_errors(meta, &mut check.findings);
    if !check.findings.is_empty() {
        // The object could not be read: nothing is validated.
        return check;
    }
    let text = |key: &str| meta.get(key).and_then(Value::as_str).unwrap_or_default();
    let findings = &mut check.findings;
    let (name, generate_name) = (text("name"), text("generateName"));
    if !generate_name.is_empty() {
        for message in is_dns1123_subdomain(&mask_trailing_dash(generate_name)) {
            findings.push(invalid(
                rules::GENERATE_NAME_INVALID,
                "metadata.generateName",
                generate_name,
                &message,
            ));
        }
    }
    if name.is_empty() && generate_name.is_empty() {
        findings.push(error(
            rules::NAME_REQUIRED,
            "metadata.name",
            "Required value: name or generateName is required".to_string(),
        ));
    } else if !name.is_empty() {
        for message in is_dns1123_subdomain(name) {
            findings.push(invalid(
                rules::NAME_INVALID,
                "metadata.name",
                name,
                &message,
            ));
        }
    }
    let namespace = text("namespace");
    if !namespace.is_empty() {
        for message in is_dns1123_label(namespace) {
            findings.push(invalid(
                rules::NAMESPACE_INVALID,
                "metadata.namespace",
                namespace,
                &message,
            ));
        }
    }
    let strings = |key: &str| {
        meta.get(key)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default()))
    };
    for (key, value) in strings("labels") {
        for message in is_label_key(key, Texts::ApiServer) {
            findings.push(invalid(
                rules::LABEL_INVALID,
                "metadata.labels",
                key,
                &message,
            ));
        }
        for message in is_label_value(value, Texts::ApiServer) {
            findings.push(invalid(
                rules::LABEL_INVALID,
                "metadata.labels",
                value,
                &message,
            ));
        }
    }
    let mut written = 0;
    for (key, value) in strings("annotations") {
        for message in is_label_key(&key.to_lowercase(), Texts::ApiServer) {
            findings.push(invalid(
                rules::ANNOTATION_INVALID,
                "metadata.annotations",
                key,
                &message,
            ));
        }
        if key != LAST_APPLIED_ANNOTATION {
            written += key.len() + value.len();
        }
    }
    let added = LAST_APPLIED_ANNOTATION.len() + last_applied_len(object);
    if written + added > TOTAL_ANNOTATION_SIZE_LIMIT {
        findings.push(error(
            rules::ANNOTATIONS_TOO_LONG,
            "metadata.annotations",
            format!(
                "Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes; the \
                 annotations hold {written} bytes and kubectl apply adds {added} for its \
                 {LAST_APPLIED_ANNOTATION} annotation (a copy of the object): move large values \
                 into a ConfigMap, or apply with kubectl apply --server-side, which adds none"
            ),
        ));
    }
    check
}

fn error(rule: &str, field: &str, message: String) -> Finding {
    Finding::error(rule, field, message, Compat::Kuberay)
}

/// `field.Invalid`: `Invalid value: "<value>": <message>`.
fn invalid(rule: &str, field: &str, value: &str, message: &str) -> Finding {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    error(rule, field, format!("Invalid value: {quoted}: {message}"))
}

/// apimachinery's `maskTrailingDash`: a `generateName` may end in `-`, the generated suffix
/// follows it.
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(_) if name.len() > 1 => {
            let mut masked: String = name.chars().take(name.chars().count() - 2).collect();
            masked.push('a');
            masked
        }
        _ => name.to_string(),
    }
}

/// Members `ObjectMeta` (and its owner references and managed-fields entries) do not have.
fn unknown_fields(meta: &Map<String, Value>, out: &mut Vec<String>) {
    for (key, value) in meta {
        if !OBJECT_META_FIELDS.contains(&key.as_str()) {
            out.push(format!("metadata.{key}"));
            continue;
        }
        let known: &[&str] = match key.as_str() {
            "ownerReferences" => &OWNER_REFERENCE_FIELDS,
            "managedFields" => &MANAGED_FIELDS_ENTRY_FIELDS,
            _ => continue,
        };
        let items = value.as_array().into_iter().flatten().enumerate();
        for (i, item) in items {
            for member in item.as_object().into_iter().flat_map(Map::keys) {
                if !known.contains(&member.as_str()) {
                    out.push(format!("metadata.{key}[{i}].{member}"));
                }
            }
        }
    }
}

/// What Go's `encoding/json` calls a JSON value in its `UnmarshalTypeError`.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// The fields kubectl cannot decode into an `ObjectMeta` before it sends the object: it refuses
/// the object itself, with Go's `encoding/json` message (`json: cannot unmarshal number into Go
/// struct field ObjectMeta.metadata.labels of type string`). A `null` is none: Go decodes it as
/// the zero value.
fn type_errors(meta: &Map<String, Value>, findings: &mut Vec<Finding>) {
    let mut push = |key: &str, value: &Value, go_type: &str| {
        findings.push(error(
            rules::METADATA_TYPE,
            &format!("metadata.{key}"),
            format!(
                "json: cannot unmarshal {} into Go struct field ObjectMeta.metadata.{key} of type \
                 {go_type}",
                json_kind(value)
            ),
        ));
    };
    let not_a_string = |v: &&Value| !v.is_null() && !v.is_string();
    for (key, go_type) in STRING_FIELDS {
        if let Some(value) = meta.get(key).filter(not_a_string) {
            push(key, value, go_type);
        }
    }
    for (key, container, is_container) in [
        (
            "labels",
            "map[string]string",
            Value::is_object as fn(&Value) -> bool,
        ),
        ("annotations", "map[string]string", Value::is_object),
        ("finalizers", "[]string", Value::is_array),
    ] {
        match meta.get(key) {
            None | Some(Value::Null) => {}
            Some(value) if is_container(value) => {
                let items: Vec<&Value> = match value {
                    Value::Object(map) => map.values().collect(),
                    Value::Array(items) => items.iter().collect(),
                    _ => Vec::new(),
                };
                for item in items.into_iter().filter(not_a_string) {
                    push(key, item, "string");
                }
            }
            Some(other) => push(key, other, container),
        }
    }
}

/// The length of the value `kubectl apply` gives [`LAST_APPLIED_ANNOTATION`]: the object as
/// Go's encoder writes it (compact; `<`, `>`, `&`, U+2028 and U+2029 escaped; integral floats
/// as integers), with its annotations but that one (an empty map when none), and a newline.
fn last_applied_len(object: &Value) -> usize {
    let mut copy = crate::input::as_the_api_server_reads(object);
    if let Some(Value::Object(meta)) = copy.get_mut("metadata") {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(annotations) = annotations {
            annotations.remove(LAST_APPLIED_ANNOTATION);
        }
    }
    let json = serde_json::to_string(&copy).unwrap_or_default();
    let html = json
        .bytes()
        .filter(|b| matches!(b, b'<' | b'>' | b'&'))
        .count();
    let separators = json.matches(['\u{2028}', '\u{2029}']).count();
    // `\u003c` is 6 bytes for 1; `\u2028` is 6 for 3.
    json.len() + 5 * html + 3 * separators + 1
}
