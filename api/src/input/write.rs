//! Writing JSON values as YAML that kubectl reads back as the same values (`docs/yaml.md`,
//! "Writing YAML"): the reader's rules decide which strings may stay plain.

use serde_json::{Map, Value};

use super::dialect::{Scalar, resolve_plain};

/// `value` as one YAML document (without a `---` marker), in block style with kubectl's compact
/// sequences, such that [`super::parse_documents`] (and kubectl) read it back as `value` (up to
/// [`super::as_the_api_server_reads`]).
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => mapping(&mut out, map, 0, false),
        Value::Array(items) if !items.is_empty() => sequence(&mut out, items, 0, false),
        scalar => {
            inline(&mut out, scalar, 0);
            out.push('\n');
        }
    }
    out
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// A block mapping at indentation `n`; `inline_first`: the first key continues the current line
/// (after a sequence's `- `).
fn mapping(out: &mut String, map: &Map<String, Value>, n: usize, inline_first: bool) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !inline_first {
            indent(out, n);
        }
        if is_plain_safe(key) {
            out.push_str(key);
        } else {
            double_quoted(out, key);
        }
        out.push(':');
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                mapping(out, inner, n + 2, false);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                sequence(out, items, n, false);
            }
            scalar => {
                out.push(' ');
                inline(out, scalar, n + 2);
                out.push('\n');
            }
        }
    }
}

/// A block sequence whose `- ` markers are at indentation `n`.
fn sequence(out: &mut String, items: &[Value], n: usize, inline_first: bool) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 || !inline_first {
            indent(out, n);
        }
        out.push_str("- ");
        match item {
            Value::Object(inner) if !inner.is_empty() => mapping(out, inner, n + 2, true),
            Value::Array(inner) if !inner.is_empty() => sequence(out, inner, n + 2, true),
            scalar => {
                inline(out, scalar, n + 2);
                out.push('\n');
            }
        }
    }
}

/// A scalar or an empty collection on the current line; a literal block's lines are indented
/// by `content_indent`.
fn inline(out: &mut String, value: &Value, content_indent: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) if is_plain_safe(s) => out.push_str(s),
        Value::String(s) if is_literal_safe(s) => literal(out, s, content_indent),
        Value::String(s) => double_quoted(out, s),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

/// A number in a spelling kubectl reads as the same number: floats of extreme magnitude in
/// exponent form (the float syntax needs digits before `e`, which Rust's `{:e}` gives).
fn number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() => {
            let magnitude = f.abs();
            if magnitude != 0.0 && !(1e-4..1e16).contains(&magnitude) {
                format!("{f:e}")
            } else {
                format!("{f}")
            }
        }
        _ => n.to_string(),
    }
}

/// Whether `s` may be written unquoted: it reads back as this very string by kubectl's rules
/// and has nothing YAML's plain-scalar syntax treats specially (conservatively: ASCII letters,
/// digits, a few punctuation marks, single inner spaces; no `: `, ` #`, leading indicator).
fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    (first.is_ascii_alphanumeric() || matches!(first, '/' | '.' | '_'))
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && !s.contains(" #")
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    ' ' | '-'
                        | '_'
                        | '.'
                        | '/'
                        | ':'
                        | '='
                        | '+'
                        | '@'
                        | '%'
                        | '^'
                        | ','
                        | '('
                        | ')'
                        | '$'
                        | ';'
                        | '~'
                        | '<'
                        | '>'
                )
        })
        && resolve_plain(s) == Scalar::Str
}

/// Characters YAML (1.1, as kubectl's parser reads it) takes as content verbatim: printable, and
/// not one of the line breaks YAML 1.1 adds (NEL, LS, PS) or a byte-order mark.
fn is_verbatim(c: char) -> bool {
    matches!(c, ' '..='~' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..='\u{10ffff}')
        && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// Whether `s` can be a `|` literal block: several lines, each verbatim text without leading
/// blanks on the first line, blank-only lines, or more than one final line break.
fn is_literal_safe(s: &str) -> bool {
    let body = s.strip_suffix('\n').unwrap_or(s);
    body.contains('\n')
        && !body.ends_with('\n')
        && !body.starts_with(' ')
        && body.split('\n').all(|line| {
            line.chars().all(is_verbatim) && (line.is_empty() || !line.trim().is_empty())
        })
}

fn literal(out: &mut String, s: &str, content_indent: usize) {
    let (body, chomp) = match s.strip_suffix('\n') {
        Some(body) => (body, "|"),
        None => (s, "|-"),
    };
    out.push_str(chomp);
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            indent(out, content_indent);
            out.push_str(line);
        }
    }
}

/// A double-quoted scalar with YAML escapes for everything not taken verbatim.
fn double_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if is_verbatim(c) => out.push(c),
            c if u32::from(c) <= 0xff => out.push_str(&format!("\\x{:02X}", u32::from(c))),
            c if u32::from(c) <= 0xffff => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08X}", u32::from(c))),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::parse_documents;
    use serde_json::json;

    fn round_trip(value: &Value) -> Value {
        let text = to_yaml(value);
        let mut docs = parse_documents("out.yaml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(docs.len(), 1, "{text}");
        docs.remove(0).value
    }

    #[test]
    fn strings_kubectl_would_read_as_something_else_are_quoted() {
        let value = json!({
            "mode": "0777", "yes": "yes", "on": "on", "y": "y", "tilde": "~", "empty": "",
            "sci": "1e3", "inf": ".inf", "octal": "0o17", "hex": "0x_1", "merge": "<<",
            "image": "rayproject/ray:2.9.0", "cmd": "python -c 'print(1)'", "colon": "a: b",
            "hash": "a #b", "dash": "-Xmx1g", "space": " padded ", "nel": "a\u{85}b",
            "ls": "a\u{2028}b", "ctl": "a\u{7}b", "quote": "say \"hi\"",
            "script": "set -e\nray start --head\n", "noeol": "a\nb", "blank": "a\n\nb\n",
            "tabs": "a\tb\nc", "lead": " a\nb", "trail": "a\n\n",
        });
        let text = to_yaml(&value);
        for quoted in [
            "\"0777\"", "\"yes\"", "\"on\":", "\"y\"", "\"~\"", "\"1e3\"", "\"<<\"",
        ] {
            assert!(text.contains(quoted), "{quoted} not in:\n{text}");
        }
        assert!(text.contains("image: rayproject/ray:2.9.0\n"), "{text}");
        assert!(
            text.contains("script: |\n  set -e\n  ray start --head\n"),
            "{text}"
        );
        assert_eq!(round_trip(&value), value);
    }

    #[test]
    fn numbers_and_nesting_read_back_the_same() {
        let value = json!({
            "int": 511, "neg": -3, "big": u64::MAX as f64, "half": 0.5, "tiny": 1.5e-7,
            "huge": 1e300, "t": true, "n": null,
            "list": [[1, [2]], {"a": {"b": []}}, {}, [], "x"],
            "nested": {"deeper": {"deepest": [{"k": "v", "l": [1, 2]}]}},
        });
        assert_eq!(round_trip(&value), value);
        assert_eq!(round_trip(&json!([1, "two"])), json!([1, "two"]));
        assert_eq!(round_trip(&json!("yes")), json!("yes"));
    }
}
