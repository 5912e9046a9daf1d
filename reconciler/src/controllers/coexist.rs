//! PodGroup-only controllers for RayJobs and RayClusters that a KubeRay operator runs.
//!
//! In a namespace handed to KubeRay (`raygate.io/reconciler=kuberay`, or `--reconciler
//! kuberay` for namespaces without the label) and opted into Volcano, these controllers keep
//! the PodGroup `ray-<owner>-pg` that raygate's webhook points KubeRay's Pods at, as
//! [`raygate_api::coexist::decide`] says. They create and patch PodGroups and publish Events;
//! they never create, change or delete RayJobs, RayClusters, Pods or Jobs.
//!
//! Each controller watches its kind and the PodGroups it owns; the RayJob controller also
//! watches the RayClusters its RayJobs own, so a finished job's cluster going away settles the
//! gang at once. Observations are live GETs, so a stale cache never sizes a gang.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::runtime::controller::Action as Requeue;
use kube::runtime::watcher;
use raygate_api::coexist::{self, Action, Owner, Snapshot};
use raygate_api::keys;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::PodGroup;

use super::{run_in_scopes, scoped_api, watching};
use crate::MANAGER_NAME;
use crate::context::{Context, NamespaceScope, ReconcileError, error_policy};
use crate::exec::{self, Perform, Writer};

/// Name of the RayJob PodGroup controller (metrics label, logs).
pub const RAYJOB_NAME: &str = "rayjob-podgroup";
/// Name of the RayCluster PodGroup controller (metrics label, logs).
pub const RAYCLUSTER_NAME: &str = "raycluster-podgroup";

/// The RayJob PodGroup controller, for [`super::all`].
pub fn rayjob_controller() -> super::Controller {
    super::Controller {
        name: RAYJOB_NAME,
        run: run_rayjobs,
    }
}

/// The RayCluster PodGroup controller, for [`super::all`].
pub fn raycluster_controller() -> super::Controller {
    super::Controller {
        name: RAYCLUSTER_NAME,
        run: run_rayclusters,
    }
}

fn run_rayjobs(ctx: Arc<Context>) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        run_in_scopes(&ctx, RAYJOB_NAME, |ns| {
            watching::<RayJob>(&ctx, ns)
                .owns(
                    scoped_api::<PodGroup>(&ctx.client, ns),
                    watcher::Config::default(),
                )
                .owns(
                    scoped_api::<RayCluster>(&ctx.client, ns),
                    watcher::Config::default(),
                )
                .run(reconcile_rayjob, error_policy, ctx.clone())
        })
        .await;
    })
}

fn run_rayclusters(ctx: Arc<Context>) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        run_in_scopes(&ctx, RAYCLUSTER_NAME, |ns| {
            watching::<RayCluster>(&ctx, ns)
                .owns(
                    scoped_api::<PodGroup>(&ctx.client, ns),
                    watcher::Config::default(),
                )
                .run(reconcile_raycluster, error_policy, ctx.clone())
        })
        .await;
    })
}

async fn reconcile_rayjob(job: Arc<RayJob>, ctx: Arc<Context>) -> Result<Requeue, ReconcileError> {
    exec::reconcile(&ctx, RAYJOB_NAME, job.as_ref(), async {
        let (namespace, name) = exec::namespace_and_name(job.as_ref(), "RayJob")?;
        if !in_scope(&ctx, &namespace) {
            return Ok(Requeue::await_change());
        }
        let writer = ctx.writer(&namespace, job.as_ref());
        let cluster = match job
            .status
            .as_ref()
            .and_then(|s| s.ray_cluster_name.as_deref())
            .filter(|n| !n.is_empty())
        {
            Some(cluster_name) => writer.get::<RayCluster>(cluster_name).await?,
            None => None,
        };
        let pod_group = writer.get::<PodGroup>(&keys::pod_group_name(&name)).await?;
        let decision = coexist::decide(
            Owner::RayJob(&job),
            &Snapshot {
                pod_group: pod_group.as_ref(),
                cluster: cluster.as_ref(),
                own_manager: MANAGER_NAME,
            },
        );
        Ok(exec::carry_out(&writer, &mut Performer { writer: &writer }, decision).await?)
    })
    .await
}

async fn reconcile_raycluster(
    cluster: Arc<RayCluster>,
    ctx: Arc<Context>,
) -> Result<Requeue, ReconcileError> {
    exec::reconcile(&ctx, RAYCLUSTER_NAME, cluster.as_ref(), async {
        let (namespace, name) = exec::namespace_and_name(cluster.as_ref(), "RayCluster")?;
        if !in_scope(&ctx, &namespace) || coexist::cluster_ray_job(&cluster).is_some() {
            // A RayJob's cluster joins the RayJob's gang, kept by the RayJob controller.
            return Ok(Requeue::await_change());
        }
        let writer = ctx.writer(&namespace, cluster.as_ref());
        let pod_group = writer.get::<PodGroup>(&keys::pod_group_name(&name)).await?;
        let decision = coexist::decide(
            Owner::RayCluster(&cluster),
            &Snapshot {
                pod_group: pod_group.as_ref(),
                cluster: None,
                own_manager: MANAGER_NAME,
            },
        );
        Ok(exec::carry_out(&writer, &mut Performer { writer: &writer }, decision).await?)
    })
    .await
}

/// Only KubeRay-run namespaces opted into Volcano; everything else is not this mode's.
fn in_scope(ctx: &Context, namespace: &str) -> bool {
    match ctx.kuberay_scope(namespace) {
        NamespaceScope::Volcano => true,
        NamespaceScope::Plain | NamespaceScope::Ignored => {
            tracing::debug!("not a KubeRay-run Volcano namespace; skipped");
            false
        }
    }
}

/// Carries out the PodGroup-only decision's writes, under raygate's field manager: the
/// ownership [`coexist::decide`] tells raygate's writes from KubeRay's by.
struct Performer<'a> {
    writer: &'a Writer,
}

impl Perform<Action> for Performer<'_> {
    async fn perform(&mut self, action: Action) -> Result<(), ReconcileError> {
        let writer = self.writer;
        match action {
            Action::CreatePodGroup(pg) => writer.create(&*pg).await,
            Action::ResizePodGroup(size) => writer.resize_pod_group(&size).await,
            // Events are published by `exec::carry_out`.
            Action::Event(_) => Ok(()),
        }
    }
}
