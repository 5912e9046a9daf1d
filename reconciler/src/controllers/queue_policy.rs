//! QueuePolicy status: `observedGeneration` and how many opted-in namespaces each policy
//! selects.
//!
//! It watches QueuePolicies and re-reconciles every policy whenever a Namespace appears,
//! changes or goes away (a label change can move a namespace in or out of any policy). The
//! decision is [`raygate_api::queue_policy::desired_status`]; this module only reads the
//! Namespace cache and writes the status subresource with a merge patch, and only when it
//! differs.
//!
//! Its Namespace cache is its own, not the [`Context`]'s: the webhook enforces policies in
//! every opted-in namespace, so the count must not be narrowed by `--namespace-selector`, which
//! the shared cache is filtered by.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Patch;
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use raygate_api::queue_policy::{QueuePolicy, desired_status};
use serde_json::json;
use tracing::info;

use crate::cache;
use crate::context::{Context, ReconcileError, api_error, error_policy, is_status};
use crate::exec::{self, Writer};

/// The controller's name (metrics label, logs).
pub const NAME: &str = "queuepolicy";

/// What each reconcile gets.
struct Shared {
    ctx: Arc<Context>,
    namespaces: Store<Namespace>,
}

/// Runs the QueuePolicy status controller until the context's shutdown fires.
pub fn run(ctx: Arc<Context>) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let policies = Api::<QueuePolicy>::all(ctx.client.clone());
        let (namespaces, writer) = reflector::store();
        let namespace_events = reflector::reflector(
            writer,
            watcher(
                Api::<Namespace>::all(ctx.client.clone()),
                cache::watch_config(None),
            ),
        )
        .backoff(cache::watch_backoff())
        .touched_objects()
        .map(|_| ());
        let shared = Arc::new(Shared {
            ctx: ctx.clone(),
            namespaces,
        });
        // QueuePolicies are cluster-scoped: one controller, whatever the namespace scopes.
        Controller::new(policies, cache::watch_config(None))
            .trigger_backoff(cache::watch_backoff())
            .reconcile_all_on(namespace_events)
            .graceful_shutdown_on(ctx.shutdown.clone().wait())
            .run(reconcile, error_policy, shared)
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(controller = NAME, %error, "controller event");
                }
            })
            .await;
        info!(controller = NAME, "controller stopped");
    })
}

async fn reconcile(
    policy: Arc<QueuePolicy>,
    shared: Arc<Shared>,
) -> Result<Requeue, ReconcileError> {
    exec::reconcile(&shared.ctx, NAME, policy.as_ref(), async {
        if shared.namespaces.wait_until_ready().await.is_err() {
            // The cache's writer is gone: the controller is stopping.
            return Ok(Requeue::await_change());
        }
        let namespaces = shared.namespaces.state();
        let empty = BTreeMap::new();
        let labels = namespaces
            .iter()
            .map(|ns| ns.metadata.labels.as_ref().unwrap_or(&empty));
        let Some(status) = desired_status(&policy, &shared.ctx.config.opt_in_label, labels) else {
            return Ok(Requeue::await_change());
        };
        let name = policy.name_any();
        let patched = Api::<QueuePolicy>::all(shared.ctx.client.clone())
            .patch_status(
                &name,
                &Writer::patch_params(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await;
        match patched {
            Ok(_) => {}
            // Deleted since the cache saw it: no status to keep.
            Err(e) if is_status(&e, 404) => return Ok(Requeue::await_change()),
            Err(e) => return Err(api_error(format!("patch status of QueuePolicy {name}"))(e)),
        }
        info!(
            observed_generation = ?status.observed_generation,
            matched_namespaces = ?status.matched_namespaces,
            "QueuePolicy status updated"
        );
        Ok(Requeue::await_change())
    })
    .await
}
