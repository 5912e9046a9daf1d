//! CustomResourceDefinitions generated from the types, and the API server's defaulting.

use schemars::{Schema, SchemaGenerator, json_schema};

/// Schema of a field whose content raygate keeps but does not interpret.
pub fn opaque_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}
