//! `spec.runtimeEnvYAML` read into the JSON object the submitter sends to Ray.
//!
//! Admission and the submitter both read it here, so a RayJob the webhook admits is one whose
//! runtime environment the submitter can send. KubeRay reads it with Go's YAML reader into a
//! map and sends it as JSON; as there:
//! - local tags (`!env {…}`) do not change what a value is;
//! - merge keys (`<<: *base`) are applied;
//! - a key that is a number, a boolean or null becomes its text;
//! - a document that is null or empty is no runtime environment.

use serde_json::{Map, Number, Value};
use serde_yaml_ng::Value as Yaml;

/// Why a runtime environment cannot be read; the messages follow Go's YAML reader.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeEnvError {
    /// The text is not YAML (or a merge key is misused); serde_yaml_ng's message.
    #[error("{0}")]
    Syntax(String),
    /// The document is a sequence or a scalar, not a map.
    #[error("cannot unmarshal {0} into a map")]
    NotAMap(&'static str),
    /// A map key is itself a map or a sequence: JSON has no such key.
    #[error("{0} is not a valid map key")]
    Key(&'static str),
    /// A float JSON cannot carry (`.nan`, `.inf`).
    #[error("{0} has no JSON encoding")]
    Number(String),
}

/// Reads a runtime environment: `None` for an empty or null document.
pub fn read(yaml: &str) -> Result<Option<Map<String, Value>>, RuntimeEnvError> {
    let mut value: Yaml =
        serde_yaml_ng::from_str(yaml).map_err(|e| RuntimeEnvError::Syntax(e.to_string()))?;
    value = untagged(value);
    value
        .apply_merge()
        .map_err(|e| RuntimeEnvError::Syntax(e.to_string()))?;
    match value {
        Yaml::Null => Ok(None),
        Yaml::Mapping(mapping) => object(mapping).map(Some),
        other => Err(RuntimeEnvError::NotAMap(kind(&other))),
    }
}

/// `value` with every tag dropped, at every depth.
fn untagged(value: Yaml) -> Yaml {
    match value {
        Yaml::Tagged(tagged) => untagged(tagged.value),
        Yaml::Sequence(items) => Yaml::Sequence(items.into_iter().map(untagged).collect()),
        Yaml::Mapping(mapping) => Yaml::Mapping(
            mapping
                .into_iter()
                .map(|(k, v)| (untagged(k), untagged(v)))
                .collect(),
        ),
        scalar => scalar,
    }
}

fn kind(value: &Yaml) -> &'static str {
    match value {
        Yaml::Null => "null",
        Yaml::Bool(_) => "a bool",
        Yaml::Number(_) => "a number",
        Yaml::String(_) => "a string",
        Yaml::Sequence(_) => "a sequence",
        Yaml::Mapping(_) => "a map",
        Yaml::Tagged(tagged) => kind(&tagged.value),
    }
}

fn object(mapping: serde_yaml_ng::Mapping) -> Result<Map<String, Value>, RuntimeEnvError> {
    mapping
        .into_iter()
        .map(|(key, value)| {
            let key = match key {
                Yaml::String(text) => text,
                Yaml::Null => "null".to_string(),
                Yaml::Bool(b) => b.to_string(),
                Yaml::Number(n) => n.to_string(),
                other => return Err(RuntimeEnvError::Key(kind(&other))),
            };
            Ok((key, json(value)?))
        })
        .collect()
}

fn json(value: Yaml) -> Result<Value, RuntimeEnvError> {
    Ok(match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(b),
        Yaml::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let float = n.as_f64().unwrap_or(f64::NAN);
                Value::Number(
                    Number::from_f64(float).ok_or(RuntimeEnvError::Number(n.to_string()))?,
                )
            }
        }
        Yaml::String(text) => Value::String(text),
        Yaml::Sequence(items) => {
            Value::Array(items.into_iter().map(json).collect::<Result<_, _>>()?)
        }
        Yaml::Mapping(mapping) => Value::Object(object(mapping)?),
        Yaml::Tagged(tagged) => json(tagged.value)?,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read_json(yaml: &str) -> Result<Option<Value>, RuntimeEnvError> {
        read(yaml).map(|map| map.map(Value::Object))
    }

    #[test]
    fn a_map_is_read_with_its_values_typed_as_yaml_types_them() {
        assert_eq!(
            read_json(
                "pip: [torch==2.3.0]\nenv_vars: {EPOCHS: \"10\", DEBUG: 1}\nworking_dir: .\nratio: 0.5\nconda: ~\n"
            ),
            Ok(Some(
                json!({"pip": ["torch==2.3.0"], "env_vars": {"EPOCHS": "10", "DEBUG": 1},
                "working_dir": ".", "ratio": 0.5, "conda": null})
            ))
        );
    }

    #[test]
    fn empty_and_null_documents_are_no_runtime_environment() {
        for text in ["", "\n", "# nothing\n", "~", "null", "---\n"] {
            assert_eq!(read(text), Ok(None), "{text:?}");
        }
    }

    #[test]
    fn tags_are_dropped_at_every_depth() {
        assert_eq!(
            read_json("!env {pip: !list [requests], env_vars: !vars {A: !s b}}"),
            Ok(Some(json!({"pip": ["requests"], "env_vars": {"A": "b"}})))
        );
        assert_eq!(
            read("!env [pip]"),
            Err(RuntimeEnvError::NotAMap("a sequence"))
        );
    }

    #[test]
    fn merge_keys_are_applied() {
        assert_eq!(
            read_json("base: &b {A: x, B: y}\nenv_vars:\n  <<: *b\n  B: z\n"),
            Ok(Some(
                json!({"base": {"A": "x", "B": "y"}, "env_vars": {"A": "x", "B": "z"}})
            ))
        );
        assert!(matches!(read("<<: x"), Err(RuntimeEnvError::Syntax(_))));
    }

    #[test]
    fn scalar_keys_become_their_text_and_others_are_refused() {
        assert_eq!(
            read_json("1: a\ntrue: b\n~: c\n2.5: d\n"),
            Ok(Some(
                json!({"1": "a", "true": "b", "null": "c", "2.5": "d"})
            ))
        );
        assert_eq!(
            read("? [a]\n: b\n"),
            Err(RuntimeEnvError::Key("a sequence"))
        );
    }

    #[test]
    fn what_is_not_a_map_says_what_it_is() {
        for (text, what) in [
            ("- pip\n- conda\n", "a sequence"),
            ("just a string", "a string"),
            ("12", "a number"),
            ("true", "a bool"),
        ] {
            let error = read(text).expect_err(text);
            assert_eq!(error, RuntimeEnvError::NotAMap(what), "{text:?}");
            assert_eq!(
                error.to_string(),
                format!("cannot unmarshal {what} into a map")
            );
        }
        assert!(matches!(
            read("pip: [requests"),
            Err(RuntimeEnvError::Syntax(_))
        ));
        assert_eq!(
            read("x: .nan"),
            Err(RuntimeEnvError::Number(".nan".to_string()))
        );
    }
}
