//! A Kubernetes namespace per test, and waiting for conditions inside it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Event, Namespace, Pod, ServiceAccount};
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, Client};
use raygate_api::volcano::PodGroup;

use crate::Env;

/// The PodNodeSelector admission plugin's namespace annotation (`key=value,…`).
const NODE_SELECTOR_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/node-selector";
/// The PodTolerationRestriction admission plugin's namespace annotation (a JSON list).
const DEFAULT_TOLERATIONS_ANNOTATION: &str = "scheduler.alpha.kubernetes.io/defaultTolerations";

/// A namespace created for one test. Dropping it deletes the namespace (also when the test
/// panics); the namespace controller then removes everything in it.
pub struct TestNamespace {
    name: String,
    client: Client,
    config: kube::Config,
}

impl TestNamespace {
    /// Creates namespace `<prefix>-<unique suffix>`, whose Pods run on the environment's kwok
    /// nodes, and waits for its `default` ServiceAccount (ServiceAccount admission rejects pods
    /// until it exists).
    ///
    /// # Panics
    /// When the namespace cannot be created or its ServiceAccount does not appear in 60 s.
    pub async fn new(env: &Env, prefix: &str) -> TestNamespace {
        TestNamespace::with_labels(env, prefix, &[]).await
    }

    /// [`TestNamespace::new`] with labels on the namespace (e.g. raygate's opt-in label).
    ///
    /// # Panics
    /// As [`TestNamespace::new`].
    pub async fn with_labels(env: &Env, prefix: &str, labels: &[(&str, &str)]) -> TestNamespace {
        TestNamespace::on_kwok_nodes(env, prefix, labels, "type=kwok").await
    }

    /// [`TestNamespace::with_labels`] whose every Pod runs on the kwok nodes that
    /// `node_selector` (`key=value,…`) selects and nowhere else: the API server's
    /// PodNodeSelector and PodTolerationRestriction admission plugins merge the selector and a
    /// toleration of the kwok nodes' taint into each Pod as it is created, so manifests run
    /// unchanged. Pods of a namespace without these annotations go to the real nodes.
    ///
    /// # Panics
    /// As [`TestNamespace::new`].
    pub async fn on_kwok_nodes(
        env: &Env,
        prefix: &str,
        labels: &[(&str, &str)],
        node_selector: &str,
    ) -> TestNamespace {
        let toleration = serde_json::json!([{
            "key": env.var("RAYGATE_KWOK_NODE_TAINT"), "operator": "Exists", "effect": "NoSchedule"
        }]);
        let annotations = BTreeMap::from([
            (
                NODE_SELECTOR_ANNOTATION.to_string(),
                node_selector.to_string(),
            ),
            (
                DEFAULT_TOLERATIONS_ANNOTATION.to_string(),
                toleration.to_string(),
            ),
        ]);
        TestNamespace::create(env, prefix, labels, annotations).await
    }

    /// [`TestNamespace::with_labels`] whose every Pod runs on the environment's real kubelet
    /// nodes, never on kwok: the PodNodeSelector admission plugin merges the namespace's node
    /// selector (`type=real`) into each Pod as it is created.
    ///
    /// # Panics
    /// As [`TestNamespace::new`].
    pub async fn on_real_nodes(env: &Env, prefix: &str, labels: &[(&str, &str)]) -> TestNamespace {
        let annotations = BTreeMap::from([(
            NODE_SELECTOR_ANNOTATION.to_string(),
            "type=real".to_string(),
        )]);
        TestNamespace::create(env, prefix, labels, annotations).await
    }

    /// A namespace as a user makes one: only `labels`, no annotation, so the environment's
    /// defaults place its Pods (the real nodes, as in a cluster without kwok).
    ///
    /// # Panics
    /// As [`TestNamespace::new`].
    pub async fn plain(env: &Env, prefix: &str, labels: &[(&str, &str)]) -> TestNamespace {
        TestNamespace::create(env, prefix, labels, BTreeMap::new()).await
    }

    async fn create(
        env: &Env,
        prefix: &str,
        labels: &[(&str, &str)],
        annotations: BTreeMap<String, String>,
    ) -> TestNamespace {
        let config = env.kube_config().await;
        let client =
            Client::try_from(config.clone()).expect("a kube client from the admin kubeconfig");
        let name = unique_name(prefix);
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(self::labels(labels)),
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
        let ns = TestNamespace {
            name,
            client,
            config,
        };
        let accounts: Api<ServiceAccount> = ns.api();
        ns.wait_for(
            "the namespace's default ServiceAccount",
            Duration::from_secs(60),
            || async { Ok(accounts.get_opt("default").await?) },
        )
        .await;
        ns
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The admin client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// An API of a namespaced kind, in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Polls `condition` every 250 ms until it returns `Ok(Some(value))`, and returns the value.
    /// `Ok(None)` means "not yet"; an error is remembered and polling goes on.
    ///
    /// # Panics
    /// After `timeout`, with `what`, the last error and a dump of the namespace (pods with
    /// phase, node and conditions; PodGroups; events).
    pub async fn wait_for<T, F, Fut>(&self, what: &str, timeout: Duration, mut condition: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Option<T>>>,
    {
        let start = Instant::now();
        let mut last_error = None;
        loop {
            match condition().await {
                Ok(Some(value)) => return value,
                Ok(None) => {}
                Err(e) => last_error = Some(format!("{e:#}")),
            }
            if start.elapsed() >= timeout {
                let error = last_error
                    .map(|e| format!("\nlast error: {e}"))
                    .unwrap_or_default();
                panic!(
                    "timed out after {timeout:?} waiting for {what} (namespace {}){error}\n{}",
                    self.name,
                    self.dump().await
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// A readable listing of the namespace: pods, PodGroups and events, for failure messages.
    pub async fn dump(&self) -> String {
        let mut out = String::new();
        let list = ListParams::default();
        match self.api::<Pod>().list(&list).await {
            Ok(pods) => {
                let _ = writeln!(out, "pods in {}:", self.name);
                for pod in pods {
                    let spec = pod.spec.unwrap_or_default();
                    let status = pod.status.unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "  {} phase={} node={} scheduler={}",
                        pod.metadata.name.unwrap_or_default(),
                        status.phase.unwrap_or_default(),
                        spec.node_name.unwrap_or_default(),
                        spec.scheduler_name.unwrap_or_default(),
                    );
                    for c in status.conditions.unwrap_or_default() {
                        let _ = writeln!(
                            out,
                            "    {}={} {} {}",
                            c.type_,
                            c.status,
                            c.reason.unwrap_or_default(),
                            c.message.unwrap_or_default()
                        );
                    }
                    for c in status.container_statuses.unwrap_or_default() {
                        let state = serde_json::to_string(&c.state).unwrap_or_default();
                        let _ = writeln!(out, "    container {}: {state}", c.name);
                    }
                }
            }
            Err(e) => {
                let _ = writeln!(out, "listing pods failed: {e}");
            }
        }
        match self.api::<PodGroup>().list(&list).await {
            Ok(groups) => {
                let _ = writeln!(out, "podgroups:");
                for pg in groups {
                    let status = pg.status.clone().unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "  {} minMember={:?} queue={:?} status={}",
                        pg.metadata.name.clone().unwrap_or_default(),
                        pg.spec.min_member,
                        pg.spec.queue,
                        serde_json::to_string(&status).unwrap_or_default()
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(out, "listing podgroups failed: {e}");
            }
        }
        match self.api::<Event>().list(&list).await {
            Ok(events) => {
                let _ = writeln!(out, "events:");
                let mut events = events.items;
                events.sort_by_key(|e| {
                    e.last_timestamp
                        .clone()
                        .map(|t| t.0)
                        .or(e.event_time.clone().map(|t| t.0))
                });
                for e in events {
                    let _ = writeln!(
                        out,
                        "  {} {} {}/{}: {}",
                        e.type_.unwrap_or_default(),
                        e.reason.unwrap_or_default(),
                        e.involved_object.kind.unwrap_or_default(),
                        e.involved_object.name.unwrap_or_default(),
                        e.message.unwrap_or_default()
                    );
                }
            }
            Err(e) => {
                let _ = writeln!(out, "listing events failed: {e}");
            }
        }
        out
    }
}

impl Drop for TestNamespace {
    /// Deletes the namespace; the namespace controller then removes everything in it.
    fn drop(&mut self) {
        crate::cleanup::delete_on_drop::<Namespace>(&self.config, &self.name);
    }
}

/// `<prefix>-<time><pid><counter>` in hex, cut to a valid namespace name (63 characters).
fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let suffix = format!(
        "{:x}{:x}{:x}",
        nanos,
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let prefix: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(62 - suffix.len())
        .collect();
    format!("{}-{suffix}", prefix.trim_matches('-'))
}

/// Labels as the map Kubernetes objects carry.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::unique_name;

    #[test]
    fn unique_names_are_valid_and_distinct() {
        let a = unique_name("Smoke_API test");
        let b = unique_name("Smoke_API test");
        assert_ne!(a, b);
        for n in [&a, &b, &unique_name(&"x".repeat(100))] {
            assert!(n.len() <= 63, "{n}");
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{n}"
            );
            assert!(!n.starts_with('-') && !n.ends_with('-'), "{n}");
        }
        assert!(a.starts_with("smoke-api-test-"), "{a}");
    }
}
