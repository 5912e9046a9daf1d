//! QueuePolicies without escape: the Namespace, Volcano Pod and PodGroup reviews.
//! `raygate_api::admission::escape` decides; this module feeds it the request, the cached
//! Namespace and the cached QueuePolicies.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use raygate_api::admission::{Admission, escape};
use raygate_api::settings::OptInLabel;

use crate::cache::Caches;
use crate::ray::reviewed_object;
use crate::review::{AdmissionRequest, Denial, Operation, Verdict};

/// The verdict of a validating review: its denial and warnings.
fn verdict(decision: Admission) -> Verdict {
    Verdict {
        denial: decision.denial().map(Denial::invalid),
        warnings: decision.warnings(),
        ..Verdict::allow()
    }
}

/// The verdict on a Namespace review: the opt-in label guard.
pub fn review_namespace(request: &AdmissionRequest, opt_in: &OptInLabel) -> Verdict {
    match reviewed_object(request) {
        Ok(Some(object)) => verdict(escape::review_namespace(
            request.operation,
            object,
            request.old_object.as_ref(),
            &request.user_info,
            opt_in,
        )),
        Ok(None) => Verdict::allow(),
        Err(verdict) => verdict,
    }
}

/// The cached metadata of the request's namespace (a name only when it is not cached yet).
async fn namespace(caches: &Caches, request: &AdmissionRequest) -> Result<ObjectMeta, Verdict> {
    let name = request.namespace.clone().unwrap_or_default();
    match caches.namespace(&name).await {
        Ok(Some(namespace)) => Ok(namespace.metadata.clone()),
        Ok(None) => Ok(ObjectMeta {
            name: Some(name),
            ..ObjectMeta::default()
        }),
        Err(error) => Err(Verdict::deny(Denial {
            code: 503,
            reason: "ServiceUnavailable",
            message: format!("{error}; raygate cannot check this object's queue, retry"),
        })),
    }
}

/// The verdict on a Pod review: a Volcano Pod without a PodGroup names an allowed queue.
pub async fn review_volcano_pod(caches: &Caches, request: &AdmissionRequest) -> Verdict {
    let pod = match reviewed_object(request) {
        Ok(Some(pod)) if request.operation == Operation::Create => pod,
        Ok(_) => return Verdict::allow(),
        Err(verdict) => return verdict,
    };
    match namespace(caches, request).await {
        Ok(namespace) => verdict(escape::review_volcano_pod(
            pod,
            &namespace,
            &caches.queue_policies(),
        )),
        Err(verdict) => verdict,
    }
}

/// The verdict on a PodGroup review: its queue, priority and gang against the policies.
pub async fn review_pod_group(caches: &Caches, request: &AdmissionRequest) -> Verdict {
    let pod_group = match reviewed_object(request) {
        Ok(Some(pod_group)) => pod_group,
        Ok(None) => return Verdict::allow(),
        Err(verdict) => return verdict,
    };
    match namespace(caches, request).await {
        Ok(namespace) => verdict(escape::review_pod_group(
            request.operation,
            pod_group,
            request.old_object.as_ref(),
            &namespace,
            &caches.queue_policies(),
        )),
        Err(verdict) => verdict,
    }
}
