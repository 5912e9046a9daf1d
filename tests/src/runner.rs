//! What the `submitter-runner` binary runs for a pod: container 0's command, arguments and
//! environment, with `$(VAR)` references expanded as the kubelet does and every Ray dashboard
//! address pointed at the environment's Ray head.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

/// Annotation the runner puts on a pod before running it, so it runs once, also across runner
/// restarts.
pub const RAN_ANNOTATION: &str = "e2e.raygate.io/submitter-runner";

/// The Ray dashboard port whose addresses are rewritten.
const DASHBOARD_PORT: &str = "8265";

/// One process to start for a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// Program (container 0's `command[0]`).
    pub program: String,
    /// The rest of `command`, then `args`.
    pub args: Vec<String>,
    /// The container's environment, in order.
    pub env: Vec<(String, String)>,
}

/// True for a pod owned by a batch/v1 Job.
pub fn owned_by_job(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.api_version == "batch/v1" && o.kind == "Job")
}

/// The invocation for `pod`'s container 0, with dashboard addresses rewritten to `dashboard`
/// (`http://host:port`).
///
/// # Errors
/// A message for the pod's status when the container cannot be run here: no container, no
/// `command` (the image's entrypoint is unknown without a container runtime), or an environment
/// variable taken from another object (`valueFrom`).
pub fn invocation(pod: &Pod, dashboard: &str) -> Result<Invocation, String> {
    let container = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .ok_or("the pod has no container")?;
    let mut env = Vec::new();
    let mut known = BTreeMap::new();
    for var in container.env.iter().flatten() {
        if var.value_from.is_some() {
            return Err(format!(
                "env {} uses valueFrom, which the submitter runner does not resolve",
                var.name
            ));
        }
        let value = expand(var.value.as_deref().unwrap_or_default(), &known);
        let value = if var.name == "RAY_DASHBOARD_ADDRESS" {
            dashboard_address(&value, dashboard)
        } else {
            rewrite_dashboard(&value, dashboard)
        };
        known.insert(var.name.clone(), value.clone());
        env.push((var.name.clone(), value));
    }
    let mut words = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .map(|w| rewrite_dashboard(&expand(w, &known), dashboard));
    if container.command.as_ref().is_none_or(Vec::is_empty) {
        return Err(format!(
            "container {} has no command; without a container runtime the image's entrypoint is unknown",
            container.name
        ));
    }
    let program = words.next().unwrap_or_default();
    Ok(Invocation {
        program,
        args: words.collect(),
        env,
    })
}

/// `RAY_DASHBOARD_ADDRESS` for the environment's head: `http://host:port` when the original had
/// a scheme, else `host:port` (KubeRay sets it to `status.dashboardURL`, which has none).
fn dashboard_address(original: &str, dashboard: &str) -> String {
    if original.contains("://") {
        dashboard.to_string()
    } else {
        dashboard.trim_start_matches("http://").to_string()
    }
}

/// Replaces every `http://HOST:8265` or `https://HOST:8265` in `text` by `dashboard`.
pub fn rewrite_dashboard(text: &str, dashboard: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("http") {
        out.push_str(&rest[..at]);
        let candidate = &rest[at..];
        let after_scheme = candidate
            .strip_prefix("http://")
            .or_else(|| candidate.strip_prefix("https://"));
        let matched = after_scheme.and_then(|tail| {
            let host_len = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_'))
                .unwrap_or(tail.len());
            let port = tail[host_len..]
                .strip_prefix(':')?
                .strip_prefix(DASHBOARD_PORT)?;
            let ends = port.chars().next().is_none_or(|c| !c.is_ascii_digit());
            (host_len > 0 && ends).then(|| candidate.len() - port.len())
        });
        match matched {
            Some(len) => {
                out.push_str(dashboard);
                rest = &candidate[len..];
            }
            None => {
                out.push_str("http");
                rest = &candidate[4..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Expands `$(NAME)` with the variables in `vars` as the kubelet does: `$$` is a literal `$`,
/// and a reference to an unknown variable stays as written.
pub fn expand(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some((name, after)) = tail.strip_prefix("$(").and_then(|t| t.split_once(')'))
        {
            match vars.get(name) {
                Some(value) => out.push_str(value),
                None => out.push_str(&tail[..tail.len() - after.len()]),
            }
            rest = after;
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::{Invocation, expand, invocation, owned_by_job, rewrite_dashboard};

    const HEAD: &str = "http://127.0.0.1:8265";

    #[test]
    fn rewrites_only_dashboard_addresses() {
        assert_eq!(
            rewrite_dashboard(
                "ray job submit --address http://rc-head-svc.ns.svc.cluster.local:8265 -- x",
                HEAD
            ),
            "ray job submit --address http://127.0.0.1:8265 -- x"
        );
        assert_eq!(
            rewrite_dashboard("https://h:8265/api", HEAD),
            "http://127.0.0.1:8265/api"
        );
        for unchanged in [
            "http://h:82650",
            "http://h:8266",
            "http:",
            "see http",
            "h:8265",
            "http://:8265",
        ] {
            assert_eq!(rewrite_dashboard(unchanged, HEAD), unchanged);
        }
    }

    #[test]
    fn expands_like_the_kubelet() {
        let vars = BTreeMap::from([("A".to_string(), "x".to_string())]);
        assert_eq!(expand("$(A)-$(B)-$$(A)-$-$(A", &vars), "x-$(B)-$(A)-$-$(A");
    }

    #[test]
    fn builds_the_invocation_of_container_zero() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}]},
            "spec": {"containers": [
                {"name": "submitter", "command": ["/bin/bash", "-ce", "--"],
                 "args": ["ray job submit --address http://$(RAY_DASHBOARD_ADDRESS) -- echo $(RAY_JOB_SUBMISSION_ID)"],
                 "env": [{"name": "RAY_DASHBOARD_ADDRESS", "value": "rc-head-svc.ns.svc.cluster.local:8265"},
                         {"name": "RAY_JOB_SUBMISSION_ID", "value": "id-1"},
                         {"name": "URL", "value": "http://other:8265"}]},
                {"name": "sidecar", "command": ["sleep"]}]}
        }))
        .unwrap();
        assert!(owned_by_job(&pod));
        assert_eq!(
            invocation(&pod, HEAD),
            Ok(Invocation {
                program: "/bin/bash".into(),
                args: vec![
                    "-ce".into(),
                    "--".into(),
                    "ray job submit --address http://127.0.0.1:8265 -- echo id-1".into()
                ],
                env: vec![
                    ("RAY_DASHBOARD_ADDRESS".into(), "127.0.0.1:8265".into()),
                    ("RAY_JOB_SUBMISSION_ID".into(), "id-1".into()),
                    ("URL".into(), HEAD.into()),
                ],
            })
        );
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        let no_command: Pod =
            serde_json::from_value(json!({"spec": {"containers": [{"name": "c", "args": ["x"]}]}}))
                .unwrap();
        assert!(
            invocation(&no_command, HEAD)
                .unwrap_err()
                .contains("no command")
        );
        let secret: Pod = serde_json::from_value(
            json!({"spec": {"containers": [{"name": "c", "command": ["x"],
            "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}}),
        )
        .unwrap();
        assert!(invocation(&secret, HEAD).unwrap_err().contains("valueFrom"));
        assert!(!owned_by_job(&secret));
    }
}
