//! What the `submitter-runner` binary runs for a pod: container 0 of a Job's pod, or the
//! SidecarMode submitter container of a Ray head pod — its command, arguments and environment,
//! with `$(VAR)` references expanded as the kubelet does and every Ray dashboard address pointed
//! at the environment's Ray head.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

/// Annotation the runner puts on a pod before running it, so it runs once, also across runner
/// restarts.
pub const RAN_ANNOTATION: &str = "e2e.raygate.io/submitter-runner";

/// The Ray dashboard port whose addresses are rewritten.
const DASHBOARD_PORT: &str = "8265";

/// Name of the submitter container KubeRay's SidecarMode adds to the head pod.
pub const SIDECAR_SUBMITTER: &str = "ray-job-submitter";

/// Which container of a pod the runner runs, and what its end means for the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Container 0 of a pod owned by a batch/v1 Job: the pod ends with it.
    JobPod,
    /// The SidecarMode submitter container of a Ray head pod (not owned by a Job): it ends, the
    /// pod (the Ray head) keeps running.
    Sidecar,
}

impl Target {
    /// What the runner does with `pod`, if anything.
    pub fn of(pod: &Pod) -> Option<Target> {
        if owned_by_job(pod) {
            return Some(Target::JobPod);
        }
        let head = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("ray.io/node-type"))
            .is_some_and(|t| t == "head");
        let sidecar = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .any(|c| c.name == SIDECAR_SUBMITTER);
        (head && sidecar).then_some(Target::Sidecar)
    }

    /// The container of `pod` to run.
    pub fn container<'p>(&self, pod: &'p Pod) -> Option<&'p Container> {
        let containers = &pod.spec.as_ref()?.containers;
        match self {
            Target::JobPod => containers.first(),
            Target::Sidecar => containers.iter().find(|c| c.name == SIDECAR_SUBMITTER),
        }
    }
}

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

/// The invocation for `pod`'s container chosen by `target`, with dashboard addresses rewritten
/// to `dashboard` (`http://host:port`).
///
/// # Errors
/// A message for the pod's status when the container cannot be run here: no such container, no
/// `command` (the image's entrypoint is unknown without a container runtime), or an environment
/// variable taken from another object (`valueFrom`).
pub fn invocation(pod: &Pod, target: &Target, dashboard: &str) -> Result<Invocation, String> {
    let container = target
        .container(pod)
        .ok_or("the pod has no container to run")?;
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

    use super::{Invocation, Target, expand, invocation, owned_by_job, rewrite_dashboard};

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
        assert_eq!(Target::of(&pod), Some(Target::JobPod));
        assert_eq!(
            invocation(&pod, &Target::JobPod, HEAD),
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
            invocation(&no_command, &Target::JobPod, HEAD)
                .unwrap_err()
                .contains("no command")
        );
        let secret: Pod = serde_json::from_value(
            json!({"spec": {"containers": [{"name": "c", "command": ["x"],
            "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}}),
        )
        .unwrap();
        assert!(
            invocation(&secret, &Target::JobPod, HEAD)
                .unwrap_err()
                .contains("valueFrom")
        );
        assert!(!owned_by_job(&secret));
        assert_eq!(Target::of(&secret), None);
    }

    #[test]
    fn runs_the_sidecar_submitter_of_a_head_pod_only() {
        let head: Pod = serde_json::from_value(json!({
            "metadata": {"name": "h", "labels": {"ray.io/node-type": "head"}},
            "spec": {"containers": [
                {"name": "ray-head", "command": ["ray", "start"]},
                {"name": "ray-job-submitter", "command": ["/bin/bash", "-ce", "--"],
                 "args": ["until curl http://localhost:8265/api/gcs_healthz ; do sleep 2 ; done ; ray job submit --address http://127.0.0.1:8265 -- true"]}]}
        }))
        .unwrap();
        assert_eq!(Target::of(&head), Some(Target::Sidecar));
        let run = invocation(&head, &Target::Sidecar, HEAD).unwrap();
        assert_eq!(run.program, "/bin/bash");
        assert_eq!(
            run.args[2],
            "until curl http://127.0.0.1:8265/api/gcs_healthz ; do sleep 2 ; done ; ray job submit --address http://127.0.0.1:8265 -- true"
        );
        let mut plain_head = head.clone();
        plain_head.spec.as_mut().unwrap().containers.pop();
        assert_eq!(Target::of(&plain_head), None, "no submitter container");
        let mut worker = head;
        worker.metadata.labels = Some(BTreeMap::from([(
            "ray.io/node-type".to_string(),
            "worker".to_string(),
        )]));
        assert_eq!(
            Target::of(&worker),
            None,
            "only head pods carry the sidecar"
        );
    }
}
