//! The CRD schemas compiled once into a compact tree for fast defaulting and validation.

use rustc_hash::FxHashMap;
use std::sync::LazyLock;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use super::CrdError;
use super::generate::CRDS;
use super::pattern::KnownPattern;

/// The JSON type a schema node accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
    /// `x-kubernetes-int-or-string`.
    IntOrString,
    /// No type (only with `x-kubernetes-preserve-unknown-fields`).
    Any,
}

impl Ty {
    fn parse(ty: Option<&str>, int_or_string: bool) -> Self {
        if int_or_string {
            return Self::IntOrString;
        }
        match ty {
            Some("object") => Self::Object,
            Some("array") => Self::Array,
            Some("string") => Self::String,
            Some("integer") => Self::Integer,
            Some("number") => Self::Number,
            Some("boolean") => Self::Boolean,
            _ => Self::Any,
        }
    }

    /// The type list kube-openapi prints in "must be of type …".
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Object => "object",
            Self::Array => "array",
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::IntOrString => "integer,string",
            Self::Any => "",
        }
    }
}

/// One declared CEL rule.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub(crate) rule: String,
    pub(crate) message: String,
}

/// One compiled schema node.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) ty: Ty,
    /// Looked up once per member of every checked object: FxHash, not SipHash (the table is
    /// fixed, so hash flooding through input keys cannot degrade it).
    pub(crate) properties: FxHashMap<String, Node>,
    pub(crate) additional: Option<Box<Node>>,
    pub(crate) items: Option<Box<Node>>,
    pub(crate) required: Vec<String>,
    pub(crate) default: Option<Value>,
    pub(crate) nullable: bool,
    pub(crate) preserve_unknown: bool,
    pub(crate) enum_values: Vec<Value>,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_maximum: bool,
    pub(crate) min_items: Option<i64>,
    pub(crate) max_items: Option<i64>,
    pub(crate) min_length: Option<i64>,
    pub(crate) max_length: Option<i64>,
    pub(crate) pattern: Option<String>,
    /// `pattern`, when raygate knows how to match it (the generated CRDs declare no other).
    pub(crate) known_pattern: Option<KnownPattern>,
    pub(crate) rules: Vec<Rule>,
    /// Whether this node or anything below it declares a default.
    pub(crate) has_defaults: bool,
    /// Properties that declare a default, in name order (defaulting fills them in this order).
    pub(crate) defaulted: Vec<(String, Value)>,
}

impl Node {
    pub(crate) fn compile(s: &JSONSchemaProps) -> Self {
        let properties: FxHashMap<String, Node> = s
            .properties
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), Node::compile(v)))
            .collect();
        let additional = match &s.additional_properties {
            Some(JSONSchemaPropsOrBool::Schema(child)) => Some(Box::new(Node::compile(child))),
            _ => None,
        };
        let items = match &s.items {
            Some(JSONSchemaPropsOrArray::Schema(child)) => Some(Box::new(Node::compile(child))),
            Some(JSONSchemaPropsOrArray::Schemas(children)) => {
                children.first().map(|c| Box::new(Node::compile(c)))
            }
            None => None,
        };
        let mut defaulted: Vec<(String, Value)> = properties
            .iter()
            .filter_map(|(k, v)| v.default.clone().map(|d| (k.clone(), d)))
            .collect();
        defaulted.sort_by(|a, b| a.0.cmp(&b.0));
        let default = s.default.as_ref().map(|d| d.0.clone());
        let has_defaults = default.is_some()
            || properties.values().any(|p| p.has_defaults)
            || additional.as_ref().is_some_and(|a| a.has_defaults)
            || items.as_ref().is_some_and(|i| i.has_defaults);
        Node {
            ty: Ty::parse(
                s.type_.as_deref(),
                s.x_kubernetes_int_or_string == Some(true),
            ),
            properties,
            additional,
            items,
            required: s.required.clone().unwrap_or_default(),
            default,
            nullable: s.nullable == Some(true),
            preserve_unknown: s.x_kubernetes_preserve_unknown_fields == Some(true),
            enum_values: s.enum_.iter().flatten().map(|v| v.0.clone()).collect(),
            minimum: s.minimum,
            exclusive_minimum: s.exclusive_minimum == Some(true),
            maximum: s.maximum,
            exclusive_maximum: s.exclusive_maximum == Some(true),
            min_items: s.min_items,
            max_items: s.max_items,
            min_length: s.min_length,
            max_length: s.max_length,
            pattern: s.pattern.clone(),
            known_pattern: s.pattern.as_deref().and_then(KnownPattern::of),
            rules: s
                .x_kubernetes_validations
                .iter()
                .flatten()
                .map(|r| Rule {
                    rule: r.rule.clone(),
                    message: r.message.clone().unwrap_or_default(),
                })
                .collect(),
            has_defaults,
            defaulted,
        }
    }

    /// Schema of the member `key` of an object: its property, else `additionalProperties`.
    pub(crate) fn member(&self, key: &str) -> Option<&Node> {
        self.properties.get(key).or(self.additional.as_deref())
    }

    /// Every node of the tree, depth first (used by tests).
    #[cfg(test)]
    pub(crate) fn walk<'a>(&'a self, out: &mut Vec<&'a Node>) {
        out.push(self);
        let mut keys: Vec<_> = self.properties.keys().collect();
        keys.sort();
        for k in keys {
            if let Some(p) = self.properties.get(k) {
                p.walk(out);
            }
        }
        if let Some(a) = &self.additional {
            a.walk(out);
        }
        if let Some(i) = &self.items {
            i.walk(out);
        }
    }
}

/// Compiled root schemas by (apiVersion, kind).
static SCHEMAS: LazyLock<Vec<(String, String, Node)>> = LazyLock::new(|| {
    let mut out = Vec::new();
    for crd in CRDS.iter() {
        let group = crd.spec.group.clone();
        let kind = crd.spec.names.kind.clone();
        for version in &crd.spec.versions {
            if !version.served {
                continue;
            }
            if let Some(schema) = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
            {
                out.push((
                    format!("{group}/{}", version.name),
                    kind.clone(),
                    Node::compile(schema),
                ));
            }
        }
    }
    out
});

/// The compiled schema of `api_version`/`kind`.
pub(crate) fn lookup(api_version: &str, kind: &str) -> Result<&'static Node, CrdError> {
    SCHEMAS
        .iter()
        .find(|(v, k, _)| v == api_version && k == kind)
        .map(|(_, _, node)| node)
        .ok_or_else(|| CrdError::UnknownKind {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        })
}
