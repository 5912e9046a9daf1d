//! A cluster without a schedulable node (every node cordoned: what the scheduler sees of a
//! cluster whose pools are scaled to zero) on the real control plane: raygate's webhook judges
//! nothing there, so a RayJob no node of the cluster could hold is admitted with the warning that
//! feasibility was not checked, even where a QueuePolicy denies what can never be scheduled; once
//! the nodes are back, the same RayJob is denied. Run inside the environment:
//! `tests/env/control-plane exec -- cargo test -p raygate-e2e --test no_nodes`.
//!
//! A suite of its own, of one test: cordoning every node would stall the Pods of any test
//! running beside it, and test binaries run one after another.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use raygate_api::feasibility::NO_NODES_MESSAGE;
use raygate_api::keys;
use raygate_api::queue_policy::{QueuePolicy, QueuePolicySpec};
use raygate_e2e::{Env, TestNamespace, kubectl};
use serde_json::{Value, json};

/// How long the webhook's Node cache may take to see a cordon.
const SETTLE: Duration = Duration::from_secs(60);
/// Label tying the test's namespace to its policy.
const MARKER: &str = "e2e.raygate.io/no-nodes";

/// Uncordons the nodes it names when dropped, however the test ends.
struct Cordoned(Vec<String>);

impl Cordoned {
    /// Cordons every schedulable node.
    async fn every_node(env: &Env) -> Cordoned {
        let nodes: Api<Node> = Api::all(env.client().await);
        let listed = nodes
            .list(&ListParams::default())
            .await
            .expect("list nodes");
        let names: Vec<String> = (listed.items.iter())
            .filter(|n| n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true))
            .map(|n| n.name_any())
            .collect();
        assert!(!names.is_empty(), "the environment has schedulable nodes");
        let cordoned = Cordoned(names);
        let mut args = vec!["cordon"];
        args.extend(cordoned.0.iter().map(String::as_str));
        kubectl::stdout(&args).await;
        cordoned
    }
}

impl Drop for Cordoned {
    fn drop(&mut self) {
        let status = std::process::Command::new("kubectl")
            .arg("uncordon")
            .args(&self.0)
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "uncordoning {:?} failed: later suites need the nodes",
            self.0
        );
    }
}

/// A RayJob whose head asks for 64 CPUs: more than any node of the environment has.
fn too_big(namespace: &str) -> Value {
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "too-big", "namespace": namespace},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "HTTPMode",
            "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": {"containers": [
                    {"name": "ray-head", "image": "rayproject/ray:2.60.0",
                     "resources": {"requests": {"cpu": "64", "memory": "1Gi"}}}]}}},
            },
        },
    })
}

/// `kubectl create --dry-run=server` of the manifest at `path`: (admitted, stderr).
async fn dry_run(path: &std::path::Path) -> (bool, String) {
    let path = path.to_str().expect("a UTF-8 path");
    let output = kubectl::run(&["create", "--dry-run=server", "-f", path]).await;
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn with_every_node_cordoned_nothing_is_judged_and_nothing_is_denied() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(
        &env,
        "no-nodes",
        &[(keys::NAMESPACE_OPT_IN_LABEL, keys::NAMESPACE_OPT_IN_VALUE)],
    )
    .await;
    let marker = ns.name().to_string();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(ns.client());
    namespaces
        .patch(
            ns.name(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {MARKER: marker}}})),
        )
        .await
        .expect("label the namespace");
    let mut spec: QueuePolicySpec =
        serde_json::from_value(json!({"infeasible": "Deny"})).expect("a policy spec");
    spec.namespace_selector =
        Some(serde_json::from_value(json!({"matchLabels": {MARKER: marker}})).expect("a selector"));
    let policy_name = format!("{}-deny", ns.name());
    let policies: Api<QueuePolicy> = Api::all(ns.client());
    policies
        .create(
            &PostParams::default(),
            &QueuePolicy::new(&policy_name, spec),
        )
        .await
        .expect("create the QueuePolicy");
    let manifest = std::env::temp_dir().join(format!("{}-too-big.json", ns.name()));
    std::fs::write(&manifest, too_big(ns.name()).to_string()).expect("write the manifest");
    let denial = format!(
        "(QueuePolicy \"{policy_name}\" denies what can never be scheduled: infeasible: Deny)"
    );

    // Control: with the nodes there, the policy denies the RayJob.
    ns.wait_for("the denial with nodes", SETTLE, || async {
        let (admitted, stderr) = dry_run(&manifest).await;
        Ok(
            (!admitted && stderr.contains(&denial) && stderr.contains("head Pod asks cpu 64"))
                .then_some(()),
        )
    })
    .await;

    let cordoned = Cordoned::every_node(&env).await;
    let stderr = ns
        .wait_for("admission with every node cordoned", SETTLE, || async {
            let (admitted, stderr) = dry_run(&manifest).await;
            Ok(admitted.then_some(stderr))
        })
        .await;
    assert!(
        stderr.contains(&format!("Warning: spec.rayClusterSpec: {NO_NODES_MESSAGE}")),
        "{stderr}"
    );
    assert!(!stderr.contains("Pod asks"), "nothing is judged: {stderr}");

    // The nodes are back: the same RayJob is judged, and denied, again.
    drop(cordoned);
    ns.wait_for("the denial once the nodes are back", SETTLE, || async {
        let (admitted, stderr) = dry_run(&manifest).await;
        Ok((!admitted && stderr.contains(&denial)).then_some(()))
    })
    .await;
    policies
        .delete(&policy_name, &DeleteParams::default())
        .await
        .expect("delete the QueuePolicy");
    std::fs::remove_file(&manifest).expect("remove the manifest");
}
