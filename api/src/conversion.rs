//! Lossless conversion of `ray.io` RayJobs and RayClusters between `v1alpha1` and `v1`.
//!
//! KubeRay serves `v1alpha1` next to `v1` without a conversion webhook, so a `v1alpha1` read drops
//! every `v1`-only field and a `v1alpha1` write erases them. raygate's conversion keeps them:
//!
//! * **`v1` → `v1alpha1`** moves every `v1`-only field (per the difference table of
//!   docs/upstream.md, "KubeRay: API versions and conversion") out of the object into one reserved
//!   annotation, [`keys::V1_FIELDS_ANNOTATION`], and writes the fields that `v1alpha1` requires but
//!   `v1` leaves optional (`spec.entrypoint`, `rayStartParams`) as empty placeholders, noting which
//!   ones it invented.
//! * **`v1alpha1` → `v1`** puts the kept fields back where they were (a field the object itself
//!   carries wins), drops the placeholders it invented if they are still empty, and removes the
//!   annotation.
//!
//! So `v1 → v1alpha1 → v1` is the identity, and a `v1alpha1` update (an old manifest, an old
//! client, `kubectl edit` through the old version) never erases a `v1`-only field. Worker-group
//! fields are kept by `groupName`, so reordering, adding or removing groups through `v1alpha1`
//! keeps each remaining group's fields; a group removed through `v1alpha1` takes its fields with
//! it, as does a removed parent (e.g. `autoscalerOptions`).
//!
//! The conversion works on the raw JSON and touches only the paths that differ between the
//! versions: every other field, known or not, passes through unchanged, and in `metadata` only
//! `annotations` ever changes (docs/upstream.md, "Kubernetes: ConversionReview").
//!
//! The annotation's value is a JSON object mirroring the object's structure: `v1`-only fields at
//! their place, worker groups as an object keyed by `groupName`, and `"$absent": [...]` listing
//! the placeholder fields of a level, e.g.
//! `{"spec":{"backoffLimit":2,"rayClusterSpec":{"workerGroupSpecs":{"gpu":{"numOfHosts":2}}}}}`.
//! A copy of the annotation found on a `v1` object is stale by definition (it describes fields
//! the object carries itself) and is replaced.
//!
//! What the annotation cannot do: a `v1alpha1` write whose body lacks it (a `PUT` of an old
//! manifest, e.g. `kubectl replace -f old.yaml`) replaces the whole object, and the conversion
//! of that body cannot know the stored `v1`-only fields. Reads, `kubectl edit`, `get | replace`,
//! patches and `kubectl apply` all start from the served object and keep them.

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde_json::{Map, Value};

use crate::keys;

/// API version `ray.io/v1` (stored).
pub const RAY_V1: &str = "ray.io/v1";
/// API version `ray.io/v1alpha1` (served, deprecated).
pub const RAY_V1ALPHA1: &str = "ray.io/v1alpha1";

/// Key of a level of the annotation that lists the placeholders conversion invented there.
const ABSENT_KEY: &str = "$absent";

/// A served version of the `ray.io` group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RayVersion {
    /// `ray.io/v1`, the storage version.
    V1,
    /// `ray.io/v1alpha1`, KubeRay's frozen version.
    V1alpha1,
}

impl RayVersion {
    /// The `group/version` string, e.g. `ray.io/v1`.
    pub fn api_version(self) -> &'static str {
        match self {
            Self::V1 => RAY_V1,
            Self::V1alpha1 => RAY_V1ALPHA1,
        }
    }

    /// The version named by an `apiVersion` string, if it is one of `ray.io`'s.
    pub fn from_api_version(api_version: &str) -> Option<Self> {
        match api_version {
            RAY_V1 => Some(Self::V1),
            RAY_V1ALPHA1 => Some(Self::V1alpha1),
            _ => None,
        }
    }
}

/// Why an object cannot be converted. Messages name the field, kubectl-style.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// The object is not a JSON object.
    #[error("the object must be a JSON object, found {found}")]
    NotAnObject {
        /// JSON type of what was found instead.
        found: &'static str,
    },
    /// `apiVersion` (of an object, or the desired one) is not a served `ray.io` version.
    #[error(
        "{field}: Unsupported value: {value:?}: supported values: \"ray.io/v1\", \"ray.io/v1alpha1\""
    )]
    UnsupportedVersion {
        /// `apiVersion` or `desiredAPIVersion`.
        field: &'static str,
        /// The value found.
        value: String,
    },
    /// `kind` is not one of the kinds raygate converts.
    #[error("kind: Unsupported value: {value:?}: supported values: \"RayCluster\", \"RayJob\"")]
    UnsupportedKind {
        /// The value found.
        value: String,
    },
    /// A field conversion depends on has a value it cannot use.
    #[error("{path}: Invalid value: {reason}")]
    Invalid {
        /// Field path, e.g. `spec.workerGroupSpecs[1].groupName`.
        path: String,
        /// What is wrong and what to do.
        reason: String,
    },
}

/// Placeholder written for a field `v1alpha1` requires and `v1` leaves optional.
#[derive(Clone, Copy)]
enum Placeholder {
    EmptyString,
    EmptyObject,
}

impl Placeholder {
    fn value(self) -> Value {
        match self {
            Self::EmptyString => Value::String(String::new()),
            Self::EmptyObject => Value::Object(Map::new()),
        }
    }
}

/// A nested structure that contains differing fields.
#[derive(Clone, Copy)]
enum Child {
    /// An object field.
    Object(&'static Level),
    /// A list of objects identified by the string field `key` (worker groups by `groupName`).
    Keyed {
        key: &'static str,
        level: &'static Level,
    },
}

/// What differs between the versions at one level of an object.
struct Level {
    /// Fields only `v1` has.
    v1_only: &'static [&'static str],
    /// Fields `v1alpha1` requires and `v1` leaves optional.
    required_in_v1alpha1: &'static [(&'static str, Placeholder)],
    /// Nested structures with differences of their own.
    children: &'static [(&'static str, Child)],
}

const AUTOSCALER_OPTIONS: Level = Level {
    v1_only: &["version", "command", "args"],
    required_in_v1alpha1: &[],
    children: &[],
};

const HEAD_GROUP_SPEC: Level = Level {
    v1_only: &["ingressOptions", "resources", "labels"],
    required_in_v1alpha1: &[("rayStartParams", Placeholder::EmptyObject)],
    children: &[],
};

const WORKER_GROUP_SPEC: Level = Level {
    v1_only: &[
        "suspend",
        "idleTimeoutSeconds",
        "priority",
        "resources",
        "labels",
        "numOfHosts",
    ],
    required_in_v1alpha1: &[("rayStartParams", Placeholder::EmptyObject)],
    children: &[],
};

const RAY_CLUSTER_SPEC: Level = Level {
    v1_only: &[
        "upgradeStrategy",
        "authOptions",
        "managedBy",
        "gcsFaultToleranceOptions",
        "historyServerOptions",
        "networkPolicy",
        "tlsOptions",
    ],
    required_in_v1alpha1: &[],
    children: &[
        ("autoscalerOptions", Child::Object(&AUTOSCALER_OPTIONS)),
        ("headGroupSpec", Child::Object(&HEAD_GROUP_SPEC)),
        (
            "workerGroupSpecs",
            Child::Keyed {
                key: "groupName",
                level: &WORKER_GROUP_SPEC,
            },
        ),
    ],
};

const HEAD_INFO: Level = Level {
    v1_only: &["podName", "serviceName"],
    required_in_v1alpha1: &[],
    children: &[],
};

const RAY_CLUSTER_STATUS: Level = Level {
    v1_only: &["conditions", "stateTransitionTimes"],
    required_in_v1alpha1: &[],
    children: &[("head", Child::Object(&HEAD_INFO))],
};

const RAY_JOB_SPEC: Level = Level {
    v1_only: &[
        "activeDeadlineSeconds",
        "submissionMode",
        "backoffLimit",
        "submitterConfig",
        "managedBy",
        "deletionStrategy",
        "preRunningDeadlineSeconds",
    ],
    required_in_v1alpha1: &[("entrypoint", Placeholder::EmptyString)],
    children: &[("rayClusterSpec", Child::Object(&RAY_CLUSTER_SPEC))],
};

const RAY_JOB_STATUS: Level = Level {
    v1_only: &[
        "reason",
        "succeeded",
        "failed",
        "rayJobInfo",
        "jobStatusCheckFailureStartTime",
        "conditions",
    ],
    required_in_v1alpha1: &[],
    children: &[("rayClusterStatus", Child::Object(&RAY_CLUSTER_STATUS))],
};

const RAY_JOB: Level = Level {
    v1_only: &[],
    required_in_v1alpha1: &[],
    children: &[
        ("spec", Child::Object(&RAY_JOB_SPEC)),
        ("status", Child::Object(&RAY_JOB_STATUS)),
    ],
};

const RAY_CLUSTER: Level = Level {
    v1_only: &[],
    required_in_v1alpha1: &[],
    children: &[
        ("spec", Child::Object(&RAY_CLUSTER_SPEC)),
        ("status", Child::Object(&RAY_CLUSTER_STATUS)),
    ],
};

/// Every `v1`-only field path of `kind` (`RayJob` or `RayCluster`), with `[*]` for list items,
/// e.g. `spec.rayClusterSpec.workerGroupSpecs[*].numOfHosts`. For tests and documentation.
pub fn v1_only_paths(kind: &str) -> Vec<String> {
    let mut paths = Vec::new();
    if let Some(level) = level_of(kind) {
        collect_paths(level, "", &mut paths);
    }
    paths.sort();
    paths
}

/// Every path of `kind` that `v1alpha1` requires and `v1` leaves optional (same notation as
/// [`v1_only_paths`]).
pub fn required_only_in_v1alpha1_paths(kind: &str) -> Vec<String> {
    let mut paths = Vec::new();
    if let Some(level) = level_of(kind) {
        collect_required(level, "", &mut paths);
    }
    paths.sort();
    paths
}

fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_owned()
    } else {
        format!("{prefix}.{field}")
    }
}

fn child_prefix(prefix: &str, name: &str, child: Child) -> (String, &'static Level) {
    match child {
        Child::Object(level) => (join(prefix, name), level),
        Child::Keyed { level, .. } => (format!("{}[*]", join(prefix, name)), level),
    }
}

fn collect_paths(level: &Level, prefix: &str, out: &mut Vec<String>) {
    out.extend(level.v1_only.iter().map(|f| join(prefix, f)));
    for (name, child) in level.children {
        let (prefix, level) = child_prefix(prefix, name, *child);
        collect_paths(level, &prefix, out);
    }
}

fn collect_required(level: &Level, prefix: &str, out: &mut Vec<String>) {
    out.extend(
        level
            .required_in_v1alpha1
            .iter()
            .map(|(f, _)| join(prefix, f)),
    );
    for (name, child) in level.children {
        let (prefix, level) = child_prefix(prefix, name, *child);
        collect_required(level, &prefix, out);
    }
}

fn level_of(kind: &str) -> Option<&'static Level> {
    match kind {
        "RayJob" => Some(&RAY_JOB),
        "RayCluster" => Some(&RAY_CLUSTER),
        _ => None,
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Converts one `ray.io` RayJob or RayCluster to `desired`.
///
/// Only `apiVersion`, the fields that differ between the versions and
/// `metadata.annotations[raygate.io/v1-fields]` change; an object already in `desired` is
/// returned as it is.
pub fn convert(object: Value, desired: RayVersion) -> Result<Value, ConversionError> {
    let Value::Object(mut object) = object else {
        return Err(ConversionError::NotAnObject {
            found: json_type(&object),
        });
    };
    let api_version = object.get("apiVersion").and_then(Value::as_str);
    let Some(source) = api_version.and_then(RayVersion::from_api_version) else {
        return Err(ConversionError::UnsupportedVersion {
            field: "apiVersion",
            value: api_version.unwrap_or_default().to_owned(),
        });
    };
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(level) = level_of(kind) else {
        return Err(ConversionError::UnsupportedKind {
            value: kind.to_owned(),
        });
    };
    match (source, desired) {
        (RayVersion::V1, RayVersion::V1alpha1) => to_v1alpha1(&mut object, level)?,
        (RayVersion::V1alpha1, RayVersion::V1) => to_v1(&mut object, level)?,
        (RayVersion::V1, RayVersion::V1) | (RayVersion::V1alpha1, RayVersion::V1alpha1) => {}
    }
    object.insert(
        "apiVersion".to_owned(),
        Value::String(desired.api_version().to_owned()),
    );
    Ok(Value::Object(object))
}

fn to_v1alpha1(object: &mut Map<String, Value>, level: &Level) -> Result<(), ConversionError> {
    let kept = keep(object, level, "")?;
    if let Some(Value::Object(metadata)) = object.get_mut("metadata")
        && let Some(Value::Object(annotations)) = metadata.get_mut("annotations")
        && annotations.remove(keys::V1_FIELDS_ANNOTATION).is_some()
        && annotations.is_empty()
    {
        metadata.remove("annotations");
    }
    let Some(kept) = kept else {
        return Ok(());
    };
    // A null `metadata` or `annotations` (Helm renders an `annotations:` block whose values are
    // empty so) means to the API server what an absent one does.
    let metadata = empty_object_for_null(object.entry("metadata"));
    let Value::Object(metadata) = metadata else {
        return Err(ConversionError::Invalid {
            path: "metadata".to_owned(),
            reason: format!("must be an object, found {}", json_type(metadata)),
        });
    };
    let annotations = empty_object_for_null(metadata.entry("annotations"));
    let Value::Object(annotations) = annotations else {
        return Err(ConversionError::Invalid {
            path: "metadata.annotations".to_owned(),
            reason: format!("must be an object, found {}", json_type(annotations)),
        });
    };
    annotations.insert(
        keys::V1_FIELDS_ANNOTATION.to_owned(),
        Value::String(Value::Object(kept).to_string()),
    );
    Ok(())
}

/// The entry's value, an empty object when it is absent or null.
fn empty_object_for_null(entry: serde_json::map::Entry<'_>) -> &mut Value {
    let value = entry.or_insert(Value::Null);
    if value.is_null() {
        *value = Value::Object(Map::new());
    }
    value
}

/// Moves the `v1`-only fields of `object` into the returned tree and fills in the placeholders
/// `v1alpha1` requires; `None` when nothing had to be kept.
fn keep(
    object: &mut Map<String, Value>,
    level: &Level,
    path: &str,
) -> Result<Option<Map<String, Value>>, ConversionError> {
    let mut kept = Map::new();
    for field in level.v1_only {
        if let Some(value) = object.remove(*field) {
            kept.insert((*field).to_owned(), value);
        }
    }
    let mut absent = Vec::new();
    for (field, placeholder) in level.required_in_v1alpha1 {
        if !object.contains_key(*field) {
            object.insert((*field).to_owned(), placeholder.value());
            absent.push(Value::String((*field).to_owned()));
        }
    }
    if !absent.is_empty() {
        kept.insert(ABSENT_KEY.to_owned(), Value::Array(absent));
    }
    for (name, child) in level.children {
        let child_path = join(path, name);
        let kept_child = match (*child, object.get_mut(*name)) {
            (Child::Object(level), Some(Value::Object(inner))) => keep(inner, level, &child_path)?,
            (Child::Keyed { key, level }, Some(Value::Array(items))) => {
                keep_keyed(items, key, level, &child_path)?
            }
            _ => None,
        };
        if let Some(kept_child) = kept_child {
            kept.insert((*name).to_owned(), Value::Object(kept_child));
        }
    }
    Ok((!kept.is_empty()).then_some(kept))
}

fn keep_keyed(
    items: &mut [Value],
    key: &str,
    level: &Level,
    path: &str,
) -> Result<Option<Map<String, Value>>, ConversionError> {
    let mut occurrences: std::collections::HashMap<String, usize> = Default::default();
    for name in items
        .iter()
        .filter_map(|item| item.get(key).and_then(Value::as_str))
    {
        *occurrences.entry(name.to_owned()).or_default() += 1;
    }
    let mut kept = Map::new();
    for (index, item) in items.iter_mut().enumerate() {
        let Value::Object(item) = item else {
            continue;
        };
        let item_path = format!("{path}[{index}]");
        let Some(kept_item) = keep(item, level, &item_path)? else {
            continue;
        };
        let Some(name) = item.get(key).and_then(Value::as_str) else {
            return Err(ConversionError::Invalid {
                path: format!("{item_path}.{key}"),
                reason: format!(
                    "Required value: ray.io/v1alpha1 can keep this item's v1-only fields ({}) only by its {key}",
                    field_list(&kept_item)
                ),
            });
        };
        if occurrences.get(name).copied().unwrap_or_default() > 1 {
            return Err(ConversionError::Invalid {
                path: format!("{item_path}.{key}"),
                reason: format!(
                    "Duplicate value: {name:?}: ray.io/v1alpha1 can keep v1-only fields ({}) only of uniquely named items; rename it",
                    field_list(&kept_item)
                ),
            });
        }
        kept.insert(name.to_owned(), Value::Object(kept_item));
    }
    Ok((!kept.is_empty()).then_some(kept))
}

/// `idleTimeoutSeconds, numOfHosts, no rayStartParams`: what an item's kept tree holds.
fn field_list(kept: &Map<String, Value>) -> String {
    let mut fields: Vec<String> = kept.keys().filter(|k| *k != ABSENT_KEY).cloned().collect();
    if let Some(Value::Array(absent)) = kept.get(ABSENT_KEY) {
        fields.extend(
            absent
                .iter()
                .filter_map(Value::as_str)
                .map(|f| format!("no {f}")),
        );
    }
    fields.join(", ")
}

fn to_v1(object: &mut Map<String, Value>, level: &Level) -> Result<(), ConversionError> {
    let Some(Value::Object(metadata)) = object.get_mut("metadata") else {
        return Ok(());
    };
    let Some(Value::Object(annotations)) = metadata.get_mut("annotations") else {
        return Ok(());
    };
    let Some(text) = annotations.remove(keys::V1_FIELDS_ANNOTATION) else {
        return Ok(());
    };
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
    let path = format!("metadata.annotations[{}]", keys::V1_FIELDS_ANNOTATION);
    let kept = match &text {
        Value::String(text) => serde_json::from_str::<Value>(text).map_err(|e| {
            ConversionError::Invalid {
                path: path.clone(),
                reason: format!(
                    "not the JSON raygate writes ({e}); remove the annotation to drop the kept v1-only fields"
                ),
            }
        })?,
        other => other.clone(),
    };
    let Value::Object(kept) = kept else {
        return Err(ConversionError::Invalid {
            path,
            reason: format!(
                "must be a JSON object, found {}; remove the annotation to drop the kept v1-only fields",
                json_type(&kept)
            ),
        });
    };
    restore(object, kept, level, &path)
}

/// Puts the kept fields back into `object` (fields the object carries win) and removes the
/// placeholders that are still empty.
fn restore(
    object: &mut Map<String, Value>,
    mut kept: Map<String, Value>,
    level: &Level,
    path: &str,
) -> Result<(), ConversionError> {
    for field in level.v1_only {
        if let Some(value) = kept.remove(*field)
            && !object.contains_key(*field)
        {
            object.insert((*field).to_owned(), value);
        }
    }
    if let Some(absent) = kept.remove(ABSENT_KEY) {
        let Value::Array(absent) = absent else {
            return Err(ConversionError::Invalid {
                path: format!("{path}.{ABSENT_KEY}"),
                reason: format!("must be a list, found {}", json_type(&absent)),
            });
        };
        for (field, placeholder) in level.required_in_v1alpha1 {
            let listed = absent.iter().any(|f| f.as_str() == Some(*field));
            if listed && object.get(*field) == Some(&placeholder.value()) {
                object.remove(*field);
            }
        }
    }
    for (name, child) in level.children {
        let Some(kept_child) = kept.remove(*name) else {
            continue;
        };
        let child_path = format!("{path}.{name}");
        let Value::Object(kept_child) = kept_child else {
            return Err(ConversionError::Invalid {
                path: child_path,
                reason: format!("must be an object, found {}", json_type(&kept_child)),
            });
        };
        match (*child, object.get_mut(*name)) {
            (Child::Object(level), Some(Value::Object(inner))) => {
                restore(inner, kept_child, level, &child_path)?;
            }
            (Child::Keyed { key, level }, Some(Value::Array(items))) => {
                restore_keyed(items, kept_child, key, level, &child_path)?;
            }
            // The parent was removed through v1alpha1: its v1-only fields go with it.
            _ => {}
        }
    }
    Ok(())
}

fn restore_keyed(
    items: &mut [Value],
    mut kept: Map<String, Value>,
    key: &str,
    level: &Level,
    path: &str,
) -> Result<(), ConversionError> {
    for item in items.iter_mut() {
        let Value::Object(item) = item else {
            continue;
        };
        let Some(kept_item) = item
            .get(key)
            .and_then(Value::as_str)
            .and_then(|name| kept.remove(name))
        else {
            continue;
        };
        let item_path = format!("{path}.{}", item[key].as_str().unwrap_or_default());
        let Value::Object(kept_item) = kept_item else {
            return Err(ConversionError::Invalid {
                path: item_path,
                reason: format!("must be an object, found {}", json_type(&kept_item)),
            });
        };
        restore(item, kept_item, level, &item_path)?;
    }
    Ok(())
}

/// Answers a ConversionReview (`apiextensions.k8s.io/v1`): every object converted to the
/// desired version, in order, with `result.status: Success`; or, when any object cannot be
/// converted, `result.status: Failure` with a message naming each such object and why (the API
/// server then fails the request with that message). Never panics.
pub fn convert_review(review: ConversionReview) -> ConversionReview {
    let mut request = match ConversionRequest::from_review(review) {
        Ok(request) => request,
        Err(e) => {
            return ConversionResponse::invalid(
                Status::failure(&format!("malformed ConversionReview: {e}"), "BadRequest")
                    .with_code(400),
            )
            .into_review();
        }
    };
    let objects = std::mem::take(&mut request.objects);
    let desired_api_version = request.desired_api_version.clone();
    let response = ConversionResponse::for_request(request);
    let Some(desired) = RayVersion::from_api_version(&desired_api_version) else {
        let e = ConversionError::UnsupportedVersion {
            field: "desiredAPIVersion",
            value: desired_api_version,
        };
        return response
            .failure(Status::failure(&e.to_string(), "BadRequest").with_code(400))
            .into_review();
    };
    let mut converted = Vec::with_capacity(objects.len());
    let mut failures = Vec::new();
    for (index, object) in objects.into_iter().enumerate() {
        let who = describe(index, &object);
        match convert(object, desired) {
            Ok(object) => converted.push(object),
            Err(e) => failures.push(format!("{who}: {e}")),
        }
    }
    if failures.is_empty() {
        response.success(converted).into_review()
    } else {
        let message = format!(
            "raygate cannot convert to {}: {}",
            desired.api_version(),
            failures.join("; ")
        );
        response
            .failure(Status::failure(&message, "Invalid").with_code(422))
            .into_review()
    }
}

/// Answers the JSON body of a ConversionReview request with a ConversionReview response; a body
/// that is not a ConversionReview gets a `Failure` result saying why.
pub fn convert_review_json(body: &[u8]) -> ConversionReview {
    match serde_json::from_slice::<ConversionReview>(body) {
        Ok(review) => convert_review(review),
        Err(e) => ConversionResponse::invalid(
            Status::failure(&format!("malformed ConversionReview: {e}"), "BadRequest")
                .with_code(400),
        )
        .into_review(),
    }
}

/// `objects[2] (RayJob team-a/demo)`, for failure messages.
fn describe(index: usize, object: &Value) -> String {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("object");
    let metadata = object.get("metadata");
    let field = |name: &str| {
        metadata
            .and_then(|m| m.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let (namespace, name) = (field("namespace"), field("name"));
    let key = if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    };
    format!("objects[{index}] ({kind} {key})")
}

/// Converts the `ray.io` RayJobs and RayClusters among `documents` to `desired` and passes every
/// other object through untouched (offline migration of manifests). Errors name the document
/// (1-based) and the field.
pub fn convert_documents(
    documents: Vec<Value>,
    desired: RayVersion,
) -> Result<Vec<Value>, Vec<(usize, ConversionError)>> {
    let mut converted = Vec::with_capacity(documents.len());
    let mut errors = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        if !is_convertible(&document) {
            converted.push(document);
            continue;
        }
        match convert(document, desired) {
            Ok(document) => converted.push(document),
            Err(e) => errors.push((index + 1, e)),
        }
    }
    if errors.is_empty() {
        Ok(converted)
    } else {
        Err(errors)
    }
}

/// Whether `object` is a RayJob or RayCluster of a served `ray.io` version.
pub fn is_convertible(object: &Value) -> bool {
    let api_version = object.get("apiVersion").and_then(Value::as_str);
    let kind = object.get("kind").and_then(Value::as_str);
    api_version.and_then(RayVersion::from_api_version).is_some()
        && kind.and_then(level_of).is_some()
}

#[cfg(test)]
mod tests;
