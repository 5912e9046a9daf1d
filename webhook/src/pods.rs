//! Pod CREATE mutation: Ray Pods in opted-in namespaces join their Volcano gang, and so do
//! KubeRay's submitter Pods, which carry no Ray label: they are known by their Job, which a
//! RayJob controls.
//!
//! The decisions (role, gang owner, the patch) are `raygate_api::onboarding`'s; this module
//! only gathers the facts they need from the request and the caches.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use raygate_api::keys;
use raygate_api::onboarding::{
    GangMembership, Labels, RayPodRole, cluster_ray_job, controlling_job,
    gang_owner_of_cluster_job, is_mirror_pod, onboarding_patch, originating_ray_job, ray_pod_role,
    submitter_job_ray_job,
};
use raygate_api::settings::OptInLabel;
use serde::Deserialize;
use serde_json::Value;

use crate::cache::{Caches, LookupError};
use crate::review::{AdmissionRequest, Denial, Operation, Verdict};

/// A label or annotation map of an object, read leniently: non-string values are skipped.
pub fn string_map(object: &Value, map: &str) -> Labels {
    object
        .get("metadata")
        .and_then(|m| m.get(map))
        .and_then(Value::as_object)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The Pod's `metadata.ownerReferences`, read leniently: malformed ones count as none.
fn owner_references(pod: &Value) -> Vec<OwnerReference> {
    pod.pointer("/metadata/ownerReferences")
        .and_then(|owners| Vec::<OwnerReference>::deserialize(owners).ok())
        .unwrap_or_default()
}

fn unavailable(error: LookupError) -> Verdict {
    Verdict::deny(Denial {
        code: 503,
        reason: "ServiceUnavailable",
        message: format!("{error}; raygate cannot place this Pod in its gang, retry"),
    })
}

/// What a Pod under review may be, from its own labels and ownerReferences.
enum Candidate<'a> {
    /// A Ray Pod (head, worker, or a submitter labelled as one).
    Ray(RayPodRole),
    /// A Pod of the named Job, which may be a RayJob's submitter Job.
    JobPod(&'a str),
}

/// The verdict on a Pod review.
/// Only namespaces `opt_in` selects are onboarded.
pub async fn review_pod(
    caches: &Caches,
    request: &AdmissionRequest,
    opt_in: &OptInLabel,
) -> Verdict {
    if request.operation != Operation::Create
        || request.kind.kind != "Pod"
        || !request.kind.group.is_empty()
        || request
            .sub_resource
            .as_deref()
            .is_some_and(|s| !s.is_empty())
    {
        return Verdict::allow();
    }
    let Some(pod) = request.object.as_ref().filter(|o| o.is_object()) else {
        return Verdict::deny(Denial::bad_request(
            "request.object: Required value: a Pod CREATE review carries the Pod",
        ));
    };
    let pod_labels = string_map(pod, "labels");
    let owners = owner_references(pod);
    let candidate = match ray_pod_role(&pod_labels) {
        Some(role) => Candidate::Ray(role),
        None => match controlling_job(&pod_labels, &owners) {
            Some(job) => Candidate::JobPod(job),
            None => return Verdict::allow(),
        },
    };
    if is_mirror_pod(&string_map(pod, "annotations")) {
        return Verdict::allow();
    }
    let namespace = request
        .namespace
        .as_deref()
        .or_else(|| pod.pointer("/metadata/namespace").and_then(Value::as_str))
        .unwrap_or("");
    if namespace.is_empty() {
        return Verdict::deny(Denial::bad_request(
            "request.namespace: Required value: a Pod is namespaced",
        ));
    }
    match caches.namespace(namespace).await {
        Ok(Some(ns)) => {
            if !opt_in.selects(ns.metadata.labels.as_ref().unwrap_or(&Labels::new())) {
                return Verdict::allow();
            }
        }
        Ok(None) => return Verdict::allow(),
        Err(error) => return unavailable(error),
    }
    let role = match candidate {
        Candidate::Ray(role) => role,
        // Onboarded only when the Job is a RayJob's submitter, silently left alone otherwise
        // (an ordinary Job in an opted-in namespace is none of raygate's business).
        Candidate::JobPod(job) => {
            return match submitter_membership(caches, namespace, job).await {
                Ok(Some(membership)) => {
                    let onboarding = onboarding_patch(pod, &membership);
                    Verdict {
                        denial: None,
                        patch: onboarding.patch,
                        warnings: onboarding.warnings,
                    }
                }
                Ok(None) => Verdict::allow(),
                Err(error) => unavailable(error),
            };
        }
    };
    match membership(caches, namespace, &pod_labels, &role).await {
        // The API server only sends Pods it could decode, which always have a `spec` object;
        // without one, the onboarding patch (`add /spec/schedulerName`) could not apply.
        Ok(Some(_)) if !pod.get("spec").is_some_and(Value::is_object) => {
            Verdict::deny(Denial::bad_request(
                "request.object.spec: Required value: a Pod has a spec object, which raygate adds spec.schedulerName to",
            ))
        }
        Ok(Some((membership, mut warnings))) => {
            let onboarding = onboarding_patch(pod, &membership);
            warnings.extend(onboarding.warnings);
            Verdict {
                denial: None,
                patch: onboarding.patch,
                warnings,
            }
        }
        Ok(None) => Verdict {
            warnings: vec![format!(
                "metadata.labels: this {} Pod names no RayCluster or RayJob ({:?}), so raygate cannot gang-schedule it",
                role.task(),
                keys::RAY_CLUSTER_LABEL
            )],
            ..Verdict::allow()
        },
        Err(error) => unavailable(error),
    }
}

/// The gang of a Pod of Job `job`, when that Job is the submitter of a RayJob that still
/// exists: KubeRay names the submitter Job after its RayJob and makes the RayJob its controller.
async fn submitter_membership(
    caches: &Caches,
    namespace: &str,
    job: &str,
) -> Result<Option<GangMembership>, LookupError> {
    let Some(ray_job) = caches.cached_ray_job(namespace, job) else {
        return Ok(None);
    };
    let Some(job) = caches.job(namespace, job).await? else {
        return Ok(None);
    };
    Ok(submitter_job_ray_job(&job, &ray_job).map(|owner| {
        GangMembership::new(
            owner,
            &RayPodRole::Submitter,
            ray_job.labels.as_ref().unwrap_or(&Labels::new()),
        )
    }))
}

/// The Pod's gang, resolved through its RayCluster and RayJob, with warnings about what could
/// not be found; `None` when the Pod names no owner at all.
async fn membership(
    caches: &Caches,
    namespace: &str,
    pod_labels: &Labels,
    role: &RayPodRole,
) -> Result<Option<(GangMembership, Vec<String>)>, LookupError> {
    let mut warnings = Vec::new();
    let cluster_name = pod_labels
        .get(keys::RAY_CLUSTER_LABEL)
        .filter(|name| !name.is_empty());
    let cluster = match (role, cluster_name) {
        (RayPodRole::Submitter, _) | (_, None) => None,
        (_, Some(name)) => {
            let found = caches.ray_cluster(namespace, name).await?;
            if found.is_none() {
                warnings.push(format!(
                    "metadata.labels[{:?}]: RayCluster {name:?} not found; the Pod joins its gang without the owner's queue and priority",
                    keys::RAY_CLUSTER_LABEL
                ));
            }
            found
        }
    };
    let cluster_labels = cluster
        .as_ref()
        .and_then(|c| c.labels.clone())
        .unwrap_or_default();
    let cluster_owners = cluster
        .as_ref()
        .and_then(|c| c.owner_references.clone())
        .unwrap_or_default();
    let cluster_job = cluster
        .as_ref()
        .and_then(|_| cluster_ray_job(&cluster_labels, &cluster_owners));
    let Some(owner) = gang_owner_of_cluster_job(pod_labels, cluster_job) else {
        return Ok(None);
    };
    let job = match role {
        RayPodRole::Submitter => originating_ray_job(pod_labels),
        RayPodRole::Head | RayPodRole::Worker(_) => {
            cluster_job.or_else(|| originating_ray_job(pod_labels))
        }
    };
    let owner_labels = if job == Some(owner) {
        match caches.ray_job(namespace, owner).await? {
            Some(ray_job) => ray_job.labels.unwrap_or_default(),
            // KubeRay copies a RayJob's labels to the cluster it creates.
            None => cluster_labels.clone(),
        }
    } else {
        cluster_labels.clone()
    };
    Ok(Some((
        GangMembership::new(owner, role, &owner_labels),
        warnings,
    )))
}
