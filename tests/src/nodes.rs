//! Fake nodes of a test's own: kwok nodes with a capacity the test chooses, reserved for the
//! test's pods by a label and a taint, deleted when dropped.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Toleration};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::{Env, TestNamespace};

/// The annotation (and its value) that makes kwok manage a node: kwok's annotation selector in
/// `tests/env/control-plane`.
pub const KWOK_NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

/// Label and taint key that reserves a [`FakeNode`] for one pool of pods.
pub const POOL_KEY: &str = "e2e.raygate.io/pool";

/// A kwok node reserved for one pool: labelled and tainted `e2e.raygate.io/pool=<pool>`
/// (`NoSchedule`), so only pods that select and tolerate the pool land on it and the pool's
/// pods land nowhere else. Deleted when dropped (also after a panic).
pub struct FakeNode {
    name: String,
    config: kube::Config,
}

impl FakeNode {
    /// Creates node `<pool>-<index>` with `allocatable` (also its capacity, e.g.
    /// `[("cpu", "2500m"), ("memory", "4400Mi"), ("pods", "110")]`) and waits until kwok reports
    /// it Ready.
    ///
    /// # Panics
    /// When the node cannot be created or is not Ready within 60 s.
    pub async fn create(
        env: &Env,
        ns: &TestNamespace,
        pool: &str,
        index: u32,
        allocatable: &[(&str, &str)],
    ) -> FakeNode {
        let config = env.kube_config().await;
        let client = Client::try_from(config.clone()).expect("a kube client");
        let name = format!("{pool}-{index}");
        let resources: serde_json::Map<String, Value> = allocatable
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {KWOK_NODE_ANNOTATION.0: KWOK_NODE_ANNOTATION.1, "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "type": "kwok", POOL_KEY: pool,
                    "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                },
            },
            "spec": {"taints": [{"key": POOL_KEY, "value": pool, "effect": "NoSchedule"}]},
            // Nodes take their status on create.
            "status": {
                "capacity": resources, "allocatable": resources,
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                             "kubeletVersion": "fake", "kubeProxyVersion": "fake"},
            },
        }))
        .expect("a valid Node");
        let nodes: Api<Node> = Api::all(client);
        nodes
            .create(&PostParams::default(), &node)
            .await
            .unwrap_or_else(|e| panic!("creating node {name}: {e}"));
        let fake = FakeNode { name, config };
        ns.wait_for(
            &format!("node {} to be Ready", fake.name),
            Duration::from_secs(60),
            || async {
                let node = nodes.get(&fake.name).await?;
                let ready = node
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                Ok(ready.then_some(()))
            },
        )
        .await;
        fake
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What a pod spec needs to run in `pool` and only there: `(nodeSelector, tolerations)`.
pub fn placement(pool: &str) -> (BTreeMap<String, String>, Vec<Toleration>) {
    (
        BTreeMap::from([(POOL_KEY.to_string(), pool.to_string())]),
        vec![Toleration {
            key: Some(POOL_KEY.to_string()),
            operator: Some("Equal".to_string()),
            value: Some(pool.to_string()),
            effect: Some("NoSchedule".to_string()),
            toleration_seconds: None,
        }],
    )
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        crate::cleanup::delete_on_drop::<Node>(&self.config, &self.name);
    }
}
