//! KubeRay-compatible validation of RayJobs and RayClusters, plus raygate's own rules.
//!
//! [`validate_ray_job`] and [`validate_ray_cluster`] run every rule of KubeRay v1.7's
//! `ValidateRayJobMetadata` / `ValidateRayJobSpec` / `ValidateRayJobStatus` and
//! `ValidateRayClusterMetadata` / `ValidateRayClusterSpec` / `ValidateRayClusterUpgradeOptions` /
//! `ValidateRayClusterStatus` (docs/upstream.md, "KubeRay: validation"), in KubeRay's evaluation
//! order and with KubeRay's messages, but — unlike KubeRay, which stops at the first failure — they
//! report **every** rule that fails. Rules of the embedded `spec.rayClusterSpec` of a RayJob carry
//! KubeRay's wrapper `The RayJob spec is invalid: <err>` and field paths under
//! `spec.rayClusterSpec.`.
//!
//! raygate adds its own rules (compat [`Compat::Raygate`]) where KubeRay lets a broken object
//! through and it then fails silently or loops (docs/upstream.md, "KubeRay: known defects"); each
//! sits right after the KubeRay rule it belongs to. With [`ReconcilerKind::Raygate`], features
//! raygate's own reconciler does not run are reported as errors too (rules
//! `unsupported-<feature>`).
//!
//! [`Compat::Raygate`]: crate::finding::Compat::Raygate
//!
//! The catalogue of every rule (name, severity, compat, field, message, when it fires) is in
//! `docs/validation-rules.md` at the repository root.
//!
//! Everything here is a pure function of its inputs: no I/O, no panics on any input.

mod cluster;
mod job;
pub mod k8s;
mod out;
pub mod raygate_rules;
pub mod version;

#[cfg(test)]
mod tests;

use crate::features::FeatureGates;
use crate::finding::Finding;
use crate::ray::v1::{RayCluster, RayJob};

/// Which controller will run the validated object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReconcilerKind {
    /// raygate's own reconciler: features it does not run are rejected.
    Raygate,
    /// KubeRay's operator (the default): only KubeRay's rules and raygate's safety rules apply.
    #[default]
    Kuberay,
}

/// Everything validation depends on besides the object itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ValidationContext {
    /// KubeRay feature gates in force (KubeRay v1.7 defaults unless overridden).
    pub gates: FeatureGates,
    /// Which controller will run the object.
    pub reconciler: ReconcilerKind,
}

/// Validates a RayJob: metadata, spec (with its embedded RayCluster spec), then status.
///
/// The object should already carry the CRD defaults (as the API server hands it to a webhook);
/// absent fields are treated as their CRD default. Returns every finding, in KubeRay's order,
/// with raygate's own rules interleaved after the KubeRay rule they belong to.
pub fn validate_ray_job(job: &RayJob, ctx: &ValidationContext) -> Vec<Finding> {
    let mut findings = Vec::new();
    job::validate(job, ctx, &mut findings);
    findings
}

/// Validates a standalone RayCluster: metadata, spec, the autoscaler-v1 restartPolicy warning,
/// upgrade options, then status.
///
/// The object should already carry the CRD defaults; absent fields are treated as their CRD
/// default. Returns every finding, in KubeRay's order.
pub fn validate_ray_cluster(cluster: &RayCluster, ctx: &ValidationContext) -> Vec<Finding> {
    let mut findings = Vec::new();
    cluster::validate_cluster(cluster, ctx, &mut findings);
    findings
}

/// Whether `findings` contains an error (the object must be rejected).
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(Finding::is_error)
}
