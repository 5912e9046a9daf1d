//! raygate's `unsupported-*` rules: with [`ReconcilerKind::Raygate`], the features raygate's
//! reconciler does not run.
//!
//! [`ReconcilerKind::Raygate`]: crate::validation::ReconcilerKind::Raygate

use std::collections::BTreeMap;

use super::ft_annotation_true;
use crate::keys;
use crate::ray::v1::RayClusterSpec;
use crate::validation::out::Out;
use crate::validation::raygate_rules as rr;

/// raygate, `ReconcilerKind::Raygate` only: features raygate's reconciler does not run.
pub(super) fn validate(
    spec: &RayClusterSpec,
    annotations: Option<&BTreeMap<String, String>>,
    out: &mut Out<'_>,
) {
    let report = |rule: &str, field: &str, what: &str, out: &mut Out<'_>| {
        out.raygate(
            rule,
            field,
            format!("{what} is not supported by raygate's reconciler; run this object with KubeRay (--reconciler kuberay) or remove the field"),
        );
    };
    if spec.gcs_fault_tolerance_options.is_some() {
        report(
            rr::UNSUPPORTED_GCS_FAULT_TOLERANCE,
            "gcsFaultToleranceOptions",
            "gcsFaultToleranceOptions (GCS fault tolerance)",
            out,
        );
    }
    if ft_annotation_true(annotations) {
        report(
            rr::UNSUPPORTED_GCS_FAULT_TOLERANCE,
            &format!("metadata.annotations[{}]", keys::FT_ENABLED_ANNOTATION),
            "the ray.io/ft-enabled annotation (GCS fault tolerance)",
            out,
        );
    }
    if spec.tls_options.is_some() {
        report(rr::UNSUPPORTED_TLS, "tlsOptions", "tlsOptions (mTLS)", out);
    }
    if spec.history_server_options.is_some() {
        report(
            rr::UNSUPPORTED_HISTORY_SERVER,
            "historyServerOptions",
            "historyServerOptions",
            out,
        );
    }
    if spec.network_policy.is_some() {
        report(
            rr::UNSUPPORTED_NETWORK_POLICY,
            "networkPolicy",
            "networkPolicy",
            out,
        );
    }
    if spec.k8s_token_auth() {
        report(
            rr::UNSUPPORTED_K8S_TOKEN_AUTH,
            "authOptions.enableK8sTokenAuth",
            "authOptions.enableK8sTokenAuth (Kubernetes service-account tokens)",
            out,
        );
    }
}
