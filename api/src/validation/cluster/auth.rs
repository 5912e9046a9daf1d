//! `ValidateRayClusterSpec`, step 15: token authentication (`authOptions`).

use crate::ray::v1::RayClusterSpec;
use crate::validation::out::Out;
use crate::validation::version::GenericVersion;

/// Step 15: token mode needs a recent enough Ray; Kubernetes token auth needs token mode, a
/// more recent Ray, and no secret name.
pub(super) fn validate(spec: &RayClusterSpec, out: &mut Out<'_>) {
    let k8s = spec.k8s_token_auth();
    if !spec.token_auth() {
        if k8s {
            out.kuberay(
                "auth-k8s-token-without-token-mode",
                "authOptions.enableK8sTokenAuth",
                "authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'",
            );
        }
        return;
    }
    let version = spec.ray_version.as_deref().unwrap_or("");
    if version.is_empty() {
        out.kuberay(
            "auth-token-ray-version-missing",
            "rayVersion",
            "authOptions.mode is 'token' but RayVersion was not specified. Ray version 2.52.0 or later is required",
        );
    } else {
        match GenericVersion::parse(version) {
            Err(err) => out.kuberay(
                "auth-token-ray-version-invalid",
                "rayVersion",
                format!(
                    "authOptions.mode is 'token' but RayVersion format is invalid: {version}, {err}"
                ),
            ),
            Ok(v) => {
                if v.less_than(2, 52, 0) {
                    out.kuberay(
                        "auth-token-ray-version-too-old",
                        "rayVersion",
                        format!("authOptions.mode is 'token' but minimum Ray version is 2.52.0, got {version}"),
                    );
                }
                if k8s && v.less_than(2, 55, 0) {
                    out.kuberay(
                        "auth-k8s-token-ray-version-too-old",
                        "rayVersion",
                        format!("authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, got {version}"),
                    );
                }
            }
        }
    }
    let secret = spec
        .auth_options
        .as_ref()
        .and_then(|a| a.secret_name.as_deref())
        .unwrap_or("");
    if k8s && !secret.is_empty() {
        out.kuberay(
            "auth-k8s-token-with-secret-name",
            "authOptions.secretName",
            "authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set",
        );
    }
}
