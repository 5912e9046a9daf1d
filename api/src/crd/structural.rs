//! Structural-schema walks that mutate an object: null pruning, defaulting, unknown-field pruning.

use serde_json::{Map, Value};

use super::schema::{Node, Ty};

/// The JSON type name kube-openapi reports for a value (`"integer"` for integral numbers).
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Removes the `null` members of one object whose schema is neither nullable nor defaulted (the
/// rule of kube-apiserver's `PruneNonNullableNullsWithoutDefaults`, one level).
pub(crate) fn prune_null_members(map: &mut Map<String, Value>, schema: &Node) {
    // `retain` rebuilds the map; almost no object holds a null, so look first.
    if map.values().any(Value::is_null) {
        map.retain(|key, child| match schema.member(key) {
            Some(s) => !(child.is_null() && !s.nullable && s.default.is_none()),
            None => true,
        });
    }
}

/// Removes `null` members whose schema is neither nullable nor defaulted
/// (kube-apiserver's `PruneNonNullableNullsWithoutDefaults`). Array items are never removed.
pub(crate) fn prune_nulls(value: &mut Value, schema: &Node) {
    match value {
        Value::Object(map) => {
            prune_null_members(map, schema);
            for (key, child) in map.iter_mut() {
                if matches!(child, Value::Object(_) | Value::Array(_))
                    && let Some(s) = schema.member(key)
                {
                    prune_nulls(child, s);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.items.as_deref() {
                for item in items {
                    prune_nulls(item, s);
                }
            }
        }
        _ => {}
    }
}

/// Whether `value` is a `null` the schema does not allow (defaulting replaces or prunes it).
pub(crate) fn non_nullable_null(value: &Value, schema: &Node) -> bool {
    value.is_null() && !schema.nullable
}

/// Fills missing members (and non-nullable `null`s) that have a default, then recurses into
/// every member, `additionalProperties` value and array item (kube-apiserver's `Default`).
pub(crate) fn default(value: &mut Value, schema: &Node) {
    if !schema.has_defaults {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, default) in &schema.defaulted {
                let fill = match map.get(key) {
                    None => true,
                    Some(current) => schema
                        .properties
                        .get(key)
                        .is_some_and(|s| non_nullable_null(current, s)),
                };
                if fill {
                    map.insert(key.clone(), default.clone());
                }
            }
            for (key, child) in map.iter_mut() {
                if let Some(s) = schema.properties.get(key) {
                    default(child, s);
                } else if let Some(s) = schema.additional.as_deref() {
                    if non_nullable_null(child, s)
                        && let Some(d) = &s.default
                    {
                        *child = d.clone();
                    }
                    default(child, s);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.items.as_deref() {
                for item in items {
                    if non_nullable_null(item, s)
                        && let Some(d) = &s.default
                    {
                        *item = d.clone();
                    }
                    default(item, s);
                }
            }
        }
        _ => {}
    }
}

/// [`prune_nulls`] followed by [`default`], in one walk of the object instead of two: each
/// member the user wrote is pruned and then defaulted; a value filled in from a default is only
/// defaulted, exactly as in the two separate walks (pruning never sees defaults).
pub(crate) fn prune_nulls_and_default(value: &mut Value, schema: &Node) {
    if !schema.has_defaults {
        prune_nulls(value, schema);
        return;
    }
    match value {
        Value::Object(map) => {
            prune_null_members(map, schema);
            for (key, child) in map.iter_mut() {
                if let Some(s) = schema.properties.get(key) {
                    prune_nulls_and_default(child, s);
                } else if let Some(s) = schema.additional.as_deref() {
                    fill_or_walk(child, s);
                }
            }
            for (key, default_value) in &schema.defaulted {
                let Some(s) = schema.properties.get(key) else {
                    continue;
                };
                let fill = map
                    .get(key)
                    .is_none_or(|current| non_nullable_null(current, s));
                if fill {
                    let mut filled = default_value.clone();
                    default(&mut filled, s);
                    map.insert(key.clone(), filled);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.items.as_deref() {
                for item in items {
                    fill_or_walk(item, s);
                }
            }
        }
        _ => {}
    }
}

/// An array item or `additionalProperties` value: a non-nullable `null` becomes the schema's
/// default (then defaulted), anything else is pruned and defaulted.
fn fill_or_walk(value: &mut Value, schema: &Node) {
    if non_nullable_null(value, schema)
        && let Some(d) = &schema.default
    {
        *value = d.clone();
        default(value, schema);
    } else {
        prune_nulls_and_default(value, schema);
    }
}

/// Appends `key` to a dotted field path.
pub(crate) fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Appends an array index to a field path.
pub(crate) fn index_path(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

/// Removes members the schema does not declare; records their paths in `removed`.
/// The root `metadata` is left alone (the API server handles `ObjectMeta` itself).
pub(crate) fn prune_unknown(
    value: &mut Value,
    schema: &Node,
    path: &str,
    removed: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => {
            let root = path.is_empty();
            map.retain(|key, _| {
                let known = (root && key == "metadata")
                    || schema.ty != Ty::Object
                    || schema.properties.contains_key(key)
                    || schema.additional.is_some()
                    || schema.preserve_unknown;
                if !known {
                    removed.push(child_path(path, key));
                }
                known
            });
            for (key, child) in map.iter_mut() {
                if root && key == "metadata" {
                    continue;
                }
                if let Some(s) = schema.member(key) {
                    prune_unknown(child, s, &child_path(path, key), removed);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_unknown(item, s, &index_path(path, i), removed);
                }
            }
        }
        _ => {}
    }
}
