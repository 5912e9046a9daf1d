//! `raygate follow`: follows one RayJob to the end, printing each state transition, its
//! Volcano PodGroup, why its gang is pending (its `GangPending` condition) and, once it is over,
//! the Ray job's output (the main job's demo,
//! `tests/env/dev`, ends with it).

use std::fmt::Debug;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::{Stream, StreamExt, stream};
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use raygate_api::keys;
use raygate_api::lifecycle::DeploymentStatus;
use raygate_api::pending;
use raygate_api::ray::v1::RayJob;
use raygate_api::volcano::PodGroup;
use raygate_certs::config::parse_duration;
use raygate_reconciler::dashboard::{AddressResolver, Dashboard};
use raygate_reconciler::tokens::Tokens;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// Follow a RayJob to its end: print each state transition, its Volcano PodGroup and,
/// once it is over, the Ray job's output.
///
/// Exit codes: 0 Complete with jobStatus SUCCEEDED, 1 any other end, 2 on an error or
/// timeout.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The RayJob's name.
    name: String,
    /// The RayJob's namespace.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Give up after this long (e.g. 10m).
    #[arg(long, default_value = "10m", value_name = "DURATION", value_parser = parse_duration)]
    timeout: Duration,
    /// Ray dashboard `host:port` to read the job's output from instead of the cluster's head
    /// Service (the local Ray head of the test environment).
    #[arg(long, env = "RAYGATE_RAY_DASHBOARD_ADDRESS", value_name = "HOST:PORT")]
    ray_dashboard_address: Option<String>,
}

/// The lines last printed about the RayJob and its PodGroup.
#[derive(Debug, Default)]
struct Seen {
    rayjob: Option<String>,
    pod_group: Option<String>,
    gang: Option<String>,
}

/// One line about the RayJob's state: deployment status, Ray's job status, reason and message.
fn rayjob_line(job: &RayJob) -> String {
    let status = job.status.clone().unwrap_or_default();
    let deployment = match status.job_deployment_status.as_deref() {
        None | Some("") => "New",
        Some(other) => other,
    };
    let mut line = format!(
        "RayJob {}: {deployment}, jobStatus {}",
        job.metadata.name.as_deref().unwrap_or_default(),
        status
            .job_status
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("-"),
    );
    if let Some(cluster) = status.ray_cluster_name.as_deref().filter(|c| !c.is_empty()) {
        line.push_str(&format!(", cluster {cluster}"));
    }
    if let Some(reason) = status.reason.as_deref().filter(|r| !r.is_empty()) {
        line.push_str(&format!(", reason {reason}"));
    }
    if let Some(message) = status.message.as_deref().filter(|m| !m.is_empty()) {
        line.push_str(&format!(": {message}"));
    }
    line
}

/// One line about the RayJob's `GangPending` condition (docs/reconciler.md, "Why a gang is
/// pending"), if it has one: the cause and its numbers while the gang waits, how the wait ended
/// once it does not.
fn gang_line(job: &RayJob) -> Option<String> {
    let condition = job
        .status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == pending::CONDITION_GANG_PENDING)?;
    let state = if condition.status == "True" {
        "pending"
    } else {
        "no longer pending"
    };
    Some(format!(
        "Gang {state}: {}: {}",
        condition.reason, condition.message
    ))
}

/// Prints `line` unless it is the one `last` printed, and remembers it.
fn print_changed(last: &mut Option<String>, line: Option<String>) {
    if line != *last
        && let Some(line) = &line
    {
        println!("{line}");
    }
    *last = line;
}

/// The RayJob's `status.jobDeploymentStatus`.
fn state_of(job: &RayJob) -> DeploymentStatus {
    DeploymentStatus::parse(
        job.status
            .as_ref()
            .and_then(|s| s.job_deployment_status.as_deref()),
    )
}

/// One line about the PodGroup: gang size, resources and Volcano's phase.
fn pod_group_line(pg: &PodGroup) -> String {
    let resources: Vec<String> = pg
        .spec
        .min_resources
        .iter()
        .flatten()
        .map(|(name, quantity)| format!("{name}={}", quantity.0))
        .collect();
    format!(
        "PodGroup {}: minMember {}, minResources {{{}}}, phase {}",
        pg.metadata.name.as_deref().unwrap_or_default(),
        pg.spec.min_member.unwrap_or(0),
        resources.join(", "),
        pg.status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("-"),
    )
}

/// Follows the RayJob; exit code 0 when it completed with jobStatus SUCCEEDED, 1 otherwise.
pub fn run(args: Args) -> Result<u8> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(follow(args))
}

/// What the watches of the RayJob and its PodGroup report.
enum Update {
    RayJob(Box<RayJob>),
    /// The RayJob watch's initial list is complete: a RayJob that exists came before it.
    RayJobListed,
    RayJobDeleted,
    /// The line about the PodGroup as it is now; `None` once it is deleted.
    PodGroup(Option<String>),
}

/// A watch of the one object named `name`: every write to it arrives, so no state the
/// reconciler writes is missed, however briefly it lasts (a poll would skip it).
fn watch<K>(api: Api<K>, name: &str) -> impl Stream<Item = Result<Event<K>, watcher::Error>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(
        api,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
}

async fn follow(args: Args) -> Result<u8> {
    let client = Client::try_default()
        .await
        .context("no Kubernetes client (KUBECONFIG or in-cluster config)")?;
    let jobs: Api<RayJob> = Api::namespaced(client.clone(), &args.namespace);
    let pod_groups: Api<PodGroup> = Api::namespaced(client.clone(), &args.namespace);
    let pod_group_name = keys::pod_group_name(&args.name);
    let key = format!("{}/{}", args.namespace, args.name);
    let job_updates = watch(jobs, &args.name).map(|event| {
        event.map(|event| match event {
            Event::Apply(job) | Event::InitApply(job) => Some(Update::RayJob(Box::new(job))),
            Event::InitDone => Some(Update::RayJobListed),
            Event::Delete(_) => Some(Update::RayJobDeleted),
            Event::Init => None,
        })
    });
    let pod_group_updates = watch(pod_groups, &pod_group_name).map(|event| {
        event.map(|event| match event {
            Event::Apply(pg) | Event::InitApply(pg) => {
                Some(Update::PodGroup(Some(pod_group_line(&pg))))
            }
            Event::Delete(_) => Some(Update::PodGroup(None)),
            Event::Init | Event::InitDone => None,
        })
    });
    let mut updates = std::pin::pin!(stream::select(job_updates, pod_group_updates));
    let deadline = Instant::now() + args.timeout;
    let mut job: Option<RayJob> = None;
    let mut seen = Seen::default();
    let finished = loop {
        let update = match tokio::time::timeout_at(deadline, updates.next()).await {
            Err(_) => bail!(
                "RayJob {key} is still {} after {:?}",
                job.as_ref()
                    .map_or(DeploymentStatus::New, state_of)
                    .as_str(),
                args.timeout
            ),
            Ok(None) => bail!("the watch of RayJob {key} ended"),
            Ok(Some(Err(error))) => {
                eprintln!("watching RayJob {key}: {error}; retrying");
                continue;
            }
            Ok(Some(Ok(update))) => update,
        };
        let current = match update {
            None => continue,
            Some(Update::RayJob(new)) => job.insert(*new),
            Some(Update::RayJobListed) if job.is_none() => bail!("RayJob {key} does not exist"),
            Some(Update::RayJobListed) => continue,
            Some(Update::RayJobDeleted) => bail!("RayJob {key} was deleted"),
            Some(Update::PodGroup(line)) => {
                print_changed(&mut seen.pod_group, line);
                continue;
            }
        };
        print_changed(&mut seen.rayjob, Some(rayjob_line(current)));
        print_changed(&mut seen.gang, gang_line(current));
        let state = state_of(current);
        if state.is_terminal() || state == DeploymentStatus::ValidationFailed {
            break current.clone();
        }
    };
    let status = finished.status.clone().unwrap_or_default();
    if let (Some(url), Some(id)) = (
        status.dashboard_url.as_deref().filter(|u| !u.is_empty()),
        status.job_id.as_deref().filter(|i| !i.is_empty()),
    ) {
        let resolver = match &args.ray_dashboard_address {
            Some(address) => AddressResolver::Fixed(address.clone()),
            None => AddressResolver::ClusterDns,
        };
        let dashboard = Dashboard::new(resolver, Duration::from_secs(10));
        let token = match (
            finished.spec.ray_cluster_spec.as_ref(),
            status.ray_cluster_name.as_deref(),
        ) {
            (Some(spec), Some(cluster)) => Tokens::new(client)
                .of_spec(&args.namespace, cluster, spec)
                .await
                .unwrap_or_else(|error| {
                    eprintln!("reading the Ray job's auth token: {error}");
                    None
                }),
            _ => None,
        };
        match dashboard.logs(url, token.as_deref(), id).await {
            Ok(logs) => {
                println!("--- output of Ray job {id} ---");
                print!("{logs}");
                if !logs.ends_with('\n') {
                    println!();
                }
                println!("--- end of output ---");
            }
            Err(error) => eprintln!("could not read the output of Ray job {id}: {error}"),
        }
    }
    let succeeded = status.job_deployment_status.as_deref() == Some("Complete")
        && status.job_status.as_deref() == Some("SUCCEEDED");
    Ok(if succeeded { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lines_name_the_state_the_gang_and_the_reason() {
        let job: RayJob = serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "demo"},
            "spec": {"entrypoint": "python x.py"},
            "status": {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED",
                       "rayClusterName": "demo-x7k2p", "reason": "AppFailed", "message": "exit 3"}
        }))
        .expect("a RayJob");
        assert_eq!(
            rayjob_line(&job),
            "RayJob demo: Failed, jobStatus FAILED, cluster demo-x7k2p, reason AppFailed: exit 3"
        );
        let fresh: RayJob = serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "demo"}, "spec": {"entrypoint": "x"}
        }))
        .expect("a RayJob");
        assert_eq!(rayjob_line(&fresh), "RayJob demo: New, jobStatus -");
        assert_eq!(gang_line(&fresh), None);
        let waiting: RayJob = serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "demo"}, "spec": {"entrypoint": "x"},
            "status": {"conditions": [{"type": "GangPending", "status": "True", "reason": "QueueClosed",
                "message": "queue gpu is Closed", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .expect("a RayJob");
        assert_eq!(
            gang_line(&waiting).as_deref(),
            Some("Gang pending: QueueClosed: queue gpu is Closed")
        );
        let pg: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "ray-demo-pg"},
            "spec": {"minMember": 3, "minResources": {"cpu": "2500m", "memory": "4296Mi"}},
            "status": {"phase": "Running"}
        }))
        .expect("a PodGroup");
        assert_eq!(
            pod_group_line(&pg),
            "PodGroup ray-demo-pg: minMember 3, minResources {cpu=2500m, memory=4296Mi}, phase Running"
        );
    }
}
