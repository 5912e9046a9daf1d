//! raygate's container image without a container engine: the docker-archive tar that
//! `tests/env/images raygate` writes ([`Archive`], its layer as [`Entry`]s), a directory listed
//! the same way ([`read_tree`]), a listing unpacked into a directory ([`unpack`]), and the
//! repository's `Dockerfile` read as a builder would read it ([`Dockerfile`]).
//!
//! The tar reader knows what `tests/env/images` writes (POSIX ustar headers, PAX extended
//! headers, regular files, directories and symbolic links) and fails on anything else, so a
//! listing is never silently incomplete.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value, json};

/// The repository's root directory.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests package is inside the repository")
        .to_path_buf()
}

/// `tests/env/images`, the script that builds the image.
pub fn images_script() -> PathBuf {
    repo().join("tests/env/images")
}

/// Where `tests/env/images raygate` puts the image of the default tag: `IMAGE_RAYGATE_TAR` of
/// `tests/env/versions.sh` (so `RAYGATE_CACHE` moves it, as it moves the script's output).
///
/// # Panics
/// When the image has not been built, naming the command that builds it.
pub fn cached_image() -> PathBuf {
    let versions = repo().join("tests/env/versions.sh");
    let output = Command::new("bash")
        .arg("-c")
        .arg(r#". "$1" && printf %s "$IMAGE_RAYGATE_TAR""#)
        .arg("bash")
        .arg(&versions)
        .output()
        .unwrap_or_else(|e| panic!("sourcing {}: {e}", versions.display()));
    assert!(
        output.status.success(),
        "sourcing {} failed: {}",
        versions.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let tar = PathBuf::from(String::from_utf8(output.stdout).expect("a UTF-8 path"));
    assert!(
        tar.is_file(),
        "{} not found: build raygate's image first with `tests/env/images raygate` \
         (`tests/env/build raygate-image`, which `tests/run` runs; so does an in-cluster `control-plane up`)",
        tar.display()
    );
    tar
}

/// What an entry of a listing is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
}

/// One file, directory or link of a layer or a directory tree.
#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path relative to the root, without `./` or a trailing `/` (`etc/passwd`).
    pub path: String,
    /// File, directory or link.
    pub kind: Kind,
    /// Permission bits, with setuid, setgid and sticky (`0o1777` for `/tmp`).
    pub mode: u32,
    /// Numeric owner.
    pub uid: u32,
    /// Numeric group.
    pub gid: u32,
    /// A link's target; empty for the others.
    pub link: String,
    /// A file's contents; empty for the others.
    pub data: Vec<u8>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?} {:04o} {}:{} {} bytes",
            self.path,
            self.kind,
            self.mode,
            self.uid,
            self.gid,
            self.data.len()
        )?;
        if !self.link.is_empty() {
            write!(f, " -> {}", self.link)?;
        }
        Ok(())
    }
}

impl Entry {
    /// The contents as text.
    ///
    /// # Panics
    /// When they are not UTF-8.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.data).unwrap_or_else(|e| panic!("{}: not UTF-8: {e}", self.path))
    }
}

fn octal(field: &[u8], what: &str) -> u64 {
    assert!(
        field.first().is_none_or(|b| b & 0x80 == 0),
        "tar {what}: base-256 numbers are not used by tests/env/images"
    );
    let text: String = field
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    let text = text.trim();
    if text.is_empty() {
        return 0;
    }
    u64::from_str_radix(text, 8).unwrap_or_else(|e| panic!("tar {what} {text:?}: {e}"))
}

fn name_field(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8(field[..end].to_vec()).expect("a UTF-8 name in a tar header")
}

/// The records of a PAX extended header (`<length> <key>=<value>\n`).
fn pax_records(data: &[u8]) -> BTreeMap<String, String> {
    let mut records = BTreeMap::new();
    let mut rest = data;
    while !rest.is_empty() {
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .expect("a PAX record's length");
        let length: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|n| n.parse().ok())
            .expect("a PAX record's length");
        let record = std::str::from_utf8(&rest[space + 1..length - 1]).expect("a UTF-8 PAX record");
        let (key, value) = record.split_once('=').expect("a PAX key=value record");
        records.insert(key.to_owned(), value.to_owned());
        rest = &rest[length..];
    }
    records
}

/// Every entry of a tar archive, in the archive's order.
///
/// # Panics
/// On a malformed header (bad checksum, truncated data) or an entry kind other than file,
/// directory, link or PAX header.
pub fn read_tar(bytes: &[u8]) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut offset = 0;
    let mut pax: BTreeMap<String, String> = BTreeMap::new();
    while offset + 512 <= bytes.len() {
        let header = &bytes[offset..offset + 512];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let checksum = octal(&header[148..156], "checksum");
        let sum: u64 = header
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u64::from(b)
                }
            })
            .sum();
        assert_eq!(sum, checksum, "tar header at offset {offset}: bad checksum");
        let size = match pax.get("size") {
            Some(size) => size.parse().expect("a PAX size"),
            None => octal(&header[124..136], "size"),
        };
        let size = usize::try_from(size).expect("a size that fits in memory");
        let start = offset + 512;
        let data = bytes
            .get(start..start + size)
            .unwrap_or_else(|| panic!("tar entry at offset {offset}: data truncated"));
        offset = start + size.div_ceil(512) * 512;
        let typeflag = header[156];
        match typeflag {
            b'x' => {
                pax = pax_records(data);
                continue;
            }
            b'g' => continue,
            _ => {}
        }
        let mut path = name_field(&header[0..100]);
        if &header[257..262] == b"ustar" {
            let prefix = name_field(&header[345..500]);
            if !prefix.is_empty() {
                path = format!("{prefix}/{path}");
            }
        }
        if let Some(long) = pax.get("path") {
            path.clone_from(long);
        }
        let link = pax
            .get("linkpath")
            .cloned()
            .unwrap_or_else(|| name_field(&header[157..257]));
        let kind = match typeflag {
            b'0' | 0 => Kind::File,
            b'5' => Kind::Dir,
            b'2' => Kind::Symlink,
            other => panic!(
                "tar entry {path}: type {:?} is not used here",
                other as char
            ),
        };
        let path = path
            .trim_start_matches("./")
            .trim_end_matches('/')
            .to_owned();
        let id = |range: std::ops::Range<usize>, what| {
            u32::try_from(octal(&header[range], what)).expect("a 32-bit id")
        };
        entries.push(Entry {
            kind,
            mode: u32::try_from(octal(&header[100..108], "mode")).expect("a mode") & 0o7777,
            uid: id(108..116, "uid"),
            gid: id(116..124, "gid"),
            link: if kind == Kind::Symlink {
                link
            } else {
                String::new()
            },
            data: if kind == Kind::File {
                data.to_vec()
            } else {
                Vec::new()
            },
            path,
        });
        pax.clear();
    }
    entries
}

/// A docker-archive image as `ctr images import` reads it.
pub struct Archive {
    /// `manifest.json`'s one entry (`Config`, `RepoTags`, `Layers`).
    pub manifest: Value,
    /// The image config (`architecture`, `os`, `config`, `rootfs`, …).
    pub config: Value,
    /// Each layer's entries, in the manifest's order.
    pub layers: Vec<Vec<Entry>>,
}

impl Archive {
    /// Reads the archive at `path`.
    ///
    /// # Panics
    /// When it cannot be read or is not a docker-archive of one image.
    pub fn open(path: &Path) -> Self {
        let bytes = fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let entries = read_tar(&bytes);
        let file = |name: &str| -> &Entry {
            entries
                .iter()
                .find(|e| e.path == name && e.kind == Kind::File)
                .unwrap_or_else(|| panic!("{}: no {name}", path.display()))
        };
        let manifests: Vec<Value> =
            serde_json::from_slice(&file("manifest.json").data).expect("manifest.json is JSON");
        assert_eq!(manifests.len(), 1, "{}: one image", path.display());
        let manifest = manifests.into_iter().next().expect("one image");
        let config_name = manifest["Config"].as_str().expect("manifest Config");
        let config = serde_json::from_slice(&file(config_name).data).expect("the config is JSON");
        let layers = manifest["Layers"]
            .as_array()
            .expect("manifest Layers")
            .iter()
            .map(|layer| read_tar(&file(layer.as_str().expect("a layer path")).data))
            .collect();
        Self {
            manifest,
            config,
            layers,
        }
    }

    /// The entries of the image's only layer.
    ///
    /// # Panics
    /// When the image has more than one layer, or none.
    pub fn layer(&self) -> &[Entry] {
        assert_eq!(self.layers.len(), 1, "raygate's image has one layer");
        &self.layers[0]
    }

    /// The layer's entry at `path` (`etc/passwd`).
    ///
    /// # Panics
    /// When there is none.
    pub fn entry(&self, path: &str) -> &Entry {
        self.layer()
            .iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("the image has no {path}"))
    }
}

/// Every entry under `root` (not `root` itself), depth-first with names in byte order, as
/// `tests/env/images` packs a layer.
///
/// # Panics
/// When the tree cannot be read or holds something other than files, directories and links.
pub fn read_tree(root: &Path) -> Vec<Entry> {
    fn walk(root: &Path, rel: &str, entries: &mut Vec<Entry>) {
        let dir = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| {
                e.expect("a directory entry")
                    .file_name()
                    .into_string()
                    .expect("a UTF-8 file name")
            })
            .collect();
        names.sort();
        for name in names {
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let full = root.join(&path);
            let meta = fs::symlink_metadata(&full)
                .unwrap_or_else(|e| panic!("stat {}: {e}", full.display()));
            let kind = if meta.file_type().is_symlink() {
                Kind::Symlink
            } else if meta.is_dir() {
                Kind::Dir
            } else if meta.is_file() {
                Kind::File
            } else {
                panic!("{} is neither file, directory nor link", full.display())
            };
            entries.push(Entry {
                path: path.clone(),
                kind,
                mode: meta.mode() & 0o7777,
                uid: meta.uid(),
                gid: meta.gid(),
                link: match kind {
                    Kind::Symlink => fs::read_link(&full)
                        .expect("a link target")
                        .to_string_lossy()
                        .into_owned(),
                    _ => String::new(),
                },
                data: match kind {
                    Kind::File => fs::read(&full).expect("a readable file"),
                    _ => Vec::new(),
                },
            });
            if kind == Kind::Dir {
                walk(root, &path, entries);
            }
        }
    }
    let mut entries = Vec::new();
    walk(root, "", &mut entries);
    entries
}

/// Creates `entries` under `dir` (which must exist) with their modes; owners are left to the
/// caller (entries are made by the current user).
///
/// # Panics
/// When a file cannot be written.
pub fn unpack(entries: &[Entry], dir: &Path) {
    for entry in entries {
        let path = dir.join(&entry.path);
        match entry.kind {
            Kind::Dir => fs::create_dir_all(&path),
            Kind::File => fs::write(&path, &entry.data),
            Kind::Symlink => symlink(&entry.link, &path),
        }
        .unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        if entry.kind != Kind::Symlink {
            fs::set_permissions(&path, fs::Permissions::from_mode(entry.mode))
                .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
        }
    }
}

/// How two listings differ, one line per path ("only in …", or the metadata that differs);
/// empty when they are the same.
pub fn differences(left: &[Entry], right: &[Entry], names: (&str, &str)) -> Vec<String> {
    let index = |entries: &[Entry]| -> BTreeMap<String, Entry> {
        entries
            .iter()
            .map(|e| (e.path.clone(), e.clone()))
            .collect()
    };
    let (left, right) = (index(left), index(right));
    let mut lines = Vec::new();
    for (path, l) in &left {
        match right.get(path) {
            None => lines.push(format!("only in {}: {l:?}", names.0)),
            Some(r) if l != r => {
                let contents = if l.data == r.data {
                    ""
                } else {
                    ", contents differ"
                };
                lines.push(format!("{}: {l:?}; {}: {r:?}{contents}", names.0, names.1));
            }
            Some(_) => {}
        }
    }
    for (path, r) in &right {
        if !left.contains_key(path) {
            lines.push(format!("only in {}: {r:?}", names.1));
        }
    }
    lines
}

/// A temporary directory, removed when dropped.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// A fresh, empty directory named after `name` and this process.
    ///
    /// # Panics
    /// When it cannot be created.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("raygate-image-{name}-{}", std::process::id()));
        if dir.exists() {
            fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("removing {}: {e}", dir.display()));
        }
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        Self(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// One instruction of a Dockerfile: its keyword in upper case and the rest of its line(s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// `FROM`, `RUN`, `COPY`, …
    pub keyword: String,
    /// The arguments, continuation lines joined with a space.
    pub args: String,
}

/// One build stage: its `FROM` and what follows it.
#[derive(Clone, Debug)]
pub struct Stage {
    /// The base image (`scratch` for none).
    pub from: String,
    /// The name `FROM … AS name` gives it.
    pub name: Option<String>,
    /// The instructions after `FROM`.
    pub instructions: Vec<Instruction>,
}

/// A Dockerfile's stages, read as a builder reads them: comment lines (and so parser
/// directives) skipped, lines ending in `\` joined with the next.
#[derive(Clone, Debug)]
pub struct Dockerfile {
    /// The stages in order; the last one is the image.
    pub stages: Vec<Stage>,
}

/// Splits `text` into words at whitespace; double quotes group and are removed, a backslash
/// escapes the next character.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut started) = (false, false);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                word.extend(chars.next());
                started = true;
            }
            '"' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    assert!(!quoted, "unbalanced quotes in {text:?}");
    if started {
        words.push(word);
    }
    words
}

/// `key=value` words as pairs.
fn pairs(keyword: &str, args: &str) -> Vec<(String, String)> {
    words(args)
        .into_iter()
        .map(|word| {
            let (key, value) = word
                .split_once('=')
                .unwrap_or_else(|| panic!("{keyword} {args}: only the key=value form is read"));
            (key.to_owned(), value.to_owned())
        })
        .collect()
}

impl Dockerfile {
    /// Parses a Dockerfile's text.
    ///
    /// # Panics
    /// When an instruction comes before the first `FROM`.
    pub fn parse(text: &str) -> Self {
        let mut instructions = Vec::new();
        let mut pending = String::new();
        for line in text.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_empty()) {
                continue;
            }
            match trimmed.strip_suffix('\\') {
                Some(head) => {
                    pending.push_str(head.trim());
                    pending.push(' ');
                }
                None => {
                    pending.push_str(trimmed);
                    let line = std::mem::take(&mut pending);
                    let (keyword, args) = line
                        .trim()
                        .split_once(char::is_whitespace)
                        .unwrap_or((&line, ""));
                    instructions.push(Instruction {
                        keyword: keyword.to_uppercase(),
                        args: args.trim().to_owned(),
                    });
                }
            }
        }
        let mut stages: Vec<Stage> = Vec::new();
        for instruction in instructions {
            if instruction.keyword == "FROM" {
                let args = words(&instruction.args);
                let name = match args.as_slice() {
                    [_, as_, name] if as_.eq_ignore_ascii_case("as") => Some(name.clone()),
                    [_] => None,
                    _ => panic!("FROM {}: not read", instruction.args),
                };
                stages.push(Stage {
                    from: args[0].clone(),
                    name,
                    instructions: Vec::new(),
                });
            } else {
                stages
                    .last_mut()
                    .unwrap_or_else(|| panic!("{} before the first FROM", instruction.keyword))
                    .instructions
                    .push(instruction);
            }
        }
        Self { stages }
    }

    /// The last stage, whose result is the image.
    ///
    /// # Panics
    /// When there is no stage.
    pub fn image_stage(&self) -> &Stage {
        self.stages.last().expect("a Dockerfile with a FROM")
    }
}

impl Stage {
    /// The instructions with `keyword`.
    pub fn all(&self, keyword: &str) -> Vec<&Instruction> {
        self.instructions
            .iter()
            .filter(|i| i.keyword == keyword)
            .collect()
    }

    /// The image config (`User`, `Entrypoint`, `Cmd`, `Env`, `WorkingDir`, `Labels`) this
    /// stage gives its image on top of an empty base (`FROM scratch`), in the shape of an
    /// image config's `config` object: only the fields it sets. `ENTRYPOINT` resets a `CMD`
    /// set before it, as builders do.
    ///
    /// # Panics
    /// When `ENTRYPOINT` or `CMD` is in shell form (the image would need a shell), or `ENV` or
    /// `LABEL` is not in the `key=value` form.
    pub fn image_config(&self) -> Value {
        let mut config = Map::new();
        let mut env: Vec<(String, String)> = Vec::new();
        let mut labels = Map::new();
        let exec_form = |i: &Instruction| -> Value {
            let value: Value = serde_json::from_str(&i.args).unwrap_or_else(|_| {
                panic!(
                    "{} {}: only the exec (JSON) form runs without a shell",
                    i.keyword, i.args
                )
            });
            assert!(value.is_array(), "{} {}: a JSON array", i.keyword, i.args);
            value
        };
        for i in &self.instructions {
            match i.keyword.as_str() {
                "USER" => {
                    config.insert("User".into(), json!(i.args));
                }
                "WORKDIR" => {
                    config.insert("WorkingDir".into(), json!(i.args));
                }
                "ENTRYPOINT" => {
                    config.insert("Entrypoint".into(), exec_form(i));
                    config.remove("Cmd");
                }
                "CMD" => {
                    config.insert("Cmd".into(), exec_form(i));
                }
                "ENV" => {
                    for (key, value) in pairs("ENV", &i.args) {
                        env.retain(|(k, _)| *k != key);
                        env.push((key, value));
                    }
                }
                "LABEL" => {
                    for (key, value) in pairs("LABEL", &i.args) {
                        labels.insert(key, json!(value));
                    }
                }
                _ => {}
            }
        }
        if !env.is_empty() {
            let env: Vec<String> = env.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
            config.insert("Env".into(), json!(env));
        }
        if !labels.is_empty() {
            config.insert("Labels".into(), Value::Object(labels));
        }
        Value::Object(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dockerfile_is_read_as_a_builder_reads_it() {
        let file = Dockerfile::parse(
            "# syntax=docker/dockerfile:1\n# a comment\nFROM base:1 AS build\nRUN a \\\n  && b\n\n\
             from scratch\nCOPY --from=build /x/ /\nLABEL a=\"one two\" b=2 \\\n      c=\"x\\\"y\"\n\
             ENV P=1\nENV P=2 Q=3\nCMD [\"old\"]\nENTRYPOINT [\"/e\"]\nCMD [\"run\"]\nUSER 1:2\n",
        );
        assert_eq!(file.stages.len(), 2);
        assert_eq!(file.stages[0].name.as_deref(), Some("build"));
        assert_eq!(file.stages[0].instructions[0].args, "a && b");
        let image = file.image_stage();
        assert_eq!(image.from, "scratch");
        assert_eq!(image.all("COPY")[0].args, "--from=build /x/ /");
        assert_eq!(
            image.image_config(),
            json!({
                "Labels": {"a": "one two", "b": "2", "c": "x\"y"},
                "Env": ["P=2", "Q=3"],
                "Entrypoint": ["/e"],
                "Cmd": ["run"],
                "User": "1:2",
            })
        );
    }

    #[test]
    #[should_panic(expected = "only the exec (JSON) form")]
    fn a_shell_form_entrypoint_is_refused() {
        Dockerfile::parse("FROM scratch\nENTRYPOINT /raygate run\n")
            .image_stage()
            .image_config();
    }

    /// A two-entry archive as Python's `tarfile` (PAX format) writes one.
    fn header(name: &str, typeflag: u8, size: usize, mode: u32) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let field = |h: &mut [u8], at: usize, width: usize, value: u64| {
            let text = format!("{value:0w$o}\0", w = width - 1);
            h[at..at + width].copy_from_slice(text.as_bytes());
        };
        field(&mut h, 100, 8, u64::from(mode));
        field(&mut h, 108, 8, 0);
        field(&mut h, 116, 8, 0);
        field(&mut h, 124, 12, size as u64);
        field(&mut h, 136, 12, 0);
        h[156] = typeflag;
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        h
    }

    #[test]
    fn a_tar_with_a_pax_path_and_a_directory_is_listed() {
        let long = format!("d/{}", "n".repeat(120));
        let record = format!(" path={long}\n");
        let record = format!("{}{record}", record.len() + 3);
        let mut tar = header("d/", b'5', 0, 0o1777);
        tar.extend(header("PaxHeader", b'x', record.len(), 0o644));
        tar.extend(record.as_bytes());
        tar.resize(tar.len().div_ceil(512) * 512, 0);
        tar.extend(header("short", b'0', 3, 0o755));
        tar.extend(b"abc");
        tar.resize(tar.len().div_ceil(512) * 512 + 1024, 0);
        let entries = read_tar(&tar);
        assert_eq!(entries.len(), 2);
        assert_eq!(
            (entries[0].path.as_str(), entries[0].kind, entries[0].mode),
            ("d", Kind::Dir, 0o1777)
        );
        assert_eq!(entries[1].path, long);
        assert_eq!(
            (entries[1].kind, entries[1].data.as_slice()),
            (Kind::File, b"abc".as_slice())
        );
    }
}
