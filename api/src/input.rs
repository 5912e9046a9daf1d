//! Reading manifests: multi-document YAML or JSON, `kind: List` flattened.
//!
//! YAML is read in kubectl's dialect (YAML 1.1 scalars, as `sigs.k8s.io/yaml` reads them: `0777`
//! is 511, `yes` is `true`, duplicate keys keep the last), so that a file means to raygate what
//! it means to `kubectl apply`; `docs/yaml.md` lists the rules and where they come from.
//!
//! Pure: the caller reads the bytes; this module only parses them, never panics, and reports
//! the file, line and column of a syntax error.

mod dialect;
mod write;

use std::collections::HashMap;
use std::fmt;

use granit_parser::{Event, Parser, ScalarStyle, Span, StrInput};
use serde_json::{Map, Value};

pub use dialect::{Scalar, resolve_plain};
pub use write::to_yaml;

/// Objects as a multi-document YAML stream (each after a `---` marker) that kubectl reads back
/// as the same objects: what `raygate convert` and `raygate podgroup` print.
pub fn documents_to_yaml<'a>(values: impl IntoIterator<Item = &'a Value>) -> String {
    let mut out = String::new();
    for value in values {
        out.push_str("---\n");
        out.push_str(&to_yaml(value));
    }
    out
}

/// `value` as the API server reads the JSON kubectl sends for it: a float with an integral value
/// (`1.0`, `0.0`) is the integer Go's encoder writes for it. Two objects mean the same to
/// kubectl exactly when their readings are equal.
pub fn as_the_api_server_reads(value: &Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => n.as_f64().map_or(Value::Null, dialect::float_value),
        Value::Array(items) => Value::Array(items.iter().map(as_the_api_server_reads).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), as_the_api_server_reads(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

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

/// YAML as kubectl reads it, over granit-parser's events (the parser serde-saphyr is built
/// on). serde_yaml_ng and serde-saphyr resolve scalars by YAML 1.2 and do not say whether a
/// scalar was quoted, so neither can read `0777` or `yes` as kubectl does; the events carry
/// each scalar's style and tag, and [`dialect`] resolves them by kubectl's YAML 1.1 rules
/// (`docs/yaml.md`). Nesting is limited by the parser (255 levels), alias expansion by
/// [`ALIAS_BUDGET`].
fn parse_yaml(
    source_name: &str,
    text: &str,
    emit: &mut impl FnMut(Value),
) -> Result<(), InputError> {
    // kubectl reads the documents before the one a bad separator line ends (and applies them)
    // before it stops there: so are they read here, and the separator's error comes after them.
    let (text, bad_separator) = split_at_bad_separator(source_name, text);
    let mut reader = YamlReader {
        source_name,
        parser: Parser::new_from_str(text),
        anchors: HashMap::default(),
        expanded: 0,
    };
    loop {
        let (event, span) = reader.next()?;
        match event {
            Event::StreamEnd => return bad_separator.map_or(Ok(()), Err),
            Event::DocumentStart(..) => {
                reader.anchors.clear();
                reader.expanded = 0;
                let (event, span) = reader.next()?;
                if !matches!(event, Event::DocumentEnd) {
                    let root = reader.node(event, span)?;
                    let value = reader.value(root)?;
                    let (end, span) = reader.next()?;
                    if !matches!(end, Event::DocumentEnd) {
                        return Err(reader.error(&span, "expected the end of the document"));
                    }
                    emit(value);
                }
            }
            Event::StreamStart => {}
            _ => return Err(reader.error(&span, "expected a document")),
        }
    }
}

/// kubectl cuts a stream into documents at lines starting with `---` and refuses such a line
/// with anything but a comment after the marker (`--- {a: 1}` is YAML, but not to kubectl).
/// The document that line would end is lost with it (kubectl's `YAMLReader` drops what it has
/// read of it). Returns the text of the documents before that one, and the line's error; the
/// whole text when there is no such line.
fn split_at_bad_separator<'t>(source_name: &str, text: &'t str) -> (&'t str, Option<InputError>) {
    let mut start = 0;
    let mut document_start = 0;
    for (number, line) in text.split_inclusive('\n').enumerate() {
        let line_start = start;
        start += line.len();
        let Some(rest) = line.strip_prefix("---") else {
            continue;
        };
        let rest = rest.trim();
        if rest.is_empty() || rest.starts_with('#') {
            document_start = line_start;
        } else {
            let error = InputError {
                source_name: source_name.to_string(),
                line: Some(number as u64 + 1),
                column: Some(4),
                message: format!(
                    "kubectl allows only a comment after a `---` document separator, not \
                     {rest:?}: move it to the next line"
                ),
            };
            return (&text[..document_start], Some(error));
        }
    }
    (text, None)
}

/// How many nodes aliases may copy into one document before it is refused as an alias bomb
/// (kubectl refuses such documents as well, by a ratio of its own).
const ALIAS_BUDGET: usize = 1_000_000;

/// A node of the document being read, before it becomes JSON: scalars keep their meaning and
/// text until it is known whether they are a key (`yes:` is the key `"true"`), a merge key, or
/// a value (where `.inf` is refused).
#[derive(Clone)]
enum Node {
    Scalar {
        scalar: Scalar,
        text: String,
        /// A `<<` merge key: plain and untagged, or tagged `!!merge`.
        merge: bool,
        line: u64,
        column: u64,
    },
    Sequence(Vec<Value>),
    Mapping(Map<String, Value>),
}

fn size(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(size).sum::<usize>(),
        Value::Object(map) => 1 + map.values().map(size).sum::<usize>(),
        _ => 1,
    }
}

impl Node {
    fn size(&self) -> usize {
        match self {
            Node::Scalar { .. } => 1,
            Node::Sequence(items) => 1 + items.iter().map(size).sum::<usize>(),
            Node::Mapping(map) => 1 + map.values().map(size).sum::<usize>(),
        }
    }
}

struct YamlReader<'a> {
    source_name: &'a str,
    parser: Parser<'a, StrInput<'a>>,
    /// Completed anchored nodes of the current document, by the parser's anchor id.
    anchors: HashMap<usize, Node>,
    /// Nodes copied by aliases so far in the current document.
    expanded: usize,
}

impl<'a> YamlReader<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), InputError> {
        loop {
            match self.parser.next_event() {
                Some(Ok((event, span))) if is_data(&event) => return Ok((event, span)),
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    return Err(InputError {
                        source_name: self.source_name.to_string(),
                        line: Some(e.marker().line() as u64),
                        column: Some(e.marker().col() as u64 + 1),
                        message: e.info(),
                    });
                }
                None => {
                    return Err(InputError {
                        source_name: self.source_name.to_string(),
                        line: None,
                        column: None,
                        message: "unexpected end of input".to_string(),
                    });
                }
            }
        }
    }
    fn error(&self, span: &Span, message: impl Into<String>) -> InputError {
        self.error_at(
            span.start.line() as u64,
            span.start.col() as u64 + 1,
            message,
        )
    }

    fn error_at(&self, line: u64, column: u64, message: impl Into<String>) -> InputError {
        InputError {
            source_name: self.source_name.to_string(),
            line: Some(line),
            column: Some(column),
            message: message.into(),
        }
    }

    /// The node that starts with `event`, with all its children.
    fn node(&mut self, event: Event<'a>, span: Span) -> Result<Node, InputError> {
        let (node, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let tag = tag.map(|t| format!("{}{}", t.handle(), t.suffix()));
                (self.scalar(&text, style, tag.as_deref(), &span)?, anchor)
            }
            Event::SequenceStart(_, anchor, _) => {
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    let item = self.node(event, span)?;
                    items.push(self.value(item)?);
                }
                (Node::Sequence(items), anchor)
            }
            Event::MappingStart(_, anchor, _) => (self.mapping()?, anchor),
            Event::Alias(id) => {
                let Some(mut node) = self.anchors.get(&id).cloned() else {
                    return Err(self.error(
                        &span,
                        "anchor value contains itself: this alias refers to a node that contains the alias",
                    ));
                };
                self.expanded += node.size();
                if self.expanded > ALIAS_BUDGET {
                    return Err(self.error(
                        &span,
                        format!(
                            "document contains excessive aliasing (aliases copy more than \
                             {ALIAS_BUDGET} nodes); write the repeated parts out, or fewer times"
                        ),
                    ));
                }
                if let Node::Scalar { merge, .. } = &mut node {
                    *merge = false;
                }
                return Ok(node);
            }
            _ => return Err(self.error(&span, "expected a scalar, a sequence or a mapping")),
        };
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(node)
    }

    fn scalar(
        &self,
        text: &str,
        style: ScalarStyle,
        tag: Option<&str>,
        span: &Span,
    ) -> Result<Node, InputError> {
        let start = span.tag_start.as_ref().unwrap_or(&span.start);
        let (line, column) = (start.line() as u64, start.col() as u64 + 1);
        let mut text = text.to_string();
        let scalar = match tag {
            None if style == ScalarStyle::Plain => dialect::resolve_plain(&text),
            None => Scalar::Str,
            Some("tag:yaml.org,2002:binary") => {
                text = decode_base64(&text).ok_or_else(|| {
                    self.error(span, "!!binary value contains invalid base64 data")
                })?;
                Scalar::Str
            }
            Some(tag) => dialect::resolve_tagged(tag, &text).map_err(|e| self.error(span, e))?,
        };
        let merge = match tag {
            None => style == ScalarStyle::Plain && text == "<<",
            Some(tag) => tag == "tag:yaml.org,2002:merge" && text == "<<",
        };
        Ok(Node::Scalar {
            scalar,
            text,
            merge,
            line,
            column,
        })
    }

    fn mapping(&mut self) -> Result<Node, InputError> {
        let mut map = Map::new();
        loop {
            let (event, key_span) = self.next()?;
            if matches!(event, Event::MappingEnd) {
                return Ok(Node::Mapping(map));
            }
            let key = self.node(event, key_span)?;
            let (event, span) = self.next()?;
            let value = self.node(event, span)?;
            match key {
                Node::Scalar { merge: true, .. } => self.merge(&mut map, value, &span)?,
                Node::Scalar { scalar, text, .. } => {
                    let key = dialect::key_string(&scalar, &text)
                        .map_err(|e| self.error(&key_span, e))?;
                    let value = self.value(value)?;
                    map.insert(key, value);
                }
                Node::Sequence(_) | Node::Mapping(_) => {
                    return Err(self.error(
                        &key_span,
                        "a mapping key must be a scalar; kubectl refuses a sequence or a \
                         mapping as a key (\"invalid map key\")",
                    ));
                }
            }
        }
    }

    /// A `<<` merge: the keys of a mapping (or of each mapping of a sequence, earlier ones
    /// winning) are set in `map`, over what it already has; keys written after `<<` win.
    fn merge(
        &self,
        map: &mut Map<String, Value>,
        value: Node,
        span: &Span,
    ) -> Result<(), InputError> {
        let refuse = || {
            self.error(
                span,
                "map merge requires map or sequence of maps as the value",
            )
        };
        match value {
            Node::Mapping(merged) => map.extend(merged),
            Node::Sequence(items) => {
                if !items.iter().all(Value::is_object) {
                    return Err(refuse());
                }
                for item in items.into_iter().rev() {
                    if let Value::Object(merged) = item {
                        map.extend(merged);
                    }
                }
            }
            Node::Scalar { .. } => return Err(refuse()),
        }
        Ok(())
    }

    /// The JSON kubectl makes of a node used as a value.
    fn value(&self, node: Node) -> Result<Value, InputError> {
        match node {
            Node::Scalar {
                scalar,
                text,
                line,
                column,
                ..
            } => dialect::to_json(scalar, &text).map_err(|e| self.error_at(line, column, e)),
            Node::Sequence(items) => Ok(Value::Array(items)),
            Node::Mapping(map) => Ok(Value::Object(map)),
        }
    }
}

/// Whether an event is part of the data (comments, with granit-parser's `comments` feature, are
/// presentation only).
fn is_data(event: &Event<'_>) -> bool {
    matches!(
        event,
        Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(..)
            | Event::DocumentEnd
            | Event::Alias(_)
            | Event::Scalar(..)
            | Event::SequenceStart(..)
            | Event::SequenceEnd
            | Event::MappingStart(..)
            | Event::MappingEnd
    )
}

/// Standard base64 as Go's decoder reads `!!binary` (line breaks ignored), as text (invalid
/// UTF-8 replaced, as Go's JSON encoder does).
fn decode_base64(text: &str) -> Option<String> {
    let symbols: Vec<u8> = text
        .bytes()
        .filter(|b| !matches!(b, b'\n' | b'\r'))
        .collect();
    if !symbols.len().is_multiple_of(4) {
        return None;
    }
    let mut bytes = Vec::with_capacity(symbols.len() / 4 * 3);
    for chunk in symbols.chunks(4) {
        let padding = chunk.iter().rev().take_while(|&&b| b == b'=').count();
        if padding > 2 {
            return None;
        }
        let mut group = 0u32;
        for &b in &chunk[..4 - padding] {
            let sextet = match b {
                b'A'..=b'Z' => b - b'A',
                b'a'..=b'z' => b - b'a' + 26,
                b'0'..=b'9' => b - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                _ => return None,
            };
            group = group << 6 | u32::from(sextet);
        }
        group <<= 6 * padding as u32;
        let decoded = group.to_be_bytes();
        bytes.extend_from_slice(&decoded[1..4 - padding]);
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
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

    fn one(text: &str) -> Value {
        let mut docs = values(text);
        assert_eq!(docs.len(), 1, "{text:?}");
        docs.remove(0)
    }

    fn refused(text: &str) -> InputError {
        parse_documents("bad.yaml", text).expect_err(text)
    }

    #[test]
    fn plain_scalars_are_yaml_1_1_and_quoted_ones_strings() {
        let doc = one(
            "mode: 0777\nperm: 0644\nhex: 0x1F\nauto: yes\nswitch: off\ny: n\nnum: 1_000\n\
             sci: 1e3\nfrac: .5\nodd: 08\noct12: 0o17\nq1: \"0777\"\nq2: 'yes'\nblock: |\n  on\n\
             stamp: 2015-01-01\nempty:\ntilde: ~\n",
        );
        assert_eq!(
            doc,
            json!({"mode": 511, "perm": 420, "hex": 31, "auto": true, "switch": false,
                   "true": false, "num": 1000, "sci": 1000, "frac": 0.5, "odd": 8, "oct12": 15,
                   "q1": "0777", "q2": "yes", "block": "on\n", "stamp": "2015-01-01",
                   "empty": null, "tilde": null})
        );
    }

    #[test]
    fn explicit_tags_are_honoured() {
        let doc = one(
            "a: !!str 0777\nb: !!int \"0777\"\nc: !!bool 'on'\nd: !!float 1\ne: ! 0777\n\
             f: !custom yes\ng: !!binary aGVsbG8=\nh: !<tag:yaml.org,2002:int> '12'\n",
        );
        assert_eq!(
            doc,
            json!({"a": "0777", "b": 511, "c": true, "d": 1, "e": "0777", "f": "yes",
                   "g": "hello", "h": 12})
        );
        let err = refused("spec:\n  x: !!int abc\n");
        assert_eq!((err.line, err.column), (Some(2), Some(12)), "{err}");
        assert_eq!(err.message, "cannot decode !!str `abc` as a !!int");
    }

    #[test]
    fn merge_keys_anchors_and_duplicates_follow_kubectl() {
        let doc = one(
            "base: &base {cpu: 1, memory: 2Gi}\nsmall: &small {cpu: 0.5}\n\
             one:\n  <<: *base\n  memory: 4Gi\n\
             list:\n  <<: [*small, *base]\n\
             before:\n  cpu: 8\n  <<: *base\n\
             quoted:\n  \"<<\": x\n\
             dup:\n  a: 1\n  a: 2\n",
        );
        assert_eq!(doc["one"], json!({"cpu": 1, "memory": "4Gi"}));
        assert_eq!(doc["list"], json!({"cpu": 0.5, "memory": "2Gi"}));
        assert_eq!(doc["before"], json!({"cpu": 1, "memory": "2Gi"}));
        assert_eq!(doc["quoted"], json!({"<<": "x"}));
        assert_eq!(doc["dup"], json!({"a": 2}));
        let err = refused("a: &a 1\nb:\n  <<: *a\n");
        assert!(err.message.contains("map merge requires map"), "{err}");
    }

    #[test]
    fn non_string_keys_become_the_strings_kubectl_makes() {
        assert_eq!(
            one("0777: a\nyes: b\n1.5: c\n1e3: d\n"),
            json!({"511": "a", "true": "b", "1.5": "c", "1000": "d"})
        );
        let err = refused("metadata:\n  ~: x\n");
        assert_eq!((err.line, err.column), (Some(2), Some(3)), "{err}");
        let err = refused("? [a]\n: x\n");
        assert!(err.message.contains("invalid map key"), "{err}");
    }

    #[test]
    fn non_finite_numbers_are_refused_where_they_are_written() {
        let err = refused("kind: A\nspec:\n  ratio: .inf\n");
        assert_eq!((err.line, err.column), (Some(3), Some(10)), "{err}");
        assert!(
            err.message.contains("json: unsupported value: +Inf"),
            "{err}"
        );
        assert!(err.message.contains("'.inf'"), "{err}");
        assert_eq!(one("ratio: '.nan'\n"), json!({"ratio": ".nan"}));
    }

    #[test]
    fn kubectl_document_separators_only_take_comments() {
        assert_eq!(values("--- # first\na: 1\n---\nb: 2\n").len(), 2);
        let err = refused("a: 1\n--- {b: 2}\n");
        assert_eq!((err.line, err.column), (Some(2), Some(4)), "{err}");
        assert!(err.message.contains("next line"), "{err}");
    }

    #[test]
    fn the_documents_before_a_bad_separator_are_read_first() {
        let mut seen = Vec::new();
        let text = "a: 1\n---\nb: 2\n--- {c: 3}\nc: 4\n";
        let err = for_each_document("x.yaml", text, |d| seen.push(d.value)).unwrap_err();
        // The document the bad line would end is lost, as kubectl loses it.
        assert_eq!(seen, vec![json!({"a": 1})]);
        assert_eq!((err.line, err.column), (Some(4), Some(4)), "{err}");
        // A syntax error in a document before the lost one is the one reported; in the lost
        // one, it is never read.
        let err = refused("a: [\n---\nb: 2\n--- {c: 3}\n");
        assert!(!err.message.contains("separator"), "{err}");
        let err = refused("a: [\n--- {b: 2}\n");
        assert!(err.message.contains("separator"), "{err}");
    }

    #[test]
    fn syntax_error_positions_are_the_parser_s_and_the_text_repeats_none() {
        let err = refused("kind: A\nspec:\n  x: [1, 2\n  y: 3\n");
        let shown = err.to_string();
        assert!(!shown.contains(" line "), "{shown}");
        assert!(shown.starts_with("bad.yaml:"), "{shown}");
        let err = refused("a: 1\n b: 2\n");
        assert_eq!(err.line, Some(2), "{err}");
    }

    #[test]
    fn alias_bombs_and_self_references_are_refused() {
        let err = refused("a: &a\n  b: *a\n");
        assert!(err.message.contains("contains itself"), "{err}");
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (name, previous) in ["b", "c", "d", "e", "f", "g"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f"])
        {
            bomb.push_str(&format!(
                "{name}: &{name} [{}]\n",
                vec![format!("*{previous}"); 10].join(", ")
            ));
        }
        assert!(refused(&bomb).message.contains("excessive aliasing"));
    }
}
