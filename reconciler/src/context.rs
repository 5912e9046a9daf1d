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

    /// How raygate treats objects in `namespace`.
    pub fn namespace_scope(&self, namespace: &str) -> NamespaceScope {
        let Some(ns) = self.namespaces.get(&ObjectRef::new(namespace)) else {
            return NamespaceScope::Ignored;
        };
        let labels: &BTreeMap<String, String> = match ns.metadata.labels.as_ref() {
            Some(labels) => labels,
            None => return NamespaceScope::Plain,
        };
        let (key, value) = &self.config.opt_in_label;
        if labels.get(key) == Some(value) {
            NamespaceScope::Volcano
        } else {
            NamespaceScope::Plain
        }
    }
}
