//! `raygate follow`: follows one RayJob to the end, printing each state transition, its
//! Volcano PodGroup and, once it is over, the Ray job's output (the main job's demo,
//! `tests/env/dev`, ends with it).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::{Api, Client};
use raygate_api::keys;
use raygate_api::lifecycle::DeploymentStatus;
use raygate_api::ray::v1::RayJob;
use raygate_api::volcano::PodGroup;
use raygate_certs::config::parse_duration;
use raygate_reconciler::dashboard::{AddressResolver, Dashboard};

/// How often the RayJob and its PodGroup are read.
const POLL: Duration = Duration::from_secs(1);

/// Flags of `raygate follow`.
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

/// What one look at the RayJob shows, as printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Seen {
    rayjob: Option<String>,
    pod_group: Option<String>,
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

async fn follow(args: Args) -> Result<u8> {
    let client = Client::try_default()
        .await
        .context("no Kubernetes client (KUBECONFIG or in-cluster config)")?;
    let jobs: Api<RayJob> = Api::namespaced(client.clone(), &args.namespace);
    let pod_groups: Api<PodGroup> = Api::namespaced(client, &args.namespace);
    let pod_group_name = keys::pod_group_name(&args.name);
    let key = format!("{}/{}", args.namespace, args.name);
    let started = Instant::now();
    let mut seen = Seen::default();
    let finished = loop {
        let job = jobs
            .get_opt(&args.name)
            .await
            .with_context(|| format!("reading RayJob {key}"))?
            .with_context(|| format!("RayJob {key} does not exist"))?;
        let pod_group = pod_groups
            .get_opt(&pod_group_name)
            .await
            .with_context(|| format!("reading PodGroup {pod_group_name}"))?;
        let now = Seen {
            rayjob: Some(rayjob_line(&job)),
            pod_group: pod_group.as_ref().map(pod_group_line),
        };
        if now.rayjob != seen.rayjob
            && let Some(line) = &now.rayjob
        {
            println!("{line}");
        }
        if now.pod_group != seen.pod_group
            && let Some(line) = &now.pod_group
        {
            println!("{line}");
        }
        seen = now;
        let status = job.status.clone().unwrap_or_default();
        let state = DeploymentStatus::parse(status.job_deployment_status.as_deref());
        if state.is_terminal() || state == DeploymentStatus::ValidationFailed {
            break job;
        }
        if started.elapsed() >= args.timeout {
            bail!(
                "RayJob {key} is still {} after {:?}",
                state.as_str(),
                args.timeout
            );
        }
        tokio::time::sleep(POLL).await;
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
        match dashboard.logs(url, id).await {
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
