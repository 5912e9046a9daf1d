//! raygate's own image, as `tests/env/images raygate` builds it without a container engine (read
//! from the cache, where `tests/env/build raygate-image` puts it), and the repository's
//! `Dockerfile`, which must give the same files and config with an engine:
//!
//! * the image is the one the install manifests name and runs as their Deployment runs it;
//! * it holds raygate, what raygate needs to run and data files, nothing else (no shell);
//! * the Dockerfile's image is the script's rootfs step on scratch, with the script's config,
//!   and that step gives exactly the image's layer;
//! * building it twice from the same binary gives the same tar, byte for byte;
//! * unpacked and entered by chroot as its user, it runs raygate, which resolves names from
//!   `/etc/hosts` and from a Pod's `resolv.conf` (a DNS server of the test's own, with the
//!   search list and `ndots:5` a Pod gets).
//!
//! No environment is needed, but root is (chroot, and the DNS server's port 53); the image is
//! never built here from source (the release build happens outside, `tests/env/images
//! raygate` runs it), only repacked from the cached image's own binary.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use raygate_api::manifests::{DEFAULT_IMAGE, InstallOptions, render};
use raygate_e2e::image::{
    self, Archive, Dockerfile, Kind, ScratchDir, differences, read_tree, unpack,
};
use serde_json::Value;

/// The image's user, as `--userspec` takes it.
const USERSPEC: &str = "65532:65532";

fn archive() -> &'static Archive {
    static ARCHIVE: OnceLock<Archive> = OnceLock::new();
    ARCHIVE.get_or_init(|| Archive::open(&image::cached_image()))
}

fn deployment() -> Value {
    render(&InstallOptions::default())
        .into_iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("the install manifests have a Deployment")
}

/// The image's `/raygate`, written to `dir/raygate` as an executable.
fn extract_binary(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("raygate");
    unpack(std::slice::from_ref(archive().entry("raygate")), dir);
    path
}

fn output_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn assert_root() {
    let uid = fs::metadata("/proc/self").expect("/proc/self").uid();
    assert_eq!(
        uid, 0,
        "these tests need root (chroot, port 53): run them as root, as CI does"
    );
}

#[test]
fn the_image_is_the_deployments_image_and_runs_as_its_user() {
    let tar = image::cached_image();
    let verify = Command::new(image::images_script())
        .arg("--verify")
        .arg(&tar)
        .output()
        .expect("tests/env/images --verify runs");
    assert!(
        verify.status.success(),
        "tests/env/images --verify {}: {}",
        tar.display(),
        output_text(&verify.stderr)
    );

    let archive = archive();
    assert_eq!(
        archive.manifest["RepoTags"],
        serde_json::json!([DEFAULT_IMAGE])
    );
    let config = &archive.config["config"];
    let deployment = deployment();
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let security = &pod["securityContext"];
    let user = format!("{}:{}", security["runAsUser"], security["runAsGroup"]);
    assert_eq!(config["User"], user.as_str());
    assert_eq!(user, USERSPEC);
    assert_eq!(config["Entrypoint"], serde_json::json!(["/raygate"]));
    // The image's command is `raygate run`; the Deployment runs the same subcommand, with its
    // settings spelled out after it.
    assert_eq!(config["Cmd"], serde_json::json!(["run"]));
    assert_eq!(
        container["args"][0], config["Cmd"][0],
        "the Deployment runs the image's own command"
    );
    assert!(
        container.get("command").is_none(),
        "the Deployment keeps the entrypoint"
    );

    let passwd = archive.entry("etc/passwd").text();
    assert!(
        passwd
            .lines()
            .any(|l| l.split(':').nth(2) == Some("65532") && l.split(':').nth(3) == Some("65532")),
        "/etc/passwd has no user 65532:65532: {passwd}"
    );
    let group = archive.entry("etc/group").text();
    assert!(
        group.lines().any(|l| l.split(':').nth(2) == Some("65532")),
        "{group}"
    );
    // The Deployment mounts an emptyDir on /tmp; without one (a plain `docker run`) the
    // image's own /tmp is writable by everyone.
    assert!(
        container["volumeMounts"]
            .as_array()
            .expect("volumeMounts")
            .iter()
            .any(|m| m["mountPath"] == "/tmp")
    );
    let tmp = archive.entry("tmp");
    assert_eq!((tmp.kind, tmp.mode), (Kind::Dir, 0o1777));
    for entry in archive.layer() {
        assert_eq!(
            (entry.uid, entry.gid),
            (0, 0),
            "{entry:?}: every file is root's"
        );
    }
}

#[test]
fn the_image_holds_raygate_what_it_needs_and_data_files_only() {
    let archive = archive();
    let mut executables = Vec::new();
    let mut libraries = Vec::new();
    for entry in archive.layer() {
        let name = entry.path.rsplit('/').next().expect("a name");
        match entry.kind {
            Kind::Dir => continue,
            Kind::Symlink => panic!("{entry:?}: the image has no links"),
            Kind::File => {}
        }
        const PROGRAMS: [&str; 7] = ["sh", "bash", "dash", "busybox", "apt", "apt-get", "dpkg"];
        assert!(
            !PROGRAMS.contains(&name),
            "{entry:?}: no shell, no package manager"
        );
        if entry.mode & 0o111 != 0 {
            executables.push(entry.path.clone());
        }
        if name.contains(".so") {
            libraries.push(name.to_owned());
            continue;
        }
        let data_file = entry.path.starts_with("etc/")
            || entry.path.starts_with("var/lib/dpkg/status.d/")
            || (entry.path.starts_with("usr/share/doc/") && name == "copyright");
        assert!(
            entry.path == "raygate" || data_file,
            "{entry:?} is neither raygate, a library nor a data file"
        );
    }
    executables.sort();
    let loader = executables
        .iter()
        .find(|p| {
            p.rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with("ld-linux"))
        })
        .unwrap_or_else(|| panic!("no ELF loader among the executables {executables:?}"));
    assert_eq!(
        executables,
        [loader.clone(), "raygate".to_owned()],
        "only raygate and its loader are executable"
    );
    libraries.sort();
    assert!(libraries.iter().any(|l| l == "libc.so.6"), "{libraries:?}");

    // Every Debian package the files come from is recorded, with its copyright.
    let packages: BTreeMap<String, String> = archive
        .layer()
        .iter()
        .filter_map(|e| {
            e.path
                .strip_prefix("var/lib/dpkg/status.d/")
                .map(|name| (name.to_owned(), e.text().to_owned()))
        })
        .collect();
    for (name, status) in &packages {
        assert!(status.contains(&format!("Package: {name}\n")), "{status}");
        assert!(
            status
                .lines()
                .any(|l| l.starts_with("Version: ") && l.len() > 9),
            "{status}"
        );
        archive.entry(&format!("usr/share/doc/{name}/copyright"));
    }
    let names: BTreeSet<&str> = packages.keys().map(String::as_str).collect();
    for package in ["libc6", "ca-certificates", "base-files"] {
        assert!(
            names.contains(package),
            "no status of {package} in {names:?}"
        );
    }

    assert_eq!(
        archive
            .entry("etc/nsswitch.conf")
            .text()
            .lines()
            .find(|l| l.starts_with("hosts:")),
        Some("hosts: files dns")
    );
    // Debian's CA bundle, without the machine's own CAs (which the host's bundle has).
    let bundle = archive.entry("etc/ssl/certs/ca-certificates.crt").text();
    assert!(bundle.matches("-----BEGIN CERTIFICATE-----").count() > 100);
    if let Ok(local) = fs::read_dir("/usr/local/share/ca-certificates") {
        for file in local {
            let path = file.expect("an entry").path();
            let pem = fs::read_to_string(&path).unwrap_or_default();
            let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
            assert!(
                body.len() < 100 || !bundle.replace('\n', "").contains(&body),
                "the image trusts this machine's local CA {}",
                path.display()
            );
        }
    }
}

#[test]
fn the_dockerfile_builds_the_scripts_files_and_config() {
    // (The rootfs step needs no root, but the image's files are root's.)
    assert_root();
    let text = fs::read_to_string(image::repo().join("Dockerfile")).expect("the Dockerfile");
    let dockerfile = Dockerfile::parse(&text);
    let [build, image] = dockerfile.stages.as_slice() else {
        panic!("two stages, a build and the image: {dockerfile:?}")
    };
    assert_eq!(build.name.as_deref(), Some("build"));
    let runs: Vec<&str> = build.all("RUN").iter().map(|i| i.args.as_str()).collect();
    let run = runs.join(" && ");
    assert!(
        run.contains("cargo build --release --locked -p raygate"),
        "{runs:?}"
    );
    assert!(
        run.contains("tests/env/images --raygate-rootfs target/release/raygate /rootfs"),
        "the build stage runs the script's rootfs step on the release binary: {runs:?}"
    );

    // The image is the rootfs and nothing else: no base image, one COPY, no RUN or ADD.
    assert_eq!(image.from, "scratch");
    for instruction in &image.instructions {
        assert!(
            [
                "COPY",
                "LABEL",
                "ENV",
                "WORKDIR",
                "USER",
                "ENTRYPOINT",
                "CMD"
            ]
            .contains(&instruction.keyword.as_str()),
            "{instruction:?} in the image stage"
        );
    }
    let copies: Vec<&str> = image.all("COPY").iter().map(|i| i.args.as_str()).collect();
    assert_eq!(copies, ["--from=build /rootfs/ /"]);
    assert_eq!(
        image.image_config(),
        archive().config["config"],
        "the Dockerfile's config (left) and the script's (right)"
    );

    // The rootfs step, run here on the image's own binary, gives exactly the image's layer.
    let scratch = ScratchDir::new("dockerfile");
    let binary = extract_binary(scratch.path());
    let rootfs = scratch.path().join("rootfs");
    let step = Command::new(image::images_script())
        .arg("--raygate-rootfs")
        .arg(&binary)
        .arg(&rootfs)
        .output()
        .expect("tests/env/images --raygate-rootfs runs");
    assert!(
        step.status.success(),
        "--raygate-rootfs: {}",
        output_text(&step.stderr)
    );
    let tree = read_tree(&rootfs);
    let diff = differences(&tree, archive().layer(), ("the rootfs step", "the image"));
    assert!(
        diff.is_empty(),
        "the rootfs step and the image differ:\n{}",
        diff.join("\n")
    );
    assert!(tree.len() > 10, "{tree:?}");
}

#[test]
fn building_the_image_twice_from_the_same_binary_gives_the_same_tar() {
    assert_root();
    let scratch = ScratchDir::new("twice");
    let binary = extract_binary(scratch.path());
    let cached = fs::read(image::cached_image()).expect("the cached image");
    let mut builds = Vec::new();
    for cache in ["first", "second"] {
        let cache = scratch.path().join(cache);
        let started = Instant::now();
        let build = Command::new(image::images_script())
            .args(["raygate", "--binary"])
            .arg(&binary)
            .env("RAYGATE_CACHE", &cache)
            .output()
            .expect("tests/env/images raygate runs");
        assert!(
            build.status.success(),
            "tests/env/images raygate --binary {}: {}{}",
            binary.display(),
            output_text(&build.stderr),
            fs::read_to_string(cache.join("logs/build-image-raygate.log")).unwrap_or_default()
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "an image build took {:?}",
            started.elapsed()
        );
        let tar = cache.join(format!(
            "images/raygate-{}/image.tar",
            env!("CARGO_PKG_VERSION")
        ));
        builds.push(fs::read(&tar).unwrap_or_else(|e| panic!("{}: {e}", tar.display())));
    }
    let first_difference = |a: &[u8], b: &[u8]| a.iter().zip(b).position(|(x, y)| x != y);
    assert!(
        builds[0] == builds[1],
        "two builds differ ({} and {} bytes, first at byte {:?})",
        builds[0].len(),
        builds[1].len(),
        first_difference(&builds[0], &builds[1])
    );
    assert!(
        builds[0] == cached,
        "the cached image ({} bytes) is not what this script makes of its binary ({} bytes, \
         first difference at byte {:?}): rebuild it with `tests/env/images raygate`",
        cached.len(),
        builds[0].len(),
        first_difference(&builds[0], &cached)
    );
}

/// The image's layer unpacked into a fresh directory, with the files a kubelet gives every
/// container (`/etc/hosts`, `/etc/resolv.conf`).
fn unpacked(name: &str, hosts: &str, resolv_conf: &str) -> ScratchDir {
    let dir = ScratchDir::new(name);
    unpack(archive().layer(), dir.path());
    fs::write(dir.path().join("etc/hosts"), hosts).expect("/etc/hosts");
    fs::write(dir.path().join("etc/resolv.conf"), resolv_conf).expect("/etc/resolv.conf");
    dir
}

/// `chroot --userspec=65532:65532 ROOT /raygate ARGS…` with the image's environment only.
fn chroot(root: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("chroot");
    command
        .arg(format!("--userspec={USERSPEC}"))
        .arg(root)
        .arg("/raygate")
        .args(args)
        .env_clear();
    for variable in archive().config["config"]["Env"]
        .as_array()
        .expect("the image's Env")
    {
        let (name, value) = variable
            .as_str()
            .and_then(|v| v.split_once('='))
            .expect("NAME=value");
        command.env(name, value);
    }
    command
}

#[test]
fn the_unpacked_image_runs_raygate_as_its_user() {
    assert_root();
    let root = unpacked("run", "127.0.0.1 localhost\n", "");
    let version = chroot(root.path(), &["--version"])
        .output()
        .expect("chroot runs");
    assert!(version.status.success(), "{}", output_text(&version.stderr));
    assert_eq!(
        output_text(&version.stdout),
        format!("raygate {}\n", env!("CARGO_PKG_VERSION"))
    );

    // The image's raygate renders exactly the committed install manifests: it is this
    // checkout's.
    let manifests = chroot(root.path(), &["manifests"])
        .output()
        .expect("chroot runs");
    assert!(
        manifests.status.success(),
        "{}",
        output_text(&manifests.stderr)
    );
    let committed =
        fs::read_to_string(image::repo().join("manifests/install.yaml")).expect("install.yaml");
    assert!(
        output_text(&manifests.stdout) == committed,
        "the image's `raygate manifests` is not manifests/install.yaml: the image is stale, rebuild \
         it with `tests/env/images raygate`"
    );
    assert!(!root.path().join("bin/sh").exists() && !root.path().join("usr/bin/sh").exists());
}

/// A DNS server for one test: answers `A` queries for the names it knows with their address,
/// any other type for them with no record, every other name with NXDOMAIN; remembers every
/// question.
struct DnsServer {
    questions: Arc<Mutex<Vec<(String, u16)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The reply to a DNS query (RFC 1035 §4.1) and its question, or `None` for a malformed one.
fn dns_reply(query: &[u8], names: &BTreeMap<String, Ipv4Addr>) -> Option<(String, u16, Vec<u8>)> {
    if query.len() < 12 || query[4..6] != [0, 1] {
        return None;
    }
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let length = usize::from(*query.get(at)?);
        at += 1;
        if length == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + length)?).to_lowercase());
        at += length;
    }
    let qtype = u16::from_be_bytes([*query.get(at)?, *query.get(at + 1)?]);
    let question = query.get(12..at + 4)?;
    let name = labels.join(".");
    let address = names.get(&name);
    let answer = address.filter(|_| qtype == 1);
    let mut reply = vec![
        query[0],
        query[1],
        0x84 | (query[2] & 1),
        0x80 | if address.is_some() { 0 } else { 3 },
    ];
    reply.extend([0, 1, 0, u8::from(answer.is_some()), 0, 0, 0, 0]);
    reply.extend(question);
    if let Some(address) = answer {
        reply.extend([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4]);
        reply.extend(address.octets());
    }
    Some((name, qtype, reply))
}

impl DnsServer {
    fn start(address: Ipv4Addr, names: BTreeMap<String, Ipv4Addr>) -> Self {
        let socket = UdpSocket::bind((address, 53))
            .unwrap_or_else(|e| panic!("binding the test's DNS server to {address}:53: {e}"));
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("a read timeout");
        let questions = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (questions, stop) = (questions.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buffer = [0u8; 1500];
                while !stop.load(Ordering::Relaxed) {
                    let (length, peer) = match socket.recv_from(&mut buffer) {
                        Ok(received) => received,
                        Err(e)
                            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                        {
                            continue;
                        }
                        Err(e) => panic!("the test's DNS server: {e}"),
                    };
                    if let Some((name, qtype, reply)) = dns_reply(&buffer[..length], &names) {
                        questions.lock().expect("questions").push((name, qtype));
                        socket.send_to(&reply, peer).expect("a DNS reply sent");
                    }
                }
            })
        };
        Self {
            questions,
            stop,
            thread: Some(thread),
        }
    }

    fn questions(&self) -> Vec<(String, u16)> {
        self.questions.lock().expect("questions").clone()
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs `raygate follow` in `root` against an API server at `https://HOST:PORT` (a kubeconfig
/// in the image's /tmp), PORT that of a fresh listener on 127.0.0.1, and returns whether
/// raygate connected to it within 30 s, with its standard error.
fn connects(root: &Path, host: &str) -> (bool, String) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a listener");
    let port = listener.local_addr().expect("an address").port();
    fs::write(
        root.join("tmp/kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    \
             server: https://{host}:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  \
             user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
        ),
    )
    .expect("a kubeconfig");
    let mut child = chroot(
        root,
        &[
            "follow",
            "absent",
            "--namespace",
            "default",
            "--timeout",
            "60s",
        ],
    )
    .env("KUBECONFIG", "/tmp/kubeconfig")
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("chroot starts");
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let deadline = Instant::now() + Duration::from_secs(30);
    let connected = loop {
        match listener.accept() {
            Ok(_) => break true,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("accept: {e}"),
        }
        if Instant::now() > deadline || child.try_wait().expect("wait").is_some() {
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let output = child.wait_with_output().expect("raygate's output");
    (connected, output_text(&output.stderr))
}

#[test]
fn the_image_resolves_names_from_etc_hosts_and_from_the_pods_dns_server() {
    assert_root();
    // An address of the loopback network of our own (Linux routes all of 127/8 to lo).
    let dns = Ipv4Addr::new(127, 77, 0, 53);
    let service = "kubernetes.default.svc.cluster.local";
    let server = DnsServer::start(
        dns,
        BTreeMap::from([(service.to_owned(), Ipv4Addr::LOCALHOST)]),
    );
    // What a kubelet writes for a Pod in namespace `default` (ClusterFirst DNS policy).
    let root = unpacked(
        "dns",
        "127.0.0.1 localhost\n127.0.0.1 raygate-api.hosts.test\n",
        &format!(
            "search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver {dns}\noptions ndots:5\n"
        ),
    );
    let (connected, stderr) = connects(root.path(), "raygate-api.hosts.test");
    assert!(
        connected,
        "raygate did not connect to the name /etc/hosts gives: {stderr}"
    );
    assert!(
        server
            .questions()
            .iter()
            .all(|(name, _)| !name.starts_with("raygate-api.hosts.test")),
        "/etc/hosts answers before DNS: {:?}",
        server.questions()
    );

    let (connected, stderr) = connects(root.path(), service);
    let questions = server.questions();
    assert!(
        connected,
        "raygate did not connect to {service} through DNS: {stderr}; questions {questions:?}"
    );
    assert!(
        questions.contains(&(service.to_owned(), 1)),
        "{questions:?}"
    );
    // ndots:5 makes the resolver try the search list first, as in a Pod.
    assert!(
        questions
            .iter()
            .any(|(name, _)| name == &format!("{service}.default.svc.cluster.local")),
        "the search list of resolv.conf was not used: {questions:?}"
    );
}
