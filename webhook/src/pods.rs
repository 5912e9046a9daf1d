//! Pod CREATE mutation: Ray Pods in opted-in namespaces join their Volcano gang, and so do
//! KubeRay's submitter Pods, which carry no Ray label: they are known by their Job, which a
//! RayJob controls.
//!
//! `raygate_api::onboarding::review_pod` decides; this module feeds it the request and the
//! caches, and answers with its decision.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use raygate_api::onboarding::{self, Labels, PodLookups, PodOnboarding};
use raygate_api::settings::OptInLabel;

use crate::cache::{Caches, LookupError};
use crate::review::{AdmissionRequest, Denial, Operation, Verdict};

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
    match onboarding::review_pod(pod, request.namespace.as_deref(), opt_in, caches).await {
        Ok(PodOnboarding::LeftAlone) => Verdict::allow(),
        Ok(PodOnboarding::Onboarded(onboarding)) => Verdict {
            denial: None,
            patch: onboarding.patch,
            warnings: onboarding.warnings,
        },
        Ok(PodOnboarding::NoGang { warning }) => Verdict {
            warnings: vec![warning],
            ..Verdict::allow()
        },
        Ok(PodOnboarding::Malformed(malformed)) => {
            Verdict::deny(Denial::bad_request(malformed.to_string()))
        }
        Err(error) => Verdict::deny(Denial {
            code: 503,
            reason: "ServiceUnavailable",
            message: format!("{error}; raygate cannot place this Pod in its gang, retry"),
        }),
    }
}

/// The caches' reads, cache first with a fallback GET on a miss (see [`Caches`]).
impl PodLookups for Caches {
    type Error = LookupError;

    async fn namespace_labels(&self, name: &str) -> Result<Option<Labels>, LookupError> {
        let namespace = self.namespace(name).await?;
        Ok(namespace.map(|ns| ns.metadata.labels.clone().unwrap_or_default()))
    }

    async fn ray_cluster(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, LookupError> {
        Caches::ray_cluster(self, namespace, name).await
    }

    async fn ray_job(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, LookupError> {
        Caches::ray_job(self, namespace, name).await
    }

    fn cached_ray_job(&self, namespace: &str, name: &str) -> Option<ObjectMeta> {
        Caches::cached_ray_job(self, namespace, name)
    }

    async fn job(&self, namespace: &str, name: &str) -> Result<Option<ObjectMeta>, LookupError> {
        Caches::job(self, namespace, name).await
    }
}
