//! What every controller shares: the client, the configuration, metrics, the cached
//! Namespaces and the shutdown signal.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use raygate_api::coexist;
use raygate_api::validation::ReconcilerKind;
use tokio::sync::watch;

use crate::Config;
use crate::metrics::Metrics;

/// A signal that fires once, when the process (or its leadership) ends; cheap to clone.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// The sending side of [`Shutdown`].
pub struct ShutdownTrigger(watch::Sender<bool>);

impl Shutdown {
    /// A new signal and its trigger.
    pub fn new() -> (ShutdownTrigger, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (ShutdownTrigger(tx), Shutdown(rx))
    }

    /// Resolves once the signal has fired (or its trigger is gone).
    pub async fn wait(mut self) {
        // An error means the trigger was dropped, which also ends the process.
        let _ = self.0.wait_for(|fired| *fired).await;
    }

    /// Whether the signal has fired.
    pub fn fired(&self) -> bool {
        *self.0.borrow()
    }
}

impl ShutdownTrigger {
    /// Fires the signal.
    pub fn fire(&self) {
        self.0.send_replace(true);
    }
}

/// State shared by all controllers of one leadership term.
pub struct Context {
    /// Client to the API server.
    pub client: Client,
    /// The reconciler's configuration.
    pub config: Config,
    /// Metrics registry.
    pub metrics: Arc<Metrics>,
    /// Namespaces matching `--namespace-selector`; objects elsewhere are left alone.
    namespaces: Store<Namespace>,
    /// Fires when the controllers must stop.
    pub shutdown: Shutdown,
}

/// Where a namespace stands for raygate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamespaceScope {
    /// Not selected by `--namespace-selector` (or unknown): leave its objects alone.
    Ignored,
    /// Selected; Pods are scheduled by the default scheduler.
    Plain,
    /// Selected and opted into Volcano.
    Volcano,
}

impl Context {
    /// Starts the Namespace cache (filtered by the namespace selector) and waits until it has
    /// synced, so that no object is skipped for want of its namespace.
    ///
    /// # Errors
    /// When the namespace selector is rejected by the API server.
    pub async fn start(
        client: Client,
        config: Config,
        metrics: Arc<Metrics>,
        shutdown: Shutdown,
    ) -> Result<Arc<Context>, crate::Error> {
        let mut watch_config = watcher::Config::default();
        if let Some(selector) = config.namespace_selector.as_deref() {
            watch_config = watch_config.labels(selector);
            // The API server judges the selector; a bad one fails here, not in a retry loop.
            Api::<Namespace>::all(client.clone())
                .list_metadata(&ListParams::default().labels(selector).limit(1))
                .await
                .map_err(|source| crate::Error::NamespaceSelector {
                    selector: selector.to_string(),
                    source,
                })?;
        }
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(
            writer,
            watcher(Api::<Namespace>::all(client.clone()), watch_config),
        )
        .default_backoff()
        .for_each(|event| async move {
            if let Err(e) = event {
                tracing::warn!(error = %e, "namespace watch failed; retrying");
            }
        });
        let stop = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stream => {}
                () = stop.wait() => {}
            }
        });
        tokio::select! {
            ready = store.wait_until_ready() => ready.map_err(|_| crate::Error::NamespaceCache)?,
            () = shutdown.clone().wait() => {}
        }
        Ok(Arc::new(Context {
            client,
            config,
            metrics,
            namespaces: store,
            shutdown,
        }))
    }

    /// How raygate's own RayJob and RayCluster controllers treat objects in `namespace`:
    /// [`NamespaceScope::Ignored`] as well when a KubeRay operator runs the namespace's Ray
    /// objects (see [`Context::kuberay_scope`]).
    pub fn namespace_scope(&self, namespace: &str) -> NamespaceScope {
        match self.reconciler_of(namespace) {
            Some((ReconcilerKind::Raygate, scope)) => scope,
            _ => NamespaceScope::Ignored,
        }
    }

    /// How the PodGroup-only controllers (`crate::coexist`) treat objects in `namespace`:
    /// [`NamespaceScope::Ignored`] unless a KubeRay operator runs its Ray objects.
    pub fn kuberay_scope(&self, namespace: &str) -> NamespaceScope {
        match self.reconciler_of(namespace) {
            Some((ReconcilerKind::Kuberay, scope)) => scope,
            _ => NamespaceScope::Ignored,
        }
    }

    /// Which controller runs the namespace's Ray objects, and whether it is opted into
    /// Volcano; `None` when the namespace is not selected or its reconciler label is invalid.
    fn reconciler_of(&self, namespace: &str) -> Option<(ReconcilerKind, NamespaceScope)> {
        let ns = self.namespaces.get(&ObjectRef::new(namespace))?;
        let labels: Option<&BTreeMap<String, String>> = ns.metadata.labels.as_ref();
        let reconciler = match coexist::namespace_reconciler(labels, self.config.default_reconciler)
        {
            Ok(kind) => kind,
            Err(message) => {
                tracing::warn!(namespace, %message, "namespace left alone");
                return None;
            }
        };
        let (key, value) = &self.config.opt_in_label;
        let scope = if labels.and_then(|l| l.get(key)) == Some(value) {
            NamespaceScope::Volcano
        } else {
            NamespaceScope::Plain
        };
        Some((reconciler, scope))
    }
}
