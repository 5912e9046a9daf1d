//! The RayCluster controller: observe the cluster's Pods, head Service and PodGroup, let
//! [`raygate_api::cluster::decide`] choose, then carry out its actions in order and patch the
//! status subresource.
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
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use raygate_api::cluster::status as cluster_status;
use raygate_api::cluster::{self, Action as ClusterAction, Observed};
use raygate_api::keys;
use raygate_api::ray::v1::RayCluster;
use raygate_api::volcano::PodGroup;
use serde_json::Value;
use tracing::Instrument;

use crate::context::{
    Context, Error, NamespaceScope, STEADY_REQUEUE, api_error, error_policy, is_status,
};

/// The controller's name (metrics label, logs).
pub const NAME: &str = "raycluster";

/// The RayCluster controller, for [`crate::controllers`].
pub fn controller() -> crate::Controller {
    crate::Controller { name: NAME, run }
}

fn run(ctx: Arc<Context>) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let shared = Arc::new(Shared {
            ctx: ctx.clone(),
            recorder: Arc::new(crate::event_recorder(&ctx)),
        });
        crate::run_in_scopes(&ctx, NAME, |namespace| {
            let ns = namespace.as_deref();
            let client = &ctx.client;
            let labelled = || watcher::Config::default().labels(keys::RAY_CLUSTER_LABEL);
            Controller::new(
                crate::scoped_api::<RayCluster>(client, ns),
                watcher::Config::default(),
            )
            .owns(crate::scoped_api::<Pod>(client, ns), labelled())
            .owns(crate::scoped_api::<Service>(client, ns), labelled())
            .owns(
                crate::scoped_api::<PodGroup>(client, ns),
                watcher::Config::default(),
            )
            .with_config(ControllerConfig::default().concurrency(ctx.config.concurrency))
            .graceful_shutdown_on(ctx.shutdown.clone().wait())
            .run(reconcile, error_policy, shared.clone())
        })
        .await;
    })
}

/// What each reconcile gets.
struct Shared {
    ctx: Arc<Context>,
    recorder: Arc<Recorder>,
}

async fn reconcile(cluster: Arc<RayCluster>, shared: Arc<Shared>) -> Result<Action, Error> {
    let key = format!(
        "{}/{}",
        cluster.namespace().unwrap_or_default(),
        cluster.name_any()
    );
    let span = tracing::info_span!("reconcile", controller = NAME, object = %key);
    let metrics = shared.ctx.metrics.clone();
    metrics
        .reconcile(
            NAME,
            reconcile_inner(cluster, shared).instrument(span.clone()),
        )
        .instrument(span)
        .await
}

async fn reconcile_inner(cluster: Arc<RayCluster>, shared: Arc<Shared>) -> Result<Action, Error> {
    let ctx = &shared.ctx;
    let (Some(namespace), Some(name)) = (cluster.namespace(), cluster.metadata.name.clone()) else {
        return Err(Error::Unnamed { kind: "RayCluster" });
    };
    if cluster.metadata.deletion_timestamp.is_some() {
        // Children go with the cluster through their ownerReferences.
        return Ok(Action::await_change());
    }
    if let Some(manager) = cluster.spec.managed_by.as_deref()
        && manager != keys::KUBERAY_MANAGED_BY
    {
        tracing::debug!(
            managed_by = manager,
            "managed by another controller; skipped"
        );
        return Ok(Action::await_change());
    }
    let volcano = match ctx.namespace_scope(&namespace) {
        NamespaceScope::Ignored => {
            tracing::debug!("namespace not selected; skipped");
            return Ok(Action::await_change());
        }
        NamespaceScope::Plain => false,
        NamespaceScope::Volcano => true,
    };

    // Observe: live reads, so a stale cache never decides.
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let uid = cluster.metadata.uid.clone();
    let pods: Vec<Pod> = pods_api
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
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &namespace);
    let service_name = cluster::head_service_name(&cluster);
    let head_service = services
        .get_opt(&service_name)
        .await
        .map_err(api_error(format!("get Service {service_name}")))?;
    let pod_groups: Api<PodGroup> = Api::namespaced(ctx.client.clone(), &namespace);
    let pod_group_name = keys::pod_group_name(&name);
    let pod_group = if volcano {
        pod_groups
            .get_opt(&pod_group_name)
            .await
            .map_err(api_error(format!("get PodGroup {pod_group_name}")))?
    } else {
        None
    };
    let now = Time(Timestamp::now());

    // Decide.
    let plan = cluster::decide(
        &cluster,
        &Observed {
            pods: &pods,
            head_service: head_service.as_ref(),
            pod_group: pod_group.as_ref(),
            volcano,
            now: &now,
        },
        &ctx.config.validation,
        &ctx.config.build,
    );
    for warning in &plan.warnings {
        shared
            .event(&cluster, EventType::Warning, "PodOnboarding", warning)
            .await;
    }

    // Pods are made from the templates as stored: fields raygate's types drop stay.
    let raw = if plan
        .actions
        .iter()
        .any(|a| matches!(a, ClusterAction::CreatePod(_)))
    {
        Some(stored(ctx, &cluster, &namespace, &name).await?)
    } else {
        None
    };

    // Act, stopping at the first failure.
    let status = plan.status;
    for action in plan.actions {
        if let Err((reason, error)) = act(&shared, &cluster, raw.as_ref(), &namespace, action).await
        {
            shared
                .event(&cluster, EventType::Warning, reason, &error.to_string())
                .await;
            let failed =
                cluster_status::with_replica_failure(status, reason, &error.to_string(), &now);
            write_status(ctx, &cluster, &namespace, &name, failed, &now).await?;
            return Err(error);
        }
    }
    if let Some(reason) = &status.reason
        && cluster_status::changed(&cluster, &status)
    {
        shared
            .event(&cluster, EventType::Warning, "InvalidSpec", reason)
            .await;
    }
    write_status(ctx, &cluster, &namespace, &name, status, &now).await?;
    Ok(Action::requeue(STEADY_REQUEUE))
}

async fn write_status(
    ctx: &Context,
    cluster: &RayCluster,
    namespace: &str,
    name: &str,
    status: raygate_api::ray::v1::RayClusterStatus,
    now: &Time,
) -> Result<(), Error> {
    if !cluster_status::changed(cluster, &status) {
        return Ok(());
    }
    let status = cluster_status::finish(status, now);
    let api: Api<RayCluster> = Api::namespaced(ctx.client.clone(), namespace);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(cluster_status::merge_patch(&status)),
    )
    .await
    .map_err(api_error("patch RayCluster status"))?;
    Ok(())
}

/// Carries out one action; on failure returns KubeRay's failure reason and the error.
/// The RayCluster as stored (its JSON, unknown fields included), at the version decided on.
async fn stored(
    ctx: &Context,
    cluster: &RayCluster,
    namespace: &str,
    name: &str,
) -> Result<Value, Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        namespace,
        &ApiResource::erase::<RayCluster>(&()),
    );
    let current = api
        .get(name)
        .await
        .map_err(api_error(format!("get RayCluster {name}")))?;
    if current.resource_version() != cluster.resource_version() {
        return Err(Error::Stale {
            kind: "RayCluster",
            seen: cluster.resource_version().unwrap_or_default(),
            now: current.resource_version().unwrap_or_default(),
        });
    }
    Ok(serde_json::to_value(&current).unwrap_or_default())
}

async fn act(
    shared: &Shared,
    cluster: &RayCluster,
    raw: Option<&Value>,
    namespace: &str,
    action: ClusterAction,
) -> Result<(), (&'static str, Error)> {
    let client = shared.ctx.client.clone();
    let post = PostParams {
        field_manager: Some(crate::MANAGER_NAME.to_string()),
        ..PostParams::default()
    };
    match action {
        ClusterAction::CreateService(service) => {
            let name = service.name_any();
            let api: Api<Service> = Api::namespaced(client, namespace);
            match api.create(&post, &service).await {
                Ok(_) => {
                    tracing::info!(service = %name, "created head Service");
                    shared
                        .event(
                            cluster,
                            EventType::Normal,
                            "CreatedService",
                            &format!("Created service {namespace}/{name}"),
                        )
                        .await;
                    Ok(())
                }
                Err(e) if is_status(&e, 409) => Ok(()),
                Err(e) => Err((
                    "FailedToCreateService",
                    api_error(format!("create Service {name}"))(e),
                )),
            }
        }
        ClusterAction::CreatePodGroup(pg) => {
            let name = pg.name_any();
            let api: Api<PodGroup> = Api::namespaced(client, namespace);
            match api.create(&post, &pg).await {
                Ok(_) => {
                    tracing::info!(pod_group = %name, min_member = ?pg.spec.min_member, "created PodGroup");
                    Ok(())
                }
                Err(e) if is_status(&e, 409) => Ok(()),
                Err(e) => Err((
                    "FailedToCreatePodGroup",
                    api_error(format!("create PodGroup {name}"))(e),
                )),
            }
        }
        ClusterAction::ResizePodGroup {
            name,
            min_member,
            min_resources,
        } => {
            let api: Api<PodGroup> = Api::namespaced(client, namespace);
            // Only minMember and minResources: queue, priority and status stay as they are.
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
            api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .map_err(|e| {
                    (
                        "FailedToUpdatePodGroup",
                        api_error(format!("resize PodGroup {name}"))(e),
                    )
                })?;
            tracing::info!(pod_group = %name, min_member, "resized PodGroup");
            Ok(())
        }
        ClusterAction::CreatePod(pod) => {
            let name = pod.name_any();
            let head = cluster_status::node_type(&pod) == Some(cluster::HEAD_NODE_TYPE);
            let object = raw.map_or_else(
                || serde_json::to_value(&*pod),
                |raw| Ok(cluster::pod_object(raw, cluster, &pod)),
            );
            let object: DynamicObject = match object.and_then(serde_json::from_value) {
                Ok(object) => object,
                Err(e) => {
                    return Err((
                        if head {
                            "FailedCreateHeadPod"
                        } else {
                            "FailedCreateWorkerPod"
                        },
                        Error::Build {
                            what: format!("Pod {name}"),
                            reason: e.to_string(),
                        },
                    ));
                }
            };
            let api: Api<DynamicObject> =
                Api::namespaced_with(client, namespace, &ApiResource::erase::<Pod>(&()));
            match api.create(&post, &object).await {
                Ok(_) => {
                    tracing::info!(pod = %name, "created Pod");
                    let reason = if head {
                        "CreatedHeadPod"
                    } else {
                        "CreatedWorkerPod"
                    };
                    shared
                        .event(
                            cluster,
                            EventType::Normal,
                            reason,
                            &format!("Created Pod {namespace}/{name}"),
                        )
                        .await;
                    Ok(())
                }
                Err(e) if is_status(&e, 409) => Ok(()),
                Err(e) => {
                    let reason = if head {
                        "FailedCreateHeadPod"
                    } else {
                        "FailedCreateWorkerPod"
                    };
                    Err((reason, api_error(format!("create Pod {name}"))(e)))
                }
            }
        }
        ClusterAction::DeletePod { name, uid, reason } => {
            let api: Api<Pod> = Api::namespaced(client, namespace);
            let params = DeleteParams {
                preconditions: uid.map(|uid| Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => {
                    tracing::info!(pod = %name, %reason, "deleted Pod");
                    shared
                        .event(
                            cluster,
                            EventType::Normal,
                            "DeletedPod",
                            &format!("Deleted Pod {namespace}/{name}: {reason}"),
                        )
                        .await;
                    Ok(())
                }
                // Gone already, or a same-named successor (its UID differs): nothing to do.
                Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(()),
                Err(e) => Err((
                    "FailedDeleteWorkerPod",
                    api_error(format!("delete Pod {name}"))(e),
                )),
            }
        }
    }
}

impl Shared {
    /// Publishes an Event on the cluster; a failure to publish is logged, never fatal.
    async fn event(&self, cluster: &RayCluster, type_: EventType, reason: &str, note: &str) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note.chars().take(1000).collect()),
            action: "Reconcile".to_string(),
            secondary: None,
        };
        if let Err(e) = self
            .recorder
            .publish(&event, &cluster.object_ref(&()))
            .await
        {
            tracing::debug!(error = %e, reason, "publishing an event failed");
        }
    }
}
