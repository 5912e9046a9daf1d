//! RayJob, RayCluster and QueuePolicy admission: `raygate_api::admission` decides, this module
//! feeds it the request and the cached Namespace, Queues, QueuePolicies and node shapes.
//!
//! The decision runs on both webhooks and is the same each time: the mutating call returns
//! only its patch (queue defaulting), the validating call only its denial and warnings, so
//! kubectl shows each warning once.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use raygate_api::admission::{self, Admission, RayObjectReview};
use raygate_api::settings::OptInLabel;
use raygate_api::validation::ValidationContext;
use serde_json::Value;

use crate::cache::Caches;
use crate::review::{AdmissionRequest, Denial, Operation, Verdict};

/// Which of the two Ray object webhooks is answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RayWebhook {
    /// The mutating webhook: the queue-defaulting patch only.
    Mutate,
    /// The validating webhook: denial and warnings only.
    Validate,
}

/// The reviewed object of a CREATE or UPDATE of the main resource (`None`: nothing to decide),
/// or the denial of a review that carries none.
pub(crate) fn reviewed_object(request: &AdmissionRequest) -> Result<Option<&Value>, Verdict> {
    let operation = match request.operation {
        Operation::Create | Operation::Update => request.operation,
        Operation::Delete | Operation::Connect => return Ok(None),
    };
    if request
        .sub_resource
        .as_deref()
        .is_some_and(|s| !s.is_empty())
    {
        return Ok(None);
    }
    match request.object.as_ref().filter(|o| o.is_object()) {
        Some(object) => Ok(Some(object)),
        None => Err(Verdict::deny(Denial::bad_request(format!(
            "request.object: Required value: a {} {} review carries the object",
            request.kind.kind,
            operation.as_str()
        )))),
    }
}

/// The reviewed object of a CREATE or UPDATE, taken out of `request` (see
/// [`AdmissionRequest::take_object`]); otherwise as [`reviewed_object`].
fn take_reviewed_object(request: &mut AdmissionRequest) -> Result<Option<Value>, Verdict> {
    if reviewed_object(request)?.is_none() {
        return Ok(None);
    }
    Ok(request.take_object())
}

/// The verdict on a RayJob or RayCluster review. The decision consumes the object (it is
/// defaulted in place), so it is taken out of `request` rather than copied.
pub async fn review_ray(
    caches: &Caches,
    request: &mut AdmissionRequest,
    context: &ValidationContext,
    opt_in: &OptInLabel,
    webhook: RayWebhook,
) -> Verdict {
    let object = match take_reviewed_object(request) {
        Ok(Some(object)) => object,
        Ok(None) => return Verdict::allow(),
        Err(verdict) => return verdict,
    };
    // An object being deleted only sheds finalizers: blocking that would strand it.
    if request.operation == Operation::Update
        && object.pointer("/metadata/deletionTimestamp").is_some()
    {
        return Verdict::allow();
    }
    let operation = request.operation;
    let old_object = match (operation, request.old_object.take()) {
        (Operation::Update, Some(old)) if old.is_object() => Some(old),
        (Operation::Update, _) => {
            return Verdict::deny(Denial::bad_request(
                "request.oldObject: Required value: an UPDATE review carries the old object",
            ));
        }
        _ => None,
    };
    let namespace_name = request
        .namespace
        .clone()
        .or_else(|| {
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default();
    let namespace = match caches.namespace(&namespace_name).await {
        Ok(Some(namespace)) => namespace.metadata.clone(),
        Ok(None) => ObjectMeta {
            name: Some(namespace_name),
            ..ObjectMeta::default()
        },
        Err(error) => {
            return Verdict::deny(Denial {
                code: 503,
                reason: "ServiceUnavailable",
                message: format!("{error}; raygate cannot check this object, retry"),
            });
        }
    };
    let policies = caches.queue_policies();
    let queues = |name: &str| caches.queue(name);
    let nodes = caches.nodes();
    let decision = admission::review_ray_object(RayObjectReview {
        operation,
        object,
        old_object,
        namespace: &namespace,
        opt_in,
        queues: &queues,
        policies: &policies,
        nodes: &nodes,
        context,
    });
    verdict(decision, webhook)
}

/// Loads the CRD schemas Ray object admission validates against (parsed once, on first use),
/// so that the first review does not pay for it; call before serving. Takes about a second in
/// a debug build, which would otherwise eat into the API server's webhook timeout.
pub fn warm_up(context: &ValidationContext) {
    for kind in ["RayJob", "RayCluster"] {
        let object = serde_json::json!({
            "apiVersion": "ray.io/v1",
            "kind": kind,
            "metadata": {"name": "warm-up"},
        });
        let _ = raygate_api::check::check_object(object, context);
    }
}

/// The verdict on a QueuePolicy review (validating only).
pub fn review_queue_policy(request: &AdmissionRequest) -> Verdict {
    match reviewed_object(request) {
        Ok(Some(object)) => verdict(admission::review_queue_policy(object), RayWebhook::Validate),
        Ok(None) => Verdict::allow(),
        Err(verdict) => verdict,
    }
}

fn verdict(decision: Admission, webhook: RayWebhook) -> Verdict {
    match webhook {
        RayWebhook::Mutate => Verdict {
            patch: decision.patch.unwrap_or_default(),
            ..Verdict::allow()
        },
        RayWebhook::Validate => Verdict {
            denial: decision.denial().map(Denial::invalid),
            warnings: decision.warnings(),
            ..Verdict::allow()
        },
    }
}
