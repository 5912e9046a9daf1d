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

use futures::StreamExt;
use futures::future::BoxFuture;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use raygate_api::coexist::{self, Observed, Owner, Plan};
use raygate_api::keys;
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::volcano::PodGroup;
use tracing::Instrument;

use crate::context::{
    Context, ERROR_REQUEUE, Error, NamespaceScope, STEADY_REQUEUE, api_error, error_policy,
};

/// Name of the RayJob PodGroup controller (metrics label, logs).
pub const RAYJOB_NAME: &str = "rayjob-podgroup";
/// Name of the RayCluster PodGroup controller (metrics label, logs).
pub const RAYCLUSTER_NAME: &str = "raycluster-podgroup";

/// The RayJob PodGroup controller, for [`crate::controllers`].
pub fn rayjob_controller() -> crate::Controller {
    crate::Controller {
        name: RAYJOB_NAME,
        run: run_rayjobs,
    }
}

/// The RayCluster PodGroup controller, for [`crate::controllers`].
pub fn raycluster_controller() -> crate::Controller {
    crate::Controller {
        name: RAYCLUSTER_NAME,
        run: run_rayclusters,
    }
}

fn scoped<K>(ctx: &Context, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    }
}

fn shared(ctx: &Arc<Context>) -> Arc<Shared> {
    Arc::new(Shared {
        ctx: ctx.clone(),
        recorder: Recorder::new(
            ctx.client.clone(),
            Reporter {
                controller: crate::MANAGER_NAME.to_string(),
                instance: ctx
                    .config
                    .leader_election
                    .as_ref()
                    .map(|l| l.identity.clone()),
            },
        ),
    })
}

fn run_rayjobs(ctx: Arc<Context>) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let running = ctx.config.scopes().into_iter().map(|namespace| {
            let ctx = ctx.clone();
            async move {
                let ns = namespace.as_deref();
                Controller::new(scoped::<RayJob>(&ctx, ns), watcher::Config::default())
                    .owns(scoped::<PodGroup>(&ctx, ns), watcher::Config::default())
                    .owns(scoped::<RayCluster>(&ctx, ns), watcher::Config::default())
                    .with_config(ControllerConfig::default().concurrency(ctx.config.concurrency))
                    .graceful_shutdown_on(ctx.shutdown.clone().wait())
                    .run(reconcile_rayjob, error_policy, shared(&ctx))
                    .for_each(|_| async {})
                    .await;
                tracing::info!(controller = RAYJOB_NAME, namespace = ?namespace, "controller stopped");
            }
        });
        futures::future::join_all(running).await;
    })
}

fn run_rayclusters(ctx: Arc<Context>) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let running = ctx.config.scopes().into_iter().map(|namespace| {
            let ctx = ctx.clone();
            async move {
                let ns = namespace.as_deref();
                Controller::new(scoped::<RayCluster>(&ctx, ns), watcher::Config::default())
                    .owns(scoped::<PodGroup>(&ctx, ns), watcher::Config::default())
                    .with_config(ControllerConfig::default().concurrency(ctx.config.concurrency))
                    .graceful_shutdown_on(ctx.shutdown.clone().wait())
                    .run(reconcile_raycluster, error_policy, shared(&ctx))
                    .for_each(|_| async {})
                    .await;
                tracing::info!(controller = RAYCLUSTER_NAME, namespace = ?namespace, "controller stopped");
            }
        });
        futures::future::join_all(running).await;
    })
}

/// What each reconcile gets.
struct Shared {
    ctx: Arc<Context>,
    recorder: Recorder,
}

async fn reconcile_rayjob(job: Arc<RayJob>, shared: Arc<Shared>) -> Result<Action, Error> {
    let key = format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any());
    let span = tracing::info_span!("reconcile", controller = RAYJOB_NAME, object = %key);
    let metrics = shared.ctx.metrics.clone();
    metrics
        .reconcile(
            RAYJOB_NAME,
            async {
                let (Some(namespace), Some(name)) = (job.namespace(), job.metadata.name.clone())
                else {
                    return Err(Error::Unnamed { kind: "RayJob" });
                };
                if !in_scope(&shared.ctx, &namespace) {
                    return Ok(Action::await_change());
                }
                let cluster = match job
                    .status
                    .as_ref()
                    .and_then(|s| s.ray_cluster_name.as_deref())
                    .filter(|n| !n.is_empty())
                {
                    Some(cluster_name) => {
                        Api::<RayCluster>::namespaced(shared.ctx.client.clone(), &namespace)
                            .get_opt(cluster_name)
                            .await
                            .map_err(api_error(format!("get RayCluster {cluster_name}")))?
                    }
                    None => None,
                };
                let pod_group = get_pod_group(&shared.ctx, &namespace, &name).await?;
                let plan = coexist::decide(
                    Owner::RayJob(&job),
                    &Observed {
                        pod_group: pod_group.as_ref(),
                        cluster: cluster.as_ref(),
                        own_manager: crate::MANAGER_NAME,
                    },
                );
                shared.carry_out(job.as_ref(), &namespace, plan).await
            }
            .instrument(span.clone()),
        )
        .instrument(span)
        .await
}

async fn reconcile_raycluster(
    cluster: Arc<RayCluster>,
    shared: Arc<Shared>,
) -> Result<Action, Error> {
    let key = format!(
        "{}/{}",
        cluster.namespace().unwrap_or_default(),
        cluster.name_any()
    );
    let span = tracing::info_span!("reconcile", controller = RAYCLUSTER_NAME, object = %key);
    let metrics = shared.ctx.metrics.clone();
    metrics
        .reconcile(
            RAYCLUSTER_NAME,
            async {
                let (Some(namespace), Some(name)) =
                    (cluster.namespace(), cluster.metadata.name.clone())
                else {
                    return Err(Error::Unnamed { kind: "RayCluster" });
                };
                if !in_scope(&shared.ctx, &namespace)
                    || coexist::cluster_ray_job(&cluster).is_some()
                {
                    // A RayJob's cluster joins the RayJob's gang, kept by the RayJob controller.
                    return Ok(Action::await_change());
                }
                let pod_group = get_pod_group(&shared.ctx, &namespace, &name).await?;
                let plan = coexist::decide(
                    Owner::RayCluster(&cluster),
                    &Observed {
                        pod_group: pod_group.as_ref(),
                        cluster: None,
                        own_manager: crate::MANAGER_NAME,
                    },
                );
                shared.carry_out(cluster.as_ref(), &namespace, plan).await
            }
            .instrument(span.clone()),
        )
        .instrument(span)
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

async fn get_pod_group(
    ctx: &Context,
    namespace: &str,
    owner: &str,
) -> Result<Option<PodGroup>, Error> {
    let name = keys::pod_group_name(owner);
    Api::<PodGroup>::namespaced(ctx.client.clone(), namespace)
        .get_opt(&name)
        .await
        .map_err(api_error(format!("get PodGroup {name}")))
}

impl Shared {
    /// Performs the plan's single write, with raygate's field manager (the ownership
    /// [`coexist::decide`] tells raygate's writes from KubeRay's by).
    async fn carry_out<K>(&self, owner: &K, namespace: &str, plan: Plan) -> Result<Action, Error>
    where
        K: Resource<DynamicType = ()>,
    {
        let api: Api<PodGroup> = Api::namespaced(self.ctx.client.clone(), namespace);
        match plan {
            Plan::InSync => {}
            Plan::Create(pg) => {
                let name = pg.name_any();
                let post = PostParams {
                    field_manager: Some(crate::MANAGER_NAME.to_string()),
                    ..PostParams::default()
                };
                match api.create(&post, &pg).await {
                    Ok(_) => {
                        tracing::info!(pod_group = %name, min_member = ?pg.spec.min_member, "created PodGroup");
                        let note = format!(
                            "Created PodGroup {name} (minMember {})",
                            pg.spec.min_member.unwrap_or(0)
                        );
                        self.event(owner, EventType::Normal, "CreatedPodGroup", note)
                            .await;
                    }
                    // Someone else made it first: the next reconcile judges whose it is.
                    Err(kube::Error::Api(status)) if status.code == 409 => {
                        return Ok(Action::requeue(ERROR_REQUEUE));
                    }
                    Err(e) => return Err(api_error(format!("create PodGroup {name}"))(e)),
                }
            }
            Plan::Resize {
                name,
                min_member,
                min_resources,
            } => {
                // Only minMember and minResources: queue, priority and Volcano's status stay.
                let add = |path: [&str; 2], value: serde_json::Value| {
                    PatchOperation::Add(AddOperation {
                        path: PointerBuf::from_tokens(path),
                        value,
                    })
                };
                let patch = json_patch::Patch(vec![
                    add(["spec", "minMember"], min_member.into()),
                    add(
                        ["spec", "minResources"],
                        serde_json::to_value(&min_resources).unwrap_or_default(),
                    ),
                ]);
                api.patch(
                    &name,
                    &PatchParams {
                        field_manager: Some(crate::MANAGER_NAME.to_string()),
                        ..PatchParams::default()
                    },
                    &Patch::<()>::Json(patch),
                )
                .await
                .map_err(api_error(format!("resize PodGroup {name}")))?;
                tracing::info!(pod_group = %name, min_member, "resized PodGroup");
                let note = format!("PodGroup {name} resized to minMember {min_member}");
                self.event(owner, EventType::Normal, "UpdatedPodGroup", note)
                    .await;
            }
            Plan::KubeRayGangScheduled { message } => {
                tracing::warn!(%message, "KubeRay gang-schedules this object; left alone");
                self.event(
                    owner,
                    EventType::Warning,
                    coexist::REASON_KUBERAY_GANG,
                    message,
                )
                .await;
                return Ok(Action::await_change());
            }
            Plan::Skipped { message } => {
                self.event(owner, EventType::Warning, coexist::REASON_SKIPPED, message)
                    .await;
                return Ok(Action::await_change());
            }
        }
        Ok(Action::requeue(STEADY_REQUEUE))
    }

    /// Publishes an Event on the owner; a failure to publish is logged, never fatal.
    async fn event<K>(&self, owner: &K, type_: EventType, reason: &str, note: String)
    where
        K: Resource<DynamicType = ()>,
    {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note.chars().take(1000).collect()),
            action: "SyncPodGroup".to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &owner.object_ref(&())).await {
            tracing::debug!(error = %e, reason, "publishing an event failed");
        }
    }
}
