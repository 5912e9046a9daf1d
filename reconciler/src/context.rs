//! What every controller shares: the client, the configuration, metrics, the cached
//! Namespaces and the shutdown signal, and how a failed reconcile is reported and retried.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use raygate_api::coexist;
use raygate_api::feasibility::NodeKinds;
use raygate_api::queue_policy::{self, QueuePolicy};
use raygate_api::validation::ReconcilerKind;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::Config;
use crate::dashboard::DashboardError;
use crate::events::EventSink;
use crate::exec::{SubGroupSupport, Writer};
use crate::freshness::{CreateAnswers, Expected, Superseded};
use crate::metrics::Metrics;

/// Requeue after a failed reconcile.
pub const ERROR_REQUEUE: Duration = Duration::from_secs(2);
/// Requeue after a conflict: the object changed under the pass, which is retried at once on
/// the new version.
pub const CONFLICT_REQUEUE: Duration = Duration::from_millis(500);

/// Why one reconcile failed; the controller retries it ([`error_policy`]).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A read or write against the API server failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done, e.g. `create PodGroup ray-demo-pg`.
        action: String,
        /// The API error.
        source: kube::Error,
    },
    /// The object has no namespace or name (never true for objects from a watch).
    #[error("{kind} without namespace or name")]
    Unnamed {
        /// The object's kind.
        kind: &'static str,
    },
    /// The object changed since it was read; the pass is retried on the new version.
    #[error("the {kind} changed while it was being reconciled (resourceVersion {seen} → {now})")]
    Stale {
        /// The object's kind.
        kind: &'static str,
        /// The version decided on.
        seen: String,
        /// The current version.
        now: String,
    },
    /// A call to the Ray dashboard failed.
    #[error(transparent)]
    Dashboard(#[from] DashboardError),
    /// A token-authenticated cluster's Secret holds no `auth_token`.
    #[error("Secret {secret} holds no Ray auth token: its data needs the key auth_token")]
    NoToken {
        /// `namespace/name` of the Secret.
        secret: String,
    },
    /// The operating system gave no random bytes for a Ray auth token.
    #[error("generating the Ray auth token of Secret {secret}: {source}")]
    Token {
        /// The Secret the token was for.
        secret: String,
        /// Why the random bytes could not be had.
        source: getrandom::Error,
    },
    /// A built object is not a Kubernetes object (a builder bug).
    #[error("{what}: the built object is not valid: {reason}")]
    Build {
        /// The object.
        what: String,
        /// Why.
        reason: String,
    },
}

impl ReconcileError {
    /// Whether the pass lost a race with another writer (stale object or HTTP 409), which a
    /// quick retry on the new version resolves.
    pub fn is_conflict(&self) -> bool {
        match self {
            ReconcileError::Stale { .. } => true,
            ReconcileError::Api {
                source: kube::Error::Api(status),
                ..
            } => status.code == 409,
            _ => false,
        }
    }
}

/// Maps a client error to [`ReconcileError::Api`] with what was being done.
pub fn api_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> ReconcileError {
    let action = action.into();
    move |source| ReconcileError::Api { action, source }
}

/// Whether a client error is an API status with HTTP code `code`.
pub fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

/// `<namespace>/<name>` of an object, or its name alone when it is cluster-scoped: the key in
/// logs.
pub(crate) fn object_key<K: Resource>(object: &K) -> String {
    match object.namespace() {
        Some(namespace) => format!("{namespace}/{}", object.name_any()),
        None => object.name_any(),
    }
}

/// The error policy of every controller: logs the failure with the object's key and retries
/// it, soon after a conflict ([`CONFLICT_REQUEUE`]), else after [`ERROR_REQUEUE`].
pub fn error_policy<K: Resource, S>(
    object: Arc<K>,
    error: &ReconcileError,
    _shared: Arc<S>,
) -> Action {
    let key = object_key(object.as_ref());
    if error.is_conflict() {
        tracing::debug!(object = %key, %error, "retrying on a newer version");
        Action::requeue(CONFLICT_REQUEUE)
    } else {
        tracing::warn!(object = %key, %error, "reconcile failed");
        Action::requeue(ERROR_REQUEUE)
    }
}

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
    /// Where every controller queues its Events, recorded under raygate's reporter name and
    /// this replica's identity.
    events: EventSink,
    /// The task that publishes them, until [`Context::take_event_publisher`] takes it.
    event_publisher: Mutex<Option<JoinHandle<()>>>,
    /// Cached versions of RayJobs and RayClusters that this term's own writes replaced.
    pub superseded: Superseded,
    /// Children this term's passes created that the caches may not show yet.
    pub expected: Expected,
    /// The API server's answers to the RayClusters this term created.
    pub create_answers: CreateAnswers,
    /// Whether PodGroups get sub-group policies (the PodGroup CRD keeps them).
    pub sub_groups: Arc<SubGroupSupport>,
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
    ) -> Result<Arc<Context>, crate::runtime::Error> {
        let mut watch_config = crate::cache::watch_config(None);
        if let Some(selector) = config.namespace_selector.as_deref() {
            watch_config = watch_config.labels(selector);
            // The API server judges the selector; a bad one fails here, not in a retry loop.
            Api::<Namespace>::all(client.clone())
                .list_metadata(&ListParams::default().labels(selector).limit(1))
                .await
                .map_err(|source| crate::runtime::Error::NamespaceSelector {
                    selector: selector.to_string(),
                    source,
                })?;
        }
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(
            writer,
            watcher(Api::<Namespace>::all(client.clone()), watch_config),
        )
        .backoff(crate::cache::watch_backoff())
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
            ready = store.wait_until_ready() => ready.map_err(|_| crate::runtime::Error::NamespaceCache)?,
            () = shutdown.clone().wait() => {}
        }
        let (events, publish) = EventSink::new(
            client.clone(),
            Reporter {
                controller: crate::MANAGER_NAME.to_string(),
                instance: config.leader_election.as_ref().map(|l| l.identity.clone()),
            },
        );
        let event_publisher = Mutex::new(Some(tokio::spawn(publish)));
        let sub_groups = Arc::new(SubGroupSupport::new(metrics.clone()));
        Ok(Arc::new(Context {
            client,
            config,
            metrics,
            sub_groups,
            namespaces: store,
            shutdown,
            events,
            event_publisher,
            superseded: Superseded::default(),
            expected: Expected::default(),
            create_answers: CreateAnswers::default(),
        }))
    }

    /// The task that publishes the queued Events (once; `None` afterwards). It ends when the
    /// last reference to this context is gone and every queued Event is published, so a
    /// shutdown awaits it after the controllers have stopped.
    pub(crate) fn take_event_publisher(&self) -> Option<JoinHandle<()>> {
        self.event_publisher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// A writer for the objects of `namespace`, recording Events on `owner`.
    pub(crate) fn writer<K>(&self, namespace: &str, owner: &K) -> Writer
    where
        K: Resource<DynamicType = ()>,
    {
        Writer::new(
            &self.client,
            self.events.clone(),
            self.sub_groups.clone(),
            namespace,
            owner,
        )
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

    /// The node templates of the QueuePolicies in `policies` that govern `namespace` (an opted-in
    /// namespace they select), with the Node shapes `nodes`: what feasibility judges the
    /// namespace's gangs against, as the webhook does at admission.
    pub fn judged_nodes<'n>(
        &self,
        namespace: &str,
        policies: &[Arc<QueuePolicy>],
        nodes: &'n NodeKinds,
    ) -> Cow<'n, NodeKinds> {
        let Some(ns) = self.namespaces.get(&ObjectRef::new(namespace)) else {
            return Cow::Borrowed(nodes);
        };
        let empty = BTreeMap::new();
        let labels = ns.metadata.labels.as_ref().unwrap_or(&empty);
        if !self.config.opt_in_label.selects(labels) {
            return Cow::Borrowed(nodes);
        }
        let governing = queue_policy::matching_policies(policies, labels);
        nodes.with_templates(&queue_policy::node_templates(&governing))
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
        let scope = if labels.is_some_and(|l| self.config.opt_in_label.selects(l)) {
            NamespaceScope::Volcano
        } else {
            NamespaceScope::Plain
        };
        Some((reconciler, scope))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::Status;

    use super::*;

    fn api(code: u16) -> ReconcileError {
        api_error("patch RayJob ns/demo")(kube::Error::Api(Box::new(
            Status::failure("refused", "Reason").with_code(code),
        )))
    }

    #[test]
    fn conflicts_are_retried_soon_and_other_failures_later() {
        let object = Arc::new(ConfigMap::default());
        let stale = ReconcileError::Stale {
            kind: "RayJob",
            seen: "1".into(),
            now: "2".into(),
        };
        for conflict in [stale, api(409)] {
            assert!(conflict.is_conflict(), "{conflict}");
            assert_eq!(
                error_policy(object.clone(), &conflict, Arc::new(())),
                Action::requeue(CONFLICT_REQUEUE)
            );
        }
        for failure in [
            api(500),
            api(404),
            ReconcileError::Unnamed { kind: "RayCluster" },
        ] {
            assert!(!failure.is_conflict(), "{failure}");
            assert_eq!(
                error_policy(object.clone(), &failure, Arc::new(())),
                Action::requeue(ERROR_REQUEUE)
            );
        }
    }

    #[test]
    fn messages_name_the_kind_and_the_action() {
        assert_eq!(
            ReconcileError::Unnamed { kind: "RayJob" }.to_string(),
            "RayJob without namespace or name"
        );
        assert!(api(500).to_string().starts_with("patch RayJob ns/demo: "));
        assert!(is_status(
            &kube::Error::Api(Box::new(Status::failure("gone", "NotFound").with_code(404))),
            404
        ));
    }
}
