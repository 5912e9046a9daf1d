//! The manifest corpus as the CLI and end-to-end tests read it: every file of `tests/corpus/`,
//! every example of `manifests/examples/` and every YAML or JSON block of `docs/*.md`, each with
//! what its header promises. `tests/corpus/README.md` describes the header.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::{Scope, pinned_kind};
use raygate_api::input::parse_documents;
use raygate_api::keys;
use raygate_api::validation::{ReconcilerKind, ValidationContext};
use serde_json::Value;

use crate::TestNamespace;

/// One manifest: a file, or a block of a Markdown document.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// Where it is, relative to the repository, e.g. `tests/corpus/rayjob-interactive.yaml` or
    /// `docs/queue-policy.md block 1`.
    pub name: String,
    /// Its text, as `raygate -f` reads it.
    pub text: String,
    /// What its header promises.
    pub expect: Expectations,
}

impl Manifest {
    /// Every object of the manifest as kubectl reads it (`kind: List` flattened). Panics
    /// (failing the test) on a manifest that does not parse.
    pub fn objects(&self) -> Vec<Value> {
        parse_documents(&self.name, &self.text)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|doc| doc.value)
            .collect()
    }
}

/// What a manifest's header promises.
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    /// Extra arguments of `raygate validate` and `raygate podgroup` (`# raygate-flags:`).
    pub flags: Vec<String>,
    /// Exit code of `raygate validate` (`# expect-exit:`; for an example, 1 when its name
    /// starts with `invalid-`).
    pub exit: i32,
    /// Exit code of `raygate podgroup` (`# expect-podgroup-exit:`; the validate code unless
    /// given).
    pub podgroup_exit: i32,
    /// Texts each of which some error of `raygate validate` contains, as `field: message`
    /// (`# expect-error:`, the convention of `manifests/examples/`).
    pub messages: Vec<String>,
    /// Every verdict, finding and PodGroup, when the header pins them (any header with
    /// `# expect-exit:` does).
    pub pinned: Option<Pinned>,
    /// Objects (`Kind/name`) the API server refuses although raygate accepts them, on purpose
    /// (`# api-server-rejects: Kind/name why`).
    pub api_server_rejects: BTreeSet<String>,
}

impl Expectations {
    /// The reconciler `# raygate-flags:` names (`--reconciler`), raygate's own by default, as
    /// `raygate validate` defaults to it. Panics on any other flag.
    pub fn reconciler(&self) -> ReconcilerKind {
        let mut reconciler = ReconcilerKind::Raygate;
        let mut flags = self.flags.iter();
        while let Some(flag) = flags.next() {
            match (flag.as_str(), flags.next().map(String::as_str)) {
                ("--reconciler", Some("kuberay")) => reconciler = ReconcilerKind::Kuberay,
                ("--reconciler", Some("raygate")) => reconciler = ReconcilerKind::Raygate,
                (flag, value) => panic!("raygate-flags: {flag} {value:?} is not understood here"),
            }
        }
        reconciler
    }

    /// The rules `raygate validate` applies with these flags.
    pub fn validation_context(&self) -> ValidationContext {
        ValidationContext {
            reconciler: self.reconciler(),
            ..ValidationContext::default()
        }
    }
}

/// The verdicts a header pins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pinned {
    /// The Ray objects (`Kind/name`) validate accepts (`# expect-valid:`); every other Ray
    /// object has an error among the findings.
    pub valid: BTreeSet<String>,
    /// Every finding of every object, sorted (`# expect-finding:`).
    pub findings: Vec<FindingSummary>,
    /// Every PodGroup `raygate podgroup` prints, sorted by name (`# expect-podgroup:`).
    pub pod_groups: Vec<PodGroupSummary>,
}

/// A finding as a header writes it: `Kind/name severity rule field`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FindingSummary {
    /// `Kind/name` of the object.
    pub object: String,
    /// `error` or `warning`.
    pub severity: String,
    /// The rule's name (`docs/validation-rules.md`).
    pub rule: String,
    /// The field path.
    pub field: String,
}

impl FindingSummary {
    /// Every finding of one report of `raygate validate -o json`.
    pub fn of_report(report: &Value) -> Vec<FindingSummary> {
        let object = report_key(report);
        report["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|finding| FindingSummary {
                object: object.clone(),
                severity: text(&finding["severity"]),
                rule: text(&finding["rule"]),
                field: text(&finding["field"]),
            })
            .collect()
    }
}

/// A PodGroup as a header writes it: `name minMember=<n> [queue=<q>] [priorityClassName=<p>]
/// [<resource>=<quantity>…]`; no `queue=` means the group has none.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodGroupSummary {
    /// `metadata.name`.
    pub name: String,
    /// `spec.minMember`.
    pub min_member: i64,
    /// `spec.queue`.
    pub queue: Option<String>,
    /// `spec.priorityClassName`.
    pub priority_class_name: Option<String>,
    /// `spec.minResources`, quantities as printed.
    pub min_resources: BTreeMap<String, String>,
}

impl PodGroupSummary {
    /// The summary of a PodGroup printed by `raygate podgroup -o json`.
    pub fn of(group: &Value) -> PodGroupSummary {
        let spec = &group["spec"];
        PodGroupSummary {
            name: text(&group["metadata"]["name"]),
            min_member: spec["minMember"].as_i64().unwrap_or(-1),
            queue: spec["queue"].as_str().map(str::to_string),
            priority_class_name: spec["priorityClassName"].as_str().map(str::to_string),
            min_resources: spec["minResources"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(name, quantity)| (name.clone(), text(quantity)))
                .collect(),
        }
    }

    fn parse(line: &str) -> PodGroupSummary {
        let mut words = line.split_whitespace();
        let mut group = PodGroupSummary {
            name: words.next().unwrap_or_default().to_string(),
            min_member: -1,
            ..PodGroupSummary::default()
        };
        for word in words {
            let (key, value) = word
                .split_once('=')
                .unwrap_or_else(|| panic!("expect-podgroup: {word:?} is not key=value"));
            match key {
                "minMember" => {
                    group.min_member = value
                        .parse()
                        .unwrap_or_else(|_| panic!("expect-podgroup: minMember={value}"));
                }
                "queue" => group.queue = Some(value.to_string()),
                "priorityClassName" => group.priority_class_name = Some(value.to_string()),
                resource => {
                    group
                        .min_resources
                        .insert(resource.to_string(), value.to_string());
                }
            }
        }
        assert!(
            group.min_member >= 0,
            "expect-podgroup without minMember: {line}"
        );
        group
    }
}

/// `Kind/name` of a report of `raygate validate -o json`, named as raygate names it.
pub fn report_key(report: &Value) -> String {
    format!(
        "{}/{}",
        text(&report["kind"]),
        keys::display_name(report["name"].as_str(), report["generateName"].as_str())
    )
}

/// `Kind/name` of a manifest object, named as raygate names it.
pub fn object_key(object: &Value) -> String {
    let metadata = &object["metadata"];
    format!(
        "{}/{}",
        text(&object["kind"]),
        keys::display_name(metadata["name"].as_str(), metadata["generateName"].as_str())
    )
}

/// What the API server answered a dry-run create: `Ok` when it accepted the object, `Err` with
/// its message when it refused it (a 4xx status).
pub async fn dry_run_create(ns: &TestNamespace, object: &Value) -> Result<(), String> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = pinned_kind(&ns.client(), &gvk)
        .await
        .unwrap_or_else(|e| panic!("the API server does not serve {api_version} {kind}: {e}"));
    let mut object = object.clone();
    // Namespaced objects go into the test's namespace, whatever the file says.
    let api = if capabilities.scope == Scope::Cluster {
        Api::<DynamicObject>::all_with(ns.client(), &resource)
    } else {
        object["metadata"]["namespace"] = Value::String(ns.name().to_string());
        Api::<DynamicObject>::namespaced_with(ns.client(), ns.name(), &resource)
    };
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    let params = PostParams {
        dry_run: true,
        field_manager: Some("raygate-e2e".into()),
    };
    match api.create(&params, &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if (400..500).contains(&status.code) => Err(status.message),
        Err(e) => panic!("asking the API server about {api_version} {kind}: {e}"),
    }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repository")
        .to_path_buf()
}

/// The directory of the corpus, `tests/corpus/`.
pub fn corpus_dir() -> PathBuf {
    root().join("tests/corpus")
}

/// Every manifest: the corpus, then the examples, then the documentation's blocks, each sorted
/// by name. Panics (failing the test) on an unreadable file or a header it cannot read.
pub fn manifests() -> Vec<Manifest> {
    let mut all = corpus();
    for path in files(&root().join("manifests/examples"), &["yaml"]) {
        let text = read(&path);
        let invalid = file_name(&path).starts_with("invalid-");
        let expect = header(&path, &text, i32::from(invalid));
        assert_eq!(
            expect.exit,
            i32::from(invalid),
            "{}: an example's exit code follows its name (invalid-*)",
            path.display()
        );
        all.push(Manifest {
            name: relative(&path),
            text,
            expect,
        });
    }
    for path in files(&root().join("docs"), &["md"]) {
        for (i, block) in blocks(&read(&path)).into_iter().enumerate() {
            all.push(Manifest {
                name: format!("{} block {}", relative(&path), i + 1),
                text: block,
                expect: Expectations::default(),
            });
        }
    }
    all
}

/// The files of `tests/corpus/` alone. A JSON file, which cannot hold comments, has its header
/// in `<file>.expect`.
pub fn corpus() -> Vec<Manifest> {
    files(&corpus_dir(), &["yaml", "json"])
        .into_iter()
        .map(|path| {
            let text = read(&path);
            let header_text = if path.extension().is_some_and(|e| e == "json") {
                read(&PathBuf::from(format!("{}.expect", path.display())))
            } else {
                text.clone()
            };
            let expect = header(&path, &header_text, 0);
            assert!(
                expect.pinned.is_some(),
                "{}: a corpus file pins its verdicts with # expect-exit:",
                path.display()
            );
            Manifest {
                name: relative(&path),
                text,
                expect,
            }
        })
        .collect()
}

fn files(dir: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| {
            path.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| extensions.contains(&e))
        })
        .collect();
    paths.sort();
    paths
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// The fenced `yaml` and `json` blocks of a Markdown text that hold an object (`apiVersion`).
fn blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match current.as_mut() {
            None if line.trim() == "```yaml" || line.trim() == "```json" => {
                current = Some(String::new());
            }
            None => {}
            Some(_) if line.trim() == "```" => {
                let block = current.take().unwrap_or_default();
                if block.contains("apiVersion") {
                    blocks.push(block);
                }
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}

/// Reads the header: the comment lines before the first other line. `default_exit` is the
/// validate exit code when the header does not give one.
fn header(path: &Path, text: &str, default_exit: i32) -> Expectations {
    let mut expect = Expectations {
        exit: default_exit,
        ..Expectations::default()
    };
    let mut exit = None;
    let mut podgroup_exit = None;
    let mut pinned = Pinned::default();
    let number = |key: &str, value: &str| -> i32 {
        value
            .parse()
            .unwrap_or_else(|_| panic!("{}: # {key}: {value:?}", path.display()))
    };
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        let Some((key, value)) = line.trim_start_matches('#').trim().split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "raygate-flags" => expect.flags = value.split_whitespace().map(String::from).collect(),
            "expect-exit" => exit = Some(number(key, value)),
            "expect-podgroup-exit" => podgroup_exit = Some(number(key, value)),
            "expect-error" => expect.messages.push(value.to_string()),
            "expect-valid" => {
                pinned.valid.insert(value.to_string());
            }
            "expect-finding" => {
                let words: Vec<&str> = value.split_whitespace().collect();
                let [object, severity, rule, field] = words[..] else {
                    panic!("{}: # expect-finding: {value:?}", path.display());
                };
                pinned.findings.push(FindingSummary {
                    object: object.to_string(),
                    severity: severity.to_string(),
                    rule: rule.to_string(),
                    field: field.to_string(),
                });
            }
            "expect-podgroup" => pinned.pod_groups.push(PodGroupSummary::parse(value)),
            "api-server-rejects" => {
                let object = value.split_whitespace().next().unwrap_or_default();
                expect.api_server_rejects.insert(object.to_string());
            }
            other => assert!(
                !["expect-", "raygate-", "api-server-"]
                    .iter()
                    .any(|prefix| other.starts_with(prefix)),
                "{}: unknown header key {other:?}",
                path.display()
            ),
        }
    }
    if let Some(code) = exit {
        expect.exit = code;
        pinned.findings.sort();
        pinned.pod_groups.sort();
        expect.pinned = Some(pinned);
    } else {
        assert!(
            pinned == Pinned::default(),
            "{}: pinned verdicts without # expect-exit:",
            path.display()
        );
    }
    expect.podgroup_exit = podgroup_exit.unwrap_or(expect.exit);
    expect
}
