//! `raygate convert`'s path (read as kubectl does → convert → write YAML) never changes what a
//! manifest means: `v1 → v1alpha1 → v1` is the identity by kubectl's reading, over generated
//! manifests full of YAML 1.1-only scalars, comments, anchors, merge keys, block and flow
//! styles and several documents per file.

use proptest::prelude::*;
use raygate_api::conversion::{RayVersion, convert_documents};
use raygate_api::input::{as_the_api_server_reads, documents_to_yaml, parse_documents};
use serde_json::Value;

/// Spellings whose meaning differs between YAML 1.1 (kubectl) and 1.2, or that look like one.
const TRICKY: &[&str] = &[
    "0777",
    "0644",
    "08",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "Y",
    "NO",
    "True",
    "~",
    "null",
    "",
    "1_000",
    "0x1F",
    "0x_1",
    "0o17",
    "0b101",
    ".5",
    "1e3",
    "+1",
    "-0",
    "1.",
    "2015-01-01",
    "1:1",
    "hello",
    "4Gi",
    "500m",
    "rayproject/ray",
    "a b",
    "<<x",
    "-Xmx1g",
];
const INTS: &[&str] = &["0777", "0x1F", "1_000", "0b101", "+1", "0o17", "3", "08"];
const KEYS: &[&str] = &[
    "name", "mode", "on", "yes", "0777", "x-a", "1e3", "image", "n",
];

#[derive(Debug, Clone)]
enum Gen {
    Plain(&'static str),
    Single(&'static str),
    Double(&'static str),
    Literal(Vec<&'static str>),
    Map(Vec<Entry>, bool),
    Seq(Vec<Gen>, bool),
    Anchored(Box<Gen>),
    Alias(usize),
}

#[derive(Debug, Clone)]
enum Entry {
    Pair(&'static str, Gen),
    Merge(usize),
    Comment,
}

fn scalar() -> impl Strategy<Value = Gen> {
    let text = proptest::sample::select(TRICKY);
    prop_oneof![
        4 => text.clone().prop_map(Gen::Plain),
        1 => text.clone().prop_map(Gen::Single),
        1 => text.clone().prop_map(Gen::Double),
        1 => proptest::collection::vec(text, 1..3).prop_map(Gen::Literal),
        1 => (0usize..4).prop_map(Gen::Alias),
    ]
}

fn tree() -> impl Strategy<Value = Gen> {
    scalar().prop_recursive(4, 40, 5, |inner| {
        let entry = prop_oneof![
            6 => (proptest::sample::select(KEYS), inner.clone()).prop_map(|(k, v)| Entry::Pair(k, v)),
            1 => (0usize..4).prop_map(Entry::Merge),
            1 => Just(Entry::Comment),
        ];
        prop_oneof![
            (proptest::collection::vec(entry, 0..5), any::<bool>()).prop_map(|(e, f)| Gen::Map(e, f)),
            (proptest::collection::vec(inner.clone(), 0..4), any::<bool>())
                .prop_map(|(items, f)| Gen::Seq(items, f)),
            inner.prop_map(|g| match g {
                Gen::Anchored(_) | Gen::Alias(_) => g,
                other => Gen::Anchored(Box::new(other)),
            }),
        ]
    })
}

/// Renders generated nodes as YAML text, numbering anchors in document order so that every
/// alias refers to an anchor defined before it.
struct Writer {
    out: String,
    /// Anchors defined so far: (name, whether the node is a mapping, whether it is complete;
    /// an alias inside its own anchor's node would make the node contain itself).
    anchors: Vec<(String, bool, bool)>,
}

impl Writer {
    fn flow_safe(g: &Gen) -> bool {
        match g {
            Gen::Plain(t) => {
                !t.is_empty() && !t.contains([':', ',', ' ']) && !t.starts_with(['-', '<'])
            }
            Gen::Literal(_) | Gen::Map(_, false) | Gen::Seq(_, false) => false,
            Gen::Map(entries, true) => entries.iter().all(|e| match e {
                Entry::Pair(_, v) => Self::flow_safe(v),
                _ => true,
            }),
            Gen::Seq(items, true) => items.iter().all(Self::flow_safe),
            Gen::Anchored(inner) => Self::flow_safe(inner),
            _ => true,
        }
    }

    /// Whether `g` is written inline after `key:` (or `- `) rather than on the next lines.
    fn inline(g: &Gen) -> bool {
        match g {
            Gen::Map(entries, flow) => *flow && Self::flow_safe(g) || entries.is_empty(),
            Gen::Seq(items, flow) => *flow && Self::flow_safe(g) || items.is_empty(),
            Gen::Anchored(inner) => Self::inline(inner),
            _ => true,
        }
    }

    fn alias(&self, i: usize, maps_only: bool) -> Option<String> {
        let done: Vec<&String> = self
            .anchors
            .iter()
            .filter(|(_, map, complete)| *complete && (*map || !maps_only))
            .map(|(name, ..)| name)
            .collect();
        (!done.is_empty()).then(|| format!("*{}", done[i % done.len()]))
    }

    /// Defines an anchor for a node about to be written; [`Self::close`] completes it.
    fn open(&mut self, inner: &Gen) -> (usize, String) {
        let name = format!("a{}", self.anchors.len());
        self.anchors
            .push((name.clone(), matches!(inner, Gen::Map(..)), false));
        (self.anchors.len() - 1, name)
    }

    fn close(&mut self, index: usize) {
        self.anchors[index].2 = true;
    }

    /// An inline node: a scalar, a flow collection, an alias, a literal block's header.
    fn inline_node(&mut self, g: &Gen, indent: usize) {
        match g {
            Gen::Plain(t) => self.out.push_str(t),
            Gen::Single(t) => self.out.push_str(&format!("'{t}'")),
            Gen::Double(t) => self.out.push_str(&format!("\"{t}\"")),
            Gen::Literal(lines) => {
                self.out.push('|');
                for line in lines {
                    self.out.push('\n');
                    self.out.push_str(&" ".repeat(indent + 2));
                    self.out.push_str(if line.is_empty() { "x" } else { line });
                }
            }
            Gen::Alias(i) => match self.alias(*i, false) {
                Some(a) => self.out.push_str(&a),
                None => self.out.push_str("fallback"),
            },
            Gen::Anchored(inner) => {
                let (index, name) = self.open(inner);
                self.out.push_str(&format!("&{name} "));
                self.inline_node(inner, indent);
                self.close(index);
            }
            Gen::Map(entries, _) => {
                self.out.push('{');
                let mut first = true;
                for entry in entries {
                    if let Entry::Pair(k, v) = entry {
                        if !first {
                            self.out.push_str(", ");
                        }
                        first = false;
                        self.out.push_str(&format!("{k}: "));
                        self.inline_node(v, indent);
                    }
                }
                self.out.push('}');
            }
            Gen::Seq(items, _) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.inline_node(item, indent);
                }
                self.out.push(']');
            }
        }
    }

    /// A node as the value of a block mapping key or sequence entry at `indent`.
    fn value(&mut self, g: &Gen, indent: usize) {
        if Self::inline(g) {
            self.out.push(' ');
            self.inline_node(g, indent);
            if !matches!(g, Gen::Literal(_)) {
                self.out.push_str(" # trailing");
            }
            self.out.push('\n');
            return;
        }
        match g {
            Gen::Anchored(inner) => {
                let (index, name) = self.open(inner);
                self.out.push_str(&format!(" &{name}"));
                self.value(inner, indent);
                self.close(index);
            }
            Gen::Map(entries, _) => {
                self.out.push('\n');
                self.block_map(entries, indent + 2);
            }
            Gen::Seq(items, _) => {
                self.out.push('\n');
                for item in items {
                    self.out.push_str(&" ".repeat(indent + 2));
                    self.out.push('-');
                    self.value(item, indent + 2);
                }
            }
            _ => unreachable!("scalars are inline"),
        }
    }

    fn block_map(&mut self, entries: &[Entry], indent: usize) {
        let pad = " ".repeat(indent);
        let mut wrote = false;
        for entry in entries {
            match entry {
                Entry::Pair(k, v) => {
                    self.out.push_str(&format!("{pad}{k}:"));
                    self.value(v, indent);
                    wrote = true;
                }
                Entry::Merge(i) => {
                    if let Some(alias) = self.alias(*i, true) {
                        self.out.push_str(&format!("{pad}<<: {alias}\n"));
                        wrote = true;
                    }
                }
                Entry::Comment => self.out.push_str(&format!("{pad}# a comment\n")),
            }
        }
        if !wrote {
            self.out.push_str(&format!("{pad}empty: {{}}\n"));
        }
    }
}

fn document(kind: u8, extra: &Gen, backoff: &str, mode: &str, index: usize) -> String {
    let mut w = Writer {
        out: String::new(),
        anchors: Vec::new(),
    };
    w.out.push_str("# a generated manifest\n");
    let extra_at = |w: &mut Writer, key: &str, indent: usize| {
        w.out.push_str(&format!("{}{key}:", " ".repeat(indent)));
        w.value(extra, indent);
    };
    match kind % 3 {
        0 => {
            w.out.push_str(&format!(
                "apiVersion: ray.io/v1\nkind: RayJob\nmetadata:\n  name: job-{index}\n\
                 spec:\n  backoffLimit: {backoff}\n  entrypoint: python -c 'print(1)'\n"
            ));
            extra_at(&mut w, "userField", 2);
            w.out.push_str(&format!(
                "  rayClusterSpec:\n    headGroupSpec:\n      rayStartParams: {{num-cpus: '1'}}\n\
                 \x20     template:\n        spec:\n          containers:\n\
                 \x20         - name: ray-head # the head\n            image: rayproject/ray\n\
                 \x20         volumes:\n          - name: cfg\n            configMap: {{name: c, defaultMode: {mode}}}\n"
            ));
            extra_at(&mut w, "extra", 10);
        }
        1 => {
            w.out.push_str(&format!(
                "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {{name: c-{index}}}\nspec:\n\
                 \x20 headGroupSpec:\n    template:\n      spec:\n        containers: [{{name: h, image: i}}]\n\
                 \x20       volumes:\n        - name: cfg\n          configMap:\n            defaultMode: {mode}\n\
                 \x20 workerGroupSpecs:\n  - groupName: g\n    replicas: {backoff}\n    numOfHosts: 1\n\
                 \x20   minReplicas: 0\n    maxReplicas: 0x10\n    template: {{spec: {{containers: [{{name: w, image: i}}]}}}}\n"
            ));
            extra_at(&mut w, "userField", 4);
        }
        _ => {
            w.out.push_str(&format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{index}\n"
            ));
            extra_at(&mut w, "data", 0);
        }
    }
    w.out
}

fn convert_text(text: &str, to: RayVersion) -> String {
    let documents = parse_documents("in.yaml", text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let values = documents.into_iter().map(|d| d.value).collect();
    let converted = convert_documents(values, to).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    documents_to_yaml(&converted)
}

fn read(text: &str) -> Vec<Value> {
    parse_documents("x.yaml", text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .into_iter()
        .map(|d| as_the_api_server_reads(&d.value))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn v1_to_v1alpha1_to_v1_means_what_the_input_meant(
        docs in proptest::collection::vec(
            (any::<u8>(), tree(), proptest::sample::select(INTS), proptest::sample::select(INTS)),
            1..4,
        )
    ) {
        let text: String = docs
            .iter()
            .enumerate()
            .map(|(i, (kind, extra, backoff, mode))| {
                format!("---\n{}", document(*kind, extra, backoff, mode, i))
            })
            .collect();
        let alpha = convert_text(&text, RayVersion::V1alpha1);
        let back = convert_text(&alpha, RayVersion::V1);
        prop_assert_eq!(read(&back), read(&text), "input:\n{}\nv1alpha1:\n{}\nv1:\n{}", text, alpha, back);
    }
}

#[test]
fn yaml_1_1_values_survive_conversion_as_kubectl_reads_them() {
    let text = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: j}\nspec:\n  backoffLimit: 0x10\n  \
                rayClusterSpec:\n    enableInTreeAutoscaling: yes\n    headGroupSpec:\n      template:\n        \
                spec:\n          containers: [{name: h, image: i, env: [{name: A, value: 'yes'}, {name: B, value: \"0777\"}]}]\n          \
                volumes: [{name: v, configMap: {name: c, defaultMode: 0777}}]\n";
    let alpha = convert_text(text, RayVersion::V1alpha1);
    let back = convert_text(&alpha, RayVersion::V1);
    let value = &read(&back)[0];
    let spec = &value["spec"]["rayClusterSpec"];
    assert_eq!(value["spec"]["backoffLimit"], 16);
    assert_eq!(spec["enableInTreeAutoscaling"], true);
    let pod = &spec["headGroupSpec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["configMap"]["defaultMode"], 511);
    assert_eq!(pod["containers"][0]["env"][0]["value"], "yes");
    assert_eq!(pod["containers"][0]["env"][1]["value"], "0777");
    assert!(back.contains("defaultMode: 511"), "{back}");
    assert!(back.contains("value: \"yes\""), "{back}");
    assert!(back.contains("value: \"0777\""), "{back}");
}
