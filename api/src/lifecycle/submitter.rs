//! The submitter: KubeRay's submit command, the K8sJobMode Job, the SidecarMode container and
//! the HTTPMode request body (docs/upstream.md, "KubeRay: RayJob submitter").

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, PodSpec, PodTemplateSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};

use super::cluster::owned_by;
use super::{DEFAULT_SUBMITTER_BACKOFF_LIMIT, SUBMITTER_CONTAINER, SubmissionMode};
use crate::cluster::auth;
use crate::keys;
use crate::onboarding::{GangMembership, RayPodRole, onboarding_patch};
use crate::ray::v1::{RayClusterSpec, RayJob};
use crate::validation::k8s::go_quote;
use crate::validation::version::{MetadataVersionError, check_metadata_version};

/// Why a submit command cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitCommandError {
    /// `spec.runtimeEnvYAML` is not a YAML mapping.
    #[error("spec.runtimeEnvYAML: failed to unmarshal runtimeEnvYAML: {0}")]
    RuntimeEnv(String),
    /// `spec.metadata` needs Ray ≥ 2.6.0.
    #[error("spec.metadata: {0}")]
    MetadataVersion(String),
    /// The mode has no submit command.
    #[error("unsupported submission mode for job submit command: {0}")]
    Mode(&'static str),
}

/// `spec.runtimeEnvYAML` as a JSON object (`None` when unset or blank).
pub fn runtime_env_json(job: &RayJob) -> Result<Option<Value>, SubmitCommandError> {
    let Some(text) = job
        .spec
        .runtime_env_yaml
        .as_deref()
        .filter(|t| !t.trim().is_empty())
    else {
        return Ok(None);
    };
    crate::runtime_env::read(text)
        .map(|env| env.map(Value::Object))
        .map_err(|e| SubmitCommandError::RuntimeEnv(e.to_string()))
}

fn metadata(job: &RayJob) -> Result<Option<&BTreeMap<String, String>>, SubmitCommandError> {
    let Some(metadata) = job.spec.metadata.as_ref().filter(|m| !m.is_empty()) else {
        return Ok(None);
    };
    if let Some(version) = job
        .spec
        .ray_cluster_spec
        .as_ref()
        .and_then(|s| s.ray_version.as_deref())
        .filter(|v| !v.is_empty())
    {
        check_metadata_version(version).map_err(|e| {
            SubmitCommandError::MetadataVersion(match e {
                MetadataVersionError::Unparsable => {
                    format!("failed to parse Ray version: {version}")
                }
                MetadataVersionError::TooOld => {
                    "the Ray version must be at least 2.6.0 to use the metadata field".to_string()
                }
            })
        })?;
    }
    Ok(Some(metadata))
}

fn health_wait_loop(address: &str, health_url: &str) -> String {
    let health = format!(
        "python -c \"import urllib.request; r=urllib.request.urlopen('{health_url}', timeout=10); exit(0 if b'success' in r.read() else 1)\""
    );
    let message = go_quote(&format!(
        "Waiting for Ray Dashboard GCS to become healthy at {address} ..."
    ));
    format!("until {health} >/dev/null 2>&1 ; do echo {message} ; sleep 2 ; done ;")
}

/// KubeRay's submit command (`BuildJobSubmitCommand`) as its tokens; the container runs them
/// joined with single spaces under `bash -ce`.
///
/// `dashboard_url` is `status.dashboardURL` (K8sJobMode); SidecarMode talks to
/// `127.0.0.1:<sidecar_port>`. With `guard` (K8sJobMode, or SidecarMode with the gate
/// SidecarSubmitterRestart) an existing submission is never submitted again and the command
/// follows its logs instead.
pub fn submit_command(
    job: &RayJob,
    mode: SubmissionMode,
    dashboard_url: &str,
    submission_id: &str,
    sidecar_port: i32,
    guard: bool,
) -> Result<Vec<String>, SubmitCommandError> {
    let (address, health_url) = match mode {
        SubmissionMode::K8sJob => {
            let address =
                if dashboard_url.starts_with("http://") || dashboard_url.starts_with("https://") {
                    dashboard_url.to_string()
                } else {
                    format!("http://{dashboard_url}")
                };
            let health = format!("{address}/api/gcs_healthz");
            (address, health)
        }
        SubmissionMode::Sidecar => (
            format!("http://127.0.0.1:{sidecar_port}"),
            format!("http://localhost:{sidecar_port}/api/gcs_healthz"),
        ),
        SubmissionMode::Http => return Err(SubmitCommandError::Mode("HTTPMode")),
        SubmissionMode::Interactive => return Err(SubmitCommandError::Mode("InteractiveMode")),
    };
    let mut tokens = vec![health_wait_loop(&address, &health_url)];
    if guard {
        tokens.push(format!(
            "if ! ray job status --address {address} {submission_id} >/dev/null 2>&1 ; then"
        ));
    }
    tokens.extend(["ray job submit --address".to_string(), address.clone()]);
    if guard {
        tokens.push("--no-wait".into());
    }
    if let Some(env) = runtime_env_json(job)? {
        tokens.push("--runtime-env-json".into());
        tokens.push(go_quote(&env.to_string()));
    }
    if let Some(metadata) = metadata(job)? {
        let text = serde_json::to_string(metadata).unwrap_or_default();
        tokens.push("--metadata-json".into());
        tokens.push(go_quote(&text));
    }
    if !submission_id.is_empty() {
        tokens.push("--submission-id".into());
        tokens.push(submission_id.to_string());
    }
    if let Some(cpus) = job.spec.entrypoint_num_cpus.filter(|c| *c > 0.0) {
        tokens.push("--entrypoint-num-cpus".into());
        tokens.push(format!("{cpus:.6}"));
    }
    if let Some(gpus) = job.spec.entrypoint_num_gpus.filter(|g| *g > 0.0) {
        tokens.push("--entrypoint-num-gpus".into());
        tokens.push(format!("{gpus:.6}"));
    }
    if let Some(resources) = job
        .spec
        .entrypoint_resources
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        tokens.push("--entrypoint-resources".into());
        tokens.push(go_quote(resources));
    }
    tokens.push("--".into());
    tokens.push(
        job.spec
            .entrypoint
            .as_deref()
            .unwrap_or_default()
            .trim()
            .to_string(),
    );
    tokens.push(";".into());
    if guard {
        tokens.push(format!(
            "fi ; ray job logs --address {address} --follow {submission_id}"
        ));
    }
    Ok(tokens)
}

/// The HTTPMode request body of `POST /api/jobs/` (docs/upstream.md, "KubeRay: RayJob submitter").
pub fn submit_request(job: &RayJob, submission_id: &str) -> Result<Value, SubmitCommandError> {
    let mut body = Map::new();
    body.insert(
        "entrypoint".into(),
        job.spec
            .entrypoint
            .as_deref()
            .unwrap_or_default()
            .trim()
            .into(),
    );
    body.insert("submission_id".into(), submission_id.into());
    if let Some(metadata) = metadata(job)? {
        body.insert("metadata".into(), json!(metadata));
    }
    if let Some(env) = runtime_env_json(job)? {
        body.insert("runtime_env".into(), env);
    }
    if let Some(resources) = job
        .spec
        .entrypoint_resources
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        let parsed: BTreeMap<String, f64> = serde_json::from_str(resources)
            .map_err(|e| SubmitCommandError::RuntimeEnv(format!("entrypointResources: {e}")))?;
        body.insert("entrypoint_resources".into(), json!(parsed));
    }
    if let Some(cpus) = job.spec.entrypoint_num_cpus.filter(|c| *c > 0.0) {
        body.insert("entrypoint_num_cpus".into(), json!(cpus));
    }
    if let Some(gpus) = job.spec.entrypoint_num_gpus.filter(|g| *g > 0.0) {
        body.insert("entrypoint_num_gpus".into(), json!(gpus));
    }
    Ok(Value::Object(body))
}

fn head_container(spec: Option<&RayClusterSpec>) -> Option<&Container> {
    spec?
        .head_group_spec
        .template
        .spec
        .as_ref()?
        .containers
        .first()
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

/// The submitter environment KubeRay appends to container 0 in every case.
fn submitter_env(job: &RayJob, dashboard_url: &str, submission_id: &str) -> Vec<EnvVar> {
    let mut vars = vec![
        env("PYTHONUNBUFFERED", "1"),
        env("RAY_DASHBOARD_ADDRESS", dashboard_url),
        env("RAY_JOB_SUBMISSION_ID", submission_id),
    ];
    let cluster_name = job
        .status
        .as_ref()
        .and_then(|s| s.ray_cluster_name.as_deref())
        .unwrap_or_default();
    let secret =
        (job.spec.ray_cluster_spec.as_ref()).and_then(|spec| auth::secret_name(spec, cluster_name));
    if let Some(secret) = secret {
        vars.extend(auth::token_env(&secret));
    }
    vars
}

fn default_submitter_container(spec: Option<&RayClusterSpec>) -> Container {
    let head = head_container(spec);
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(memory.into())),
        ])
    };
    Container {
        name: SUBMITTER_CONTAINER.into(),
        image: head.and_then(|c| c.image.clone()),
        image_pull_policy: head.and_then(|c| c.image_pull_policy.clone()),
        resources: Some(ResourceRequirements {
            requests: Some(quantities("500m", "200Mi")),
            limits: Some(quantities("1", "1Gi")),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }
}

fn shell(login_shell: bool) -> Vec<String> {
    let flags = if login_shell { "-cel" } else { "-ce" };
    vec!["/bin/bash".into(), flags.into(), "--".into()]
}

/// SidecarMode: KubeRay's default submitter container, running the submit command against the
/// head next to it.
pub(super) fn sidecar_container(
    job: &RayJob,
    spec: &RayClusterSpec,
    submission_id: &str,
    port: i32,
    login_shell: bool,
) -> Container {
    let mut container = default_submitter_container(Some(spec));
    let address = format!("127.0.0.1:{port}");
    let command = submit_command(job, SubmissionMode::Sidecar, "", submission_id, port, false)
        .unwrap_or_default();
    container.command = Some(shell(login_shell));
    container.args = Some(vec![command.join(" ")]);
    container.env = Some(submitter_env(job, &address, submission_id));
    container
}

/// The K8sJobMode submitter Job `<ns>/<rayjob>` (docs/upstream.md, "KubeRay: RayJob submitter").
///
/// The Pod template is `spec.submitterPodTemplate` (with `restartPolicy: Never` and the
/// container name `ray-job-submitter` filled in when missing, so the Job API never refuses it)
/// or KubeRay's default (see [`submitter_job_object`] for the JSON to create); container 0 runs the submit command unless it has a command of its
/// own; in Volcano namespaces the template carries the RayJob's gang metadata (the same patch
/// the webhook applies), as task `submittergroup`.
///
/// `cluster` is the spec of the RayCluster the job runs on: as in KubeRay, the default
/// submitter takes its image, pull policy and pull secrets from that cluster's head, which in
/// clusterSelector mode is not described by the RayJob at all.
pub fn submitter_job(
    job: &RayJob,
    cluster: &RayClusterSpec,
    dashboard_url: &str,
    submission_id: &str,
    volcano: bool,
    login_shell: bool,
) -> Result<Job, SubmitCommandError> {
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let mut template = match job.spec.submitter_pod_template.as_deref() {
        Some(template) => template.clone(),
        None => PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![default_submitter_container(Some(cluster))],
                restart_policy: Some("Never".into()),
                image_pull_secrets: cluster
                    .head_group_spec
                    .template
                    .spec
                    .as_ref()
                    .and_then(|p| p.image_pull_secrets.clone()),
                ..PodSpec::default()
            }),
        },
    };
    let pod = template.spec.get_or_insert_with(PodSpec::default);
    if pod.restart_policy.as_deref().is_none_or(str::is_empty) {
        pod.restart_policy = Some("Never".into());
    }
    if pod.containers.is_empty() {
        pod.containers
            .push(default_submitter_container(Some(cluster)));
    }
    let container = &mut pod.containers[0];
    if container.name.is_empty() {
        container.name = SUBMITTER_CONTAINER.into();
    }
    if container.command.as_ref().is_none_or(Vec::is_empty) {
        let tokens = submit_command(
            job,
            SubmissionMode::K8sJob,
            dashboard_url,
            submission_id,
            0,
            true,
        )?;
        container.command = Some(shell(login_shell));
        container.args = Some(vec![tokens.join(" ")]);
    }
    container
        .env
        .get_or_insert_with(Vec::new)
        .extend(submitter_env(job, dashboard_url, submission_id));

    let origin = BTreeMap::from([
        (
            keys::ORIGINATED_FROM_CR_NAME_LABEL.to_string(),
            job_name.clone(),
        ),
        (
            keys::ORIGINATED_FROM_CRD_LABEL.to_string(),
            "RayJob".to_string(),
        ),
        (
            keys::CREATED_BY_LABEL.to_string(),
            keys::CREATED_BY_VALUE.to_string(),
        ),
    ]);
    let meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .extend(origin.clone());
    if volcano {
        template = join_gang(job, template);
    }
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(job_name),
            namespace: job.metadata.namespace.clone(),
            labels: Some(origin),
            owner_references: Some(vec![owned_by(job)]),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(
                job.spec
                    .submitter_config
                    .as_ref()
                    .and_then(|c| c.backoff_limit)
                    .unwrap_or(DEFAULT_SUBMITTER_BACKOFF_LIMIT),
            ),
            template,
            ..JobSpec::default()
        }),
        status: None,
    })
}

/// The template with the RayJob's gang metadata, applied with the webhook's own patch.
fn join_gang(job: &RayJob, template: PodTemplateSpec) -> PodTemplateSpec {
    let owner = job.metadata.name.as_deref().unwrap_or_default();
    let labels = job.metadata.labels.clone().unwrap_or_default();
    let membership = GangMembership::new(owner, &RayPodRole::Submitter, &labels);
    let mut value = serde_json::to_value(&template).unwrap_or_else(|_| json!({}));
    if value.get("metadata").is_none() {
        value["metadata"] = json!({});
    }
    let onboarding = onboarding_patch(&value, &membership);
    if json_patch::patch(&mut value, &onboarding.patch).is_err() {
        return template;
    }
    serde_json::from_value(value).unwrap_or(template)
}

/// The submitter Job `submitter` (built by [`submitter_job`] from `job`) as the JSON to create:
/// a user `submitterPodTemplate` is taken as stored in `raw_job` (the RayJob's JSON from the
/// API server) with raygate's changes applied, so fields raygate's types do not know reach the
/// Pod ([`crate::preserve::keep_unknown_fields`]).
pub fn submitter_job_object(
    raw_job: &serde_json::Value,
    job: &RayJob,
    submitter: &Job,
) -> serde_json::Value {
    let mut object = serde_json::to_value(submitter).unwrap_or(serde_json::Value::Null);
    if let (Some(raw), Some(Ok(typed)), Some(built)) = (
        raw_job.pointer("/spec/submitterPodTemplate"),
        job.spec
            .submitter_pod_template
            .as_ref()
            .map(serde_json::to_value),
        object.pointer_mut("/spec/template"),
    ) {
        *built = crate::preserve::keep_unknown_fields(raw, &typed, built);
    }
    object
}
