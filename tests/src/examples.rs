//! The example manifests of `manifests/examples/`, as the end-to-end tests read them: each
//! file's objects and the `# expect-error:` messages its header promises.

use std::fs;
use std::path::{Path, PathBuf};

use raygate_api::input::parse_documents;
use serde_json::Value;

/// One example file.
#[derive(Clone, Debug)]
pub struct Example {
    /// Where the file is.
    pub path: PathBuf,
    /// Its file name, e.g. `rayjob.yaml`.
    pub name: String,
    /// The messages of its `# expect-error:` lines; empty for a valid example.
    pub expected_errors: Vec<String>,
    /// Every object of the file, in order.
    pub objects: Vec<Value>,
}

impl Example {
    /// Whether the example promises to be accepted (no `# expect-error:` line).
    pub fn is_valid(&self) -> bool {
        self.expected_errors.is_empty()
    }

    /// The path as a string, for command lines.
    pub fn path_str(&self) -> &str {
        self.path
            .to_str()
            .unwrap_or_else(|| panic!("{} is not UTF-8", self.path.display()))
    }
}

/// The directory of the example manifests.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples")
}

/// Every `*.yaml` of `manifests/examples/`, sorted by name. Panics (failing the test) on an
/// unreadable directory or an unparseable example.
pub fn examples() -> Vec<Example> {
    let dir = examples_dir();
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths.into_iter().map(read).collect()
}

/// The example called `name` (e.g. `invalid-rayjob-backoff-limit-type.yaml`).
pub fn example(name: &str) -> Example {
    examples()
        .into_iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no example {name} in {}", examples_dir().display()))
}

fn read(path: PathBuf) -> Example {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let expected_errors = text
        .lines()
        .filter_map(|line| line.strip_prefix("# expect-error:"))
        .map(|message| message.trim().to_string())
        .collect();
    let objects = parse_documents(&name, &text)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|doc| doc.value)
        .collect();
    Example {
        path,
        name,
        expected_errors,
        objects,
    }
}
