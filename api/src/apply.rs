//! The verdict `kubectl apply` gets for a manifest object, offline: what the API server decides
//! before raygate's webhook sees the object, then [`check::check_object`]'s rules.
//!
//! kubectl (since 1.25) applies with `--validate=strict` by default: the API server's
//! server-side field validation then refuses an object with fields its CRD's structural schema
//! does not declare (`strict decoding error: unknown field "spec.entrypont"`) instead of pruning
//! them. [`FieldValidation`] is kubectl's `--validate` flag. Before any webhook, the API server
//! also reads and validates `metadata` ([`metadata`]: a name or `generateName` is required, the
//! name is a DNS-1123 subdomain, label and annotation syntax, 256 KiB of annotations including
//! the copy of the object kubectl apply keeps in one). A `ray.io` object of a version or kind
//! the CRDs do not serve gets kubectl's `no matches for kind` error. An unknown field written
//! `null` (`creationTimestamp: null`, as `kubectl create --dry-run=client -o yaml` prints) is no
//! error: `kubectl apply` accepts it, though the API server refuses it when `kubectl create`
//! sends it.

pub mod metadata;

#[cfg(test)]
mod tests;

use std::str::FromStr;

use serde_json::Value;

use crate::check::{self, Checked, ObjectReport, RAY_API_VERSIONS};
use crate::crd;
use crate::finding::{Compat, Finding};
use crate::validation::ValidationContext;

/// The API group of raygate's CRDs.
pub const RAY_GROUP: &str = "ray.io";

/// Kinds of the `ray.io` group that KubeRay's own CRDs serve and raygate does not judge.
pub const KUBERAY_ONLY_KINDS: [&str; 1] = ["RayService"];

/// Rule of a field the CRD's structural schema does not declare (and of one `ObjectMeta` does
/// not have): an error with `--validate=strict`, a warning with `warn`.
pub const UNKNOWN_FIELD: &str = "unknown-field";

/// Rule of a `ray.io` object of a version or kind raygate's CRDs do not serve.
pub const NO_KIND_MATCH: &str = "no-kind-match";

/// How unknown fields are treated: kubectl's `--validate` (server-side field validation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// `strict` (or `true`), kubectl's default: the API server refuses the object.
    #[default]
    Strict,
    /// `warn`: the API server drops the fields and warns.
    Warn,
    /// `ignore` (or `false`): the API server drops the fields silently.
    Ignore,
}

/// A `--validate` value kubectl does not take.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid - validate option {0:?}; must be one of: strict (or true), warn, ignore (or false)"
)]
pub struct InvalidFieldValidation(pub String);

impl FromStr for FieldValidation {
    type Err = InvalidFieldValidation;

    /// kubectl's values, case-insensitively: `strict`/`true`, `warn`, `ignore`/`false`.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.to_lowercase().as_str() {
            "strict" | "true" => Ok(FieldValidation::Strict),
            "warn" => Ok(FieldValidation::Warn),
            "ignore" | "false" => Ok(FieldValidation::Ignore),
            _ => Err(InvalidFieldValidation(value.to_string())),
        }
    }
}

/// Whether `api_version` names the `ray.io` group (`ray.io/<version>`, or `ray.io` alone,
/// which kubectl reads as a version of the core group and matches nothing either).
fn in_ray_group(api_version: &str) -> bool {
    api_version == RAY_GROUP
        || api_version
            .strip_prefix(RAY_GROUP)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether raygate judges the object: `ray.io` objects with an `apiVersion` and a `kind`, but
/// [`KUBERAY_ONLY_KINDS`]. [`check_manifest`] returns `None` for the others.
pub fn judges(object: &Value) -> bool {
    check::type_meta(object).is_some_and(|(api_version, kind)| {
        in_ray_group(api_version)
            && !(RAY_API_VERSIONS.contains(&api_version) && KUBERAY_ONLY_KINDS.contains(&kind))
    })
}

/// Checks one manifest object as `kubectl apply --validate=<fields>` through raygate's webhook
/// would: `None` for what raygate does not judge ([`judges`]). The typed object and its gang
/// are [`check::check_object`]'s (none for a version or kind no CRD serves).
///
/// The findings come in the API server's order: the object cannot be read (`metadata` type
/// errors, then alone: nothing else is checked), unknown fields (sorted, as the API server
/// lists them), `metadata` validation, then [`check::check_object`]'s. Without a name,
/// KubeRay's name rules, which would repeat the missing name, are left out.
pub fn check_manifest(
    mut object: Value,
    ctx: &ValidationContext,
    fields: FieldValidation,
) -> Option<Checked> {
    if !judges(&object) {
        return None;
    }
    let (api_version, kind) = check::type_meta(&object)?;
    if !crd::is_served(api_version, kind) {
        return Some(Checked {
            report: unserved(&object, api_version, kind),
            typed: None,
            gang: None,
        });
    }
    let meta = metadata::check_metadata(&object);
    let mut nulls = Vec::new();
    null_members(&object, &mut String::new(), &mut nulls);
    metadata::empty_null_values(&mut object);
    let mut checked = check::check_object(object, ctx)?;
    let report = &mut checked.report;
    let (unknown, rest): (Vec<Finding>, Vec<Finding>) = std::mem::take(&mut report.findings)
        .into_iter()
        .partition(|f| f.rule == UNKNOWN_FIELD);
    let mut unknown: Vec<String> = unknown.into_iter().map(|f| f.field).collect();
    unknown.sort();
    let name_missing = meta.name_missing();
    let metadata::MetadataCheck {
        findings,
        unknown_fields,
    } = meta;
    unknown.extend(unknown_fields);
    unknown.retain(|path| !nulls.contains(path));
    let (decode, validation): (Vec<Finding>, Vec<Finding>) = findings
        .into_iter()
        .partition(|f| f.rule == metadata::rules::METADATA_TYPE);
    let mut findings = decode;
    if findings.is_empty() {
        findings.extend(
            unknown
                .iter()
                .filter_map(|path| unknown_field(path, fields)),
        );
        findings.extend(validation);
        findings.extend(
            rest.into_iter()
                .filter(|f| !(name_missing && f.field == "metadata.name")),
        );
    }
    report.valid = !findings.iter().any(Finding::is_error);
    report.findings = findings;
    Some(checked)
}

/// The paths of the `null` members of `value`'s objects, as unknown fields are named
/// (`spec.template.metadata.creationTimestamp`, `spec.groups[0].x`). Few objects hold any.
fn null_members(value: &Value, path: &mut String, out: &mut Vec<String>) {
    let mark = path.len();
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                if child.is_null() {
                    out.push(path.clone());
                } else {
                    null_members(child, path, out);
                }
                path.truncate(mark);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push_str(&format!("[{index}]"));
                null_members(item, path, out);
                path.truncate(mark);
            }
        }
        _ => {}
    }
}

/// The finding for an unknown field, as the API server words it for `fields`.
fn unknown_field(path: &str, fields: FieldValidation) -> Option<Finding> {
    let quoted = serde_json::to_string(path).unwrap_or_default();
    match fields {
        FieldValidation::Strict => Some(Finding::error(
            UNKNOWN_FIELD,
            path,
            format!("strict decoding error: unknown field {quoted}"),
            Compat::Kuberay,
        )),
        FieldValidation::Warn => Some(Finding::warning(
            UNKNOWN_FIELD,
            path,
            format!("unknown field {quoted}"),
            Compat::Kuberay,
        )),
        FieldValidation::Ignore => None,
    }
}

/// The report on a `ray.io` object no CRD serves: kubectl's error, and what raygate serves.
fn unserved(object: &Value, api_version: &str, kind: &str) -> ObjectReport {
    let meta = |key: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let message = format!(
        "no matches for kind {kind:?} in version {api_version:?}: raygate's CRDs serve \
         ray.io/v1 and ray.io/v1alpha1 RayJob and RayCluster"
    );
    ObjectReport {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        namespace: meta("namespace"),
        name: meta("name"),
        generate_name: None,
        valid: false,
        findings: vec![Finding::error(NO_KIND_MATCH, "", message, Compat::Kuberay)],
    }
}
