//! The RayCluster controller: observe the cluster's Pods, head Service and PodGroup, let
//! [`raygate_api::cluster::decide`] choose, then carry out its actions (writes, Events, the
//! status) through [`crate::exec`].
//!
//! Watches RayClusters and the Pods, Services and PodGroups they own, so a Pod turning Ready
//! or disappearing triggers a reconcile at once; a steady cluster is looked at again every
//! five minutes, as KubeRay does.
//!
//! Only RayClusters whose `spec.managedBy` is unset or `ray.io/kuberay-operator` (the value of
//! the operator raygate stands in for, [`raygate_api::keys::KUBERAY_MANAGED_BY`]) are
//! reconciled; any other value (e.g. Kueue's MultiKueue) hands the cluster to that manager.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, Preconditions};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::watcher;
use kube::{ResourceExt, api::DynamicObject};
use raygate_api::cluster::status as cluster_status;
use raygate_api::cluster::{self, Action, FailedWrite, Snapshot};
use raygate_api::keys;
use raygate_api::ray::v1::RayCluster;
use raygate_api::volcano::PodGroup;
use serde_json::Value;

use super::{run_in_scopes, scoped_api, watching};
use crate::context::{Context, NamespaceScope, ReconcileError, api_error, error_policy};
use crate::exec::{self, Failed, Perform, Writer};

/// The controller's name (metrics label, logs).
pub const NAME: &str = "raycluster";

/// The RayCluster controller, for [`super::all`].
pub fn controller() -> super::Controller {
    super::Controller { name: NAME, run }
}

fn run(ctx: Arc<Context>) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        run_in_scopes(&ctx, NAME, |ns| {
            let client = &ctx.client;
            let labelled = || watcher::Config::default().labels(keys::RAY_CLUSTER_LABEL);
            watching::<RayCluster>(&ctx, ns)
                .owns(scoped_api::<Pod>(client, ns), labelled())
                .owns(scoped_api::<Service>(client, ns), labelled())
                .owns(
                    scoped_api::<PodGroup>(client, ns),
                    watcher::Config::default(),
                )
                .run(reconcile, error_policy, ctx.clone())
        })
        .await;
    })
}

async fn reconcile(cluster: Arc<RayCluster>, ctx: Arc<Context>) -> Result<Requeue, ReconcileError> {
    exec::reconcile(&ctx, NAME, cluster.as_ref(), pass(&cluster, &ctx)).await
}

async fn pass(cluster: &RayCluster, ctx: &Context) -> Result<Requeue, ReconcileError> {
    let (namespace, name) = exec::namespace_and_name(cluster, "RayCluster")?;
    if cluster.metadata.deletion_timestamp.is_some() {
        // Children go with the cluster through their ownerReferences.
        return Ok(Requeue::await_change());
    }
    if keys::managed_elsewhere(cluster.spec.managed_by.as_deref()) {
        tracing::debug!("managed by another controller; skipped");
        return Ok(Requeue::await_change());
    }
    let volcano = match ctx.namespace_scope(&namespace) {
        NamespaceScope::Ignored => {
            tracing::debug!("namespace not selected; skipped");
            return Ok(Requeue::await_change());
        }
        NamespaceScope::Plain => false,
        NamespaceScope::Volcano => true,
    };
    let writer = ctx.writer(&namespace, cluster);

    // Observe: live reads, so a stale cache never decides.
    let uid = cluster.metadata.uid.clone();
    let pods: Vec<Pod> = writer
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("{}={name}", keys::RAY_CLUSTER_LABEL)))
        .await
        .map_err(api_error("list Pods"))?
        .items
        .into_iter()
        .filter(|pod| {
            pod.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
        })
        .collect();
    let service_name = cluster::head_service_name(cluster);
    let head_service = writer.get::<Service>(&service_name).await?;
    let pod_group = if volcano {
        writer.get::<PodGroup>(&keys::pod_group_name(&name)).await?
    } else {
        None
    };
    let now = Time(Timestamp::now());
    let decide = |failed_write| {
        cluster::decide(
            cluster,
            &Snapshot {
                pods: &pods,
                head_service: head_service.as_ref(),
                pod_group: pod_group.as_ref(),
                volcano,
                now: &now,
                failed_write,
            },
            &ctx.config.validation,
            &ctx.config.build,
        )
    };
    let mut performer = Performer {
        writer: &writer,
        cluster,
        name: &name,
        stored: None,
    };
    match exec::carry_out(&writer, &mut performer, decide(None)).await {
        Ok(requeue) => Ok(requeue),
        Err(Failed {
            reason: Some(reason),
            error,
        }) if !error.is_conflict() => {
            // The failure shows in the status, as KubeRay's ReplicaFailure condition.
            let message = error.to_string();
            let failed = decide(Some(FailedWrite {
                reason,
                message: &message,
            }));
            // Only the status write is left, and it has no failure reason of its own.
            let _ = exec::carry_out(&writer, &mut performer, failed).await;
            Err(error)
        }
        Err(Failed { error, .. }) => Err(error),
    }
}

/// Carries out the RayCluster decision's writes.
struct Performer<'a> {
    writer: &'a Writer,
    cluster: &'a RayCluster,
    name: &'a str,
    /// The RayCluster as stored, read before the first Pod is created.
    stored: Option<Value>,
}

impl Performer<'_> {
    /// The RayCluster as stored (its JSON, unknown fields included), at the version decided
    /// on: Pods are made from the templates as the user wrote them.
    async fn stored(&mut self) -> Result<&Value, ReconcileError> {
        if self.stored.is_none() {
            let current: DynamicObject =
                self.writer
                    .raw_api::<RayCluster>()
                    .get(self.name)
                    .await
                    .map_err(api_error(format!("get RayCluster {}", self.name)))?;
            if current.resource_version() != self.cluster.resource_version() {
                return Err(ReconcileError::Stale {
                    kind: "RayCluster",
                    seen: self.cluster.resource_version().unwrap_or_default(),
                    now: current.resource_version().unwrap_or_default(),
                });
            }
            self.stored = Some(serde_json::to_value(&current).unwrap_or_default());
        }
        Ok(self.stored.get_or_insert_default())
    }
}

impl Perform<Action> for Performer<'_> {
    async fn perform(&mut self, action: Action) -> Result<(), ReconcileError> {
        let writer = self.writer;
        match action {
            Action::CreateService(service) => writer.create(&*service).await,
            Action::CreatePodGroup(pg) => writer.create(&*pg).await,
            Action::ResizePodGroup(size) => writer.resize_pod_group(&size).await,
            Action::CreatePod(pod) => {
                let what = format!("Pod {}", pod.name_any());
                let cluster = self.cluster;
                let object = cluster::pod_object(self.stored().await?, cluster, &pod);
                writer.create_raw::<Pod>(object, &what).await
            }
            Action::DeletePod { name, uid, reason } => {
                tracing::info!(pod = %name, %reason, "deleting Pod");
                let params = DeleteParams {
                    // A same-named successor (its UID differs) is never removed.
                    preconditions: uid.map(|uid| Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match writer
                    .delete::<Pod>(&name, &params, &format!("Pod {name}"))
                    .await
                {
                    Err(error) if error.is_conflict() => Ok(()),
                    other => other,
                }
            }
            Action::UpdateStatus(status) => {
                writer
                    .api::<RayCluster>()
                    .patch_status(
                        self.name,
                        &Writer::patch_params(),
                        &Patch::Merge(cluster_status::merge_patch(&status)),
                    )
                    .await
                    .map_err(api_error("patch RayCluster status"))?;
                Ok(())
            }
            // Events are published by `exec::carry_out`.
            Action::Event(_) => Ok(()),
        }
    }
}
