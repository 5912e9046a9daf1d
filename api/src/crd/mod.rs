//! CustomResourceDefinitions generated from the types, and what the API server does with them
//! offline: defaulting ([`apply_defaults`]), structural validation ([`validate_schema`]) and
//! pruning ([`prune_unknown_fields`]).
//!
//! # Generated CRDs
//!
//! [`ray_crds`] builds `rayclusters.ray.io` and `rayjobs.ray.io` from the typed API
//! ([`crate::ray::v1`] is served and stored, [`crate::ray::v1alpha1`] is served and deprecated,
//! conversion strategy `Webhook` through raygate's `/convert`) and rewrites kube-derive's schemas into the style of KubeRay's
//! controller-gen output, so that the API server treats manifests exactly as with KubeRay's CRDs:
//!
//! * every `description` and `title` is dropped, and every `nullable` except
//!   `status.lastUpdateTime` of RayCluster (and its copy in RayJob's status);
//! * an embedded `ObjectMeta` (Pod templates, the head Service) is reduced to `annotations`,
//!   `finalizers`, `labels`, `name`, `namespace`; the root `metadata` is `{type: object}`; the root
//!   has `apiVersion`/`kind` and no `required` (KubeRay's `spec` is optional);
//! * int-or-string fields are written `anyOf: [integer, string]`, and quantities carry
//!   controller-gen's [`QUANTITY_PATTERN`];
//! * `metav1.Condition` lists carry their standard markers (`maxLength`, `minLength`,
//!   `pattern`, the `status` enum, `observedGeneration` minimum);
//! * the `+default=` values of the Kubernetes core types are declared (`protocol: TCP` on ports,
//!   `name: ""` on local object references, and the legacy volume-source defaults).
//!
//! [`render_crds_yaml`] and [`crd_files`] render them as YAML; the committed copies live in
//! `manifests/chart/files/crds/` and a test fails when they drift. Each CRD is a few hundred kB of JSON (a
//! test keeps each under 1,000,000 bytes, well below etcd's 1.5 MiB), which is more than the
//! 256 KiB `kubectl.kubernetes.io/last-applied-configuration` annotation can hold: install them
//! with `kubectl apply --server-side` or `kubectl create`, as KubeRay's own CRDs.
//!
//! # Offline API-server behaviour
//!
//! The schemas of the four (version, kind) pairs are compiled once into a compact tree (a
//! [`std::sync::LazyLock`]), so defaulting and validation do not regenerate anything per call.
//! [`apply_defaults`] follows kube-apiserver's structural defaulting: first non-nullable `null`s
//! without a default are removed, then missing (or `null`, non-nullable) fields with a default
//! are filled, recursing through `properties`, `additionalProperties` and `items`.
//! [`validate_schema`] reports what kube-apiserver would reject, with its messages.
//! [`default_and_validate`] does both in one walk of the object (what bulk checking uses).

mod generate;
mod pattern;
mod quantity;
mod schema;
mod structural;
mod validate;

use schemars::{Schema, SchemaGenerator, json_schema};

pub use generate::{crd_files, generate_crd_files, ray_crds, render_crds_yaml, webhook_conversion};
pub use pattern::{CONDITION_REASON_PATTERN, CONDITION_TYPE_PATTERN, QUANTITY_PATTERN};
pub use quantity::is_quantity;
pub use validate::{default_and_validate, validate_schema};

/// Schema of a field whose content raygate keeps but does not interpret.
pub fn opaque_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Why an object could not be processed against a CRD schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrdError {
    /// The (apiVersion, kind) pair is not one of the `ray.io` CRDs' served versions.
    #[error("no matches for kind \"{kind}\" in version \"{api_version}\"")]
    UnknownKind {
        /// The object's `apiVersion`.
        api_version: String,
        /// The object's `kind`.
        kind: String,
    },
    /// The object is not a JSON object.
    #[error("the object must be a JSON object, found {found}")]
    NotAnObject {
        /// JSON type of what was found instead.
        found: &'static str,
    },
}

/// Applies the CRD's defaults to `obj` as kube-apiserver does when it decodes a custom resource:
/// non-nullable `null`s without a default are pruned, then every missing (or non-nullable `null`)
/// field that has a `default` in the schema of `api_version`/`kind` is filled in.
///
/// `api_version` is `ray.io/v1` or `ray.io/v1alpha1`; `kind` is `RayJob` or `RayCluster`.
pub fn apply_defaults(
    api_version: &str,
    kind: &str,
    obj: &mut serde_json::Value,
) -> Result<(), CrdError> {
    let root = schema::lookup(api_version, kind)?;
    if !obj.is_object() {
        return Err(CrdError::NotAnObject {
            found: structural::json_type(obj),
        });
    }
    structural::prune_nulls_and_default(obj, root);
    Ok(())
}

/// Removes every field that the schema of `api_version`/`kind` does not declare (outside
/// `x-kubernetes-preserve-unknown-fields` subtrees and the root `metadata`), as kube-apiserver
/// prunes a custom resource before storing it, and returns the removed paths
/// (`spec.foo`, `spec.workerGroupSpecs[0].bar`, in document order).
pub fn prune_unknown_fields(
    api_version: &str,
    kind: &str,
    obj: &mut serde_json::Value,
) -> Result<Vec<String>, CrdError> {
    let root = schema::lookup(api_version, kind)?;
    if !obj.is_object() {
        return Err(CrdError::NotAnObject {
            found: structural::json_type(obj),
        });
    }
    let mut removed = Vec::new();
    structural::prune_unknown(obj, root, "", &mut removed);
    Ok(removed)
}

/// Whether `api_version`/`kind` is one of the versions the `ray.io` CRDs serve.
pub fn is_served(api_version: &str, kind: &str) -> bool {
    schema::lookup(api_version, kind).is_ok()
}

#[cfg(test)]
mod tests;
