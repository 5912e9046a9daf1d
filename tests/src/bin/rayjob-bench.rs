//! `rayjob-bench`: how raygate's reconciler copes with many RayJobs created at once, and (with
//! `--peer kuberay`) how KubeRay's operator copes with the same ones, in the same invocation.
//!
//! On the running `tests/env` environment it adds kwok nodes for the pods. For each controller
//! it measures, it creates a namespace that the environment's own reconciler ignores, starts
//! the controller for that namespace only, creates `--jobs` RayJobs at once and reports:
//!
//! * the time until every RayJob has its PodGroup and its RayCluster;
//! * the time until every Ray pod (head + `--workers` workers per RayJob) is Running;
//! * the time until every RayJob is `Waiting` (its cluster ready, seen by the RayJob controller);
//! * the controller's peak RSS (`VmHWM`) and CPU seconds (`utime + stime`) from `/proc`;
//! * the CPU seconds of the environment's own processes over the same time (the API server
//!   on its own, and all of them: etcd, Volcano, kwok, raygate's webhook, …), which the
//!   controller's requests and objects cost the cluster;
//! * the CPU floor: the controller's and the environment's CPU seconds to `Waiting` divided by
//!   the machine's cores, the shortest time those seconds allow when every process shares the
//!   same cores (a run whose time is near it is bound by the machine's CPU, not by waiting);
//! * the API requests it made (`rest_client_requests_total` of its own metrics, a name
//!   raygate shares with controller-runtime), in total and per RayJob, by method, until
//!   `Waiting` and over `--idle-seconds` afterwards; the 409 Conflict answers among them and
//!   `controller_runtime_reconcile_errors_total`;
//! * the time to delete them all again;
//! * the RayClusters, PodGroups and Ray pods beyond one of each per RayJob after the idle time
//!   (none, unless a request repeated across a failure duplicated one);
//! * with `--apiserver-outage <seconds>`: the API server is SIGKILLed 1 s after the RayJobs are
//!   created and started again that many seconds later (`tests/env/control-plane apiserver
//!   kill|start`, in every run), and the time from its `/readyz` to every RayJob `Waiting` is
//!   reported. The benchmark's own watches try again every 250 ms, so they are back at once.
//!
//! With `--real-nodes` the Pods run on the environment's real kubelet nodes instead of added
//! kwok nodes (the namespace is annotated for them, as `TestNamespace::on_real_nodes` does):
//! every RayJob starts a real Ray head and workers, and the cause-to-`Waiting` latency is that
//! of real readiness probes passing. Use a few RayJobs (`--jobs 4`): each cluster is real Ray
//! processes on the machine's two cores.
//!
//! The controllers:
//!
//! * `raygate`: `raygate reconcile` (the binary next to this one, so a release build measures a
//!   release reconciler) with `--concurrency <--reconcile-concurrency>` and the Deployment's
//!   environment (`keys::CONTAINER_ENV`: mimalloc's options), in a namespace opted
//!   into Volcano (raygate's webhook onboards the Pods);
//! * `kuberay` (defaults) and `kuberay-tuned`, with `--peer kuberay`: the environment's KubeRay
//!   operator (`tests/env/build kuberay`) with `--batch-scheduler=volcano` (its own adapter
//!   makes the PodGroups), in a namespace labelled for KubeRay and not opted in; first with its
//!   defaults (what users run: one reconcile at a time, client QPS 100 / burst 200), then with
//!   `--reconcile-concurrency` equal to raygate's and the client limit raised to QPS 1000 /
//!   burst 2000, so that the limit is not the bottleneck. raygate is compared with the faster
//!   of the two.
//!
//! The RayJobs use `InteractiveMode`: no entrypoint runs, so the figures measure the
//! controller (PodGroup, RayCluster, Service, pods, status), not Ray. After each run the
//! RayJobs and the namespace are deleted, and the next run starts once the namespace is gone;
//! the added nodes are deleted at the end.
//!
//! The environment must not run raygate's own reconciler (it watches every namespace, the
//! benchmark's too) and its webhook must be a release build, as users run it; the benchmark
//! refuses to start otherwise:
//!
//! ```text
//! cargo build --release -p raygate -p raygate-e2e --bin rayjob-bench --bin raygate
//! RAYGATE_ENV_RECONCILER=0 RAYGATE_ENV_PROFILE=release RAYGATE_ENV_KUBERAY=1 \
//!     tests/env/control-plane up
//! tests/env/control-plane exec -- target/release/rayjob-bench [--jobs 500] [--workers 1] \
//!     [--reconcile-concurrency 4] [--idle-seconds 120] [--peer kuberay] [--apiserver-outage 20] \
//!     [--real-nodes] [--timeout 1200]
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::utils::Backoff;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use raygate_api::keys;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::PodGroup;
use raygate_e2e::cleanup::DeleteOnDrop;
use raygate_e2e::env::control_plane;
use raygate_e2e::kuberay::{self, Dashboards, KubeRay};
use raygate_e2e::nodes::KWOK_NODE_ANNOTATION;
use raygate_e2e::ray::Dashboard;
use raygate_e2e::reconciler::PRIVATE_RECONCILER_LABEL;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

/// Label of the nodes the benchmark adds (and deletes).
const BENCH_NODE_LABEL: &str = "raygate.io/bench-node";
/// Pods each added node takes.
const PODS_PER_NODE: usize = 250;
/// RayJobs created at once.
const CREATE_PARALLELISM: usize = 16;

/// Many RayJobs created at once, under raygate's reconciler and, with `--peer kuberay`, under
/// KubeRay's operator, in one invocation.
#[derive(clap::Parser)]
struct Options {
    /// RayJobs created at once.
    #[arg(long, default_value_t = 500)]
    jobs: usize,
    /// Workers per RayJob (each RayJob also has a head).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Reconciles at a time: raygate's `--concurrency` and the tuned KubeRay's
    /// `--reconcile-concurrency`.
    #[arg(long = "reconcile-concurrency", default_value_t = 4)]
    concurrency: u16,
    /// Seconds to count the requests of the idle controller after every RayJob is `Waiting`.
    #[arg(long = "idle-seconds", default_value = "120", value_parser = seconds)]
    idle: Duration,
    /// Run the same RayJobs under a peer controller too.
    #[arg(long = "peer", value_enum)]
    peer: Option<Peer>,
    /// SIGKILL the API server 1 s after every RayJob is created and start it again this many
    /// seconds later, in every run; reports the time from its `/readyz` to every RayJob
    /// `Waiting`.
    #[arg(long = "apiserver-outage", value_parser = seconds)]
    outage: Option<Duration>,
    /// Run the Pods on the environment's real kubelet nodes, as real Ray containers, instead
    /// of on added kwok nodes; each RayJob then starts a real Ray cluster, so use a few.
    #[arg(long = "real-nodes")]
    real_nodes: bool,
    /// Seconds a run may take from creating the RayJobs to every RayJob `Waiting`; a run that
    /// takes longer fails, naming the RayJobs that are not `Waiting`.
    #[arg(long = "timeout", default_value = "1200", value_parser = seconds)]
    timeout: Duration,
}

/// A controller to compare raygate's with.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Peer {
    /// The environment's KubeRay operator, with its defaults and tuned.
    Kuberay,
}

impl Options {
    fn peer_kuberay(&self) -> bool {
        self.peer == Some(Peer::Kuberay)
    }
}

fn seconds(value: &str) -> Result<Duration, std::num::ParseIntError> {
    value.parse().map(Duration::from_secs)
}

/// An InteractiveMode RayJob: one head and `workers` workers, 100m / 128Mi each.
fn ray_job(name: &str, workers: usize) -> anyhow::Result<RayJob> {
    let container = |name: &str| {
        json!({"name": name, "image": "rayproject/ray:2.60.0",
               "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}})
    };
    let workers = i32::try_from(workers).context("--workers")?;
    Ok(serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "submissionMode": "InteractiveMode",
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
                "workerGroupSpecs": [{
                    "groupName": "small", "replicas": workers, "minReplicas": 0, "maxReplicas": workers.max(1),
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("ray-worker")]}}
                }]
            }
        }
    }))?)
}

/// A kwok node (kwok manages nodes with this annotation) for `PODS_PER_NODE` small pods,
/// tainted as the environment's kwok nodes are (`taint`), so that only the benchmark's
/// namespaces, which tolerate it, place Pods there.
fn node(name: &str, taint: &str) -> anyhow::Result<Node> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION.0: KWOK_NODE_ANNOTATION.1, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {BENCH_NODE_LABEL: "true", "type": "kwok-bench", "kubernetes.io/hostname": name,
                       "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
        },
        "spec": {"taints": [{"key": taint, "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": PODS_PER_NODE.to_string()},
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": PODS_PER_NODE.to_string()},
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                         "kubeletVersion": "fake", "kubeProxyVersion": "fake"},
        },
    }))?)
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A store of every `K` in `namespace`, kept current by a watch running in the background,
/// which shows `observe` every object it applies, as it arrives.
async fn store<K>(
    client: &Client,
    namespace: &str,
    observe: impl Fn(&K) + Send + 'static,
) -> Store<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .backoff(ObserverBackoff)
        .applied_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(object) = stream.next().await {
            if let Ok(object) = object {
                observe(&object);
            }
        }
    });
    reader
}

/// The benchmark's own watches try again every [`OBSERVER_RETRY`] after a failure, so that after
/// an API server outage they are back at once (kube's default backoff waits up to 30 s) and
/// the time measured is the controller's, not theirs.
struct ObserverBackoff;

/// How long the benchmark's own watches wait before trying again.
const OBSERVER_RETRY: Duration = Duration::from_millis(250);

impl Iterator for ObserverBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(OBSERVER_RETRY)
    }
}

impl Backoff for ObserverBackoff {
    fn reset(&mut self) {}
}

/// When the benchmark's watches first saw each cause and each status, for cause-to-status
/// latencies: the cause of a RayJob's `Waiting` is the last of its cluster's Pods becoming
/// Running and Ready.
#[derive(Default)]
struct Moments {
    /// Pod name → its cluster and when it was first seen Running and Ready.
    pod_ready: HashMap<String, (String, Instant)>,
    /// RayJob name → its cluster and when it was first seen `Waiting`.
    job_waiting: HashMap<String, (String, Instant)>,
}

impl Moments {
    fn observe_pod(&mut self, pod: &Pod) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if self.pod_ready.contains_key(&name) || !is_running_and_ready(pod) {
            return;
        }
        let cluster = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::RAY_CLUSTER_LABEL))
            .cloned()
            .unwrap_or_default();
        self.pod_ready.insert(name, (cluster, Instant::now()));
    }

    fn observe_job(&mut self, job: &RayJob) {
        let name = job.metadata.name.clone().unwrap_or_default();
        if self.job_waiting.contains_key(&name) || !is_waiting(job) {
            return;
        }
        let cluster = job
            .status
            .as_ref()
            .and_then(|s| s.ray_cluster_name.clone())
            .unwrap_or_default();
        self.job_waiting.insert(name, (cluster, Instant::now()));
    }

    /// Milliseconds from each RayJob's cause to its `Waiting`, sorted (0 when the status was
    /// seen first: the two watches deliver independently).
    fn latencies_ms(&self) -> Vec<f64> {
        let mut last_ready: HashMap<&str, Instant> = HashMap::new();
        for (cluster, at) in self.pod_ready.values() {
            let entry = last_ready.entry(cluster.as_str()).or_insert(*at);
            *entry = (*entry).max(*at);
        }
        let mut latencies: Vec<f64> = self
            .job_waiting
            .values()
            .filter_map(|(cluster, waiting)| {
                let cause = last_ready.get(cluster.as_str())?;
                Some(waiting.saturating_duration_since(*cause).as_secs_f64() * 1000.0)
            })
            .collect();
        latencies.sort_by(f64::total_cmp);
        latencies
    }
}

/// Whether the RayJob is `Waiting`: its cluster ready, nothing submitted (InteractiveMode).
fn is_waiting(job: &RayJob) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.job_deployment_status.as_deref())
        == Some("Waiting")
}

fn is_running_and_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The `q`-quantile (0..=1) of sorted values.
fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let index = ((last as f64) * q).round() as usize;
    sorted.get(index.min(last)).copied()
}

/// The cores this machine gives the run: every process of the environment shares them, so the
/// CPU seconds a run spent divided by them is the shortest wall time those seconds allow.
fn machine_cores() -> Option<f64> {
    std::thread::available_parallelism()
        .ok()
        .map(|n| n.get() as f64)
}

/// Which controller a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Controller {
    /// `raygate reconcile`.
    Raygate,
    /// KubeRay's operator with its defaults and `--batch-scheduler=volcano`.
    KubeRay,
    /// KubeRay's operator with raygate's concurrency and a raised client rate limit.
    KubeRayTuned,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Raygate => "raygate",
            Controller::KubeRay => "kuberay",
            Controller::KubeRayTuned => "kuberay-tuned",
        }
    }

    /// Labels of the run's namespace: away from the environment's reconciler, and opted into
    /// Volcano through raygate (raygate) or handed to KubeRay, whose own adapter schedules on
    /// Volcano (kuberay).
    fn namespace_labels(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Controller::Raygate => vec![
                (keys::NAMESPACE_OPT_IN_LABEL, keys::NAMESPACE_OPT_IN_VALUE),
                (PRIVATE_RECONCILER_LABEL, "true"),
            ],
            Controller::KubeRay | Controller::KubeRayTuned => {
                vec![
                    kuberay::RECONCILER_LABEL,
                    (PRIVATE_RECONCILER_LABEL, "true"),
                ]
            }
        }
    }

    async fn start(
        self,
        env: &Env,
        ns: &TestNamespace,
        concurrency: u16,
    ) -> anyhow::Result<Running> {
        let flags = match self {
            Controller::Raygate => return Running::raygate(env, ns.name(), concurrency).await,
            Controller::KubeRay => Vec::new(),
            Controller::KubeRayTuned => vec![
                format!("--reconcile-concurrency={concurrency}"),
                "--qps=1000".to_string(),
                "--burst=2000".to_string(),
            ],
        };
        let operator =
            KubeRay::start_with_flags(env, &[ns], Some("volcano"), Dashboards::SharedHead, &flags)
                .await;
        let process = Process::new(operator.pid, operator.metrics.clone()).await?;
        process.wait_for("/metrics", &operator.log).await?;
        println!(
            "KubeRay operator pid {} ({}), log {}",
            operator.pid,
            if flags.is_empty() {
                "its defaults".to_string()
            } else {
                flags.join(" ")
            },
            operator.log.display()
        );
        Ok(Running::KubeRay { operator, process })
    }
}

/// User + system CPU seconds so far of process `pid`, every thread; `None` once it is gone.
fn cpu_seconds(pid: u32, ticks_per_second: f64) -> anyhow::Result<Option<f64>> {
    let path = format!("/proc/{pid}/stat");
    let stat = match std::fs::read_to_string(&path) {
        Ok(stat) => stat,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).context(path),
    };
    let ticks = cpu_ticks(&stat).context(path)?;
    Ok(Some(ticks as f64 / ticks_per_second))
}

/// User + system clock ticks (fields 14 and 15) of a `/proc/PID/stat` line. The command name,
/// field 2, is in parentheses and may hold spaces and parentheses of its own: the fields are
/// counted from the last `)`.
fn cpu_ticks(stat: &str) -> anyhow::Result<u64> {
    let (_, after_command) = stat
        .rsplit_once(')')
        .context("no ')' closing the command name")?;
    // The first field after the command name is field 3.
    let fields: Vec<&str> = after_command.split_whitespace().collect();
    let field = |number: usize, name: &str| -> anyhow::Result<u64> {
        let value = fields
            .get(number - 3)
            .with_context(|| format!("no field {number} ({name})"))?;
        value
            .parse()
            .with_context(|| format!("field {number} ({name}) {value:?} is not a number of ticks"))
    };
    Ok(field(14, "utime")? + field(15, "stime")?)
}

/// Clock ticks per second of `/proc/PID/stat` (`getconf CLK_TCK`).
async fn ticks_per_second() -> anyhow::Result<f64> {
    let ticks = tokio::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .await
        .context("getconf CLK_TCK")?;
    String::from_utf8_lossy(&ticks.stdout)
        .trim()
        .parse()
        .context("getconf CLK_TCK")
}

/// The pid a component's pid file names, or `None` when there is no such file or it is empty
/// (the control plane truncates it before writing a restarted component's pid).
fn read_pid_file(path: &Path) -> anyhow::Result<Option<u32>> {
    match std::fs::read_to_string(path) {
        Ok(content) if content.trim().is_empty() => Ok(None),
        Ok(content) => parse_pid_file(path, &content).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading pid file {}", path.display())),
    }
}

/// The pid in `content`, the text of pid file `path`: a decimal number, with blank space
/// around it.
fn parse_pid_file(path: &Path, content: &str) -> anyhow::Result<u32> {
    let pid = content.trim();
    // `u32::from_str` alone would take a sign too.
    if pid.bytes().all(|b| b.is_ascii_digit())
        && let Ok(pid @ 1..) = pid.parse::<u32>()
    {
        return Ok(pid);
    }
    bail!("pid file {}: {pid:?} is not a process id", path.display())
}

/// CPU seconds of one environment component, across restarts. A restarted component (the
/// outage tests restart the API server) is a new process that its pid file names: its CPU
/// seconds add to those of the processes before it, each counted up to its last reading. The
/// total never decreases, and the difference between two readings is the CPU spent between
/// them, short of what an exited process spent after its last reading.
struct ComponentCpu {
    /// The process read last.
    pid: u32,
    /// Its CPU seconds at that reading.
    last: f64,
    /// CPU seconds of the processes before it, each at its last reading.
    predecessors: f64,
}

impl ComponentCpu {
    /// A component running as process `pid`, not read yet.
    fn new(pid: u32) -> ComponentCpu {
        ComponentCpu {
            pid,
            last: 0.0,
            predecessors: 0.0,
        }
    }

    /// Records that process `pid`, the one the component's pid file names now, has spent
    /// `seconds` so far.
    fn record(&mut self, pid: u32, seconds: f64) {
        if pid != self.pid {
            self.predecessors += self.last;
            self.pid = pid;
        }
        self.last = seconds;
    }

    /// CPU seconds of the component's processes so far, as of their last readings.
    fn total(&self) -> f64 {
        self.predecessors + self.last
    }
}

/// The environment's own processes (`$RAYGATE_STATE/pids/<component>.pid`): the API server,
/// etcd, Volcano, kwok, raygate's webhook and the rest, which every request a controller
/// makes and every object it creates keep busy too, on the same cores.
///
/// The components are those running at the start. Every reading follows a component's pid
/// file: when it names a new process (a restart), the component's CPU seconds go on from the
/// old process's last reading ([`ComponentCpu`]); while the component is down (its process
/// gone, no new one yet), they stay where they were.
struct Environment {
    /// `$RAYGATE_STATE/pids`.
    pid_dir: PathBuf,
    /// Component name → its CPU seconds; locked because every reading may record a restart.
    components: Mutex<BTreeMap<String, ComponentCpu>>,
    ticks_per_second: f64,
}

/// CPU seconds of the environment's processes, by component.
#[derive(Clone, Default)]
struct EnvironmentCpu(BTreeMap<String, f64>);

impl EnvironmentCpu {
    fn api_server(&self) -> f64 {
        self.0
            .get(API_SERVER_COMPONENT)
            .copied()
            .unwrap_or_default()
    }

    fn total(&self) -> f64 {
        self.0.values().fold(0.0, |sum, n| sum + n)
    }

    /// The seconds spent since `earlier`, by component.
    fn since(&self, earlier: &EnvironmentCpu) -> EnvironmentCpu {
        EnvironmentCpu(
            self.0
                .iter()
                .map(|(name, n)| {
                    let before = earlier.0.get(name).copied().unwrap_or_default();
                    (name.clone(), n - before)
                })
                .collect(),
        )
    }
}

/// The environment component that is the API server.
const API_SERVER_COMPONENT: &str = "kube-apiserver";

impl Environment {
    /// The components running now, from their pid files.
    async fn running(env: &Env) -> anyhow::Result<Environment> {
        let pid_dir = Path::new(env.var("RAYGATE_STATE")).join("pids");
        let mut components = BTreeMap::new();
        for entry in
            std::fs::read_dir(&pid_dir).with_context(|| format!("{}", pid_dir.display()))?
        {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "pid") {
                continue;
            }
            let name = path
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Some(pid) = read_pid_file(&path)?
                && Path::new(&format!("/proc/{pid}")).exists()
            {
                components.insert(name, ComponentCpu::new(pid));
            }
        }
        if !components.contains_key(API_SERVER_COMPONENT) {
            bail!(
                "no running {API_SERVER_COMPONENT} among {}",
                pid_dir.display()
            );
        }
        Ok(Environment {
            pid_dir,
            components: Mutex::new(components),
            ticks_per_second: ticks_per_second().await?,
        })
    }

    /// The pid of `component`, if it was running at the start, as of the last reading.
    fn pid(&self, component: &str) -> Option<u32> {
        self.components
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(component)
            .map(|cpu| cpu.pid)
    }

    /// CPU seconds so far of every component, across restarts.
    fn cpu(&self) -> anyhow::Result<EnvironmentCpu> {
        let mut components = self
            .components
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut cpu = EnvironmentCpu::default();
        for (name, component) in components.iter_mut() {
            let pid_file = self.pid_dir.join(format!("{name}.pid"));
            // No pid file, or one being rewritten: the process read last is still the one.
            let pid = read_pid_file(&pid_file)?.unwrap_or(component.pid);
            if let Some(seconds) = cpu_seconds(pid, self.ticks_per_second)
                .with_context(|| format!("the environment's {name} (pid {pid})"))?
            {
                component.record(pid, seconds);
            }
            cpu.0.insert(name.clone(), component.total());
        }
        Ok(cpu)
    }

    /// Refuses an environment that would make the figures wrong: its own raygate reconciler
    /// watches every namespace, the benchmark's too, and spends CPU on their objects that the
    /// controllers compared then lack; a debug webhook onboards raygate's Pods at a cost users'
    /// release builds do not have.
    fn check(&self, env: &Env) -> anyhow::Result<()> {
        if let Some(pid) = self.pid("raygate-reconciler") {
            bail!(
                "the environment's own raygate reconciler runs (pid {pid}): it watches the benchmark's namespaces too and takes CPU from the controllers compared; start the environment with RAYGATE_ENV_RECONCILER=0"
            );
        }
        // No webhook process with RAYGATE_WEBHOOK=0, nor in-cluster (the image's release build).
        if self.pid("raygate-webhook").is_some() {
            env.require_release_webhook("measuring the controllers while it onboards their Pods")?;
        }
        Ok(())
    }
}

/// A controller's process, and its figures from `/proc` and from its metrics.
struct Process {
    pid: u32,
    metrics: Dashboard,
    ticks_per_second: f64,
}

/// API requests counted by a controller's `rest_client_requests_total`.
#[derive(Default)]
struct Requests {
    by_method: BTreeMap<String, f64>,
    /// Answered 409 Conflict (a stale write or a create of something that exists).
    conflicts: f64,
}

impl Requests {
    fn total(&self) -> f64 {
        // From +0.0: an f64 `sum` of nothing is -0.0, which prints as "-0.0".
        self.by_method.values().fold(0.0, |sum, n| sum + n)
    }
}

/// The value of label `name` in a Prometheus sample's label set.
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    labels
        .split(',')
        .find_map(|l| l.strip_prefix(name)?.strip_prefix("=\""))
        .map(|v| v.trim_end_matches('"'))
}

impl Process {
    async fn new(pid: u32, metrics: Dashboard) -> anyhow::Result<Process> {
        Ok(Process {
            pid,
            metrics,
            ticks_per_second: ticks_per_second().await?,
        })
    }

    /// Waits (30 s at most) until the process answers `path` on its metrics address with 200.
    async fn wait_for(&self, path: &str, log: &std::path::Path) -> anyhow::Result<()> {
        until(
            Instant::now() + Duration::from_secs(30),
            Duration::from_millis(200),
            async || Ok(self.metrics.get(path).await.is_ok_and(|r| r.status == 200)),
            || {
                format!(
                    "pid {} does not answer {path} after 30 s; see {}",
                    self.pid,
                    log.display()
                )
            },
        )
        .await
    }

    /// Peak resident set size in MiB (`VmHWM`).
    fn peak_rss_mib(&self) -> anyhow::Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .context("no VmHWM in /proc/PID/status")?
            .parse()?;
        Ok(kib / 1024.0)
    }

    /// User + system CPU seconds so far, of every thread.
    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        cpu_seconds(self.pid, self.ticks_per_second)?
            .with_context(|| format!("the controller (pid {}) has exited", self.pid))
    }

    /// The samples of counter `name` (all label sets), summed by `key`.
    async fn counter(
        &self,
        name: &str,
        key: impl Fn(&str) -> String,
    ) -> anyhow::Result<BTreeMap<String, f64>> {
        let text = self.metrics.get("/metrics").await?.body;
        let prefix = format!("{name}{{");
        let mut sums = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix(&prefix) else {
                continue;
            };
            let (labels, value) = rest.split_once("} ").context("malformed sample")?;
            *sums.entry(key(labels)).or_insert(0.0) += value.trim().parse::<f64>()?;
        }
        Ok(sums)
    }

    /// `rest_client_requests_total` by method, and its 409s.
    async fn requests(&self) -> anyhow::Result<Requests> {
        let by_method_code = self
            .counter("rest_client_requests_total", |labels| {
                format!(
                    "{} {}",
                    label(labels, "method").unwrap_or("?"),
                    label(labels, "code").unwrap_or("?")
                )
            })
            .await?;
        let mut requests = Requests::default();
        for (method_code, n) in by_method_code {
            let (method, code) = method_code.split_once(' ').unwrap_or((&method_code, ""));
            *requests.by_method.entry(method.to_string()).or_insert(0.0) += n;
            if code == "409" {
                requests.conflicts += n;
            }
        }
        Ok(requests)
    }

    /// `controller_runtime_reconcile_errors_total`, over every controller.
    async fn reconcile_errors(&self) -> anyhow::Result<f64> {
        Ok(self
            .counter("controller_runtime_reconcile_errors_total", |_| {
                String::new()
            })
            .await?
            .values()
            .fold(0.0, |sum, n| sum + n))
    }
}

/// The measured controller, running.
enum Running {
    Raygate {
        child: tokio::process::Child,
        process: Process,
    },
    KubeRay {
        operator: KubeRay,
        process: Process,
    },
}

impl Running {
    /// `raygate reconcile` for `namespace`, healthy.
    async fn raygate(env: &Env, namespace: &str, concurrency: u16) -> anyhow::Result<Running> {
        let port = raygate_e2e::free_port();
        let log = std::path::Path::new(env.var("RAYGATE_LOGS"))
            .join(format!("reconciler-{namespace}.log"));
        let file = std::fs::File::create(&log).with_context(|| format!("{}", log.display()))?;
        let child = tokio::process::Command::new(raygate_e2e::raygate::binary())
            .args(["reconcile", "--kubeconfig"])
            .arg(env.kubeconfig())
            .args(["--watch-namespaces", namespace])
            .args(["--metrics-address", &format!("127.0.0.1:{port}")])
            .args(["--ray-dashboard-address", env.ray_dashboard()])
            .args(["--leader-elect", "false"])
            .args(["--concurrency", &concurrency.to_string()])
            // mimalloc's options, as the Deployment sets them.
            .envs(keys::CONTAINER_ENV)
            // RAYGATE_BENCH_LOG sets the reconciler's log filter, e.g.
            // `info,raygate_reconciler::metrics=trace` to log every API request it makes.
            .env(
                "RUST_LOG",
                std::env::var("RAYGATE_BENCH_LOG").unwrap_or_else(|_| "info".to_string()),
            )
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .context("starting raygate reconcile")?;
        let pid = child.id().context("the reconciler exited at once")?;
        let metrics = Dashboard::new(&format!("http://127.0.0.1:{port}"));
        let process = Process::new(pid, metrics).await?;
        process.wait_for("/healthz", &log).await?;
        println!("raygate reconciler pid {pid}, log {}", log.display());
        Ok(Running::Raygate { child, process })
    }

    fn process(&self) -> &Process {
        match self {
            Running::Raygate { process, .. } | Running::KubeRay { process, .. } => process,
        }
    }

    /// Stops it: SIGTERM and 30 s for raygate, SIGKILL for KubeRay (its figures are taken).
    async fn stop(self) {
        match self {
            Running::Raygate { mut child, process } => {
                let _ = tokio::process::Command::new("kill")
                    .args(["-TERM", &process.pid.to_string()])
                    .status()
                    .await;
                if tokio::time::timeout(Duration::from_secs(30), child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.kill().await;
                }
            }
            Running::KubeRay { operator, .. } => drop(operator),
        }
    }
}

/// One measured moment.
struct Milestone {
    what: &'static str,
    after: Duration,
    cpu_seconds: f64,
    /// CPU seconds of the environment's processes since the run began.
    environment_cpu: EnvironmentCpu,
    requests: f64,
}

impl Milestone {
    /// The shortest wall time the controller's and the environment's CPU seconds up to this
    /// moment allow when they share `cores` cores.
    fn cpu_floor(&self, cores: f64) -> f64 {
        (self.cpu_seconds + self.environment_cpu.total()) / cores
    }
}

/// What one run measured.
struct Figures {
    controller: Controller,
    /// Created, gang and cluster, Pods Running, Waiting: in that order.
    milestones: Vec<Milestone>,
    /// With `--apiserver-outage`: when the restarted API server answered `/readyz`, from the
    /// start of the run.
    readyz: Option<Duration>,
    /// Objects beyond one of each per RayJob after the idle time.
    surplus: Surplus,
    /// Requests during `--idle-seconds` after every RayJob was Waiting.
    idle_requests: f64,
    /// Each RayJob's cause-to-`Waiting` latency in milliseconds, sorted ([`Moments`]).
    latencies_ms: Vec<f64>,
    /// Requests by method from start-up to the end of the idle time.
    by_method: BTreeMap<String, f64>,
    conflicts: f64,
    reconcile_errors: f64,
    peak_rss_mib: f64,
    total_cpu: f64,
    deletion: Duration,
}

impl Figures {
    fn waiting(&self) -> Option<&Milestone> {
        self.milestones.last()
    }

    /// From the restarted API server's `/readyz` to every RayJob `Waiting`.
    fn recovery(&self) -> Option<Duration> {
        self.waiting()?.after.checked_sub(self.readyz?)
    }
}

/// RayClusters, PodGroups and Ray Pods beyond one of each per RayJob (and `--workers` worker
/// Pods), not being deleted: what requests repeated across a failure would have duplicated.
struct Surplus {
    clusters: usize,
    pod_groups: usize,
    pods: usize,
}

impl Surplus {
    fn total(&self) -> usize {
        self.clusters + self.pod_groups + self.pods
    }
}

/// The objects of a store that are not being deleted.
fn live<K: Resource<DynamicType = ()> + Clone>(store: &Store<K>) -> usize {
    store
        .state()
        .iter()
        .filter(|o| o.meta().deletion_timestamp.is_none())
        .count()
}

/// Deletes every object of `store` that is not already being deleted, `CREATE_PARALLELISM` at
/// a time; an object that is already gone is not an error.
async fn delete_each<K>(api: &Api<K>, store: &Store<K>) -> anyhow::Result<()>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let names: Vec<String> = store
        .state()
        .iter()
        .filter(|o| o.meta().deletion_timestamp.is_none())
        .filter_map(|o| o.meta().name.clone())
        .collect();
    futures::stream::iter(names.into_iter().map(anyhow::Ok))
        .try_for_each_concurrent(CREATE_PARALLELISM, |name| async move {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                Err(error) => Err(error).with_context(|| format!("deleting {name}")),
            }
        })
        .await
}

/// SIGKILLs the API server 1 s from now and starts it again `down` after that; returns when
/// it answers `/readyz`, as time since `start`.
async fn api_server_outage(down: Duration, start: Instant) -> anyhow::Result<Duration> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    control_plane(&["apiserver", "kill"]).await?;
    println!(
        "{:>7.1} s  API server killed",
        start.elapsed().as_secs_f64()
    );
    tokio::time::sleep(down).await;
    control_plane(&["apiserver", "start"]).await?;
    let readyz = start.elapsed();
    println!(
        "{:>7.1} s  API server started again, answering /readyz",
        readyz.as_secs_f64()
    );
    Ok(readyz)
}

fn describe(requests: &BTreeMap<String, f64>, jobs: usize) -> String {
    requests
        .iter()
        .map(|(method, n)| format!("{method} {:.1}", n / jobs as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = <Options as clap::Parser>::parse();
    let env = Env::load();
    if options.peer_kuberay() && env.get("RAYGATE_KUBERAY_OPERATOR").is_none() {
        bail!(
            "--peer kuberay needs the KubeRay operator in the environment: tests/env/build kuberay, then tests/env/control-plane up with RAYGATE_ENV_KUBERAY=1"
        );
    }
    let environment = Environment::running(&env).await?;
    environment.check(&env)?;
    let client = env.client().await;
    let pods_wanted = options.jobs * (1 + options.workers);

    let nodes: Api<Node> = Api::all(client.clone());
    // On real nodes the environment's own nodes take the Pods.
    let added_nodes = if options.real_nodes {
        0
    } else {
        pods_wanted.div_ceil(PODS_PER_NODE)
    };
    let node_names: Vec<String> = (0..added_nodes)
        .map(|i| format!("kwok-bench-{i}"))
        .collect();
    let config = env.kube_config().await;
    let mut node_guards = Vec::with_capacity(node_names.len());
    for name in &node_names {
        match nodes
            .create(
                &PostParams::default(),
                &node(name, env.var("RAYGATE_KWOK_NODE_TAINT"))?,
            )
            .await
        {
            // Left by a bench that was killed: the same node, ready to take Pods.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            created => {
                created.with_context(|| format!("creating node {name}"))?;
            }
        }
        node_guards.push(DeleteOnDrop::<Node>::new(&config, name));
    }
    let mut controllers = vec![Controller::Raygate];
    if options.peer_kuberay() {
        controllers.extend([Controller::KubeRay, Controller::KubeRayTuned]);
    }
    let mut runs = Vec::new();
    let mut failure = None;
    for controller in controllers {
        match measure(
            &env,
            &environment,
            &client,
            &options,
            &node_names,
            controller,
        )
        .await
        {
            Ok(figures) => runs.push(figures),
            Err(e) => {
                failure = Some(e.context(format!("the {} run", controller.name())));
                break;
            }
        }
    }
    drop(node_guards);
    let stack = format!(
        "{} / {} / {}",
        env.var("RAYGATE_K8S_VERSION"),
        env.var("RAYGATE_VOLCANO_VERSION"),
        env.var("RAYGATE_KUBERAY_VERSION")
    );
    report(&options, &stack, &runs);
    failure.map_or(Ok(()), Err)
}

/// Deletes the run's namespace and waits until it is gone: the namespace controller deletes
/// what is left in it (a run's thousands of Events, its Services and PodGroups), and the next
/// run is not to share the API server with that.
async fn delete_namespace(client: &Client, namespace: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    match namespaces
        .delete(namespace, &DeleteParams::background())
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        deleted => {
            deleted.with_context(|| format!("deleting namespace {namespace}"))?;
        }
    }
    until(
        Instant::now() + Duration::from_secs(600),
        Duration::from_millis(500),
        async || Ok(namespaces.get_opt(namespace).await?.is_none()),
        || format!("namespace {namespace} is still there 600 s after deleting it"),
    )
    .await
}

async fn wait_for_nodes(client: &Client, count: usize) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let bench_nodes = ListParams::default().labels(&format!("{BENCH_NODE_LABEL}=true"));
    until(
        Instant::now() + Duration::from_secs(120),
        Duration::from_millis(500),
        async || {
            let list = nodes.list(&bench_nodes).await?;
            Ok(list.items.iter().filter(|n| is_ready(n)).count() == count)
        },
        || format!("the benchmark's {count} kwok nodes are not Ready after 120 s"),
    )
    .await
}

/// Checks `done` every `every` until it holds; once `deadline` has passed, fails with the
/// message `late` gives then.
async fn until(
    deadline: Instant,
    every: Duration,
    mut done: impl AsyncFnMut() -> anyhow::Result<bool>,
    late: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    while !done().await? {
        if Instant::now() > deadline {
            bail!(late());
        }
        tokio::time::sleep(every).await;
    }
    Ok(())
}

async fn measure(
    env: &Env,
    environment: &Environment,
    client: &Client,
    options: &Options,
    node_names: &[String],
    controller: Controller,
) -> anyhow::Result<Figures> {
    let jobs = options.jobs;
    let pods_wanted = jobs * (1 + options.workers);
    wait_for_nodes(client, node_names.len()).await?;
    let prefix = format!("rayjob-bench-{}", controller.name());
    let ns = if options.real_nodes {
        TestNamespace::on_real_nodes(env, &prefix, &controller.namespace_labels()).await
    } else {
        TestNamespace::on_kwok_nodes(
            env,
            &prefix,
            &controller.namespace_labels(),
            &format!("{BENCH_NODE_LABEL}=true"),
        )
        .await
    };
    let placement = if options.real_nodes {
        format!("the real nodes {}", env.real_nodes().join(", "))
    } else {
        format!("{} added kwok nodes", node_names.len())
    };
    let namespace = ns.name().to_string();
    let running = controller.start(env, &ns, options.concurrency).await?;
    let process = running.process();
    let moments = Arc::new(Mutex::new(Moments::default()));
    let seen = moments.clone();
    let rayjobs: Store<RayJob> = store(client, &namespace, move |job| {
        seen.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe_job(job);
    })
    .await;
    let clusters: Store<RayCluster> = store(client, &namespace, |_| {}).await;
    let pod_groups: Store<PodGroup> = store(client, &namespace, |_| {}).await;
    let seen = moments.clone();
    let pods: Store<Pod> = store(client, &namespace, move |pod| {
        seen.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .observe_pod(pod);
    })
    .await;
    rayjobs.wait_until_ready().await.context("RayJob watch")?;
    clusters
        .wait_until_ready()
        .await
        .context("RayCluster watch")?;
    pod_groups
        .wait_until_ready()
        .await
        .context("PodGroup watch")?;
    pods.wait_until_ready().await.context("Pod watch")?;
    let startup_requests = process.requests().await?.total();
    let startup_cpu = process.cpu_seconds()?;
    let startup_environment_cpu = environment.cpu()?;

    println!(
        "{}: creating {jobs} RayJobs ({} workers each, {pods_wanted} pods) in {namespace} on {placement}; load average {}",
        controller.name(),
        options.workers,
        load_average()
    );
    let api: Api<RayJob> = ns.api();
    let start = Instant::now();
    let mut milestones = Vec::new();
    let mark = async |what: &'static str, milestones: &mut Vec<Milestone>| -> anyhow::Result<()> {
        let milestone = Milestone {
            what,
            after: start.elapsed(),
            cpu_seconds: process.cpu_seconds()? - startup_cpu,
            environment_cpu: environment.cpu()?.since(&startup_environment_cpu),
            requests: process.requests().await?.total() - startup_requests,
        };
        println!(
            "{:>7.1} s  {what} ({}: {:.1} CPU s, {:.0} requests; environment {:.1} CPU s, API server {:.1}; load average {})",
            milestone.after.as_secs_f64(),
            controller.name(),
            milestone.cpu_seconds,
            milestone.requests,
            milestone.environment_cpu.total(),
            milestone.environment_cpu.api_server(),
            load_average()
        );
        milestones.push(milestone);
        Ok(())
    };
    futures::stream::iter((0..jobs).map(|i| {
        let api = api.clone();
        async move {
            let job = ray_job(&format!("bench-{i:04}"), options.workers)?;
            api.create(&PostParams::default(), &job)
                .await
                .with_context(|| format!("creating RayJob bench-{i:04}"))
        }
    }))
    .buffer_unordered(CREATE_PARALLELISM)
    .try_collect::<Vec<_>>()
    .await?;
    mark("all RayJobs created", &mut milestones).await?;
    let outage = options
        .outage
        .map(|down| tokio::spawn(api_server_outage(down, start)));

    let mut gang_and_cluster = false;
    let mut all_running = false;
    loop {
        if start.elapsed() > options.timeout {
            let mut late: Vec<String> = rayjobs
                .state()
                .iter()
                .filter(|j| !is_waiting(j))
                .map(|j| j.metadata.name.clone().unwrap_or_default())
                .collect();
            late.sort();
            bail!(
                "{} of {jobs} RayJobs not Waiting after {} s: {}",
                late.len(),
                options.timeout.as_secs(),
                late.join(", ")
            );
        }
        if !gang_and_cluster && pod_groups.state().len() >= jobs && clusters.state().len() >= jobs {
            gang_and_cluster = true;
            mark(
                "every RayJob has a PodGroup and a RayCluster",
                &mut milestones,
            )
            .await?;
        }
        let running_pods = pods
            .state()
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if gang_and_cluster && !all_running && running_pods >= pods_wanted {
            all_running = true;
            mark("every Ray pod is Running", &mut milestones).await?;
        }
        let waiting = rayjobs.state().iter().filter(|j| is_waiting(j)).count();
        if all_running && waiting >= jobs {
            mark(
                "every RayJob is Waiting (its cluster ready)",
                &mut milestones,
            )
            .await?;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let readyz = match outage {
        Some(outage) => Some(outage.await.context("the API server outage")??),
        None => None,
    };
    let latencies_ms = moments
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .latencies_ms();
    // What the controller keeps doing with this many idle RayJobs.
    let before_idle = process.requests().await?.total();
    tokio::time::sleep(options.idle).await;
    let requests = process.requests().await?;
    let idle_requests = requests.total() - before_idle;
    println!(
        "{}: {idle_requests:.0} requests in {} idle seconds",
        controller.name(),
        options.idle.as_secs()
    );
    let peak_rss_mib = process.peak_rss_mib()?;
    let reconcile_errors = process.reconcile_errors().await?;
    let surplus = Surplus {
        clusters: live(&clusters).saturating_sub(jobs),
        pod_groups: live(&pod_groups).saturating_sub(jobs),
        pods: live(&pods).saturating_sub(pods_wanted),
    };
    if surplus.total() > 0 {
        println!(
            "{}: more than one of each per RayJob after the idle time: {} RayClusters, {} PodGroups, {} Pods too many",
            controller.name(),
            surplus.clusters,
            surplus.pod_groups,
            surplus.pods
        );
    }

    let cleanup = Instant::now();
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .context("deleting the RayJobs")?;
    let cleanup_deadline = cleanup + Duration::from_secs(600);
    until(
        cleanup_deadline,
        Duration::from_millis(250),
        async || Ok(rayjobs.state().is_empty()),
        || {
            format!(
                "{} RayJobs still there 600 s after deleting them",
                rayjobs.state().len()
            )
        },
    )
    .await?;
    let deletion = cleanup.elapsed();
    let total_cpu = process.cpu_seconds()?;
    // The next run needs the nodes' room back. The RayClusters and their Pods go by garbage
    // collection once their RayJobs are gone, but kube-controller-manager's collector deletes
    // within its client limit (QPS 20 by default: about 10 objects a second, 10 minutes for
    // 2,000 RayClusters and their 4,000 Pods), and one DELETE of a whole collection outlasts
    // the API server's 60-s request timeout at that size. So delete them one by one, the
    // clusters first, so that no controller creates a deleted Pod again.
    delete_each(&ns.api::<RayCluster>(), &clusters)
        .await
        .context("deleting the RayClusters left after their RayJobs")?;
    delete_each(&ns.api::<Pod>(), &pods)
        .await
        .context("deleting the Pods left after their RayJobs")?;
    until(
        cleanup_deadline,
        Duration::from_millis(250),
        async || Ok(pods.state().is_empty()),
        || {
            format!(
                "{} Pods still there 600 s after deleting their RayJobs",
                pods.state().len()
            )
        },
    )
    .await?;
    running.stop().await;
    delete_namespace(client, &namespace).await?;
    Ok(Figures {
        controller,
        milestones,
        readyz,
        surplus,
        idle_requests,
        latencies_ms,
        by_method: requests.by_method,
        conflicts: requests.conflicts,
        reconcile_errors,
        peak_rss_mib,
        total_cpu,
        deletion,
    })
}

/// Prints every run's figures; `stack` names the environment's Kubernetes, Volcano and KubeRay
/// releases, so that a table says which peer it compares with.
fn report(options: &Options, stack: &str, runs: &[Figures]) {
    let jobs = options.jobs;
    let per_job = |n: f64| n / jobs as f64;
    println!();
    println!(
        "| RayJobs | pods | nodes | reconcile concurrency | idle seconds | load average at the end | Kubernetes / Volcano / KubeRay |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {jobs} | {} | {} | {} | {} | {} | {stack} |",
        jobs * (1 + options.workers),
        if options.real_nodes { "real" } else { "kwok" },
        options.concurrency,
        options.idle.as_secs(),
        load_average()
    );
    for run in runs {
        println!();
        println!("{}:", run.controller.name());
        println!();
        println!(
            "| milestone | time | CPU s | API requests | requests / RayJob | environment CPU s | API server CPU s |"
        );
        println!("|---|---|---|---|---|---|---|");
        for m in &run.milestones {
            println!(
                "| {} | {:.1} s | {:.1} | {:.0} | {:.1} | {:.1} | {:.1} |",
                m.what,
                m.after.as_secs_f64(),
                m.cpu_seconds,
                m.requests,
                per_job(m.requests),
                m.environment_cpu.total(),
                m.environment_cpu.api_server()
            );
        }
        println!();
        println!(
            "requests per RayJob by method (start-up to the end of the idle time): {}",
            describe(&run.by_method, jobs)
        );
    }
    let Some(ours) = runs.iter().find(|r| r.controller == Controller::Raygate) else {
        return;
    };
    let peers: Vec<&Figures> = runs
        .iter()
        .filter(|r| r.controller != Controller::Raygate)
        .collect();
    // The faster KubeRay run to every RayJob Waiting is the one raygate is held to.
    let best = peers
        .iter()
        .filter_map(|r| Some((*r, r.waiting()?.after)))
        .min_by_key(|(_, after)| *after)
        .map(|(r, _)| r);
    type Figure = (
        &'static str,
        fn(&Figures, usize) -> Option<f64>,
        &'static str,
    );
    let figures: [Figure; 19] = [
        (
            "every RayJob has a PodGroup and a RayCluster",
            |f, _| f.milestones.get(1).map(|m| m.after.as_secs_f64()),
            "s",
        ),
        (
            "every Ray pod Running",
            |f, _| f.milestones.get(2).map(|m| m.after.as_secs_f64()),
            "s",
        ),
        (
            "every RayJob Waiting",
            |f, _| f.waiting().map(|m| m.after.as_secs_f64()),
            "s",
        ),
        (
            "API server /readyz → every RayJob Waiting (with --apiserver-outage)",
            |f, _| f.recovery().map(|d| d.as_secs_f64()),
            "s",
        ),
        (
            "RayClusters, PodGroups and Pods beyond one each",
            |f, _| Some(f.surplus.total() as f64),
            "",
        ),
        (
            "API requests per RayJob to Waiting",
            |f, jobs| f.waiting().map(|m| m.requests / jobs as f64),
            "",
        ),
        (
            "API requests per RayJob while idle",
            |f, jobs| Some(f.idle_requests / jobs as f64),
            "",
        ),
        (
            "last Pod Ready → RayJob Waiting, p50",
            |f, _| quantile(&f.latencies_ms, 0.5),
            "ms",
        ),
        (
            "last Pod Ready → RayJob Waiting, p99",
            |f, _| quantile(&f.latencies_ms, 0.99),
            "ms",
        ),
        (
            "last Pod Ready → RayJob Waiting, max",
            |f, _| quantile(&f.latencies_ms, 1.0),
            "ms",
        ),
        ("409 Conflict answers", |f, _| Some(f.conflicts), ""),
        ("reconcile errors", |f, _| Some(f.reconcile_errors), ""),
        (
            "CPU to Waiting",
            |f, _| f.waiting().map(|m| m.cpu_seconds),
            "s",
        ),
        (
            "API server CPU to Waiting",
            |f, _| f.waiting().map(|m| m.environment_cpu.api_server()),
            "s",
        ),
        (
            "environment CPU to Waiting (API server, etcd, Volcano, kwok, webhook, …)",
            |f, _| f.waiting().map(|m| m.environment_cpu.total()),
            "s",
        ),
        (
            "CPU floor to Waiting: (controller + environment CPU) ÷ the machine's cores",
            |f, _| {
                let cores = machine_cores()?;
                f.waiting().map(|m| m.cpu_floor(cores))
            },
            "s",
        ),
        (
            "CPU through deletion (incl. start-up)",
            |f, _| Some(f.total_cpu),
            "s",
        ),
        ("peak RSS", |f, _| Some(f.peak_rss_mib), "MiB"),
        (
            "deleting all RayJobs",
            |f, _| Some(f.deletion.as_secs_f64()),
            "s",
        ),
    ];
    println!();
    let mut header = "| figure | raygate |".to_string();
    let mut rule = "|---|---|".to_string();
    for peer in &peers {
        header.push_str(&format!(" {} |", peer.controller.name()));
        rule.push_str("---|");
    }
    if let Some(best) = best {
        header.push_str(&format!(" raygate ÷ {} |", best.controller.name()));
        rule.push_str("---|");
    }
    println!("{header}");
    println!("{rule}");
    let cell = |value: Option<f64>, unit: &str| match value {
        Some(v) if unit.is_empty() => format!("{v:.1}"),
        Some(v) => format!("{v:.1} {unit}"),
        None => "—".to_string(),
    };
    for (what, value, unit) in figures {
        let mut line = format!("| {what} | {} |", cell(value(ours, jobs), unit));
        for peer in &peers {
            line.push_str(&format!(" {} |", cell(value(peer, jobs), unit)));
        }
        if let Some(best) = best {
            let ratio = match (value(ours, jobs), value(best, jobs)) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
                _ => "—".to_string(),
            };
            line.push_str(&format!(" {ratio} |"));
        }
        println!("{line}");
    }
    report_environment_cpu(runs);
}

/// The environment's CPU seconds to every RayJob `Waiting`, by component, one column per run:
/// where a controller's requests and objects cost the cluster.
fn report_environment_cpu(runs: &[Figures]) {
    let by_run: Vec<(&Figures, &EnvironmentCpu)> = runs
        .iter()
        .filter_map(|run| Some((run, &run.waiting()?.environment_cpu)))
        .collect();
    let components: std::collections::BTreeSet<&String> =
        by_run.iter().flat_map(|(_, cpu)| cpu.0.keys()).collect();
    println!();
    println!("environment CPU seconds to every RayJob Waiting, by component:");
    println!();
    let mut header = "| component |".to_string();
    let mut rule = "|---|".to_string();
    for (run, _) in &by_run {
        header.push_str(&format!(" {} |", run.controller.name()));
        rule.push_str("---|");
    }
    println!("{header}");
    println!("{rule}");
    for component in components {
        let mut line = format!("| {component} |");
        for (_, cpu) in &by_run {
            let seconds = cpu.0.get(component).copied().unwrap_or_default();
            line.push_str(&format!(" {seconds:.1} |"));
        }
        println!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc/PID/stat` line of process 4242 named `command`, 250 user and 50 system ticks.
    fn stat(command: &str) -> String {
        format!(
            "4242 ({command}) S 1 4242 4242 0 -1 4194560 9051 0 3 0 250 50 0 0 20 0 17 0 81234 \
             1048576000 51200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
        )
    }

    #[test]
    fn cpu_ticks_are_utime_and_stime() {
        assert_eq!(cpu_ticks(&stat("kube-apiserver")).unwrap(), 300);
    }

    #[test]
    fn cpu_ticks_are_counted_after_the_last_parenthesis() {
        // A command name may hold spaces, parentheses and what looks like fields.
        assert_eq!(cpu_ticks(&stat("a) S 1 2 (b c")).unwrap(), 300);
        assert_eq!(
            cpu_ticks(&stat("x 1 2 3 4 5 6 7 8 9 10 11 12)")).unwrap(),
            300
        );
    }

    #[test]
    fn malformed_stat_lines_are_errors() {
        let error = |stat: &str| format!("{:#}", cpu_ticks(stat).unwrap_err());
        assert_eq!(
            error("4242 kube-apiserver S 1"),
            "no ')' closing the command name"
        );
        assert_eq!(error("4242 (etcd) S 1 2 3"), "no field 14 (utime)");
        assert_eq!(
            error("4242 (etcd) S 1 4242 4242 0 -1 4194560 9051 0 3 0 250"),
            "no field 15 (stime)"
        );
        assert!(
            error("4242 (etcd) S 1 4242 4242 0 -1 4194560 9051 0 3 0 2.5 50")
                .starts_with("field 14 (utime) \"2.5\" is not a number of ticks"),
        );
    }

    #[test]
    fn a_gone_process_has_no_cpu_seconds() {
        assert!(cpu_seconds(std::process::id(), 100.0).unwrap().is_some());
        // Above any kernel's pid_max (2^22 at most).
        assert!(cpu_seconds(u32::MAX, 100.0).unwrap().is_none());
    }

    #[test]
    fn a_pid_file_holds_one_decimal_pid() {
        let path = Path::new("/state/pids/etcd.pid");
        assert_eq!(parse_pid_file(path, "4242\n").unwrap(), 4242);
        assert_eq!(parse_pid_file(path, " 17 ").unwrap(), 17);
        for content in [
            "",
            "\n",
            "etcd",
            "12 34",
            "-1",
            "+5",
            "0",
            "4294967296",
            "4242x",
        ] {
            assert_eq!(
                parse_pid_file(path, content).unwrap_err().to_string(),
                format!(
                    "pid file /state/pids/etcd.pid: {:?} is not a process id",
                    content.trim()
                ),
                "{content:?}"
            );
        }
    }

    #[test]
    fn a_restarted_component_goes_on_from_the_last_reading_of_its_old_process() {
        let mut cpu = ComponentCpu::new(100);
        cpu.record(100, 10.0);
        let start = cpu.total();
        cpu.record(100, 12.0);
        // Restarted: process 200 has spent 0.5 s; whatever 100 spent after 12.0 is unknown.
        cpu.record(200, 0.5);
        assert_eq!(cpu.total(), 12.5);
        cpu.record(200, 3.0);
        assert_eq!(cpu.total() - start, 5.0);
        // Restarted again, and first read as process 300 already.
        cpu.record(300, 1.0);
        assert_eq!(cpu.total(), 16.0);
        assert_eq!(cpu.pid, 300);
    }

    #[test]
    fn the_cpu_floor_is_the_controllers_and_every_components_cpu_over_the_cores() {
        let waiting = Milestone {
            what: "every RayJob is Waiting",
            after: Duration::from_secs(40),
            cpu_seconds: 6.0,
            environment_cpu: EnvironmentCpu(BTreeMap::from([
                (API_SERVER_COMPONENT.to_string(), 50.0),
                ("etcd".to_string(), 8.0),
            ])),
            requests: 7400.0,
        };
        assert_eq!(waiting.cpu_floor(2.0), 32.0);
        assert_eq!(waiting.cpu_floor(4.0), 16.0);
    }

    #[test]
    fn a_component_restarted_before_its_first_reading_counts_the_new_process_only() {
        let mut cpu = ComponentCpu::new(100);
        cpu.record(200, 4.0);
        assert_eq!(cpu.total(), 4.0);
    }
}
