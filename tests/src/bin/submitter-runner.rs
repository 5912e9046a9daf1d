//! `submitter-runner`: the kubelet stand-in for pods owned by a batch/v1 Job and for the
//! SidecarMode submitter container of Ray head pods.
//!
//! kwok (configured by `tests/env/control-plane` without a "complete" stage) keeps Job-owned pods
//! Running. This program watches Running pods owned by a Job, really runs container 0's command
//! with its environment (Ray dashboard addresses pointed at the environment's Ray head, the Ray
//! venv first on `PATH`), then writes the outcome to the pod's status as a kubelet would: phase
//! `Succeeded` or `Failed`, and `containerStatuses[0].state.terminated` with the exit code, reason
//! and times. The Job controller takes it from there.
//!
//! A Running Ray head pod (`ray.io/node-type=head`) with a `ray-job-submitter` container
//! (KubeRay's SidecarMode) gets that container run the same way; afterwards only that
//! container's status becomes `terminated` and the pod's Ready/ContainersReady conditions
//! `False` (`ContainersNotReady`), as a kubelet reports a finished container of a pod with
//! `restartPolicy: Never` whose other containers still run: the pod stays Running.
//!
//! Only pods on nodes kwok manages (annotated `kwok.x-k8s.io/node: fake`, the selector
//! `tests/env/control-plane` starts kwok with) are run: a pod on a real node has a kubelet of its
//! own, and running its command here as well would submit its Ray job to the wrong cluster and
//! finish its Job before the real container does.
//!
//! Each pod runs once: the runner annotates it before starting the command. A pod found annotated
//! but still Running (the runner was restarted mid-run) is marked Failed instead of run again.
//!
//! ```text
//! submitter-runner --kubeconfig PATH --ray-venv DIR --dashboard http://127.0.0.1:8265 \
//!                  --health-address 127.0.0.1:10270
//! ```
//!
//! `GET /healthz` on the health address answers `ok` once the pod watch has synced.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use raygate_e2e::nodes::KWOK_NODE_ANNOTATION;
use raygate_e2e::runner::{self, RAN_ANNOTATION, Target};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Command-line settings.
struct Args {
    kubeconfig: PathBuf,
    ray_venv: PathBuf,
    dashboard: String,
    health_address: String,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut kubeconfig = None;
    let mut ray_venv = None;
    let mut dashboard = None;
    let mut health_address = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let slot = match flag.as_str() {
            "--kubeconfig" => &mut kubeconfig,
            "--ray-venv" => &mut ray_venv,
            "--dashboard" => &mut dashboard,
            "--health-address" => &mut health_address,
            other => bail!(
                "unknown argument {other:?} (flags: --kubeconfig --ray-venv --dashboard --health-address)"
            ),
        };
        *slot = Some(
            args.next()
                .with_context(|| format!("{flag} needs a value"))?,
        );
    }
    Ok(Args {
        kubeconfig: kubeconfig.context("--kubeconfig is required")?.into(),
        ray_venv: ray_venv.context("--ray-venv is required")?.into(),
        dashboard: dashboard.context("--dashboard is required")?,
        health_address: health_address.context("--health-address is required")?,
    })
}

/// What a finished (or unrunnable) container reports.
struct Outcome {
    exit_code: i32,
    reason: &'static str,
    message: Option<String>,
    started_at: Timestamp,
}

/// Shared state of the runner.
struct Runner {
    pods: Api<Pod>,
    nodes: Api<Node>,
    ray_venv: PathBuf,
    dashboard: String,
    /// UIDs of pods taken in this process.
    taken: Mutex<HashSet<String>>,
}

impl Runner {
    /// Starts a task for `pod` if it is a Running pod with something to run, not taken yet.
    fn consider(self: &Arc<Self>, pod: Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            return;
        }
        let Some(target) = Target::of(&pod) else {
            return;
        };
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        if !self.taken.lock().expect("taken set").insert(uid) {
            return;
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let name = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
            if let Err(e) = this.handle(pod, target).await {
                eprintln!("{name}: {e:#}");
            }
        });
    }

    /// Whether kwok manages `node` (no kubelet runs its pods).
    async fn kwok_manages(&self, node: &str) -> anyhow::Result<bool> {
        let node = self
            .nodes
            .get(node)
            .await
            .with_context(|| format!("reading node {node}"))?;
        let (key, value) = KWOK_NODE_ANNOTATION;
        Ok(node.annotations().get(key).map(String::as_str) == Some(value))
    }

    async fn handle(&self, pod: Pod, target: Target) -> anyhow::Result<()> {
        let namespace = pod.namespace().context("pod without namespace")?;
        let name = pod.name_any();
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .context("Running pod without a node")?;
        if !self.kwok_manages(&node).await? {
            eprintln!("{namespace}/{name}: on node {node}, which has a kubelet; left to it");
            return Ok(());
        }
        let pods: Api<Pod> = Api::namespaced(self.pods.clone().into_client(), &namespace);
        let outcome = if pod.annotations().contains_key(RAN_ANNOTATION) {
            eprintln!(
                "{namespace}/{name}: already started by an earlier runner; marking it Failed"
            );
            Outcome {
                exit_code: 137,
                reason: "Error",
                message: Some("the submitter runner restarted while this pod's command ran".into()),
                started_at: Timestamp::now(),
            }
        } else {
            let mark = json!({"metadata": {"annotations": {RAN_ANNOTATION: Timestamp::now().to_string()}}});
            pods.patch(&name, &PatchParams::default(), &Patch::Merge(&mark))
                .await
                .context("annotating the pod before running it")?;
            self.run(&namespace, &name, &pod, &target).await
        };
        eprintln!(
            "{namespace}/{name}: exit code {} ({})",
            outcome.exit_code, outcome.reason
        );
        let finished = Time(Timestamp::now());
        let terminated = json!({"terminated": {
            "exitCode": outcome.exit_code,
            "reason": outcome.reason,
            "message": outcome.message,
            "startedAt": Time(outcome.started_at),
            "finishedAt": finished,
        }});
        let container = target
            .container(&pod)
            .map(|c| c.name.clone())
            .unwrap_or_default();
        let (reason, message) = match target {
            Target::JobPod => ("PodCompleted", None),
            Target::Sidecar => (
                "ContainersNotReady",
                Some(format!("containers with unready status: [{container}]")),
            ),
        };
        let not_ready = |type_: &str| json!({"type": type_, "status": "False", "reason": reason, "message": message, "lastTransitionTime": finished});
        // containerStatuses is replaced as a whole by any patch: keep the other containers'
        // entries (and this container's image) as kwok wrote them.
        let mut status = json!({
            "conditions": [not_ready("Ready"), not_ready("ContainersReady")],
            "containerStatuses": container_statuses(&pod, &container, terminated),
        });
        if target == Target::JobPod {
            status["phase"] = json!(if outcome.exit_code == 0 {
                "Succeeded"
            } else {
                "Failed"
            });
        }
        let status = json!({ "status": status });
        pods.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&status))
            .await
            .context("writing the pod's terminal status")?;
        Ok(())
    }

    /// Runs the target container and returns how it ended.
    async fn run(&self, namespace: &str, name: &str, pod: &Pod, target: &Target) -> Outcome {
        let started_at = Timestamp::now();
        let invocation = match runner::invocation(pod, target, &self.dashboard) {
            Ok(invocation) => invocation,
            Err(message) => {
                return Outcome {
                    exit_code: 128,
                    reason: "ContainerCannotRun",
                    message: Some(message),
                    started_at,
                };
            }
        };
        eprintln!(
            "{namespace}/{name}: running {} {:?}",
            invocation.program, invocation.args
        );
        let path = format!(
            "{}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            self.ray_venv.display()
        );
        let child = tokio::process::Command::new(&invocation.program)
            .args(&invocation.args)
            .env_clear()
            .env("PATH", path)
            .env(
                "HOME",
                std::env::var("HOME").unwrap_or_else(|_| "/tmp".into()),
            )
            .env("VIRTUAL_ENV", &self.ray_venv)
            .env("RAY_USAGE_STATS_ENABLED", "0")
            .env("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .envs(invocation.env.iter().map(|(k, v)| (k, v)))
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output()
            .await;
        match child {
            Err(e) => Outcome {
                exit_code: 128,
                reason: "StartError",
                message: Some(format!("starting {}: {e}", invocation.program)),
                started_at,
            },
            Ok(output) => {
                let log = format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
                for line in log.lines() {
                    eprintln!("{namespace}/{name}| {line}");
                }
                use std::os::unix::process::ExitStatusExt;
                let exit_code = output
                    .status
                    .code()
                    .unwrap_or_else(|| 128 + output.status.signal().unwrap_or(0));
                let message = (exit_code != 0).then(|| tail(&log, 2048));
                let reason = if exit_code == 0 { "Completed" } else { "Error" };
                Outcome {
                    exit_code,
                    reason,
                    message,
                    started_at,
                }
            }
        }
    }
}

/// The pod's container statuses with container `name` in state `state`, not ready.
fn container_statuses(pod: &Pod, name: &str, state: serde_json::Value) -> serde_json::Value {
    let spec = pod.spec.clone().unwrap_or_default();
    let current = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let mut statuses = serde_json::to_value(current).unwrap_or_else(|_| json!([]));
    let container = spec.containers.iter().find(|c| c.name == name);
    let list = statuses
        .as_array_mut()
        .expect("a list serialises to an array");
    let entry = match list.iter().position(|c| c["name"] == json!(name)) {
        Some(i) => &mut list[i],
        None => {
            let image = container.and_then(|c| c.image.clone()).unwrap_or_default();
            list.push(json!({"name": name, "image": image, "imageID": "", "restartCount": 0}));
            list.last_mut().expect("just pushed")
        }
    };
    entry["ready"] = json!(false);
    entry["started"] = json!(false);
    entry["state"] = state;
    statuses
}

/// The last `max` bytes of `text` (on a character boundary), as the kubelet's
/// `FallbackToLogsOnError` termination message.
fn tail(text: &str, max: usize) -> String {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// Answers `GET /healthz` with `ok` once `ready` is set (503 before).
async fn serve_health(listener: TcpListener, ready: Arc<AtomicBool>) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            continue;
        };
        let ready = Arc::clone(&ready);
        tokio::spawn(async move {
            let mut request = [0u8; 1024];
            let _ = socket.read(&mut request).await;
            let answer = if ready.load(Ordering::SeqCst) {
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            } else {
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 7\r\nConnection: close\r\n\r\nsyncing"
            };
            let _ = socket.write_all(answer.as_bytes()).await;
        });
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let kubeconfig = Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    let listener = TcpListener::bind(&args.health_address)
        .await
        .with_context(|| format!("listening on {}", args.health_address))?;
    let ready = Arc::new(AtomicBool::new(false));
    tokio::spawn(serve_health(listener, Arc::clone(&ready)));

    let pods: Api<Pod> = Api::all(client.clone());
    let runner = Arc::new(Runner {
        pods: pods.clone(),
        nodes: Api::all(client),
        ray_venv: args.ray_venv,
        dashboard: args.dashboard,
        taken: Mutex::new(HashSet::new()),
    });
    let mut events = watcher::watcher(
        pods,
        watcher::Config::default().fields("status.phase=Running"),
    )
    .default_backoff()
    .boxed();
    eprintln!("submitter-runner: watching Running pods owned by Jobs and SidecarMode head pods");
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = terminate.recv() => {
                eprintln!("submitter-runner: terminated");
                return Ok(());
            }
            event = events.next() => match event {
                None => bail!("the pod watch ended"),
                Some(Err(e)) => eprintln!("submitter-runner: watch error (retrying): {e}"),
                Some(Ok(Event::InitDone)) => ready.store(true, Ordering::SeqCst),
                Some(Ok(Event::Apply(pod) | Event::InitApply(pod))) => runner.consider(pod),
                Some(Ok(_)) => {}
            },
        }
    }
}
