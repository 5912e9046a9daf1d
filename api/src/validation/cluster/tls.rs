//! `ValidateRayClusterSpec`, step 17: mTLS (`tlsOptions`).

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{has_env, ray_container, workers};
use crate::features::Feature;
use crate::ray::v1::RayClusterSpec;
use crate::validation::ValidationContext;
use crate::validation::k8s::go_quote;
use crate::validation::out::Out;

const TLS_FORBIDDEN_ENV: [&str; 4] = [
    "RAY_USE_TLS",
    "RAY_TLS_SERVER_CERT",
    "RAY_TLS_SERVER_KEY",
    "RAY_TLS_CA_CERT",
];
const RAY_TLS_VOLUME_NAME: &str = "ray-tls";
const RAY_TLS_CERT_MOUNT_PATH: &str = "/etc/ray/tls";

/// Step 17: `tlsOptions` needs its feature gate and leaves the TLS env vars and volume mounts of
/// the Ray and autoscaler containers to the operator.
pub(super) fn validate(spec: &RayClusterSpec, ctx: &ValidationContext, out: &mut Out<'_>) {
    if spec.tls_options.is_none() {
        return;
    }
    if !ctx.gates.enabled(Feature::RayClusterMtls) {
        out.kuberay(
            "tls-feature-gate",
            "tlsOptions",
            "spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled",
        );
    }
    let check = |base: String, location: String, template: &PodTemplateSpec, out: &mut Out<'_>| {
        let Some(container) = ray_container(template) else {
            return;
        };
        for name in TLS_FORBIDDEN_ENV {
            if has_env(Some(container), name) {
                out.kuberay(
                    "tls-forbidden-env",
                    &format!("{base}.template.spec.containers[0].env"),
                    format!("cannot set {name} environment variable in {location} when tlsOptions is set - the operator manages TLS configuration automatically"),
                );
            }
        }
        let mounts = container.volume_mounts.as_deref().unwrap_or(&[]);
        if let Some(m) = mounts
            .iter()
            .find(|m| m.name == RAY_TLS_VOLUME_NAME || m.mount_path == RAY_TLS_CERT_MOUNT_PATH)
        {
            let what = if m.name == RAY_TLS_VOLUME_NAME {
                format!("named {}", go_quote(RAY_TLS_VOLUME_NAME))
            } else {
                format!("at path {}", go_quote(RAY_TLS_CERT_MOUNT_PATH))
            };
            out.kuberay(
                "tls-forbidden-volume-mount",
                &format!("{base}.template.spec.containers[0].volumeMounts"),
                format!("cannot use volume mount {what} in {location} when tlsOptions is set - the operator manages TLS configuration automatically"),
            );
        }
    };
    check(
        "headGroupSpec".into(),
        "head Pod".into(),
        &spec.head_group_spec.template,
        out,
    );
    for (i, group) in workers(spec).iter().enumerate() {
        check(
            format!("workerGroupSpecs[{i}]"),
            format!("worker group {}", go_quote(&group.group_name)),
            &group.template,
            out,
        );
    }
    if let Some(options) = &spec.autoscaler_options {
        for name in TLS_FORBIDDEN_ENV {
            if options
                .env
                .as_ref()
                .is_some_and(|e| e.iter().any(|v| v.name == name))
            {
                out.kuberay(
                    "tls-forbidden-env",
                    "autoscalerOptions.env",
                    format!("cannot set {name} environment variable in autoscalerOptions.env when tlsOptions is set - the operator manages TLS configuration for the autoscaler automatically"),
                );
            }
        }
        for m in options.volume_mounts.as_deref().unwrap_or(&[]) {
            let what = if m.name == RAY_TLS_VOLUME_NAME {
                format!("named {}", go_quote(RAY_TLS_VOLUME_NAME))
            } else if m.mount_path == RAY_TLS_CERT_MOUNT_PATH {
                format!("at path {}", go_quote(RAY_TLS_CERT_MOUNT_PATH))
            } else {
                continue;
            };
            out.kuberay(
                "tls-forbidden-volume-mount",
                "autoscalerOptions.volumeMounts",
                format!("cannot use volume mount {what} in autoscalerOptions.volumeMounts when tlsOptions is set - the operator manages TLS configuration automatically"),
            );
            break;
        }
    }
}
