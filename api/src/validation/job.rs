//! RayJob rules: KubeRay's `ValidateRayJobMetadata`, `ValidateRayJobSpec` and
//! `ValidateRayJobStatus` (docs/upstream.md, "KubeRay: validation"), and raygate's own job rules.

use serde_json::Value;

use super::ValidationContext;
use super::cluster::{self, effective_name};
use super::k8s::go_string_list;
use super::out::Out;
use super::raygate_rules as rr;
use super::version::{MetadataVersionError, check_metadata_version};
use crate::features::Feature;
use crate::finding::Finding;
use crate::ray::v1::{DeletionPolicyType, RayJob, RayJobSpec};
use crate::runtime_env;

/// `53 - 6`: longest RayJob name KubeRay accepts (room for the `-xxxxx` cluster suffix).
const MAX_RAY_JOB_NAME_LENGTH: usize = 47;
/// KubeRay's wrapper of spec errors.
const SPEC_INVALID: &str = "The RayJob spec is invalid: ";
/// The four submission modes KubeRay implements.
const SUBMISSION_MODES: [&str; 4] = ["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"];
/// Kueue's cap on PodSets per Workload (kubernetes-sigs/kueue#12819).
const KUEUE_MAX_POD_SETS: usize = 18;
/// Label that hands a RayJob to Kueue.
const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// Validates a RayJob: metadata → spec → status.
pub(crate) fn validate(job: &RayJob, ctx: &ValidationContext, findings: &mut Vec<Finding>) {
    validate_metadata(job, findings);
    validate_spec(job, ctx, findings);
    validate_status(job, findings);
}

/// The submission mode, CRD default `K8sJobMode` when absent.
fn mode(spec: &RayJobSpec) -> &str {
    spec.submission_mode.as_deref().unwrap_or("K8sJobMode")
}

/// KubeRay's `ValidateRayJobMetadata`.
fn validate_metadata(job: &RayJob, findings: &mut Vec<Finding>) {
    let name = effective_name(&job.metadata).unwrap_or_default();
    let mut out = Out::new(findings, "", "The RayJob metadata is invalid: ");
    if name.len() > MAX_RAY_JOB_NAME_LENGTH {
        out.kuberay(
            "rayjob-name-too-long",
            "metadata.name",
            format!("RayJob name should be no more than {MAX_RAY_JOB_NAME_LENGTH} characters"),
        );
    }
    let errs = super::k8s::is_dns1035_label(&name);
    if !errs.is_empty() {
        out.kuberay(
            "rayjob-name-not-dns1035",
            "metadata.name",
            format!(
                "RayJob name should be a valid DNS1035 label: {}",
                go_string_list(&errs)
            ),
        );
    }
}

/// KubeRay's `ValidateRayJobStatus`.
fn validate_status(job: &RayJob, findings: &mut Vec<Finding>) {
    let waiting = job
        .status
        .as_ref()
        .and_then(|s| s.job_deployment_status.as_deref())
        == Some("Waiting");
    if waiting && mode(&job.spec) != "InteractiveMode" {
        Out::new(findings, "", "").kuberay(
            "rayjob-status-waiting-not-interactive",
            "status.jobDeploymentStatus",
            "The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when SubmissionMode is not InteractiveMode",
        );
    }
}

/// KubeRay's `ValidateRayJobSpec` — every rule in KubeRay's order, raygate's rules interleaved.
fn validate_spec(job: &RayJob, ctx: &ValidationContext, findings: &mut Vec<Finding>) {
    let spec = &job.spec;
    let suspend = spec.suspend.unwrap_or(false);
    let shutdown = spec.shutdown_after_job_finishes.unwrap_or(false);
    let ttl = spec.ttl_seconds_after_finished.unwrap_or(0);
    let selector = spec.cluster_selector.as_ref().filter(|s| !s.is_empty());
    let mode = mode(spec);
    let backoff = spec.backoff_limit;
    let mut out = Out::new(findings, "spec.", "");

    // 1.
    if suspend && !shutdown {
        out.kuberay(
            "rayjob-suspend-requires-shutdown",
            "suspend",
            format!("{SPEC_INVALID}a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"),
        );
    }
    // 2.
    if ttl < 0 {
        out.kuberay(
            "rayjob-ttl-negative",
            "ttlSecondsAfterFinished",
            format!("{SPEC_INVALID}TTLSecondsAfterFinished must be a non-negative integer"),
        );
    }
    // 3.
    deletion(job, ctx, &mut out);
    // 4.
    if suspend && selector.is_some() {
        out.kuberay(
            "rayjob-suspend-with-cluster-selector",
            "suspend",
            format!("{SPEC_INVALID}the ClusterSelector mode doesn't support the suspend operation"),
        );
    }
    // 5.
    if spec.ray_cluster_spec.is_none() && selector.is_none() {
        out.kuberay(
            "rayjob-cluster-spec-or-selector-required",
            "rayClusterSpec",
            format!("{SPEC_INVALID}one of RayClusterSpec or ClusterSelector must be set"),
        );
    }
    // 6.
    if let Some(selector) = selector {
        if selector.get("ray.io/cluster").is_none_or(String::is_empty) {
            out.kuberay(
                "rayjob-cluster-selector-name-empty",
                "clusterSelector[ray.io/cluster]",
                "cluster name in ClusterSelector should not be empty",
            );
        }
        if mode == "SidecarMode" {
            out.kuberay(
                "rayjob-cluster-selector-sidecar-mode",
                "submissionMode",
                "ClusterSelector is not supported in SidecarMode",
            );
        }
        if backoff.is_some_and(|b| b > 0) {
            out.kuberay(
                "rayjob-cluster-selector-backoff-limit",
                "backoffLimit",
                format!("{SPEC_INVALID}BackoffLimit is incompatible with ClusterSelector mode"),
            );
        }
        // raygate: what clusterSelector mode silently ignores.
        if spec.ray_cluster_spec.is_some() {
            out.raygate_warning(
                rr::RAYJOB_CLUSTER_SPEC_IGNORED,
                "rayClusterSpec",
                "rayClusterSpec is ignored because clusterSelector is set: the job runs on the existing RayCluster",
            );
        }
        if shutdown {
            out.raygate_warning(
                rr::RAYJOB_CLUSTER_SELECTOR_SHUTDOWN,
                "shutdownAfterJobFinishes",
                "shutdownAfterJobFinishes has no effect with clusterSelector: the existing RayCluster is never deleted",
            );
        }
    }
    // 7.
    if mode == "InteractiveMode" && backoff.is_some_and(|b| b > 0) {
        out.kuberay(
            "rayjob-interactive-backoff-limit",
            "backoffLimit",
            format!("{SPEC_INVALID}BackoffLimit is incompatible with InteractiveMode"),
        );
    }
    // raygate: submissionMode has no enum in the CRD (upstream defect 19, docs/upstream.md).
    if !SUBMISSION_MODES.contains(&mode) {
        out.raygate(
            rr::RAYJOB_UNKNOWN_SUBMISSION_MODE,
            "submissionMode",
            format!(
                "unknown submissionMode {mode:?}: must be one of {}",
                SUBMISSION_MODES.join(", ")
            ),
        );
    }
    // 8.
    if mode == "SidecarMode" {
        if spec.submitter_pod_template.is_some() {
            out.kuberay(
                "rayjob-sidecar-submitter-pod-template",
                "submitterPodTemplate",
                "Currently, SidecarMode doesn't support SubmitterPodTemplate",
            );
        }
        if spec.submitter_config.is_some() {
            out.kuberay(
                "rayjob-sidecar-submitter-config",
                "submitterConfig",
                "Currently, SidecarMode doesn't support SubmitterConfig",
            );
        }
        let head_policy = spec
            .ray_cluster_spec
            .as_ref()
            .and_then(|c| c.head_group_spec.template.spec.as_ref())
            .and_then(|s| s.restart_policy.as_deref())
            .unwrap_or("");
        if !head_policy.is_empty() && head_policy != "Never" {
            out.kuberay(
                "rayjob-sidecar-head-restart-policy",
                "rayClusterSpec.headGroupSpec.template.spec.restartPolicy",
                "restartPolicy for head Pod should be Never or unset when using SidecarMode",
            );
        }
    }
    // raygate: a submitterPodTemplate the Job API would reject (upstream defect 6).
    submitter_template(spec, mode, &mut out);
    // raygate: Kueue's PodSet cap counts the submitter (upstream defect 23).
    kueue_pod_sets(job, mode, &mut out);

    // 9.
    if let Some(cluster_spec) = &spec.ray_cluster_spec {
        if cluster_spec.k8s_token_auth() {
            Out::new(findings, "spec.", "").kuberay(
                "rayjob-k8s-token-auth-unsupported",
                "rayClusterSpec.authOptions.enableK8sTokenAuth",
                format!("{SPEC_INVALID}K8s token auth mode is currently not supported for RayJob"),
            );
        }
        let mut embedded = Out::new(findings, "spec.rayClusterSpec.", SPEC_INVALID);
        cluster::validate_spec(
            cluster_spec,
            job.metadata.annotations.as_ref(),
            ctx,
            &mut embedded,
        );
        cluster::autoscaler_v1_restart_policy_warning(cluster_spec, &mut embedded);
    }

    let mut out = Out::new(findings, "spec.", "");
    // 10.
    if let Some(yaml) = spec.runtime_env_yaml.as_deref().filter(|y| !y.is_empty())
        && let Err(err) = runtime_env::check(yaml)
    {
        out.kuberay(
            "rayjob-runtime-env-yaml-invalid",
            "runtimeEnvYAML",
            format!("failed to unmarshal RuntimeEnvYAML: {yaml}: {err}"),
        );
    }
    // raygate: the rest of the submit payload, which KubeRay only checks when submitting.
    submit_payload(spec, mode, &mut out);
    // 11.
    if spec.active_deadline_seconds.is_some_and(|s| s <= 0) {
        out.kuberay(
            "rayjob-active-deadline-not-positive",
            "activeDeadlineSeconds",
            format!("{SPEC_INVALID}activeDeadlineSeconds must be a positive integer"),
        );
    }
    // 12.
    if spec.pre_running_deadline_seconds.is_some_and(|s| s <= 0) {
        out.kuberay(
            "rayjob-pre-running-deadline-not-positive",
            "preRunningDeadlineSeconds",
            format!("{SPEC_INVALID}preRunningDeadlineSeconds must be a positive integer"),
        );
    }
    // 13.
    if backoff.is_some_and(|b| b < 0) {
        out.kuberay(
            "rayjob-backoff-limit-negative",
            "backoffLimit",
            format!("{SPEC_INVALID}backoffLimit must be a positive integer"),
        );
    }
}

/// `ValidateRayJobSpec`: TTL and `deletionStrategy`.
fn deletion(job: &RayJob, ctx: &ValidationContext, out: &mut Out<'_>) {
    let spec = &job.spec;
    let shutdown = spec.shutdown_after_job_finishes.unwrap_or(false);
    if !shutdown && spec.ttl_seconds_after_finished.unwrap_or(0) > 0 {
        out.kuberay(
            "rayjob-ttl-requires-shutdown",
            "ttlSecondsAfterFinished",
            format!("{SPEC_INVALID}a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished"),
        );
    }
    let Some(strategy) = &spec.deletion_strategy else {
        return;
    };
    if !ctx.gates.enabled(Feature::RayJobDeletionPolicy) {
        out.kuberay(
            "rayjob-deletion-strategy-feature-gate",
            "deletionStrategy",
            "RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy",
        );
    }
    let legacy = strategy.on_success.is_some() || strategy.on_failure.is_some();
    let rules = strategy.deletion_rules.as_deref().unwrap_or(&[]);
    if !rules.is_empty() && shutdown {
        out.kuberay(
            "rayjob-deletion-rules-with-shutdown",
            "deletionStrategy.deletionRules",
            format!("{SPEC_INVALID}spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"),
        );
    }
    if !rules.is_empty() && legacy {
        out.kuberay(
            "rayjob-deletion-rules-with-legacy",
            "deletionStrategy.deletionRules",
            format!("{SPEC_INVALID}Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously"),
        );
    }
    let selector = spec
        .cluster_selector
        .as_ref()
        .is_some_and(|s| !s.is_empty());
    let autoscaling = spec
        .ray_cluster_spec
        .as_ref()
        .is_some_and(crate::ray::v1::RayClusterSpec::autoscaling);
    if legacy {
        legacy_policies(job, selector, autoscaling, out);
    } else if !rules.is_empty() {
        deletion_rules(job, selector, autoscaling, out);
    } else {
        out.kuberay(
            "rayjob-deletion-strategy-empty",
            "deletionStrategy",
            format!("{SPEC_INVALID}DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)"),
        );
    }
}

/// `ValidateRayJobSpec`: legacy `onSuccess` / `onFailure`.
fn legacy_policies(job: &RayJob, selector: bool, autoscaling: bool, out: &mut Out<'_>) {
    let Some(strategy) = &job.spec.deletion_strategy else {
        return;
    };
    let shutdown = job.spec.shutdown_after_job_finishes.unwrap_or(false);
    if strategy.on_success.is_none() || strategy.on_failure.is_none() {
        let missing = if strategy.on_success.is_none() {
            "onSuccess"
        } else {
            "onFailure"
        };
        out.kuberay(
            "rayjob-deletion-legacy-incomplete",
            &format!("deletionStrategy.{missing}"),
            "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy deletion policy fields of DeletionStrategy",
        );
    }
    let sides = [
        ("onSuccess", "OnSuccess", "on success", &strategy.on_success),
        ("onFailure", "OnFailure", "on failure", &strategy.on_failure),
    ];
    let mut policies = Vec::new();
    for (json, go, _, side) in &sides {
        if let Some(side) = side {
            match side.policy {
                None => out.kuberay(
                    "rayjob-deletion-legacy-policy-unset",
                    &format!("deletionStrategy.{json}.policy"),
                    format!("the DeletionPolicyType field of DeletionStrategy.{go} cannot be unset when DeletionStrategy is enabled"),
                ),
                Some(p) => policies.push((*json, p)),
            }
        }
    }
    if selector {
        for (json, _, when, _) in &sides {
            if let Some((_, p)) = policies.iter().find(|(j, _)| j == json)
                && matches!(
                    p,
                    DeletionPolicyType::DeleteCluster | DeletionPolicyType::DeleteWorkers
                )
            {
                out.kuberay(
                    "rayjob-deletion-legacy-cluster-selector",
                    &format!("deletionStrategy.{json}.policy"),
                    format!(
                        "the ClusterSelector mode doesn't support DeletionStrategy={} {when}",
                        p.as_str()
                    ),
                );
            }
        }
    }
    if autoscaling
        && let Some((json, _)) = policies
            .iter()
            .find(|(_, p)| *p == DeletionPolicyType::DeleteWorkers)
    {
        out.kuberay(
                "rayjob-deletion-legacy-delete-workers-autoscaling",
                &format!("deletionStrategy.{json}.policy"),
                "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled",
            );
    }
    if shutdown
        && let Some((json, _)) = policies
            .iter()
            .find(|(_, p)| *p == DeletionPolicyType::DeleteNone)
    {
        out.kuberay(
                "rayjob-deletion-legacy-delete-none-with-shutdown",
                &format!("deletionStrategy.{json}.policy"),
                format!("{SPEC_INVALID}shutdownAfterJobFinshes is set to 'true' while deletion policy is 'DeleteNone'"),
            );
    }
}

/// A deletion condition: (`JobStatus` or `JobDeploymentStatus`, value).
type ConditionKey<'a> = (&'static str, &'a str);
/// A grouped deletion rule: (policy, ttlSeconds, index in `deletionRules`).
type RuleEntry = (DeletionPolicyType, i32, usize);

/// `ValidateRayJobSpec`: `deletionRules` (KubeRay collects all these errors itself).
fn deletion_rules(job: &RayJob, selector: bool, autoscaling: bool, out: &mut Out<'_>) {
    let rules = job
        .spec
        .deletion_strategy
        .as_ref()
        .and_then(|s| s.deletion_rules.as_deref())
        .unwrap_or(&[]);
    // (condition kind, condition value) → [(policy, ttl, rule index)], in order of appearance.
    let mut groups: Vec<(ConditionKey<'_>, Vec<RuleEntry>)> = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let base = format!("deletionStrategy.deletionRules[{i}]");
        let c = &rule.condition;
        let ttl = c.ttl_seconds.unwrap_or(0);
        let condition_error = match (&c.job_status, &c.job_deployment_status) {
            (Some(_), Some(_)) => Some((
                "rayjob-deletion-rule-both-conditions",
                format!("{base}.condition"),
                "cannot set both JobStatus and JobDeploymentStatus at the same time",
            )),
            (None, None) => Some((
                "rayjob-deletion-rule-no-condition",
                format!("{base}.condition"),
                "exactly one of JobStatus and JobDeploymentStatus must be set",
            )),
            _ if ttl < 0 => Some((
                "rayjob-deletion-rule-negative-ttl",
                format!("{base}.condition.ttlSeconds"),
                "TTLSeconds must be non-negative",
            )),
            _ => None,
        };
        if let Some((name, field, message)) = condition_error {
            out.kuberay(name, &field, format!("deletionRules[{i}]: {message}"));
            continue;
        }
        let policy = rule.policy;
        if selector
            && matches!(
                policy,
                DeletionPolicyType::DeleteCluster | DeletionPolicyType::DeleteWorkers
            )
        {
            out.kuberay(
                "rayjob-deletion-rule-cluster-selector",
                &format!("{base}.policy"),
                format!("deletionRules[{i}]: DeletionPolicyType '{}' not supported when ClusterSelector is set", policy.as_str()),
            );
            continue;
        }
        if autoscaling && policy == DeletionPolicyType::DeleteWorkers {
            out.kuberay(
                "rayjob-deletion-rule-delete-workers-autoscaling",
                &format!("{base}.policy"),
                format!("deletionRules[{i}]: DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled"),
            );
            continue;
        }
        let key = match (&c.job_status, &c.job_deployment_status) {
            (Some(s), _) => ("JobStatus", s.as_str()),
            (None, Some(d)) => ("JobDeploymentStatus", d.as_str()),
            (None, None) => continue,
        };
        let pos = match groups.iter().position(|(k, _)| *k == key) {
            Some(pos) => pos,
            None => {
                groups.push((key, Vec::new()));
                groups.len() - 1
            }
        };
        let Some((_, entries)) = groups.get_mut(pos) else {
            continue;
        };
        if entries.iter().any(|(p, _, _)| *p == policy) {
            out.kuberay(
                "rayjob-deletion-rule-duplicate",
                &format!("{base}.policy"),
                format!(
                    "deletionRules[{i}]: duplicate rule for DeletionPolicyType '{}' and {} '{}'",
                    policy.as_str(),
                    key.0,
                    key.1
                ),
            );
            continue;
        }
        entries.push((policy, ttl, i));
    }
    // TTLs must not decrease along DeleteWorkers → DeleteCluster → DeleteSelf. KubeRay walks
    // the JobStatus groups first, then the JobDeploymentStatus ones.
    let order = [
        DeletionPolicyType::DeleteWorkers,
        DeletionPolicyType::DeleteCluster,
        DeletionPolicyType::DeleteSelf,
    ];
    for kind in ["JobStatus", "JobDeploymentStatus"] {
        for ((k, value), entries) in groups.iter().filter(|((k, _), _)| *k == kind) {
            let mut prev: Option<(DeletionPolicyType, i32)> = None;
            for policy in order {
                let Some((_, ttl, index)) = entries.iter().find(|(p, _, _)| *p == policy) else {
                    continue;
                };
                if let Some((prev_policy, prev_ttl)) = prev
                    && *ttl < prev_ttl
                {
                    out.kuberay(
                        "rayjob-deletion-rule-ttl-order",
                        &format!("deletionStrategy.deletionRules[{index}].condition.ttlSeconds"),
                        format!(
                            "for {k} '{value}': {} TTL ({ttl}) must be >= {} TTL ({prev_ttl})",
                            policy.as_str(),
                            prev_policy.as_str()
                        ),
                    );
                }
                prev = Some((policy, *ttl));
            }
        }
    }
}

/// raygate: a `submitterPodTemplate` that the Job API (or the Pod API) would reject. KubeRay
/// uses the template verbatim, so such a RayJob stays Initializing with only an event (#2210).
fn submitter_template(spec: &RayJobSpec, mode: &str, out: &mut Out<'_>) {
    let Some(template) = &spec.submitter_pod_template else {
        return;
    };
    if mode == "HTTPMode" || mode == "InteractiveMode" {
        out.raygate_warning(
            rr::RAYJOB_SUBMITTER_TEMPLATE_IGNORED,
            "submitterPodTemplate",
            format!("submitterPodTemplate is ignored in {mode}: no submitter Job is created"),
        );
        return;
    }
    if mode != "K8sJobMode" {
        // SidecarMode is rejected by KubeRay above; unknown modes are reported on their own.
        return;
    }
    let pod = template.spec.as_ref();
    let containers = pod.map_or(&[][..], |p| p.containers.as_slice());
    if containers.is_empty() {
        out.raygate(
            rr::RAYJOB_SUBMITTER_NO_CONTAINERS,
            "submitterPodTemplate.spec.containers",
            "submitterPodTemplate must have at least one container: KubeRay runs `ray job submit` in containers[0], and the Job API rejects a Pod without containers",
        );
    }
    match pod.and_then(|p| p.restart_policy.as_deref()).unwrap_or("") {
        "Never" | "OnFailure" => {}
        "" => out.raygate(
            rr::RAYJOB_SUBMITTER_RESTART_POLICY_MISSING,
            "submitterPodTemplate.spec.restartPolicy",
            "submitterPodTemplate.spec.restartPolicy must be set: KubeRay uses the template as is and the Job API rejects the default (Always); set `restartPolicy: Never`",
        ),
        other => out.raygate(
            rr::RAYJOB_SUBMITTER_RESTART_POLICY_INVALID,
            "submitterPodTemplate.spec.restartPolicy",
            format!("submitterPodTemplate.spec.restartPolicy {other:?} is not allowed for a Job: use Never or OnFailure"),
        ),
    }
    for (i, container) in containers.iter().enumerate() {
        if container.name.is_empty() {
            out.raygate(
                rr::RAYJOB_SUBMITTER_CONTAINER_NAME_MISSING,
                &format!("submitterPodTemplate.spec.containers[{i}].name"),
                "every submitterPodTemplate container needs a name: the Job API rejects the submitter Job otherwise",
            );
        }
        if container.image.as_deref().unwrap_or("").is_empty() {
            out.raygate(
                rr::RAYJOB_SUBMITTER_CONTAINER_IMAGE_MISSING,
                &format!("submitterPodTemplate.spec.containers[{i}].image"),
                "every submitterPodTemplate container needs an image: KubeRay does not fill it in and the Job API rejects the submitter Job otherwise",
            );
        }
    }
}

/// raygate: Kueue counts head + worker groups in its webhook but the Workload also gets the
/// K8sJobMode submitter PodSet, capped at 18 in total (docs/upstream.md, "KubeRay: known defects",
/// 23).
fn kueue_pod_sets(job: &RayJob, mode: &str, out: &mut Out<'_>) {
    let queued = job
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(KUEUE_QUEUE_LABEL));
    let Some(cluster_spec) = job.spec.ray_cluster_spec.as_ref().filter(|_| queued) else {
        return;
    };
    let workers = cluster_spec.worker_group_specs.as_ref().map_or(0, Vec::len);
    let submitter = usize::from(mode == "K8sJobMode");
    let total = 1 + workers + submitter;
    if total > KUEUE_MAX_POD_SETS {
        out.raygate_warning(
            rr::RAYJOB_KUEUE_POD_SET_LIMIT,
            "rayClusterSpec.workerGroupSpecs",
            format!("this RayJob needs {total} PodSets (head + {workers} worker groups + submitter), more than the {KUEUE_MAX_POD_SETS} a Kueue Workload allows; Kueue will not admit it"),
        );
    }
}

/// raygate: `entrypoint`, `entrypointResources` and `metadata`, which KubeRay only looks at when
/// it submits the job (docs/upstream.md, "KubeRay: RayJob submitter"; defect 19).
fn submit_payload(spec: &RayJobSpec, mode: &str, out: &mut Out<'_>) {
    // In K8sJobMode KubeRay keeps a command the submitter template's first container sets, and
    // the entrypoint is then never used.
    let own_command = mode == "K8sJobMode"
        && spec
            .submitter_pod_template
            .as_ref()
            .and_then(|t| t.spec.as_ref())
            .and_then(|s| s.containers.first())
            .and_then(|c| c.command.as_ref())
            .is_some_and(|command| !command.is_empty());
    if mode != "InteractiveMode"
        && !own_command
        && spec.entrypoint.as_deref().unwrap_or("").trim().is_empty()
    {
        out.raygate_warning(
            rr::RAYJOB_ENTRYPOINT_EMPTY,
            "entrypoint",
            format!("entrypoint is empty: in {mode} KubeRay submits an empty command and the Ray job fails"),
        );
    }
    if let Some(text) = spec
        .entrypoint_resources
        .as_deref()
        .filter(|t| !t.is_empty())
        && let Err(why) = resources_object(text)
    {
        out.raygate(
                rr::RAYJOB_ENTRYPOINT_RESOURCES_INVALID,
                "entrypointResources",
                format!("entrypointResources must be a JSON object mapping resource names to numbers, e.g. {{\"custom\": 1}}: {why}"),
            );
    }
    let has_metadata = spec.metadata.as_ref().is_some_and(|m| !m.is_empty());
    let builds_command = mode == "K8sJobMode" || mode == "SidecarMode";
    let version = spec
        .ray_cluster_spec
        .as_ref()
        .and_then(|c| c.ray_version.as_deref())
        .filter(|v| !v.is_empty());
    if let (true, true, Some(version)) = (has_metadata, builds_command, version) {
        let selector = spec
            .cluster_selector
            .as_ref()
            .is_some_and(|s| !s.is_empty());
        let message = match check_metadata_version(version) {
            _ if selector => None,
            Ok(()) => None,
            Err(MetadataVersionError::Unparsable) => Some(format!(
                "failed to parse Ray version: {version}: Invalid Semantic Version"
            )),
            Err(MetadataVersionError::TooOld) => {
                Some("the Ray version must be at least 2.6.0 to use the metadata field".into())
            }
        };
        if let Some(message) = message {
            out.raygate(rr::RAYJOB_METADATA_RAY_VERSION, "metadata", message);
        }
    }
}

/// Whether `text` is a JSON object of numbers.
fn resources_object(text: &str) -> Result<(), String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let Value::Object(map) = value else {
        return Err("not a JSON object".into());
    };
    match map.iter().find(|(_, v)| !v.is_number()) {
        Some((k, _)) => Err(format!("the value of {k:?} is not a number")),
        None => Ok(()),
    }
}
