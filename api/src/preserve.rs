//! Never lose what a user wrote: raygate's changes to a user's object, applied to the object
//! as stored.
//!
//! raygate builds Pods from pod templates, and RayClusters from a RayJob's `rayClusterSpec`,
//! with typed structs. A typed struct drops every field it does not model — a PodSpec field
//! newer than k8s-openapi, a RayCluster field newer than raygate. [`keep_unknown_fields`]
//! therefore treats the typed result as a set of changes: it diffs the typed input against the
//! typed result and applies that JSON patch to the raw input, so every field raygate did not
//! touch stays exactly as the user wrote it.

use json_patch::{diff, patch};
use serde_json::Value;

/// `raw` (the user's JSON as stored) with raygate's changes applied: the changes are the JSON
/// patch from `typed` (`raw` read into raygate's types and written back) to `built` (what
/// raygate built from it).
///
/// Builders only edit fields and append to arrays, so array elements line up by index. Should
/// the patch not apply (a builder breaking that rule), `built` is returned: raygate's own
/// fields are never lost, only the user's unknown ones.
pub fn keep_unknown_fields(raw: &Value, typed: &Value, built: &Value) -> Value {
    let mut document = overlay(raw, typed);
    match patch(&mut document, &diff(typed, built)) {
        Ok(()) => document,
        Err(_) => built.clone(),
    }
}

/// `raw` with every value `typed` has: the shape of `typed` (so each path of a patch computed
/// from it exists) plus the fields only `raw` has.
fn overlay(raw: &Value, typed: &Value) -> Value {
    match (raw, typed) {
        (Value::Object(raw), Value::Object(typed)) => {
            let mut merged = raw.clone();
            for (key, value) in typed {
                let combined = match raw.get(key) {
                    Some(raw_value) => overlay(raw_value, value),
                    None => value.clone(),
                };
                merged.insert(key.clone(), combined);
            }
            Value::Object(merged)
        }
        (Value::Array(raw), Value::Array(typed)) => Value::Array(
            typed
                .iter()
                .enumerate()
                .map(|(i, value)| match raw.get(i) {
                    Some(raw_value) => overlay(raw_value, value),
                    None => value.clone(),
                })
                .collect(),
        ),
        (_, typed) => typed.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_fields_survive_changes_and_appends() {
        let raw = json!({
            "spec": {
                "futurePodField": {"mode": "on"},
                "containers": [
                    {"name": "ray", "image": "ray", "futureContainerField": 7, "env": [{"name": "A", "value": "1"}]},
                    {"name": "side", "image": "busybox", "futureContainerField": 8}
                ]
            }
        });
        let typed = json!({
            "spec": {
                "containers": [
                    {"name": "ray", "image": "ray", "env": [{"name": "A", "value": "1"}]},
                    {"name": "side", "image": "busybox"}
                ]
            }
        });
        let built = json!({
            "metadata": {"name": "pod-1"},
            "spec": {
                "containers": [
                    {"name": "ray", "image": "ray", "command": ["/bin/bash"],
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                    {"name": "side", "image": "busybox"},
                    {"name": "submitter", "image": "ray"}
                ],
                "volumes": [{"name": "shared-mem", "emptyDir": {"medium": "Memory"}}]
            }
        });
        let kept = keep_unknown_fields(&raw, &typed, &built);
        assert_eq!(
            kept,
            json!({
                "metadata": {"name": "pod-1"},
                "spec": {
                    "futurePodField": {"mode": "on"},
                    "containers": [
                        {"name": "ray", "image": "ray", "command": ["/bin/bash"], "futureContainerField": 7,
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                        {"name": "side", "image": "busybox", "futureContainerField": 8},
                        {"name": "submitter", "image": "ray"}
                    ],
                    "volumes": [{"name": "shared-mem", "emptyDir": {"medium": "Memory"}}]
                }
            })
        );
    }

    #[test]
    fn removals_and_replacements_by_the_builder_win() {
        let raw = json!({"a": 1, "b": {"old": true, "x": "user"}, "list": [1, 2, 3]});
        let typed = json!({"a": 1, "b": {"old": true}, "list": [1, 2, 3]});
        let built = json!({"a": 2, "b": {}, "list": [1]});
        assert_eq!(
            keep_unknown_fields(&raw, &typed, &built),
            json!({"a": 2, "b": {"x": "user"}, "list": [1]})
        );
    }

    #[test]
    fn typed_defaults_missing_from_raw_do_not_break_the_patch() {
        let raw = json!({"spec": {"future": 1}});
        let typed = json!({"spec": {"containers": []}});
        let built = json!({"spec": {"containers": [{"name": "c"}]}});
        assert_eq!(
            keep_unknown_fields(&raw, &typed, &built),
            json!({"spec": {"future": 1, "containers": [{"name": "c"}]}})
        );
    }
}
