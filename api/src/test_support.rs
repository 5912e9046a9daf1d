//! Builders shared by the unit tests of several modules.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use serde_json::Value;

/// A managed-fields entry of a PodGroup: `manager` wrote `fields` (FieldsV1) with an Update.
pub(crate) fn managed(manager: &str, fields: Value) -> ManagedFieldsEntry {
    ManagedFieldsEntry {
        manager: Some(manager.to_string()),
        operation: Some("Update".to_string()),
        api_version: Some("scheduling.volcano.sh/v1beta1".to_string()),
        fields_type: Some("FieldsV1".to_string()),
        fields_v1: Some(FieldsV1(fields)),
        ..ManagedFieldsEntry::default()
    }
}
