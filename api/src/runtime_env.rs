//! `spec.runtimeEnvYAML` read into the JSON object the submitter sends to Ray.
//!
//! Admission and the submitter both read it here, so a RayJob the webhook admits is one whose
//! runtime environment the submitter can send. KubeRay reads it with Go's YAML reader into a
//! map and sends it as JSON; as there:
//! - local tags (`!env {…}`) do not change what a value is;
//! - merge keys (`<<: *base`) are applied;
//! - a key that is a number, a boolean or null becomes its text;
//! - a document that is null or empty is no runtime environment.
//!
//! Admission only needs the verdict: [`check`] gives it, and skips the YAML parser for the
//! few plain `key: value` lines most runtime environments are.

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

/// Whether [`read`] would accept `yaml` — a map or nothing, like Go's `yaml.Unmarshal` into a
/// map — without building the map: what admission asks.
///
/// Most runtime environments are a few `key: value` lines, which [`is_simple_yaml_map`]
/// recognises without a YAML parser; everything else goes through [`read`], whose error is the
/// answer.
pub(crate) fn check(yaml: &str) -> Result<(), RuntimeEnvError> {
    if is_simple_yaml_map(yaml) {
        return Ok(());
    }
    parsed_check(yaml)
}

/// [`check`] through [`read`] alone, the reader the submitter uses too, so that an admitted
/// runtime environment is one it can send.
fn parsed_check(yaml: &str) -> Result<(), RuntimeEnvError> {
    read(yaml).map(|_| ())
}

/// A key of the YAML subset [`is_simple_yaml_map`] accepts: `[A-Za-z_][A-Za-z0-9_]*`, and none
/// of the words a YAML 1.1 reader would take for a boolean or null, in any case.
fn is_simple_key(key: &str) -> bool {
    const SPECIAL: [&str; 9] = ["y", "n", "yes", "no", "on", "off", "true", "false", "null"];
    let mut bytes = key.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !SPECIAL.iter().any(|word| word.eq_ignore_ascii_case(key))
}

/// A plain scalar of the subset: it starts with a letter or `_` and holds no character that
/// YAML gives a meaning to (no `:`, `#`, spaces, quotes, brackets, commas, anchors or tags).
fn is_simple_scalar(text: &str) -> bool {
    let mut bytes = text.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"_.=/+<>~-".contains(&b))
}

/// A value after `key: `: a plain scalar, or a flow sequence of them (`[a, b]`, `[]`).
fn is_simple_value(value: &str) -> bool {
    match value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        Some("") => true,
        Some(items) => items.split(',').enumerate().all(|(i, item)| {
            is_simple_scalar(if i == 0 {
                item
            } else {
                item.strip_prefix(' ').unwrap_or(item)
            })
        }),
        None => is_simple_scalar(value),
    }
}

/// `key: value` with a simple key and value; returns the key.
fn simple_entry(line: &str) -> Option<&str> {
    let (key, value) = line.split_once(": ")?;
    (is_simple_key(key) && is_simple_value(value)).then_some(key)
}

/// Whether `text` is, for certain, a YAML mapping: one or more `key: value` lines (distinct
/// keys), where a key may instead end in `:` and be followed by a block indented by two spaces
/// of `- scalar` items or of `key: value` entries (distinct keys). Anything else — comments,
/// quotes, anchors, deeper nesting, numbers — is left to the YAML parser (`false`), so this
/// shortcut never changes a verdict, only skips the parser for what it would accept anyway.
fn is_simple_yaml_map(text: &str) -> bool {
    let mut keys: Vec<&str> = Vec::new();
    let mut block_keys: Vec<&str> = Vec::new();
    // Inside a block under a top-level `key:`: whether it holds sequence items (`Some(true)`)
    // or map entries (`Some(false)`); `None` until its first line.
    let mut block: Option<Option<bool>> = None;
    for line in text.strip_suffix('\n').unwrap_or(text).split('\n') {
        if let Some(nested) = line.strip_prefix("  ") {
            let Some(kind) = block.as_mut() else {
                return false;
            };
            let item = nested.strip_prefix("- ");
            let sequence = item.is_some();
            if kind.is_some_and(|k| k != sequence) {
                return false;
            }
            *kind = Some(sequence);
            let well_formed = match item {
                Some(item) => is_simple_scalar(item),
                None => simple_entry(nested).is_some_and(|key| {
                    let new = !block_keys.contains(&key);
                    block_keys.push(key);
                    new
                }),
            };
            if !well_formed {
                return false;
            }
            continue;
        }
        let key = match line.strip_suffix(':') {
            Some(key) if is_simple_key(key) => {
                block = Some(None);
                block_keys.clear();
                key
            }
            _ => {
                block = None;
                match simple_entry(line) {
                    Some(key) => key,
                    None => return false,
                }
            }
        };
        if keys.contains(&key) {
            return false;
        }
        keys.push(key);
    }
    !keys.is_empty()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
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

    #[test]
    fn common_runtime_envs_skip_the_parser_and_odd_ones_do_not() {
        for simple in [
            "pip: [torch]\n",
            "pip: [torch==2.3.0, numpy>=1.26]",
            "pip:\n  - torch\n  - requests\nworking_dir: code/app.zip\n",
            "env_vars:\n  OMP_NUM_THREADS: x4\n  MODE: fast\nconda: base",
            "pip: []\nexcludes:\n",
        ] {
            assert!(is_simple_yaml_map(simple), "{simple:?}");
            assert_eq!(parsed_check(simple), Ok(()), "{simple:?}");
        }
        for odd in [
            "",
            "- pip\n- conda\n",
            "pip: [requests",
            "a: 1\na: 2\n",
            "yes: x",
            "pip: torch # comment",
            "pip: \"torch\"",
            "env:\n  A: b\n  A: c",
            "pip:\n  - a\n  b: c",
            "just a string",
            "a: b\n  continued",
            "a: 12",
            "<<: x",
        ] {
            assert!(!is_simple_yaml_map(odd), "{odd:?}");
        }
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Za-z_][A-Za-z0-9_]{0,6}",
            Just("yes".to_string()),
            Just("Off".to_string()),
            Just("NULL".to_string()),
            Just("<<".to_string()),
            "[a-z0-9&*!\"'#:.-]{1,3}",
        ]
    }

    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            "[A-Za-z_][A-Za-z0-9_.=/+<>~-]{0,10}",
            Just("true".to_string()),
            Just("~".to_string()),
            "[0-9.:# '\"&*!|>%@`{}\\[\\],-]{1,4}",
        ]
    }

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            scalar(),
            prop::collection::vec(scalar(), 0..4)
                .prop_map(|items| format!("[{}]", items.join(", "))),
            prop::collection::vec(scalar(), 0..4)
                .prop_map(|items| format!("[{}]", items.join(","))),
        ]
    }

    fn entry() -> impl Strategy<Value = String> {
        prop_oneof![
            (key(), value()).prop_map(|(k, v)| format!("{k}: {v}")),
            (key(), prop::collection::vec(scalar(), 0..3)).prop_map(|(k, items)| {
                let block: String = items.iter().map(|i| format!("\n  - {i}")).collect();
                format!("{k}:{block}")
            }),
            (key(), prop::collection::vec((key(), scalar()), 0..3)).prop_map(|(k, entries)| {
                let block: String = entries
                    .iter()
                    .map(|(k, v)| format!("\n  {k}: {v}"))
                    .collect();
                format!("{k}:{block}")
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The shortcut only ever accepts what the YAML parser reads as a map.
        #[test]
        fn the_shortcut_agrees_with_the_parser_on_generated_maps(
            entries in prop::collection::vec(entry(), 0..5),
            trailing_newline in any::<bool>(),
        ) {
            let mut text = entries.join("\n");
            if trailing_newline {
                text.push('\n');
            }
            if is_simple_yaml_map(&text) {
                prop_assert_eq!(parsed_check(&text), Ok(()), "{:?}", text);
            }
        }

        #[test]
        fn the_shortcut_agrees_with_the_parser_on_arbitrary_text(text in "[aAyN_:\\- \\[\\],\n#'&!0]{0,30}") {
            if is_simple_yaml_map(&text) {
                prop_assert_eq!(parsed_check(&text), Ok(()), "{:?}", text);
            }
        }
    }
}
