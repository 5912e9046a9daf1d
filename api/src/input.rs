//! Reading manifests: multi-document YAML or JSON, `kind: List` flattened.
//!
//! Pure: the caller reads the bytes; this module only parses them, never panics, and reports
//! the file, line and column of a syntax error.

use std::fmt;

use serde_json::Value;

/// Input that is not valid YAML or JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InputError {
    /// Name of the input (a file name, or `-` for standard input).
    pub source_name: String,
    /// 1-based line of the error, when known.
    pub line: Option<u64>,
    /// 1-based column of the error, when known.
    pub column: Option<u64>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source_name)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

/// One object found in an input, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// 0-based position among the objects of the input, after `List`s are flattened.
    pub index: usize,
    /// The object as the user wrote it.
    pub value: Value,
}

/// Parses `text` as JSON (when it starts with `{` or `[`) or as multi-document YAML, skipping
/// empty documents and flattening `kind: List` (and `*List`) objects into their items.
pub fn parse_documents(source_name: &str, text: &str) -> Result<Vec<Document>, InputError> {
    let mut documents = Vec::new();
    for_each_document(source_name, text, |document| documents.push(document))?;
    Ok(documents)
}

/// [`parse_documents`] one object at a time: `visit` gets each object as soon as it is parsed,
/// so that a caller checking a large file holds one object at a time, not the whole file's
/// tree (which, for thousands of objects, no longer fits in the CPU caches). On a syntax error
/// `visit` has already seen the objects before it; callers that must report nothing for an
/// unreadable input keep only what they derive from each object until this returns `Ok`.
pub fn for_each_document(
    source_name: &str,
    text: &str,
    mut visit: impl FnMut(Document),
) -> Result<(), InputError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut index = 0;
    let mut emit = |value: Value| {
        flatten(value, &mut |value| {
            visit(Document { index, value });
            index += 1;
        });
    };
    if text.trim_start().starts_with(['{', '[']) {
        parse_json(source_name, text, &mut emit)
    } else {
        parse_yaml(source_name, text, &mut emit)
    }
}

fn parse_json(
    source_name: &str,
    text: &str,
    emit: &mut impl FnMut(Value),
) -> Result<(), InputError> {
    for value in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        match value {
            Ok(Value::Array(items)) => items.into_iter().for_each(&mut *emit),
            Ok(value) => emit(value),
            Err(e) => {
                return Err(InputError {
                    source_name: source_name.to_string(),
                    line: Some(e.line() as u64),
                    column: Some(e.column() as u64),
                    message: strip_position(&e.to_string()),
                });
            }
        }
    }
    Ok(())
}

/// Both parsers append " at line L column C"; the position is reported separately.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// YAML through serde_yaml_ng (libyaml's parser): about three times faster than serde-saphyr on
/// large manifests, with YAML 1.2 scalars, a recursion limit, and an alias-expansion limit that
/// refuses "billion laughs" documents. Positions are 0-based there, 1-based here.
fn parse_yaml(
    source_name: &str,
    text: &str,
    emit: &mut impl FnMut(Value),
) -> Result<(), InputError> {
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value: Option<Value> = serde::Deserialize::deserialize(document).map_err(|e| {
            let location = e.location();
            InputError {
                source_name: source_name.to_string(),
                line: location.as_ref().map(|l| l.line() as u64 + 1),
                column: location.as_ref().map(|l| l.column() as u64 + 1),
                message: strip_position(&e.to_string()),
            }
        })?;
        value.into_iter().for_each(&mut *emit);
    }
    Ok(())
}

fn flatten(value: Value, out: &mut impl FnMut(Value)) {
    match value {
        Value::Null => {}
        Value::Object(ref map)
            if map
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k == "List" || k.ends_with("List"))
                && map.get("items").is_some_and(Value::is_array) =>
        {
            if let Value::Object(mut map) = value
                && let Some(Value::Array(items)) = map.remove("items")
            {
                for item in items {
                    flatten(item, out);
                }
            }
        }
        other => out(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values(text: &str) -> Vec<Value> {
        parse_documents("test.yaml", text)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|d| d.value)
            .collect()
    }

    #[test]
    fn reads_multi_document_yaml_and_skips_empty_documents() {
        let docs = values("---\nkind: A\n---\n# only a comment\n---\nkind: B\nx: 1\n...\n");
        assert_eq!(
            docs,
            vec![json!({"kind": "A"}), json!({"kind": "B", "x": 1})]
        );
    }

    #[test]
    fn reads_json_streams_and_arrays() {
        assert_eq!(
            values(" {\"kind\":\"A\"}\n{\"kind\":\"B\"}"),
            vec![json!({"kind": "A"}), json!({"kind": "B"})]
        );
        assert_eq!(values("[{\"a\":1},{\"b\":2}]").len(), 2);
    }

    #[test]
    fn flattens_lists_recursively() {
        let docs = values(
            "apiVersion: v1\nkind: List\nitems:\n- kind: A\n- kind: RayJobList\n  items:\n  - kind: B\n  - kind: C\n",
        );
        assert_eq!(
            docs,
            vec![
                json!({"kind": "A"}),
                json!({"kind": "B"}),
                json!({"kind": "C"})
            ]
        );
    }

    #[test]
    fn reports_yaml_errors_with_line_and_column() {
        let err = parse_documents("bad.yaml", "kind: A\nspec:\n  x: [1, 2\n  y: 3\n").unwrap_err();
        assert_eq!(err.source_name, "bad.yaml");
        assert!(err.line.is_some_and(|l| l >= 3), "{err:?}");
        assert!(err.column.is_some(), "{err:?}");
        assert!(err.to_string().starts_with("bad.yaml:"), "{err}");
    }

    #[test]
    fn reports_json_errors_with_line_and_column() {
        let err = parse_documents("bad.json", "{\n  \"kind\": \"A\",\n  oops\n}").unwrap_err();
        assert_eq!((err.line, err.column), (Some(3), Some(3)));
        assert!(!err.message.contains(" at line "), "{err}");
    }

    #[test]
    fn indexes_objects_in_order() {
        let docs = parse_documents("x", "a: 1\n---\nb: 2\n").unwrap();
        assert_eq!(docs.iter().map(|d| d.index).collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn visits_each_object_as_parsed_and_stops_at_a_syntax_error() {
        let mut seen = Vec::new();
        let err = for_each_document("x.yaml", "kind: A\n---\nkind: B\n---\nkind: [\n", |d| {
            seen.push((d.index, d.value));
        })
        .unwrap_err();
        assert_eq!(
            seen,
            vec![(0, json!({"kind": "A"})), (1, json!({"kind": "B"}))]
        );
        assert_eq!(err.source_name, "x.yaml");
        let mut seen = Vec::new();
        for_each_document("x.json", "[{\"a\":1},{\"b\":2}] {\"c\":3}", |d| {
            seen.push(d.index)
        })
        .unwrap();
        assert_eq!(seen, [0, 1, 2]);
    }

    #[test]
    fn many_documents_are_accepted() {
        let text = "kind: A\n---\n".repeat(5_000);
        assert_eq!(values(&text).len(), 5_000);
    }
}
