//! QueuePolicy status: `observedGeneration` and how many opted-in namespaces each policy
//! selects.
//!
//! A small controller: it watches QueuePolicies, keeps a reflector of Namespaces, and
//! re-reconciles every policy whenever a Namespace appears, changes or goes away (a label
//! change can move a namespace in or out of any policy). The decision is
//! [`raygate_api::queue_policy::desired_status`]; this module only reads the caches and writes
//! the status subresource with a merge patch, and only when it differs. Every replica may run
//! it: the written status is a pure function of the cluster's state, so concurrent writers agree.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use raygate_api::queue_policy::{QueuePolicy, desired_status};
use raygate_api::settings::OptInLabel;
use serde_json::json;
use tracing::{debug, info, warn};

/// Field manager of the status patches.
const FIELD_MANAGER: &str = "raygate-queue-policy";
/// Retry delay after a failed status write.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Why a QueuePolicy status could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Namespace cache was dropped (the controller is shutting down).
    #[error("the Namespace cache is gone")]
    CacheGone,
    /// The status patch failed.
    #[error("patching status of QueuePolicy {name}: {source}")]
    Patch {
        /// The policy.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

struct Context {
    policies: Api<QueuePolicy>,
    namespaces: Store<Namespace>,
    opt_in: OptInLabel,
}

/// The QueuePolicy status controller as one of the reconciler's [`crate::Controller`]s: it
/// runs while this replica leads, and stops with the other controllers.
pub fn controller() -> crate::Controller {
    crate::Controller {
        name: "queuepolicy",
        run: |ctx| {
            Box::pin(run(
                ctx.client.clone(),
                ctx.config.opt_in_label.clone(),
                ctx.shutdown.clone().wait(),
            ))
        },
    }
}

/// Runs the QueuePolicy status controller until `shutdown` resolves; `opt_in` says which
/// namespaces a policy can match.
pub async fn run(
    client: Client,
    opt_in: OptInLabel,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let policies = Api::<QueuePolicy>::all(client.clone());
    let (namespaces, writer) = reflector::store();
    let namespace_events = reflector::reflector(
        writer,
        watcher(Api::<Namespace>::all(client), watcher::Config::default()),
    )
    .default_backoff()
    .touched_objects()
    .map(|_| ());
    let context = Arc::new(Context {
        policies: policies.clone(),
        namespaces,
        opt_in,
    });
    info!("QueuePolicy status controller started");
    Controller::new(policies, watcher::Config::default())
        .reconcile_all_on(namespace_events)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(error = %e, "QueuePolicy reconcile");
            }
        })
        .await;
    info!("QueuePolicy status controller stopped");
}

async fn reconcile(policy: Arc<QueuePolicy>, context: Arc<Context>) -> Result<Action, Error> {
    let name = policy.name_any();
    context
        .namespaces
        .wait_until_ready()
        .await
        .map_err(|_| Error::CacheGone)?;
    let namespaces = context.namespaces.state();
    let empty = BTreeMap::new();
    let labels = namespaces
        .iter()
        .map(|ns| ns.metadata.labels.as_ref().unwrap_or(&empty));
    let Some(status) = desired_status(&policy, &context.opt_in, labels) else {
        return Ok(Action::await_change());
    };
    context
        .policies
        .patch_status(
            &name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map_err(|source| Error::Patch {
            name: name.clone(),
            source,
        })?;
    info!(
        queuepolicy = %name,
        observed_generation = ?status.observed_generation,
        matched_namespaces = ?status.matched_namespaces,
        "QueuePolicy status updated"
    );
    Ok(Action::await_change())
}

fn error_policy(policy: Arc<QueuePolicy>, error: &Error, _: Arc<Context>) -> Action {
    warn!(queuepolicy = %policy.name_any(), %error, "QueuePolicy status not written; retrying");
    Action::requeue(RETRY_AFTER)
}
