//! `rayjob-bench`: how raygate's reconciler copes with many RayJobs created at once.
//!
//! On the running `tests/env` environment it adds kwok nodes for the pods, creates a
//! Volcano-labelled namespace that the environment's own reconciler ignores, starts its own
//! `raygate reconcile` (the binary next to this one, so a release build measures a release
//! reconciler) for that namespace only, creates `--jobs` RayJobs at once and reports:
//!
//! * the time until every RayJob has its PodGroup and its RayCluster;
//! * the time until every Ray pod (head + `--workers` workers per RayJob) is Running;
//! * the time until every RayJob is `Waiting` (its cluster ready, seen by the RayJob controller);
//! * the reconciler's peak RSS (`VmHWM`) and CPU seconds (`utime + stime`) from `/proc`;
//! * the API requests it made (`rest_client_requests_total` of its own metrics), in total and
//!   per RayJob, by method;
//! * the time to delete them all again.
//!
//! The RayJobs use `InteractiveMode`: no entrypoint runs, so the figures measure the
//! reconciler (PodGroup, RayCluster, Service, pods, status), not Ray. Afterwards the RayJobs,
//! the namespace and the added nodes are deleted.
//!
//! ```text
//! cargo build --release -p raygate -p raygate-e2e --bin rayjob-bench
//! tests/env/control-plane exec -- target/release/rayjob-bench [--jobs 500] [--workers 1] \
//!     [--reconcile-concurrency 4]
//! ```

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use raygate_api::keys;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::PodGroup;
use raygate_e2e::ray::Dashboard;
use raygate_e2e::reconciler::PRIVATE_RECONCILER_LABEL;
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

/// Label of the nodes the benchmark adds (and deletes).
const BENCH_NODE_LABEL: &str = "raygate.io/bench-node";
/// Pods each added node takes.
const PODS_PER_NODE: usize = 250;
/// Bound on the whole measured phase.
const TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// RayJobs created at once.
const CREATE_PARALLELISM: usize = 16;

struct Options {
    jobs: usize,
    workers: usize,
    concurrency: u16,
}

fn options() -> anyhow::Result<Options> {
    let mut options = Options {
        jobs: 500,
        workers: 1,
        concurrency: 4,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag}: missing value"))?;
        let number = || {
            value
                .parse::<usize>()
                .with_context(|| format!("{flag}: {value:?} is not a number"))
        };
        match flag.as_str() {
            "--jobs" => options.jobs = number()?,
            "--workers" => options.workers = number()?,
            "--reconcile-concurrency" => {
                options.concurrency =
                    u16::try_from(number()?).context("--reconcile-concurrency")?;
            }
            other => bail!(
                "unknown flag {other}; usage: rayjob-bench [--jobs N] [--workers N] [--reconcile-concurrency N]"
            ),
        }
    }
    Ok(options)
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

/// A kwok node (kwok manages nodes with this annotation) for `PODS_PER_NODE` small pods.
fn node(name: &str) -> anyhow::Result<Node> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {BENCH_NODE_LABEL: "true", "type": "kwok-bench", "kubernetes.io/hostname": name,
                       "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
        },
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

/// A store of every `K` in `namespace`, kept current by a watch running in the background.
async fn store<K>(client: &Client, namespace: &str) -> Store<K>
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
        .default_backoff()
        .applied_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while stream.next().await.is_some() {}
    });
    reader
}

/// `raygate reconcile` for the benchmark's namespace, and its process figures.
struct Reconciler {
    child: tokio::process::Child,
    pid: u32,
    metrics: Dashboard,
    ticks_per_second: f64,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Reconciler {
    async fn start(env: &Env, namespace: &str, concurrency: u16) -> anyhow::Result<Reconciler> {
        let port = free_port()?;
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
        let ticks = tokio::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .await
            .context("getconf CLK_TCK")?;
        let ticks_per_second: f64 = String::from_utf8_lossy(&ticks.stdout)
            .trim()
            .parse()
            .context("getconf CLK_TCK")?;
        let reconciler = Reconciler {
            child,
            pid,
            metrics: Dashboard::new(&format!("http://127.0.0.1:{port}")),
            ticks_per_second,
        };
        let started = Instant::now();
        while !reconciler
            .metrics
            .get("/healthz")
            .await
            .is_ok_and(|r| r.status == 200)
        {
            if started.elapsed() > Duration::from_secs(30) {
                bail!(
                    "the reconciler is not healthy after 30 s; see {}",
                    log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        println!("reconciler pid {pid}, log {}", log.display());
        Ok(reconciler)
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

    /// User + system CPU seconds so far.
    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))?;
        // Fields after the command name (which may hold spaces): state is field 3, utime 14.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .context("malformed /proc/PID/stat")?
            .1
            .split_whitespace()
            .collect();
        let ticks = |i: usize| -> anyhow::Result<f64> {
            Ok(fields.get(i).context("short /proc/PID/stat")?.parse()?)
        };
        Ok((ticks(11)? + ticks(12)?) / self.ticks_per_second)
    }

    /// `rest_client_requests_total` by method (all status codes).
    async fn requests(&self) -> anyhow::Result<BTreeMap<String, f64>> {
        let text = self.metrics.get("/metrics").await?.body;
        let mut by_method = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("rest_client_requests_total{") else {
                continue;
            };
            let (labels, value) = rest.split_once("} ").context("malformed sample")?;
            let method = labels
                .split(',')
                .find_map(|l| l.strip_prefix("method=\""))
                .map(|m| m.trim_end_matches('"'))
                .unwrap_or("?");
            *by_method.entry(method.to_string()).or_insert(0.0) += value.trim().parse::<f64>()?;
        }
        Ok(by_method)
    }

    async fn stop(mut self) {
        let _ = tokio::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .await;
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// One measured moment.
struct Milestone {
    what: &'static str,
    after: Duration,
    cpu_seconds: f64,
    requests: f64,
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
    let options = options()?;
    let env = Env::load();
    let client = env.client().await;
    let jobs = options.jobs;
    let pods_wanted = jobs * (1 + options.workers);

    let nodes: Api<Node> = Api::all(client.clone());
    let node_names: Vec<String> = (0..pods_wanted.div_ceil(PODS_PER_NODE))
        .map(|i| format!("kwok-bench-{i}"))
        .collect();
    for name in &node_names {
        nodes
            .create(&PostParams::default(), &node(name)?)
            .await
            .with_context(|| format!("creating node {name}"))?;
    }
    let result = measure(&env, &client, &options, &node_names).await;
    for name in &node_names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
    result
}

async fn measure(
    env: &Env,
    client: &Client,
    options: &Options,
    node_names: &[String],
) -> anyhow::Result<()> {
    let jobs = options.jobs;
    let pods_wanted = jobs * (1 + options.workers);
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let list = nodes
            .list(&ListParams::default().labels(&format!("{BENCH_NODE_LABEL}=true")))
            .await?;
        if list.items.iter().filter(|n| is_ready(n)).count() == node_names.len() {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "the benchmark's {} kwok nodes are not Ready after 120 s",
                node_names.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ns = TestNamespace::with_labels(
        env,
        "rayjob-bench",
        &[
            (keys::NAMESPACE_OPT_IN_LABEL, keys::NAMESPACE_OPT_IN_VALUE),
            (PRIVATE_RECONCILER_LABEL, "true"),
        ],
    )
    .await;
    let namespace = ns.name().to_string();
    let reconciler = Reconciler::start(env, &namespace, options.concurrency).await?;
    let rayjobs: Store<RayJob> = store(client, &namespace).await;
    let clusters: Store<RayCluster> = store(client, &namespace).await;
    let pod_groups: Store<PodGroup> = store(client, &namespace).await;
    let pods: Store<Pod> = store(client, &namespace).await;
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
    let idle_requests: f64 = reconciler.requests().await?.values().sum();
    let idle_cpu = reconciler.cpu_seconds()?;

    println!(
        "creating {jobs} RayJobs ({} workers each, {pods_wanted} pods) in {namespace} on {} added kwok nodes; load average {}",
        options.workers,
        node_names.len(),
        load_average()
    );
    let api: Api<RayJob> = ns.api();
    let start = Instant::now();
    let mut milestones = Vec::new();
    let mark = async |what: &'static str, milestones: &mut Vec<Milestone>| -> anyhow::Result<()> {
        let requests: f64 = reconciler.requests().await?.values().sum();
        let milestone = Milestone {
            what,
            after: start.elapsed(),
            cpu_seconds: reconciler.cpu_seconds()? - idle_cpu,
            requests: requests - idle_requests,
        };
        println!(
            "{:>7.1} s  {what} (reconciler: {:.1} CPU s, {:.0} requests; load average {})",
            milestone.after.as_secs_f64(),
            milestone.cpu_seconds,
            milestone.requests,
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

    let mut gang_and_cluster = false;
    let mut running = false;
    loop {
        if start.elapsed() > TIMEOUT {
            bail!("not done after {TIMEOUT:?}");
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
        if gang_and_cluster && !running && running_pods >= pods_wanted {
            running = true;
            mark("every Ray pod is Running", &mut milestones).await?;
        }
        let waiting = rayjobs
            .state()
            .iter()
            .filter(|j| {
                j.status
                    .as_ref()
                    .and_then(|s| s.job_deployment_status.as_deref())
                    == Some("Waiting")
            })
            .count();
        if running && waiting >= jobs {
            mark(
                "every RayJob is Waiting (its cluster ready)",
                &mut milestones,
            )
            .await?;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // A quiet minute: what an idle reconciler with this many RayJobs keeps doing.
    tokio::time::sleep(Duration::from_secs(30)).await;
    mark("30 s later (steady state)", &mut milestones).await?;
    let by_method = reconciler.requests().await?;
    let peak_rss = reconciler.peak_rss_mib()?;

    let cleanup = Instant::now();
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .context("deleting the RayJobs")?;
    while !rayjobs.state().is_empty() {
        if cleanup.elapsed() > Duration::from_secs(600) {
            bail!(
                "{} RayJobs still there 600 s after deleting them",
                rayjobs.state().len()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let cleanup = cleanup.elapsed();
    let peak_rss_end = reconciler.peak_rss_mib()?;
    let total_cpu = reconciler.cpu_seconds()?;
    reconciler.stop().await;

    println!();
    println!("| RayJobs | pods | reconcile concurrency |");
    println!("|---|---|---|");
    println!("| {jobs} | {pods_wanted} | {} |", options.concurrency);
    println!();
    println!("| milestone | time | reconciler CPU s | API requests | requests / RayJob |");
    println!("|---|---|---|---|---|");
    for m in &milestones {
        println!(
            "| {} | {:.1} s | {:.1} | {:.0} | {:.1} |",
            m.what,
            m.after.as_secs_f64(),
            m.cpu_seconds,
            m.requests,
            m.requests / jobs as f64
        );
    }
    println!();
    println!(
        "requests per RayJob by method (whole run incl. startup, until the steady state): {}",
        describe(&by_method, jobs)
    );
    println!("reconciler peak RSS: {peak_rss:.1} MiB (through deletion: {peak_rss_end:.1} MiB)");
    println!("reconciler CPU: {total_cpu:.1} s in total, through deletion");
    println!(
        "deleting all RayJobs (finalizers released): {:.1} s",
        cleanup.as_secs_f64()
    );
    println!("load average at the end: {}", load_average());
    Ok(())
}
