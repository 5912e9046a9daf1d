//! Generation of the `ray.io` CRDs from the typed API, in the style of KubeRay's generated CRDs.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, JSON, JSONSchemaProps,
    JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use std::sync::LazyLock;

use kube::CustomResourceExt;
use serde_json::Value;

use super::pattern::{CONDITION_REASON_PATTERN, CONDITION_TYPE_PATTERN, QUANTITY_PATTERN};
use crate::keys;
use crate::queue_policy::QueuePolicy;
use crate::ray::{v1, v1alpha1};

/// How k8s-openapi describes `resource.Quantity`; used to recognise quantities before the
/// descriptions are stripped.
const QUANTITY_DESCRIPTION: &str = "Quantity is a fixed-point representation of a number.";

/// Int-or-string fields that are quantities although their own description hides the
/// `Quantity` one (field docs replace the type's): core `emptyDir.sizeLimit`,
/// `resourceFieldRef.divisor`, and raygate's own quantity fields.
const QUANTITY_FIELDS: &[&str] = &[
    "desiredCPU",
    "desiredGPU",
    "desiredMemory",
    "desiredTPU",
    "divisor",
    "size",
    "sizeLimit",
];

/// How k8s-openapi describes the `name` of a `LocalObjectReference` (and of the selectors that
/// embed one), which Kubernetes declares `+default=""`.
const LOCAL_OBJECT_REFERENCE_NAME: &str = "Name of the referent. This field is effectively required, but due to backwards compatibility is allowed to be empty.";

/// Where the only nullable field of KubeRay's schemas lives, per kind.
fn nullable_paths(kind: &str) -> &'static [&'static [&'static str]] {
    match kind {
        "RayCluster" => &[&["status", "lastUpdateTime"]],
        "RayJob" => &[&["status", "rayClusterStatus", "lastUpdateTime"]],
        _ => &[],
    }
}

/// Where the worker groups' schema lives, per kind.
fn worker_group_path(kind: &str) -> &'static [&'static str] {
    match kind {
        "RayCluster" => &["spec", "workerGroupSpecs"],
        "RayJob" => &["spec", "rayClusterSpec", "workerGroupSpecs"],
        _ => &[],
    }
}

/// Both `ray.io` CRDs (RayCluster, then RayJob), each serving `v1` (storage) and `v1alpha1`
/// (served, deprecated), conversion through raygate's webhook ([`webhook_conversion`]), post-processed to KubeRay's style.
///
/// These are the committed files of `manifests/chart/files/crds/`, embedded in the binary and parsed once
/// per process: generating them from the types takes seconds (kube-derive's structural-schema
/// rewrite round-trips the whole schema through serde), far too slow for a CLI start or a
/// webhook cold start. The `crds` integration test keeps the files equal to
/// [`generate_crd_files`].
pub fn ray_crds() -> Vec<CustomResourceDefinition> {
    CRDS.clone()
}

/// The committed CRD files, embedded: `(file name, YAML)`, sorted by file name.
pub(crate) const COMMITTED: [(&str, &str); 3] = [
    (
        "ray.io_rayclusters.yaml",
        include_str!("../../../manifests/chart/files/crds/ray.io_rayclusters.yaml"),
    ),
    (
        "ray.io_rayjobs.yaml",
        include_str!("../../../manifests/chart/files/crds/ray.io_rayjobs.yaml"),
    ),
    (
        QUEUE_POLICY_FILE,
        include_str!("../../../manifests/chart/files/crds/raygate.io_queuepolicies.yaml"),
    ),
];

/// File of raygate's own QueuePolicy CRD in `manifests/chart/files/crds/`.
pub(crate) const QUEUE_POLICY_FILE: &str = "raygate.io_queuepolicies.yaml";

/// The embedded CRDs, parsed once.
pub(crate) static CRDS: LazyLock<Vec<CustomResourceDefinition>> = LazyLock::new(|| {
    COMMITTED
        .iter()
        .filter(|(name, _)| *name != QUEUE_POLICY_FILE)
        .map(|(name, yaml)| {
            // serde_yaml_ng straight into the typed CRD: paid by every CLI run and webhook
            // start, and 36% fewer instructions for the whole schema load (parse + compile)
            // than serde-saphyr through a `Value`.
            serde_yaml_ng::from_str::<CustomResourceDefinition>(yaml)
                .map_err(|e| e.to_string())
                .unwrap_or_else(|e| {
                    // A build-time artefact that does not parse is a packaging bug, not input.
                    panic!("embedded manifests/chart/files/crds/{name} is not a CRD: {e}")
                })
        })
        .collect()
});

/// The CRDs generated from the types (slow: seconds). Only for writing `manifests/chart/files/crds/` and
/// for checking that the committed files are current.
fn generated_crds() -> Vec<CustomResourceDefinition> {
    vec![
        assemble(v1::RayCluster::crd(), v1alpha1::RayCluster::crd()),
        assemble(v1::RayJob::crd(), v1alpha1::RayJob::crd()),
        queue_policy_crd(),
    ]
}

/// raygate's own QueuePolicy CRD, as kube-derive generates it (descriptions kept: they are
/// raygate's documentation for `kubectl explain`), with the Quantity type's long description
/// replaced by the quantity pattern, and a root description.
pub(crate) fn queue_policy_crd() -> CustomResourceDefinition {
    let mut crd = QueuePolicy::crd();
    for version in &mut crd.spec.versions {
        let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        root.description = Some(
            "QueuePolicy: which Volcano queues, priority classes and gang sizes the Ray objects of the selected namespaces may use (raygate)."
                .to_owned(),
        );
        if let Some(Some(JSONSchemaPropsOrBool::Schema(quantity))) =
            descend(root, &["spec", "maxMinResources"]).map(|n| n.additional_properties.as_mut())
        {
            quantity.description = None;
            quantity.pattern = Some(QUANTITY_PATTERN.to_owned());
        }
        let allocatable = descend(root, &["spec", "nodeTemplates"])
            .and_then(|n| n.items.as_mut())
            .and_then(|items| match items {
                JSONSchemaPropsOrArray::Schema(item) => item.properties.as_mut(),
                JSONSchemaPropsOrArray::Schemas(_) => None,
            })
            .and_then(|properties| properties.get_mut("allocatable"))
            .and_then(|n| n.additional_properties.as_mut());
        if let Some(JSONSchemaPropsOrBool::Schema(quantity)) = allocatable {
            quantity.description = None;
            quantity.pattern = Some(QUANTITY_PATTERN.to_owned());
        }
    }
    crd
}

/// Merges the single-version CRDs kube-derive generates into one two-version CRD.
fn assemble(
    mut storage: CustomResourceDefinition,
    served: CustomResourceDefinition,
) -> CustomResourceDefinition {
    let kind = storage.spec.names.kind.clone();
    storage.spec.names.list_kind = Some(format!("{kind}List"));
    let versions: Vec<_> = std::mem::take(&mut storage.spec.versions)
        .into_iter()
        .chain(served.spec.versions)
        .collect();
    for mut version in versions {
        version.storage = version.name == "v1";
        version.served = true;
        // controller-gen omits the default priority 0.
        for column in version.additional_printer_columns.iter_mut().flatten() {
            if column.priority == Some(0) {
                column.priority = None;
            }
        }
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            kuberay_style_root(schema, &kind);
        }
        storage.spec.versions.push(version);
    }
    storage.spec.versions.sort_by(|a, b| a.name.cmp(&b.name));
    storage.spec.conversion = Some(webhook_conversion(keys::DEFAULT_NAMESPACE));
    storage
}

/// `spec.conversion` of the `ray.io` CRDs: every conversion goes through raygate's Service in
/// `namespace` at [`keys::CONVERT_PATH`] (ConversionReview v1). The CA bundle is written by
/// raygate's certificate manager at run time.
pub fn webhook_conversion(namespace: &str) -> CustomResourceConversion {
    CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.to_owned(),
                    name: keys::APP_NAME.to_owned(),
                    path: Some(keys::CONVERT_PATH.to_owned()),
                    port: Some(keys::SERVICE_PORT),
                }),
                ..Default::default()
            }),
            conversion_review_versions: vec!["v1".to_owned()],
        }),
    }
}

/// Root of a version's schema: KubeRay's root properties, no root `required`, then the
/// recursive rewrite, then the nullable exceptions.
fn kuberay_style_root(root: &mut JSONSchemaProps, kind: &str) {
    kuberay_style(root, false);
    root.required = None;
    let props = root.properties.get_or_insert_with(Default::default);
    for key in ["apiVersion", "kind"] {
        props.insert(key.to_owned(), typed("string"));
    }
    props.insert("metadata".to_owned(), typed("object"));
    for path in nullable_paths(kind) {
        if let Some(node) = descend(root, path) {
            node.nullable = Some(true);
        }
    }
    // KubeRay's `minReplicas`/`maxReplicas` have no `omitempty`: required, and always present
    // after defaulting.
    if let Some(Some(JSONSchemaPropsOrArray::Schema(group))) =
        descend(root, worker_group_path(kind)).map(|n| n.items.as_mut())
    {
        let required = group.required.get_or_insert_with(Vec::new);
        for field in ["maxReplicas", "minReplicas"] {
            if !required.iter().any(|r| r == field) {
                required.push(field.to_owned());
            }
        }
        required.sort();
    }
}

fn descend<'a>(
    mut node: &'a mut JSONSchemaProps,
    path: &[&str],
) -> Option<&'a mut JSONSchemaProps> {
    for key in path {
        node = node.properties.as_mut()?.get_mut(*key)?;
    }
    Some(node)
}

fn typed(ty: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        type_: Some(ty.to_owned()),
        ..Default::default()
    }
}

fn default_str(value: &str) -> Option<JSON> {
    Some(JSON(Value::String(value.to_owned())))
}

/// Recursive rewrite of one schema node into KubeRay's (controller-gen's) style.
fn kuberay_style(node: &mut JSONSchemaProps, quantity_field: bool) {
    let is_quantity = quantity_field
        || node
            .description
            .as_deref()
            .is_some_and(|d| d.starts_with(QUANTITY_DESCRIPTION));
    if node
        .description
        .as_deref()
        .is_some_and(|d| d.starts_with(LOCAL_OBJECT_REFERENCE_NAME))
        && node.type_.as_deref() == Some("string")
    {
        node.default = default_str("");
    }
    node.description = None;
    node.title = None;
    node.nullable = None;
    if matches!(node.format.as_deref(), Some("float" | "double")) {
        node.format = None;
    }
    if node.x_kubernetes_int_or_string == Some(true) {
        node.type_ = None;
        node.any_of = Some(vec![typed("integer"), typed("string")]);
        if is_quantity {
            node.pattern = Some(QUANTITY_PATTERN.to_owned());
        }
    }
    if let Some(required) = node.required.as_mut() {
        required.sort();
        required.dedup();
    }
    if let Some(props) = node.properties.as_mut() {
        if is_object_meta(props) {
            *props = embedded_object_meta();
            return;
        }
        core_defaults(props);
        condition_constraints(props);
        for (key, child) in props.iter_mut() {
            kuberay_style(child, QUANTITY_FIELDS.contains(&key.as_str()));
        }
    }
    if let Some(JSONSchemaPropsOrBool::Schema(child)) = node.additional_properties.as_mut() {
        kuberay_style(child, false);
    }
    match node.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(child)) => kuberay_style(child, false),
        Some(JSONSchemaPropsOrArray::Schemas(children)) => {
            for child in children {
                kuberay_style(child, false);
            }
        }
        None => {}
    }
}

type Props = std::collections::BTreeMap<String, JSONSchemaProps>;

/// Whether an object's properties are those of a full `ObjectMeta`.
fn is_object_meta(props: &Props) -> bool {
    ["managedFields", "ownerReferences", "resourceVersion", "uid"]
        .iter()
        .all(|k| props.contains_key(*k))
}

/// The embedded `ObjectMeta` subset controller-gen generates (`generateEmbeddedObjectMeta`).
fn embedded_object_meta() -> Props {
    let string_map = JSONSchemaProps {
        type_: Some("object".to_owned()),
        additional_properties: Some(JSONSchemaPropsOrBool::Schema(Box::new(typed("string")))),
        ..Default::default()
    };
    let string_list = JSONSchemaProps {
        type_: Some("array".to_owned()),
        items: Some(JSONSchemaPropsOrArray::Schema(Box::new(typed("string")))),
        ..Default::default()
    };
    Props::from([
        ("annotations".to_owned(), string_map.clone()),
        ("finalizers".to_owned(), string_list),
        ("labels".to_owned(), string_map),
        ("name".to_owned(), typed("string")),
        ("namespace".to_owned(), typed("string")),
    ])
}

/// The `+default=` markers of the Kubernetes core types, which controller-gen (and so KubeRay's
/// CRD) turns into schema defaults, recognised by the shape of the object that holds them.
fn core_defaults(props: &mut Props) {
    let has = |props: &Props, keys: &[&str]| keys.iter().all(|k| props.contains_key(*k));
    let set = |props: &mut Props, key: &str, value: Value| {
        if let Some(p) = props.get_mut(key) {
            p.default = Some(JSON(value));
        }
    };
    // ContainerPort and ServicePort.
    if has(props, &["containerPort", "protocol"]) || has(props, &["port", "targetPort", "protocol"])
    {
        set(props, "protocol", Value::from("TCP"));
    }
    // ISCSIVolumeSource.
    if has(props, &["iqn", "iscsiInterface"]) {
        set(props, "iscsiInterface", Value::from("default"));
    }
    // RBDVolumeSource.
    if has(props, &["monitors", "image", "pool", "keyring", "user"]) {
        set(props, "pool", Value::from("rbd"));
        set(props, "user", Value::from("admin"));
        set(props, "keyring", Value::from("/etc/ceph/keyring"));
    }
    // ScaleIOVolumeSource.
    if has(props, &["gateway", "system", "storageMode", "fsType"]) {
        set(props, "storageMode", Value::from("ThinProvisioned"));
        set(props, "fsType", Value::from("xfs"));
    }
    // AzureDiskVolumeSource.
    if has(props, &["diskName", "diskURI", "fsType", "readOnly"]) {
        set(props, "fsType", Value::from("ext4"));
        set(props, "readOnly", Value::from(false));
    }
}

/// The validation markers of `metav1.Condition`, which controller-gen (and so KubeRay's CRD)
/// emits wherever a condition list appears.
fn condition_constraints(props: &mut Props) {
    let keys = [
        "lastTransitionTime",
        "message",
        "observedGeneration",
        "reason",
        "status",
        "type",
    ];
    if props.len() != keys.len() || !keys.iter().all(|k| props.contains_key(*k)) {
        return;
    }
    if let Some(p) = props.get_mut("message") {
        p.max_length = Some(32768);
    }
    if let Some(p) = props.get_mut("observedGeneration") {
        p.minimum = Some(0.0);
    }
    if let Some(p) = props.get_mut("reason") {
        p.max_length = Some(1024);
        p.min_length = Some(1);
        p.pattern = Some(CONDITION_REASON_PATTERN.to_owned());
    }
    if let Some(p) = props.get_mut("status") {
        p.enum_ = Some(
            ["True", "False", "Unknown"]
                .map(|v| JSON(Value::from(v)))
                .to_vec(),
        );
    }
    if let Some(p) = props.get_mut("type") {
        p.max_length = Some(316);
        p.pattern = Some(CONDITION_TYPE_PATTERN.to_owned());
    }
}

/// A CRD as JSON, with integral `minimum`/`maximum` written as integers (as KubeRay's YAML has
/// them; the typed API stores them as floats).
pub(crate) fn crd_json(crd: &CustomResourceDefinition) -> Value {
    let mut value = serde_json::to_value(crd).unwrap_or(Value::Null);
    integral_bounds(&mut value);
    value
}

fn integral_bounds(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if matches!(key.as_str(), "minimum" | "maximum")
                    && let Some(f) = child.as_f64()
                    && f.fract() == 0.0
                    && f.abs() < 9.0e15
                {
                    // Exact: the value is integral and well inside i64's range.
                    *child = Value::from(f as i64);
                } else {
                    integral_bounds(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_bounds),
        _ => {}
    }
}

/// Name of the committed file of a CRD, as controller-gen names it (`ray.io_rayjobs.yaml`).
fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// One CRD as a YAML document (starting with `---`).
fn render_one(crd: &CustomResourceDefinition) -> String {
    // Plain scalars throughout (no folded blocks), like controller-gen's output.
    let options = serde_saphyr::ser_options! { prefer_block_scalars: false };
    let body = serde_saphyr::to_string_with_options(&crd_json(crd), options)
        .unwrap_or_else(|e| format!("# cannot render {}: {e}\n", file_name(crd)));
    format!("---\n{body}")
}

/// The files of `manifests/chart/files/crds/` as the types generate them: `(file name, YAML)`, sorted by
/// file name. Slow (seconds); what `raygate crds --write` writes.
pub fn generate_crd_files() -> Vec<(String, String)> {
    let mut files: Vec<_> = generated_crds()
        .iter()
        .map(|crd| (file_name(crd), render_one(crd)))
        .collect();
    files.sort();
    files
}

/// The committed files of `manifests/chart/files/crds/` embedded in this build: `(file name, YAML)`.
pub fn crd_files() -> Vec<(String, String)> {
    COMMITTED
        .iter()
        .map(|(name, yaml)| ((*name).to_owned(), (*yaml).to_owned()))
        .collect()
}

/// All CRDs as one multi-document YAML stream (what `raygate crds` prints), in the order of
/// [`crd_files`].
pub fn render_crds_yaml() -> String {
    COMMITTED.iter().map(|(_, yaml)| *yaml).collect()
}
