//! The whole decision on a Pod CREATE: whether raygate onboards the Pod, into which gang, and
//! what it tells the user.
//!
//! The objects the decision reads are supplied through [`PodLookups`], and which of them it
//! reads is part of the decision: each only when the answer depends on it, so an ordinary Pod
//! costs no read and an ordinary Job's Pod only a cached one.

use std::future::Future;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::Deserialize;
use serde_json::Value;

use super::{
    GangMembership, Labels, Onboarding, RayPodRole, cluster_ray_job, controlling_job,
    gang_owner_of_cluster_job, is_mirror_pod, onboarding_patch, originating_ray_job, ray_pod_role,
    submitter_job_ray_job,
};
use crate::keys;
use crate::settings::OptInLabel;

#[cfg(test)]
mod tests;

/// The objects a Pod review reads, as the caller has them. The futures are `Send` so that a
/// server can review Pods on any thread.
pub trait PodLookups {
    /// Why a read failed; it ends the review (see [`review_pod`]).
    type Error;

    /// A Namespace's labels; `None` when it does not exist.
    fn namespace_labels(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Labels>, Self::Error>> + Send;

    /// A RayCluster's metadata; `None` when it does not exist.
    fn ray_cluster(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<ObjectMeta>, Self::Error>> + Send;

    /// A RayJob's metadata; `None` when it does not exist.
    fn ray_job(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<ObjectMeta>, Self::Error>> + Send;

    /// A RayJob's metadata if the caller already holds it, without a read that could wait or
    /// fail; `None` otherwise. Asked first about every Job Pod: KubeRay creates a submitter Job
    /// long after its RayJob, so a RayJob not at hand means an ordinary Job.
    fn cached_ray_job(&self, namespace: &str, name: &str) -> Option<ObjectMeta>;

    /// A Job's metadata; `None` when it does not exist.
    fn job(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<ObjectMeta>, Self::Error>> + Send;
}

/// The decision on a Pod CREATE.
#[derive(Clone, Debug, PartialEq)]
pub enum PodOnboarding {
    /// Not raygate's to onboard (not a Ray Pod nor a RayJob's submitter, a mirror Pod, a
    /// namespace not opted in): admitted unchanged.
    LeftAlone,
    /// The Pod joins its gang: apply the patch (empty when nothing is missing) and show the
    /// warnings.
    Onboarded(Onboarding),
    /// A Ray Pod whose gang cannot be told: admitted unchanged, with this warning.
    NoGang {
        /// kubectl-style sentence naming the labels that were looked for.
        warning: String,
    },
    /// The review cannot be decided from what it carries: a bad request.
    Malformed(MalformedPod),
}

/// What a Pod review lacks for a decision. The API server never sends such a review; a
/// hand-made one is answered rather than guessed at.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MalformedPod {
    /// Neither the request nor the Pod names a namespace.
    #[error("request.namespace: Required value: a Pod is namespaced")]
    NoNamespace,
    /// The Pod has no `spec` object, so the onboarding patch (`add /spec/schedulerName`)
    /// could not apply.
    #[error(
        "request.object.spec: Required value: a Pod has a spec object, which raygate adds spec.schedulerName to"
    )]
    NoSpec,
}

/// What a Pod under review may be, from its own labels and ownerReferences.
enum Candidate<'a> {
    /// A Ray Pod (head, worker, or a submitter labelled as one).
    Ray(RayPodRole),
    /// A Pod of the named Job, which may be a RayJob's submitter Job.
    JobPod(&'a str),
}

/// Decides a Pod CREATE: `pod` is the Pod as the API server sent it, `namespace` the request's
/// namespace (else the Pod's own is used), and only namespaces `opt_in` selects are onboarded.
/// A failed read ends the review with its error: the Pod's gang cannot be known without it.
pub async fn review_pod<L: PodLookups>(
    pod: &Value,
    namespace: Option<&str>,
    opt_in: &OptInLabel,
    lookups: &L,
) -> Result<PodOnboarding, L::Error> {
    let pod_labels = string_map(pod, "labels");
    let owners = owner_references(pod);
    let candidate = match ray_pod_role(&pod_labels) {
        Some(role) => Candidate::Ray(role),
        None => match controlling_job(&pod_labels, &owners) {
            Some(job) => Candidate::JobPod(job),
            None => return Ok(PodOnboarding::LeftAlone),
        },
    };
    if is_mirror_pod(&string_map(pod, "annotations")) {
        return Ok(PodOnboarding::LeftAlone);
    }
    let namespace = namespace
        .or_else(|| pod.pointer("/metadata/namespace").and_then(Value::as_str))
        .unwrap_or("");
    if namespace.is_empty() {
        return Ok(PodOnboarding::Malformed(MalformedPod::NoNamespace));
    }
    match lookups.namespace_labels(namespace).await? {
        Some(labels) if opt_in.selects(&labels) => {}
        _ => return Ok(PodOnboarding::LeftAlone),
    }
    let role = match candidate {
        Candidate::Ray(role) => role,
        // Onboarded only when the Job is a RayJob's submitter, silently left alone otherwise
        // (an ordinary Job in an opted-in namespace is none of raygate's business).
        Candidate::JobPod(job) => {
            return Ok(match submitter_membership(lookups, namespace, job).await? {
                Some(membership) => PodOnboarding::Onboarded(onboarding_patch(pod, &membership)),
                None => PodOnboarding::LeftAlone,
            });
        }
    };
    Ok(
        match membership(lookups, namespace, &pod_labels, &role).await? {
            // The API server only sends Pods it could decode, which always have a `spec` object.
            Some(_) if !pod.get("spec").is_some_and(Value::is_object) => {
                PodOnboarding::Malformed(MalformedPod::NoSpec)
            }
            Some((membership, mut warnings)) => {
                let onboarding = onboarding_patch(pod, &membership);
                warnings.extend(onboarding.warnings);
                PodOnboarding::Onboarded(Onboarding {
                    patch: onboarding.patch,
                    warnings,
                })
            }
            None => PodOnboarding::NoGang {
                warning: format!(
                    "metadata.labels: this {} Pod names no RayCluster or RayJob ({:?}), so raygate cannot gang-schedule it",
                    role.task(),
                    keys::RAY_CLUSTER_LABEL
                ),
            },
        },
    )
}

/// A label or annotation map of an object, read leniently: non-string values are skipped.
fn string_map(object: &Value, map: &str) -> Labels {
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

/// The gang of a Pod of Job `job`, when that Job is the submitter of a RayJob that still
/// exists: KubeRay names the submitter Job after its RayJob and makes the RayJob its controller.
async fn submitter_membership<L: PodLookups>(
    lookups: &L,
    namespace: &str,
    job: &str,
) -> Result<Option<GangMembership>, L::Error> {
    let Some(ray_job) = lookups.cached_ray_job(namespace, job) else {
        return Ok(None);
    };
    let Some(job) = lookups.job(namespace, job).await? else {
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
async fn membership<L: PodLookups>(
    lookups: &L,
    namespace: &str,
    pod_labels: &Labels,
    role: &RayPodRole,
) -> Result<Option<(GangMembership, Vec<String>)>, L::Error> {
    let mut warnings = Vec::new();
    let cluster_name = pod_labels
        .get(keys::RAY_CLUSTER_LABEL)
        .filter(|name| !name.is_empty());
    let cluster = match (role, cluster_name) {
        (RayPodRole::Submitter, _) | (_, None) => None,
        (_, Some(name)) => {
            let found = lookups.ray_cluster(namespace, name).await?;
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
        match lookups.ray_job(namespace, owner).await? {
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
