//! RayJob and RayCluster admission: the same checks as `raygate validate`, errors deny and
//! warnings are passed to the client.

use raygate_api::check::check_object;
use raygate_api::finding::{Finding, Severity};
use raygate_api::validation::ValidationContext;

use crate::review::{AdmissionRequest, Denial, Operation, Verdict};

/// The denial message of several error findings, in the API server's aggregate style:
/// one finding as is, several as `[a, b]`.
pub fn denial_message(errors: &[&Finding]) -> String {
    match errors {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The verdict on a RayJob or RayCluster review.
pub fn review_ray(request: &AdmissionRequest, ctx: &ValidationContext) -> Verdict {
    if !matches!(request.operation, Operation::Create | Operation::Update)
        || request
            .sub_resource
            .as_deref()
            .is_some_and(|s| !s.is_empty())
    {
        return Verdict::allow();
    }
    let Some(object) = request.object.as_ref().filter(|o| o.is_object()) else {
        return Verdict::deny(Denial::bad_request(format!(
            "request.object: Required value: a {} {} review carries the object",
            request.kind.kind,
            request.operation.as_str()
        )));
    };
    // An object being deleted only sheds finalizers: blocking that would strand it.
    if request.operation == Operation::Update
        && object.pointer("/metadata/deletionTimestamp").is_some()
    {
        return Verdict::allow();
    }
    let Some(checked) = check_object(object.clone(), ctx) else {
        return Verdict::allow();
    };
    let findings = checked.report.findings;
    let errors: Vec<&Finding> = findings.iter().filter(|f| f.is_error()).collect();
    let warnings = findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .map(ToString::to_string)
        .collect();
    if errors.is_empty() {
        Verdict {
            warnings,
            ..Verdict::allow()
        }
    } else {
        Verdict {
            denial: Some(Denial::invalid(denial_message(&errors))),
            warnings,
            ..Verdict::default()
        }
    }
}
