//! `ValidateRayClusterSpec`, step 14: the history server's `historyServerOptions`.

use std::collections::HashMap;

use serde_json::Value;

use super::{containers, workers};
use crate::features::Feature;
use crate::ray::v1::RayClusterSpec;
use crate::validation::ValidationContext;
use crate::validation::out::Out;

const COLLECTOR_CONTAINER_NAME: &str = "ray-history-collector";
const COLLECTOR_FORBIDDEN_ENV: [&str; 8] = [
    "POD_IP",
    "FQ_RAY_IP",
    "RAY_CLUSTER_NAME",
    "RAY_CLUSTER_NAMESPACE",
    "RAY_ROLE",
    "OWNER_KIND",
    "OWNER_NAME",
    "EVENTS_PORT",
];

/// Step 14: `historyServerOptions` needs its feature gate and valid collector options, and
/// leaves the collector's container name to KubeRay.
pub(super) fn validate(spec: &RayClusterSpec, ctx: &ValidationContext, out: &mut Out<'_>) {
    let Some(options) = &spec.history_server_options else {
        return;
    };
    if !ctx.gates.enabled(Feature::RayClusterHistoryServer) {
        out.kuberay(
            "history-server-feature-gate",
            "historyServerOptions",
            "RayClusterHistoryServer feature gate is not enabled",
        );
    }
    match options.get("collectorOptions").filter(|c| !c.is_null()) {
        None => out.kuberay(
            "history-server-collector-options-missing",
            "historyServerOptions.collectorOptions",
            "historyServerOptions.collectorOptions must be set",
        ),
        Some(collector) => collector_options(collector, out),
    }
    for (i, c) in containers(&spec.head_group_spec.template)
        .iter()
        .enumerate()
    {
        if c.name == COLLECTOR_CONTAINER_NAME {
            out.kuberay(
                "history-server-collector-container-name",
                &format!("headGroupSpec.template.spec.containers[{i}].name"),
                format!("head pod template must not define a container with name '{COLLECTOR_CONTAINER_NAME}' when history server collector options are enabled"),
            );
        }
    }
    for (gi, group) in workers(spec).iter().enumerate() {
        for (i, c) in containers(&group.template).iter().enumerate() {
            if c.name == COLLECTOR_CONTAINER_NAME {
                out.kuberay(
                    "history-server-collector-container-name",
                    &format!("workerGroupSpecs[{gi}].template.spec.containers[{i}].name"),
                    format!("worker group {} pod template must not define a container with name '{COLLECTOR_CONTAINER_NAME}' when history server collector options are enabled", group.group_name),
                );
            }
        }
    }
}

/// `validateCollectorOptions`.
fn collector_options(collector: &Value, out: &mut Out<'_>) {
    let base = "historyServerOptions.collectorOptions";
    if collector
        .get("image")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        out.kuberay(
            "history-server-collector-image-missing",
            &format!("{base}.image"),
            "historyServerOptions.collectorOptions.image must be set",
        );
    }
    // Later entries win, as in Go's map built from the list.
    let mut env: HashMap<&str, &Value> = HashMap::new();
    for entry in collector
        .get("env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(name) = entry.get("name").and_then(Value::as_str) {
            env.insert(name, entry);
        }
    }
    let literal = |name: &str| {
        env.get(name)
            .and_then(|e| e.get("value"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let has_value = |name: &str| {
        env.get(name).is_some_and(|e| {
            e.get("value")
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty())
                || e.get("valueFrom").is_some_and(|v| !v.is_null())
        })
    };
    let env_field = format!("{base}.env");
    for name in COLLECTOR_FORBIDDEN_ENV {
        if env.contains_key(name) {
            out.kuberay(
                "history-server-collector-env-forbidden",
                &env_field,
                format!("historyServerOptions.collectorOptions.env must not contain {name}: it is managed by KubeRay and injected automatically into the collector container"),
            );
        }
    }
    let backend = literal("STORAGE_BACKEND");
    if backend.is_empty() {
        out.kuberay(
            "history-server-storage-backend-missing",
            &env_field,
            "STORAGE_BACKEND environment variable must be set with a literal string value in historyServerOptions.collectorOptions.env",
        );
        return;
    }
    let mut missing = |message: String| {
        out.kuberay("history-server-storage-env-missing", &env_field, message);
    };
    match backend.to_uppercase().as_str() {
        "GCS" if !has_value("GCS_BUCKET") => missing(
            "GCS_BUCKET environment variable must be set when STORAGE_BACKEND is GCS".into(),
        ),
        "S3" if !has_value("S3_REGION") => {
            missing("S3_REGION environment variable must be set when STORAGE_BACKEND is S3".into())
        }
        "AZUREBLOB" => {
            let mode = literal("AZURE_STORAGE_AUTH_MODE").trim().to_lowercase();
            match mode.as_str() {
                "connection_string" if !has_value("AZURE_STORAGE_CONNECTION_STRING") => missing(
                    "AZURE_STORAGE_CONNECTION_STRING environment variable must be set when STORAGE_BACKEND is AZUREBLOB and AZURE_STORAGE_AUTH_MODE is connection_string".into(),
                ),
                "connection_string" => {}
                "workload_identity" | "default" => {
                    if !has_value("AZURE_STORAGE_ACCOUNT_URL") {
                        missing(format!("AZURE_STORAGE_ACCOUNT_URL environment variable must be set when STORAGE_BACKEND is AZUREBLOB and AZURE_STORAGE_AUTH_MODE is {mode}"));
                    }
                }
                _ => {
                    if !has_value("AZURE_STORAGE_CONNECTION_STRING")
                        && !has_value("AZURE_STORAGE_ACCOUNT_URL")
                    {
                        missing("either AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT_URL environment variable must be set when STORAGE_BACKEND is AZUREBLOB".into());
                    }
                }
            }
        }
        "ALIYUNOSS" => {
            for name in ["OSS_BUCKET", "OSS_ENDPOINT", "OSS_REGION"] {
                if !has_value(name) {
                    missing(format!(
                        "{name} environment variable must be set when STORAGE_BACKEND is ALIYUNOSS"
                    ));
                }
            }
        }
        _ => {}
    }
}
