//! Offline structural validation of a custom resource against its CRD schema, reporting what
//! kube-apiserver would reject with kube-apiserver's messages.

use serde_json::Value;

use super::pattern::QUANTITY_PATTERN;
use super::schema::{self, Node, Rule, Ty};
use super::structural::{self, json_type, non_nullable_null};
use crate::finding::{Compat, Finding};

/// Validates `obj` against the CRD schema of `api_version`/`kind` as kube-apiserver does after
/// defaulting (call [`super::apply_defaults`] first to see exactly what the API server sees).
///
/// Reports, as errors with KubeRay compatibility (KubeRay's CRD enforces the same schema):
/// wrong types (`schema-type`, including int-or-string and integer versus number), missing
/// required fields (`schema-required`), values outside an enum (`schema-enum`), `minimum` /
/// `maximum` (`schema-minimum`, `schema-maximum`), `minItems` / `maxItems` (`schema-min-items`,
/// `schema-max-items`), `minLength` / `maxLength` (`schema-min-length`, `schema-max-length`),
/// the quantity and condition `pattern`s (`schema-pattern`), and the CRD's CEL rules (`cel-<name>`; rules that
/// compare with `oldSelf` only apply to updates and are skipped). Fields the schema does not
/// declare are warnings (`unknown-field`): the API server prunes them, it does not reject them.
/// Schema errors come first, in document order, then CEL errors.
///
/// An unknown `apiVersion`/`kind` yields one `schema-kind` error. Never panics, whatever the
/// JSON.
pub fn validate_schema(api_version: &str, kind: &str, obj: &Value) -> Vec<Finding> {
    let root = match schema::lookup(api_version, kind) {
        Ok(root) => root,
        Err(e) => {
            return vec![Finding::error(
                "schema-kind",
                "",
                e.to_string(),
                Compat::Kuberay,
            )];
        }
    };
    let mut v = Validator::default();
    let mut path = String::new();
    v.node(obj, root, &mut path, true);
    v.findings.append(&mut v.cel);
    v.findings
}

/// [`super::apply_defaults`] followed by [`validate_schema`], in one walk of the object instead
/// of two: each member is pruned and defaulted, then validated as soon as its subtree is
/// defaulted. The object and the findings are exactly those of the two calls in sequence
/// (property tests pin this).
pub fn default_and_validate(api_version: &str, kind: &str, obj: &mut Value) -> Vec<Finding> {
    match schema::lookup(api_version, kind) {
        Ok(root) if obj.is_object() => default_and_validate_node(obj, root),
        _ => {
            let mut findings = Vec::new();
            if let Err(e) = super::apply_defaults(api_version, kind, obj) {
                findings.push(Finding::error(
                    "schema-defaults",
                    "",
                    e.to_string(),
                    Compat::Kuberay,
                ));
            }
            findings.extend(validate_schema(api_version, kind, obj));
            findings
        }
    }
}

/// Defaults and validates `obj` against one compiled schema node (the root of a document).
pub(crate) fn default_and_validate_node(obj: &mut Value, root: &Node) -> Vec<Finding> {
    let mut v = Validator::default();
    let mut path = String::new();
    v.default_and_node(obj, root, &mut path, true);
    v.findings.append(&mut v.cel);
    v.findings
}

/// Validates `obj` against one compiled schema node (the root of a document).
#[cfg(test)]
pub(crate) fn validate_node(obj: &Value, root: &Node) -> Vec<Finding> {
    let mut v = Validator::default();
    let mut path = String::new();
    v.node(obj, root, &mut path, true);
    v.findings.append(&mut v.cel);
    v.findings
}

#[derive(Default)]
struct Validator {
    findings: Vec<Finding>,
    cel: Vec<Finding>,
}

/// A number as Go's `%v` prints it in these messages.
fn format_number(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

/// A value as `field.Error` prints it: strings quoted, numbers and booleans bare.
fn format_value(value: &Value) -> String {
    match value {
        Value::String(s) => quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_owned(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Go's `%q` for the strings that occur in practice (JSON escaping is the same for them).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn type_matches(ty: Ty, value: &Value) -> bool {
    match ty {
        Ty::Object => value.is_object(),
        Ty::Array => value.is_array(),
        Ty::String => value.is_string(),
        Ty::Integer => is_integer(value),
        Ty::Number => value.is_number(),
        Ty::Boolean => value.is_boolean(),
        Ty::IntOrString => value.is_string() || is_integer(value),
        Ty::Any => true,
    }
}

/// `spec.x in body` (`body` alone at the root).
/// What was written, as the user would recognise it: a scalar as JSON (long text shortened), a
/// collection by its shape.
fn written(value: &Value) -> String {
    match value {
        Value::String(text) if text.chars().count() > 60 => {
            let head: String = text.chars().take(57).collect();
            format!("{}...", quote(&head))
        }
        Value::Array(_) => "[...] (a list)".to_owned(),
        Value::Object(_) => "{...} (a mapping)".to_owned(),
        scalar => scalar.to_string(),
    }
}

/// What to write instead, for a field of type `ty`.
fn type_hint(ty: Ty) -> &'static str {
    match ty {
        Ty::Integer => "write a whole number without quotes, e.g. 3",
        Ty::Number => "write a number without quotes, e.g. 1.5",
        Ty::Boolean => "write true or false without quotes",
        Ty::String => "write text, quoted if it looks like a number or a boolean, e.g. \"2.9\"",
        Ty::IntOrString => "write a whole number or a quoted string, e.g. 2 or \"500m\"",
        Ty::Array => "write a list, e.g. [a, b] or one \"- item\" line per item",
        Ty::Object => "write a mapping of keys to values, e.g. {key: value}",
        Ty::Any => "write any value",
    }
}

fn subject(path: &str) -> String {
    if path.is_empty() {
        "body".to_owned()
    } else {
        format!("{path} in body")
    }
}

fn push_key(path: &mut String, key: &str) -> usize {
    let len = path.len();
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
    len
}

fn push_index(path: &mut String, index: usize) -> usize {
    let len = path.len();
    path.push('[');
    path.push_str(&index.to_string());
    path.push(']');
    len
}

impl Validator {
    fn error(&mut self, rule: &str, path: &str, message: String) {
        self.findings
            .push(Finding::error(rule, path, message, Compat::Kuberay));
    }

    fn node(&mut self, value: &Value, s: &Node, path: &mut String, root: bool) {
        if value.is_null() && (s.nullable || s.ty == Ty::Any) {
            return;
        }
        if !type_matches(s.ty, value) {
            // The API server's sentence, but echoing what was written where it repeats the
            // type it found, and saying what to write.
            let message = format!(
                "Invalid value: {}: {} must be of type {}: \"{}\"; {}",
                written(value),
                subject(path),
                s.ty.name(),
                json_type(value),
                type_hint(s.ty)
            );
            self.error("schema-type", path, message);
            return;
        }
        if !s.enum_values.is_empty() && !s.enum_values.contains(value) {
            let supported: Vec<String> = s
                .enum_values
                .iter()
                .map(|v| match v {
                    Value::String(s) => quote(s),
                    other => serde_json::to_string(other).unwrap_or_default(),
                })
                .collect();
            let message = format!(
                "Unsupported value: {}: supported values: {}",
                format_value(value),
                supported.join(", ")
            );
            self.error("schema-enum", path, message);
        }
        match value {
            Value::String(text) => self.string(text, s, path),
            Value::Number(n) => {
                if let Some(f) = n.as_f64() {
                    self.number(value, f, s, path);
                }
            }
            Value::Array(items) => self.array(items, s, path),
            Value::Object(map) => self.object(map, s, path, root),
            _ => {}
        }
        for rule in &s.rules {
            self.cel_rule(rule, value, s, path);
        }
    }

    /// [`structural::prune_nulls_and_default`] of `value` followed by [`Self::node`] on the
    /// result, in one walk. Scalars are never changed by defaulting; containers are defaulted
    /// member by member, each member validated right after its own subtree.
    fn default_and_node(&mut self, value: &mut Value, s: &Node, path: &mut String, root: bool) {
        let container = matches!(value, Value::Object(_) | Value::Array(_));
        if !container {
            self.node(value, s, path, root);
            return;
        }
        if !type_matches(s.ty, value) || !s.enum_values.is_empty() {
            // Rare: a type error stops validation here, and an enum compares the whole
            // defaulted value before any member is validated. Two walks keep the order.
            structural::prune_nulls_and_default(value, s);
            self.node(value, s, path, root);
            return;
        }
        match value {
            Value::Array(items) => self.default_and_array(items, s, path),
            Value::Object(map) => self.default_and_object(map, s, path, root),
            _ => {}
        }
        for rule in &s.rules {
            self.cel_rule(rule, value, s, path);
        }
    }

    /// [`Self::array`] on items that are defaulted as they are validated.
    fn default_and_array(&mut self, items: &mut [Value], s: &Node, path: &mut String) {
        self.array_length(items.len(), s, path);
        if let Some(item_schema) = s.items.as_deref() {
            for (i, item) in items.iter_mut().enumerate() {
                let mark = push_index(path, i);
                self.default_or_fill(item, item_schema, path);
                path.truncate(mark);
            }
        }
    }

    /// An array item or `additionalProperties` value: a non-nullable `null` becomes the schema's
    /// default (defaulted, then validated), anything else is defaulted and validated.
    fn default_or_fill(&mut self, value: &mut Value, s: &Node, path: &mut String) {
        if non_nullable_null(value, s)
            && let Some(d) = &s.default
        {
            *value = d.clone();
            structural::default(value, s);
            self.node(value, s, path, false);
        } else {
            self.default_and_node(value, s, path, false);
        }
    }

    /// [`Self::object`] on members that are defaulted as they are validated. Members filled in
    /// from defaults are filled first (the walk of the others never changes which are missing)
    /// and only validated: defaulting only defaults them, it never prunes them.
    fn default_and_object(
        &mut self,
        map: &mut serde_json::Map<String, Value>,
        s: &Node,
        path: &mut String,
        root: bool,
    ) {
        structural::prune_null_members(map, s);
        let mut filled: Vec<&str> = Vec::new();
        if s.has_defaults {
            for (key, default_value) in &s.defaulted {
                let Some(m) = s.properties.get(key) else {
                    continue;
                };
                if map
                    .get(key)
                    .is_none_or(|current| non_nullable_null(current, m))
                {
                    let mut value = default_value.clone();
                    structural::default(&mut value, m);
                    map.insert(key.clone(), value);
                    filled.push(key);
                }
            }
        }
        self.required(map, s, path);
        for (key, child) in map.iter_mut() {
            if root && key == "metadata" {
                // Defaulted as any member, but never validated (see `object`).
                if let Some(m) = s.member(key) {
                    structural::prune_nulls_and_default(child, m);
                }
                continue;
            }
            let mark = push_key(path, key);
            if let Some(m) = s.properties.get(key) {
                if filled.contains(&key.as_str()) {
                    self.node(child, m, path, false);
                } else {
                    self.default_and_node(child, m, path, false);
                }
            } else if let Some(m) = s.additional.as_deref() {
                self.default_or_fill(child, m, path);
            } else if !s.preserve_unknown {
                self.unknown_field(path);
            }
            path.truncate(mark);
        }
    }

    fn string(&mut self, text: &str, s: &Node, path: &str) {
        if s.max_length.is_some() || s.min_length.is_some() {
            self.length(text, s, path);
        }
        if let (Some(pattern), Some(known)) = (&s.pattern, s.known_pattern) {
            // Only patterns raygate knows are checked; the generated CRDs declare no other.
            if !known.matches(text) {
                let message = if pattern == QUANTITY_PATTERN {
                    format!(
                        "Invalid value: {}: {} is not a Kubernetes quantity: write a number with \
                         an optional unit suffix, e.g. 2, 500m or 4Gi",
                        quote(text),
                        subject(path)
                    )
                } else {
                    format!(
                        "Invalid value: {}: {} should match '{pattern}'",
                        quote(text),
                        subject(path)
                    )
                };
                self.error("schema-pattern", path, message);
            }
        }
    }

    /// `maxLength` / `minLength`, in characters (counted only where the schema bounds them).
    fn length(&mut self, text: &str, s: &Node, path: &str) {
        let chars = i64::try_from(text.chars().count()).unwrap_or(i64::MAX);
        if let Some(max) = s.max_length
            && chars > max
        {
            self.error(
                "schema-max-length",
                path,
                format!("Too long: may not be more than {max} bytes"),
            );
        }
        if let Some(min) = s.min_length
            && chars < min
        {
            let message = format!(
                "Invalid value: {}: {} should be at least {min} chars long",
                quote(text),
                subject(path)
            );
            self.error("schema-min-length", path, message);
        }
    }

    fn number(&mut self, value: &Value, f: f64, s: &Node, path: &str) {
        if let Some(min) = s.minimum {
            let (bad, relation) = if s.exclusive_minimum {
                (f <= min, "greater than")
            } else {
                (f < min, "greater than or equal to")
            };
            if bad {
                let message = format!(
                    "Invalid value: {}: {} should be {relation} {}",
                    format_value(value),
                    subject(path),
                    format_number(min)
                );
                self.error("schema-minimum", path, message);
            }
        }
        if let Some(max) = s.maximum {
            let (bad, relation) = if s.exclusive_maximum {
                (f >= max, "less than")
            } else {
                (f > max, "less than or equal to")
            };
            if bad {
                let message = format!(
                    "Invalid value: {}: {} should be {relation} {}",
                    format_value(value),
                    subject(path),
                    format_number(max)
                );
                self.error("schema-maximum", path, message);
            }
        }
    }

    fn array(&mut self, items: &[Value], s: &Node, path: &mut String) {
        self.array_length(items.len(), s, path);
        if let Some(item_schema) = s.items.as_deref() {
            for (i, item) in items.iter().enumerate() {
                let mark = push_index(path, i);
                self.node(item, item_schema, path, false);
                path.truncate(mark);
            }
        }
    }

    /// `minItems` / `maxItems`.
    fn array_length(&mut self, len: usize, s: &Node, path: &str) {
        let len = i64::try_from(len).unwrap_or(i64::MAX);
        if let Some(min) = s.min_items
            && len < min
        {
            let message = format!(
                "Invalid value: {len}: {} should have at least {min} items",
                subject(path)
            );
            self.error("schema-min-items", path, message);
        }
        if let Some(max) = s.max_items
            && len > max
        {
            let message = format!("Too many: {len}: must have at most {max} items");
            self.error("schema-max-items", path, message);
        }
    }

    fn object(
        &mut self,
        map: &serde_json::Map<String, Value>,
        s: &Node,
        path: &mut String,
        root: bool,
    ) {
        self.required(map, s, path);
        for (key, child) in map {
            if root && key == "metadata" {
                // ObjectMeta is validated by the API server itself, not by the CRD schema.
                continue;
            }
            let mark = push_key(path, key);
            match s.member(key) {
                Some(child_schema) => self.node(child, child_schema, path, false),
                None if s.preserve_unknown => {}
                None => self.unknown_field(path),
            }
            path.truncate(mark);
        }
    }

    /// `required` members that are missing.
    fn required(&mut self, map: &serde_json::Map<String, Value>, s: &Node, path: &mut String) {
        for field in &s.required {
            if !map.contains_key(field) {
                let mark = push_key(path, field);
                self.error("schema-required", path, "Required value".to_owned());
                path.truncate(mark);
            }
        }
    }

    /// A member the schema does not declare: the API server prunes it, so only a warning.
    fn unknown_field(&mut self, path: &str) {
        self.findings.push(Finding::warning(
            "unknown-field",
            path,
            format!("unknown field {}", quote(path)),
            Compat::Kuberay,
        ));
    }

    fn cel_rule(&mut self, rule: &Rule, value: &Value, s: &Node, path: &str) {
        let Some((name, holds)) = evaluate(&rule.rule, value) else {
            return;
        };
        if !holds {
            let message = format!("Invalid value: \"{}\": {}", s.ty.name(), rule.message);
            self.cel.push(Finding::error(
                format!("cel-{name}"),
                path,
                message,
                Compat::Kuberay,
            ));
        }
    }
}

fn has(value: &Value, field: &str) -> bool {
    value.get(field).is_some_and(|v| !v.is_null())
}

/// The CEL rules the generated CRDs declare, each implemented explicitly and keyed by its exact
/// text. Returns the rule's short name and whether it holds, or `None` for a rule that does not
/// apply offline (transition rules comparing with `oldSelf`) or is unknown.
pub(crate) fn evaluate(rule: &str, value: &Value) -> Option<(&'static str, bool)> {
    match rule {
        "self == oldSelf" => None,
        "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']" => Some((
            "managed-by",
            matches!(
                value.as_str(),
                Some("ray.io/kuberay-operator" | "kueue.x-k8s.io/multikueue")
            ),
        )),
        "!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))" => Some((
            "deletion-strategy-exclusive",
            !((has(value, "onSuccess") || has(value, "onFailure")) && has(value, "deletionRules")),
        )),
        "(has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules)" => Some((
            "deletion-strategy-required",
            (has(value, "onSuccess") && has(value, "onFailure")) || has(value, "deletionRules"),
        )),
        "!(has(self.jobStatus) && has(self.jobDeploymentStatus))" => Some((
            "deletion-condition-exclusive",
            !(has(value, "jobStatus") && has(value, "jobDeploymentStatus")),
        )),
        "has(self.jobStatus) || has(self.jobDeploymentStatus)" => Some((
            "deletion-condition-required",
            has(value, "jobStatus") || has(value, "jobDeploymentStatus"),
        )),
        _ => None,
    }
}

/// Whether `rule` is one raygate knows (implemented, or deliberately skipped offline).
#[cfg(test)]
pub(crate) fn is_known_rule(rule: &str) -> bool {
    rule == "self == oldSelf" || evaluate(rule, &Value::Null).is_some()
}
