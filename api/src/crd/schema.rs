//! The CRD schemas compiled once into a compact tree for fast defaulting and validation.

use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::sync::{Arc, LazyLock};

#[cfg(test)]
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::CrdError;
use super::generate::{COMMITTED, QUEUE_POLICY_FILE};
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
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rule {
    pub(crate) rule: String,
    pub(crate) message: String,
}

/// One compiled schema node.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "Declared")]
pub(crate) struct Node {
    pub(crate) ty: Ty,
    /// Looked up once per member of every checked object: FxHash, not SipHash (the table is
    /// fixed, so hash flooding through input keys cannot degrade it).
    pub(crate) properties: FxHashMap<String, Shared>,
    pub(crate) additional: Option<Shared>,
    pub(crate) items: Option<Shared>,
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

/// A schema node as a CRD declares it, reduced to what [`Node`] keeps: the CRD YAML is read
/// straight into compiled [`Node`]s through this (`#[serde(from)]`), one node at a time, never
/// into k8s-openapi's `JSONSchemaProps`. A typed `JSONSchemaProps` tree of both `ray.io` CRDs
/// takes 36 MiB of heap (each node is a struct of ~45 optional fields, each map a B-tree of
/// 11-slot nodes) against 7 MiB for compiled nodes, and it was kept for the life of the
/// process: most of the webhook's memory. Equal compiled subtrees are then shared ([`Shared`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Declared {
    #[serde(rename = "type")]
    ty: Option<String>,
    #[serde(rename = "x-kubernetes-int-or-string")]
    int_or_string: Option<bool>,
    properties: Option<FxHashMap<String, Shared>>,
    additional_properties: Option<SchemaOrBool>,
    items: Option<SchemaOrSchemas>,
    required: Option<Vec<String>>,
    default: Option<Value>,
    nullable: Option<bool>,
    #[serde(rename = "x-kubernetes-preserve-unknown-fields")]
    preserve_unknown: Option<bool>,
    #[serde(rename = "enum")]
    enum_values: Option<Vec<Value>>,
    minimum: Option<f64>,
    exclusive_minimum: Option<bool>,
    maximum: Option<f64>,
    exclusive_maximum: Option<bool>,
    min_items: Option<i64>,
    max_items: Option<i64>,
    min_length: Option<i64>,
    max_length: Option<i64>,
    pattern: Option<String>,
    #[serde(rename = "x-kubernetes-validations")]
    rules: Option<Vec<DeclaredRule>>,
}

/// One `x-kubernetes-validations` entry.
#[derive(Deserialize)]
struct DeclaredRule {
    rule: String,
    message: Option<String>,
}

/// `additionalProperties`: a schema, or a boolean (which constrains nothing raygate checks).
struct SchemaOrBool(Option<Shared>);

impl<'de> Deserialize<'de> for SchemaOrBool {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Expect;
        impl<'de> Visitor<'de> for Expect {
            type Value = SchemaOrBool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a schema or a boolean")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<SchemaOrBool, E> {
                Ok(SchemaOrBool(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SchemaOrBool, A::Error> {
                Shared::deserialize(MapAccessDeserializer::new(map)).map(|n| SchemaOrBool(Some(n)))
            }
        }
        deserializer.deserialize_any(Expect)
    }
}

/// `items`: a schema, or a list of schemas of which the first applies (as kube-openapi reads
/// the legacy tuple form).
struct SchemaOrSchemas(Option<Shared>);

impl<'de> Deserialize<'de> for SchemaOrSchemas {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Expect;
        impl<'de> Visitor<'de> for Expect {
            type Value = SchemaOrSchemas;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a schema or a list of schemas")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SchemaOrSchemas, A::Error> {
                Shared::deserialize(MapAccessDeserializer::new(map))
                    .map(|n| SchemaOrSchemas(Some(n)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SchemaOrSchemas, A::Error> {
                let first = seq.next_element::<Shared>()?;
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(SchemaOrSchemas(first))
            }
        }
        deserializer.deserialize_any(Expect)
    }
}

impl From<Declared> for Node {
    fn from(s: Declared) -> Self {
        let properties = s.properties.unwrap_or_default();
        let additional = s.additional_properties.and_then(|a| a.0);
        let items = s.items.and_then(|i| i.0);
        let mut defaulted: Vec<(String, Value)> = properties
            .iter()
            .filter_map(|(k, v)| v.default.clone().map(|d| (k.clone(), d)))
            .collect();
        defaulted.sort_by(|a, b| a.0.cmp(&b.0));
        let has_defaults = s.default.is_some()
            || properties.values().any(|p| p.has_defaults)
            || additional.as_ref().is_some_and(|a| a.has_defaults)
            || items.as_ref().is_some_and(|i| i.has_defaults);
        let known_pattern = s.pattern.as_deref().and_then(KnownPattern::of);
        Node {
            ty: Ty::parse(s.ty.as_deref(), s.int_or_string == Some(true)),
            properties,
            additional,
            items,
            required: s.required.unwrap_or_default(),
            default: s.default,
            nullable: s.nullable == Some(true),
            preserve_unknown: s.preserve_unknown == Some(true),
            enum_values: s.enum_values.unwrap_or_default(),
            minimum: s.minimum,
            exclusive_minimum: s.exclusive_minimum == Some(true),
            maximum: s.maximum,
            exclusive_maximum: s.exclusive_maximum == Some(true),
            min_items: s.min_items,
            max_items: s.max_items,
            min_length: s.min_length,
            max_length: s.max_length,
            pattern: s.pattern,
            known_pattern,
            rules: s
                .rules
                .into_iter()
                .flatten()
                .map(|r| Rule {
                    rule: r.rule,
                    message: r.message.unwrap_or_default(),
                })
                .collect(),
            has_defaults,
            defaulted,
        }
    }
}

impl Node {
    /// Compiles a typed schema (tests build synthetic ones this way), through its JSON form
    /// and the same [`Declared`] reading as the embedded CRDs.
    #[cfg(test)]
    pub(crate) fn compile(s: &JSONSchemaProps) -> Self {
        serde_json::to_value(s)
            .and_then(serde_json::from_value)
            .expect("a typed schema reads back")
    }

    /// Schema of the member `key` of an object: its property, else `additionalProperties`.
    pub(crate) fn member(&self, key: &str) -> Option<&Node> {
        self.property(key).or(self.additional.as_deref())
    }

    /// Schema of the declared property `key`.
    pub(crate) fn property(&self, key: &str) -> Option<&Node> {
        self.properties.get(key).map(|p| &**p)
    }

    /// What identifies this node among nodes whose children are already interned: every
    /// field but the children, which count by identity (equal subtrees are one [`Shared`]
    /// after interning, so equal identities mean equal subtrees).
    fn interning_key(&self) -> String {
        let Node {
            ty,
            properties,
            additional,
            items,
            required,
            default,
            nullable,
            preserve_unknown,
            enum_values,
            minimum,
            exclusive_minimum,
            maximum,
            exclusive_maximum,
            min_items,
            max_items,
            min_length,
            max_length,
            pattern,
            known_pattern: _,
            rules,
            has_defaults: _,
            defaulted: _,
        } = self;
        let mut children: Vec<(&str, *const Node)> = properties
            .iter()
            .map(|(name, child)| (name.as_str(), Arc::as_ptr(&child.0)))
            .collect();
        children.sort_unstable();
        let identity = |child: &Option<Shared>| child.as_ref().map(|c| Arc::as_ptr(&c.0));
        let mut key = String::new();
        // Writing to a String cannot fail.
        let _ = write!(
            key,
            "{ty:?}{children:?}{:?}{:?}{required:?}{default:?}{nullable}{preserve_unknown}\
             {enum_values:?}{minimum:?}{exclusive_minimum}{maximum:?}{exclusive_maximum}\
             {min_items:?}{max_items:?}{min_length:?}{max_length:?}{pattern:?}",
            identity(additional),
            identity(items),
        );
        for Rule { rule, message } in rules {
            let _ = write!(key, "{rule:?}{message:?}");
        }
        key
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

/// A compiled schema node, shared by every place that declares the same subtree: the `ray.io`
/// CRDs declare the Pod template schema (about a thousand nodes) for the head, the worker
/// groups and the submitter, in both versions of both kinds, and the compiled copies made up
/// most of the webhook's heap until they were interned into one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shared(Arc<Node>);

impl std::ops::Deref for Shared {
    type Target = Node;

    fn deref(&self) -> &Node {
        &self.0
    }
}

thread_local! {
    /// The interned nodes by [`Node::interning_key`], while [`SCHEMAS`] is compiled.
    static INTERNED: RefCell<Option<HashMap<String, Shared>>> = const { RefCell::new(None) };
}

impl<'de> Deserialize<'de> for Shared {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let node = Node::deserialize(deserializer)?;
        Ok(INTERNED.with_borrow_mut(|interned| match interned {
            // Children are read before their parent, so they are interned already.
            Some(interned) => interned
                .entry(node.interning_key())
                .or_insert_with(|| Shared(Arc::new(node)))
                .clone(),
            None => Shared(Arc::new(node)),
        }))
    }
}

/// Runs `read` with every schema subtree it reads interned (see [`Shared`]), across all the
/// documents it reads.
fn interning<T>(read: impl FnOnce() -> T) -> T {
    INTERNED.set(Some(HashMap::new()));
    let read = read();
    INTERNED.set(None);
    read
}

/// The parts of a CRD that [`SCHEMAS`] reads.
#[derive(Deserialize)]
struct DeclaredCrd {
    spec: DeclaredCrdSpec,
}

#[derive(Deserialize)]
struct DeclaredCrdSpec {
    group: String,
    names: DeclaredNames,
    versions: Vec<DeclaredVersion>,
}

#[derive(Deserialize)]
struct DeclaredNames {
    kind: String,
}

#[derive(Deserialize)]
struct DeclaredVersion {
    name: String,
    served: bool,
    schema: Option<DeclaredValidation>,
}

#[derive(Deserialize)]
struct DeclaredValidation {
    #[serde(rename = "openAPIV3Schema")]
    open_api_v3_schema: Option<Shared>,
}

/// Compiled root schemas by (apiVersion, kind), read from the embedded CRD files (not from
/// the typed [`super::generate::CRDS`], which only the CLI's manifest rendering needs).
/// serde-saphyr, not serde_yaml_ng: the latter first loads the whole document's event list
/// (tens of MiB for the RayJob CRD), which stayed in the process's peak RSS.
static SCHEMAS: LazyLock<Vec<(String, String, Shared)>> =
    LazyLock::new(|| interning(compile_embedded));

fn compile_embedded() -> Vec<(String, String, Shared)> {
    let mut out = Vec::new();
    for (name, yaml) in COMMITTED
        .iter()
        .filter(|(name, _)| *name != QUEUE_POLICY_FILE)
    {
        let crd: DeclaredCrd = serde_saphyr::from_str(yaml).unwrap_or_else(|e| {
            // A build-time artefact that does not parse is a packaging bug, not input.
            panic!("embedded manifests/chart/files/crds/{name} is not a CRD: {e}")
        });
        let DeclaredCrdSpec {
            group,
            names,
            versions,
        } = crd.spec;
        for version in versions.into_iter().filter(|v| v.served) {
            if let Some(schema) = version.schema.and_then(|s| s.open_api_v3_schema) {
                out.push((
                    format!("{group}/{}", version.name),
                    names.kind.clone(),
                    schema,
                ));
            }
        }
    }
    out
}

/// The compiled schema of `api_version`/`kind`.
pub(crate) fn lookup(api_version: &str, kind: &str) -> Result<&'static Node, CrdError> {
    SCHEMAS
        .iter()
        .find(|(v, k, _)| v == api_version && k == kind)
        .map(|(_, _, node)| &**node)
        .ok_or_else(|| CrdError::UnknownKind {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        })
}
