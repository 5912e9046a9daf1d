//! One reconcile of a RayCluster as a pure function: what exists → actions and status
//! (docs/upstream.md, "KubeRay: RayCluster controller" and "KubeRay: Volcano adapter").
//!
//! The order of the actions is the order they must run in: the head Service, the PodGroup
//! (before any Pod, so Volcano never sees a Pod of a gang it does not know), Pod deletions,
//! then Pod creations. Every action is idempotent by name, so a reconcile that stops at a
//! failure is simply recomputed and continued by the next one.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;

use super::build::{self, BuildOptions, PodRole};
use super::status::{self, StatusInput, is_terminating, node_type, phase};
use super::upgrade::{self, Upgrade};
use super::{auth, autoscaler, ingress};
use crate::decision::{self, Decision, EventNote, PodGroupSize, STEADY_REQUEUE};
use crate::feasibility::{self, NodeKinds, RayObject};
use crate::keys::{self, HEAD_NODE_TYPE, WORKER_NODE_TYPE};
use crate::onboarding::{self, GangMembership, Labels, RayPodRole};
use crate::pending::{self, GangPods, GangState};
use crate::ray::v1::{RayCluster, RayClusterStatus, WorkerGroupSpec};
use crate::sizing::{self, SizingError};
use crate::validation::{self, ValidationContext};
use crate::volcano::{PodGroup, Queue};

/// What exists for one RayCluster.
pub struct Snapshot<'a> {
    /// Pods labelled `ray.io/cluster=<name>` in the cluster's namespace (terminating ones too).
    pub pods: &'a [Pod],
    /// The head Service, when it exists.
    pub head_service: Option<&'a Service>,
    /// The headless worker Service `<cluster>-headless`, when it exists (read for clusters
    /// with a multi-host group).
    pub worker_service: Option<&'a Service>,
    /// The cluster's own PodGroup `ray-<cluster>-pg`, when it exists.
    pub pod_group: Option<&'a PodGroup>,
    /// The PodGroup's Volcano queue, if it exists (read when the PodGroup is).
    pub queue: Option<&'a Queue>,
    /// The shape of every Node the reconciler knows (empty before its Node watch has listed):
    /// whether they could ever hold the cluster's own gang ([`crate::feasibility`]).
    pub nodes: &'a NodeKinds,
    /// Whether the namespace is opted into Volcano (`raygate.io/scheduler=volcano`).
    pub volcano: bool,
    /// Whether the PodGroup CRD has `spec.subGroupPolicy` (Volcano v1.14); without it the
    /// PodGroup holds only `minMember` and `minResources` (see `crate::sizing`).
    pub sub_groups: bool,
    /// The current time (status timestamps).
    pub now: &'a Time,
    /// A write of this pass that failed: the decision is then only the status that says so.
    pub failed_write: Option<FailedWrite<'a>>,
}

/// A write the API server refused: its [`decision::Action::failure_reason`] and the error.
#[derive(Clone, Copy, Debug)]
pub struct FailedWrite<'a> {
    /// KubeRay's reason, e.g. `FailedCreateWorkerPod`.
    pub reason: &'a str,
    /// The error, as reported.
    pub message: &'a str,
}

/// One write to the API server, or an Event about the cluster.
#[derive(Clone, Debug)]
pub enum Action {
    /// Create the head Service (AlreadyExists is success).
    CreateService(Box<Service>),
    /// Create the cluster's PodGroup (AlreadyExists is success).
    CreatePodGroup(Box<PodGroup>),
    /// Set `spec.minMember` and `spec.minResources` of the PodGroup, nothing else (NotFound is
    /// success: its deletion wakes the next reconcile, which creates it again).
    ResizePodGroup(PodGroupSize),
    /// Delete a Pod (NotFound is success), guarded by its UID.
    DeletePod {
        /// Pod name.
        name: String,
        /// Pod UID, a delete precondition so a same-named successor is never removed.
        uid: Option<String>,
        /// Why, for logs and events.
        reason: String,
    },
    /// Create the cluster's token Secret, with a token the performer generates: it never
    /// passes through a decision (AlreadyExists is success: the token in use stays).
    CreateAuthSecret {
        /// Secret name ([`super::auth::created_secret_name`]).
        name: String,
    },
    /// Create the head Ingress (AlreadyExists is success).
    CreateIngress(Box<Ingress>),
    /// Create the head's ServiceAccount for the autoscaler (AlreadyExists is success).
    CreateServiceAccount(Box<ServiceAccount>),
    /// Create the autoscaler's Role (AlreadyExists is success).
    CreateRole(Box<Role>),
    /// Create the autoscaler's RoleBinding (AlreadyExists is success).
    CreateRoleBinding(Box<RoleBinding>),
    /// Create a Pod (AlreadyExists is success: a stale view asked for a name that exists).
    CreatePod(Box<Pod>),
    /// Add these labels to a running Pod (NotFound is success), guarded by its UID: a
    /// multi-host Pod made before raygate named replicas joins one without a restart.
    LabelPod {
        /// Pod name.
        name: String,
        /// Pod UID, a precondition so a same-named successor is never relabelled.
        uid: Option<String>,
        /// The labels to add (no other label changes).
        labels: BTreeMap<String, String>,
    },
    /// Replace the head Pod's Recreate stamp with these annotations (NotFound is success),
    /// guarded by its UID: a head made by another operator or version is stamped with this
    /// version's hash of the current spec instead of being recreated ([`upgrade::Upgrade`]).
    AnnotatePod {
        /// Pod name.
        name: String,
        /// Pod UID, a precondition so a same-named successor is never annotated.
        uid: Option<String>,
        /// The annotations to set (no other annotation changes).
        annotations: BTreeMap<String, String>,
    },
    /// Merge-patch the status subresource with this status (written only when it changed).
    UpdateStatus(Box<RayClusterStatus>),
    /// Record an Event on the cluster.
    Event(EventNote),
}

impl decision::Action for Action {
    fn failure_reason(&self) -> Option<&'static str> {
        Some(match self {
            Action::CreateService(_) => "FailedToCreateService",
            Action::CreatePodGroup(_) => "FailedToCreatePodGroup",
            Action::ResizePodGroup(_) => "FailedToUpdatePodGroup",
            Action::CreateAuthSecret { .. } => "FailedToCreateSecret",
            Action::CreateIngress(_) => "FailedToCreateIngress",
            Action::CreateServiceAccount(_) => "FailedToCreateServiceAccount",
            Action::CreateRole(_) => "FailedToCreateRole",
            Action::CreateRoleBinding(_) => "FailedToCreateRoleBinding",
            Action::DeletePod { .. } => "FailedDeleteWorkerPod",
            Action::CreatePod(pod) if is_head(pod) => "FailedCreateHeadPod",
            Action::CreatePod(_) => "FailedCreateWorkerPod",
            Action::LabelPod { .. } => "FailedToLabelWorkerPod",
            Action::AnnotatePod { .. } => "FailedToAnnotateHeadPod",
            Action::UpdateStatus(_) | Action::Event(_) => return None,
        })
    }

    fn event(&self) -> Option<&EventNote> {
        match self {
            Action::Event(note) => Some(note),
            _ => None,
        }
    }
}

fn is_head(pod: &Pod) -> bool {
    node_type(pod) == Some(HEAD_NODE_TYPE)
}

/// Decides one reconcile of `cluster`: the writes, each followed by the Event it earns, then
/// the status when it changed.
pub fn decide(
    cluster: &RayCluster,
    observed: &Snapshot<'_>,
    validation: &ValidationContext,
    options: &BuildOptions,
) -> Decision<Action> {
    let mut actions = Vec::new();
    let mut warnings = Vec::new();
    let failure = failure(cluster, validation);
    if failure.is_none() {
        if observed.head_service.is_none() {
            actions.push(Action::CreateService(Box::new(build::build_head_service(
                cluster, options,
            ))));
        }
        if observed.worker_service.is_none() && build::has_multi_host_group(cluster) {
            actions.push(Action::CreateService(Box::new(
                build::build_headless_worker_service(cluster),
            )));
        }
        let sizing_failure = if observed.volcano {
            pod_group_actions(cluster, observed, &mut actions).err()
        } else {
            None
        };
        if let Some(message) = sizing_failure {
            return finish(cluster, observed, actions, warnings, Some(message));
        }
        pod_actions(cluster, observed, options, &mut actions, &mut warnings);
    }
    finish(cluster, observed, actions, warnings, failure)
}

fn finish(
    cluster: &RayCluster,
    observed: &Snapshot<'_>,
    writes: Vec<Action>,
    warnings: Vec<String>,
    failure: Option<String>,
) -> Decision<Action> {
    let mut status = status::compute(
        cluster,
        &StatusInput {
            pods: observed.pods,
            head_service: observed.head_service,
            failure,
            now: observed.now,
        },
    );
    let before = cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let gang = gang_state(cluster, observed);
    status.conditions = Some(pending::with_gang_condition(
        status.conditions.as_deref().unwrap_or_default(),
        &gang,
        observed.now,
    ));
    let mut actions = Vec::new();
    if let Some(failed) = observed.failed_write {
        status = status::with_replica_failure(status, failed.reason, failed.message, observed.now);
    } else {
        let namespace = cluster.metadata.namespace.as_deref().unwrap_or_default();
        actions.extend(
            warnings
                .into_iter()
                .map(|w| Action::Event(EventNote::warning("PodOnboarding", w))),
        );
        for write in writes {
            let earned = earned_event(namespace, &write);
            actions.push(write);
            actions.extend(earned.map(Action::Event));
        }
        actions.extend(
            pending::pending_event(&before, status.conditions.as_deref().unwrap_or_default())
                .map(Action::Event),
        );
        if let Some(reason) = &status.reason
            && status::changed(cluster, &status)
        {
            actions.push(Action::Event(EventNote::warning(
                "InvalidSpec",
                reason.clone(),
            )));
        }
    }
    // A cluster's first status is written by the pass that sees its Pods, not by the one that
    // creates them: their watch events start that pass at once, and a status computed before
    // they exist would be replaced within milliseconds (one write fewer per cluster,
    // docs/reconciler.md, "The requests of one RayJob"). Failures are written at once.
    let first_pods_in_flight = cluster.status.is_none()
        && status.reason.is_none()
        && observed.failed_write.is_none()
        && actions.iter().any(|a| matches!(a, Action::CreatePod(_)));
    let mut requeue_after = STEADY_REQUEUE;
    if !first_pods_in_flight && status::changed(cluster, &status) {
        match held_back_until(cluster, &status, observed.now) {
            Some(due) => {
                requeue_after =
                    requeue_after.min(decision::until_after(due, observed.now.0.as_second()));
            }
            None => actions.push(Action::UpdateStatus(Box::new(status::finish(
                status,
                observed.now,
            )))),
        }
    }
    Decision {
        actions,
        requeue_after: Some(requeue_after),
    }
}

/// The status that makes `cluster` ready, when the cluster's own next pass over what is
/// `observed` writes it: [`ready_may_be_due`] holds for its Pods and the full decision writes
/// `ready`. `None` otherwise.
///
/// A RayJob waiting for its cluster acts on this instead of waiting for the cluster's write to
/// come back through the watch: both passes see the same Pods, so the RayJob's `Waiting` (or its
/// submitter) follows a Pod becoming Ready by one write, not two in a row, and the status it
/// mirrors is the one the cluster's pass writes (docs/reconciler.md, "Event-driven progress").
pub fn ready_status_due(
    cluster: &RayCluster,
    observed: &Snapshot<'_>,
    validation: &ValidationContext,
    options: &BuildOptions,
) -> Option<RayClusterStatus> {
    if !ready_may_be_due(cluster, observed.pods) {
        return None;
    }
    decide(cluster, observed, validation, options)
        .actions
        .into_iter()
        .find_map(|action| match action {
            Action::UpdateStatus(status)
                if status.state.as_deref() == Some(status::STATE_READY) =>
            {
                Some(*status)
            }
            _ => None,
        })
}

/// Whether the cluster's own next pass may write `ready` for `cluster`, whose controlled Pods
/// are `pods`: the stored status does not say `ready` yet, no other controller manages the
/// cluster (`spec.managedBy`), and it has Pods that are not terminating, every one of them
/// Running and Ready. Cheap: a RayJob pass asks it on every Pod event of its cluster before it
/// gathers the rest of what [`ready_status_due`] decides on.
pub fn ready_may_be_due<'a>(cluster: &RayCluster, pods: impl IntoIterator<Item = &'a Pod>) -> bool {
    let stored_state = cluster.status.as_ref().and_then(|s| s.state.as_deref());
    if stored_state == Some(status::STATE_READY)
        || keys::managed_elsewhere(cluster.spec.managed_by.as_deref())
    {
        return false;
    }
    let mut active = pods
        .into_iter()
        .filter(|pod| !is_terminating(pod))
        .peekable();
    active.peek().is_some() && active.all(status::is_running_and_ready_as_ray_node)
}

/// Seconds a status change of a cluster on its way up may wait, so that the counts and
/// conditions of Pods starting within a second of each other cost one write, not one each.
pub const PROGRESS_INTERVAL_SECONDS: i64 = 2;

/// When (epoch seconds) a change of the status of a cluster that is coming up is written, if
/// not now: while the cluster's `state` stays the same and is not `ready`, a change that says
/// nothing new about failure or the gang (no `reason`, no `ReplicaFailure`, the same
/// `GangPending` condition) waits until the stored status (or, before the first, the cluster)
/// is [`PROGRESS_INTERVAL_SECONDS`] old. A new state (`ready` among them), a failure and a
/// gang's cause are written at once, as is every change of a ready cluster; a later pass
/// carries the newest status (docs/reconciler.md, "The requests of one RayJob").
fn held_back_until(cluster: &RayCluster, status: &RayClusterStatus, now: &Time) -> Option<i64> {
    let old = cluster.status.as_ref();
    let old_state = old.and_then(|s| s.state.as_deref());
    let gang_condition = |s: Option<&RayClusterStatus>| {
        s.and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                c.iter()
                    .find(|c| c.type_ == pending::CONDITION_GANG_PENDING)
            })
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    let progress_only = old_state != Some(status::STATE_READY)
        && old_state == status.state.as_deref()
        && status.reason.is_none()
        && status::replica_failure(Some(status)).is_none()
        && gang_condition(old) == gang_condition(Some(status));
    if !progress_only {
        return None;
    }
    let since = old
        .and_then(|s| s.last_update_time.as_ref())
        .or(cluster.metadata.creation_timestamp.as_ref())?;
    let due = since.0.as_second() + PROGRESS_INTERVAL_SECONDS;
    (now.0.as_second() < due).then_some(due)
}

/// Where the cluster's own gang stands (docs/reconciler.md, "Why a gang is pending"): released
/// while suspended, else what its PodGroup, queue and Pods say; undetermined without a PodGroup
/// of its own (a RayJob's cluster: the RayJob carries the condition).
fn gang_state(cluster: &RayCluster, observed: &Snapshot<'_>) -> GangState {
    if cluster.spec.suspend == Some(true) {
        return pending::released("RayCluster is suspended");
    }
    match observed.pod_group.filter(|_| observed.volcano) {
        Some(pod_group) => {
            let name = pod_group.metadata.name.as_deref().unwrap_or_default();
            // This pass's failed write, else the one the status still reports.
            let failure = observed
                .failed_write
                .map(|f| f.message)
                .or_else(|| status::replica_failure(cluster.status.as_ref()));
            let infeasible = if pending::waits_on_queue(pod_group) {
                feasibility::infeasibilities(RayObject::RayCluster(cluster), observed.nodes)
            } else {
                Vec::new()
            };
            pending::gang_state(
                pod_group,
                observed.queue,
                GangPods::of(observed.pods, name),
                failure,
                &infeasible,
            )
        }
        None => GangState::Undetermined,
    }
}

/// The Normal Event a successful write records, as KubeRay records it.
fn earned_event(namespace: &str, write: &Action) -> Option<EventNote> {
    let name = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.name.clone().unwrap_or_default()
    };
    match write {
        Action::CreateService(service) => Some(EventNote::normal(
            "CreatedService",
            format!("Created service {namespace}/{}", name(&service.metadata)),
        )),
        Action::CreateIngress(ingress) => Some(EventNote::normal(
            "CreatedIngress",
            format!("Created ingress {namespace}/{}", name(&ingress.metadata)),
        )),
        Action::CreateServiceAccount(account) => Some(EventNote::normal(
            "CreatedServiceAccount",
            format!(
                "Created service account {namespace}/{}",
                name(&account.metadata)
            ),
        )),
        Action::CreateRole(role) => Some(EventNote::normal(
            "CreatedRole",
            format!("Created role {namespace}/{}", name(&role.metadata)),
        )),
        Action::CreateRoleBinding(binding) => Some(EventNote::normal(
            "CreatedRoleBinding",
            format!(
                "Created role binding {namespace}/{}",
                name(&binding.metadata)
            ),
        )),
        Action::CreatePod(pod) => Some(EventNote::normal(
            if is_head(pod) {
                "CreatedHeadPod"
            } else {
                "CreatedWorkerPod"
            },
            format!("Created Pod {namespace}/{}", name(&pod.metadata)),
        )),
        Action::DeletePod { name, reason, .. } => Some(EventNote::normal(
            "DeletedPod",
            format!("Deleted Pod {namespace}/{name}: {reason}"),
        )),
        Action::LabelPod { name, labels, .. } => Some(EventNote::normal(
            "LabelledWorkerPod",
            format!(
                "Labelled Pod {namespace}/{name} into replica {} of its multi-host worker group (made before raygate named replicas; not restarted)",
                labels
                    .get(keys::REPLICA_NAME_LABEL)
                    .map(String::as_str)
                    .unwrap_or_default()
            ),
        )),
        _ => None,
    }
}

/// Validation errors that stop the cluster, joined kubectl-style.
fn failure(cluster: &RayCluster, validation: &ValidationContext) -> Option<String> {
    let errors =
        crate::finding::error_messages(&validation::validate_ray_cluster(cluster, validation));
    (!errors.is_empty()).then(|| format!("invalid RayCluster: {}", errors.join("; ")))
}

/// Creates or resizes the PodGroup of a standalone cluster; a cluster created by a RayJob has
/// none of its own. A suspended cluster's group is zeroed so it holds no queue capacity.
fn pod_group_actions(
    cluster: &RayCluster,
    observed: &Snapshot<'_>,
    actions: &mut Vec<Action>,
) -> Result<(), String> {
    let existing = observed.pod_group;
    let wanted = match sizing::ray_cluster_pod_group(cluster) {
        Ok(pg) => pg,
        Err(SizingError::OwnedByRayJob { .. }) => return Ok(()),
        Err(e) => return Err(e.to_string()),
    };
    let (min_member, min_resources, sub_groups) = if cluster.spec.suspend == Some(true) {
        (0, BTreeMap::new(), Vec::new())
    } else {
        (
            wanted.spec.min_member.unwrap_or(0),
            wanted.spec.min_resources.clone().unwrap_or_default(),
            wanted.spec.sub_group_policy.clone().unwrap_or_default(),
        )
    };
    let sub_groups = observed.sub_groups.then_some(sub_groups);
    match existing {
        None => {
            let mut pg = wanted;
            pg.spec.min_member = Some(min_member);
            pg.spec.min_resources = Some(min_resources);
            pg.spec.sub_group_policy = sub_groups.filter(|s| !s.is_empty());
            actions.push(Action::CreatePodGroup(Box::new(pg)));
        }
        Some(pg) => {
            if !sizing::pod_group_holds_gang(
                &pg.spec,
                min_member,
                &min_resources,
                sub_groups.as_deref(),
            ) {
                actions.push(Action::ResizePodGroup(PodGroupSize {
                    name: wanted.metadata.name.clone().unwrap_or_default(),
                    min_member,
                    min_resources,
                    sub_group_policy: sub_groups,
                }));
            }
        }
    }
    Ok(())
}

fn is_unhealthy(pod: &Pod) -> bool {
    matches!(phase(pod), "Failed" | "Succeeded")
}

fn delete(pod: &Pod, reason: &str) -> Action {
    Action::DeletePod {
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone(),
        reason: reason.to_string(),
    }
}

/// The newest head Pod that is not terminating: the one a Recreate upgrade reads the stamp of.
fn newest_live_head(pods: &[Pod]) -> Option<&Pod> {
    let mut heads: Vec<&Pod> = pods
        .iter()
        .filter(|p| is_head(p) && !is_terminating(p))
        .collect();
    newest_first(&mut heads);
    heads.first().copied()
}

fn pod_actions(
    cluster: &RayCluster,
    observed: &Snapshot<'_>,
    options: &BuildOptions,
    actions: &mut Vec<Action>,
    warnings: &mut Vec<String>,
) {
    let pods = observed.pods;
    if cluster.spec.suspend == Some(true) {
        for pod in pods.iter().filter(|p| !is_terminating(p)) {
            actions.push(delete(pod, "the RayCluster is suspended"));
        }
        return;
    }
    let live_head = newest_live_head(pods);
    match upgrade::check(cluster, live_head) {
        Upgrade::Current => {}
        Upgrade::Restamp(annotations) => {
            if let Some(head) = live_head {
                actions.push(Action::AnnotatePod {
                    name: head.metadata.name.clone().unwrap_or_default(),
                    uid: head.metadata.uid.clone(),
                    annotations,
                });
            }
        }
        Upgrade::Recreate => {
            // Workers first and the head last: a pass that stops half-way leaves the head with
            // its old stamp, so the next pass decides the same and deletes the rest.
            let (heads, others): (Vec<&Pod>, Vec<&Pod>) = pods
                .iter()
                .filter(|p| !is_terminating(p))
                .partition(|p| is_head(p));
            for pod in others.into_iter().chain(heads) {
                actions.push(delete(
                    pod,
                    "the RayCluster spec changed and its upgradeStrategy is Recreate",
                ));
            }
            return;
        }
    }
    let taken: BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    let mut creates = Vec::new();

    // Head: exactly one healthy head; a terminating one is waited for, never doubled.
    let heads: Vec<&Pod> = pods
        .iter()
        .filter(|p| node_type(p) == Some(HEAD_NODE_TYPE))
        .collect();
    let mut healthy_heads: Vec<&Pod> = Vec::new();
    for pod in heads.iter().filter(|p| !is_terminating(p)) {
        if is_unhealthy(pod) {
            actions.push(delete(pod, &format!("the head Pod is {}", phase(pod))));
        } else {
            healthy_heads.push(pod);
        }
    }
    newest_first(&mut healthy_heads);
    for extra in healthy_heads
        .iter()
        .take(healthy_heads.len().saturating_sub(1))
    {
        actions.push(delete(extra, "more than one head Pod"));
    }
    if heads.is_empty() {
        // Made with every new head, as the access objects below: not watched.
        if ingress::enabled(cluster) {
            actions.push(Action::CreateIngress(Box::new(ingress::build(cluster))));
        }
        // The token every Pod reads, made before the first Pod that reads it.
        if let Some(name) = auth::created_secret_name(cluster) {
            actions.push(Action::CreateAuthSecret { name });
        }
        if cluster.spec.autoscaling() {
            // What the head's autoscaler acts with, made before the head that runs as it. Made
            // again with every new head, so a deleted one comes back then.
            if autoscaler::creates_service_account(cluster) {
                actions.push(Action::CreateServiceAccount(Box::new(
                    autoscaler::build_service_account(cluster),
                )));
            }
            actions.push(Action::CreateRole(Box::new(autoscaler::build_role(
                cluster,
            ))));
            actions.push(Action::CreateRoleBinding(Box::new(
                autoscaler::build_role_binding(cluster),
            )));
        }
        creates.push((PodRole::Head, None));
    }

    // Workers, group by group.
    let groups = cluster
        .spec
        .worker_group_specs
        .as_deref()
        .unwrap_or_default();
    let group_names: BTreeSet<&str> = groups.iter().map(|g| g.group_name.as_str()).collect();
    for pod in pods.iter().filter(|p| {
        !is_terminating(p)
            && node_type(p) == Some(WORKER_NODE_TYPE)
            && !status::group(p).is_some_and(|g| group_names.contains(g))
    }) {
        actions.push(delete(pod, "its worker group is no longer in the spec"));
    }
    for group in groups {
        for replica in worker_group_actions(cluster, group, pods, actions) {
            creates.push((PodRole::Worker(group), replica));
        }
    }

    let mut names: BTreeSet<String> = taken.iter().map(|s| s.to_string()).collect();
    let mut slots: BTreeMap<&str, u32> = BTreeMap::new();
    for (role, replica) in creates {
        let group = match role {
            PodRole::Head => HEAD_NODE_TYPE,
            PodRole::Worker(g) => g.group_name.as_str(),
        };
        // A replica's host has a slot of its own, so a pass that asks again for a Pod it
        // already created (a stale view) asks for the same name.
        let mut own_slot = replica.as_ref().map(|r| r.slot);
        let slot = slots.entry(group).or_default();
        let slot = own_slot.as_mut().unwrap_or(slot);
        let name = loop {
            let candidate = build::pod_name(cluster, role, *slot);
            *slot += 1;
            if !names.contains(&candidate) {
                break candidate;
            }
        };
        names.insert(name.clone());
        let mut pod = build::build_pod(cluster, role, &name, options);
        if let Some(replica) = replica {
            replica.label(&mut pod);
        }
        let pod = if observed.volcano {
            onboard(cluster, pod, role, warnings)
        } else {
            pod
        };
        actions.push(Action::CreatePod(Box::new(pod)));
    }
}

/// Where a new Pod of a multi-host group goes: its replica and its host in it, as KubeRay's
/// RayMultiHostIndexing labels them (`crate::keys::REPLICA_NAME_LABEL` and its siblings). The
/// Volcano sub-gangs of `crate::sizing` split the group by replica name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaSlot {
    /// `ray.io/worker-group-replica-name`: `<group>-<5 characters>`.
    pub name: String,
    /// `ray.io/worker-group-replica-index`.
    pub index: u32,
    /// `ray.io/replica-host-index`.
    pub host: u32,
    /// Where the Pod's name is looked for first: `index × numOfHosts + host`.
    pub slot: u32,
}

impl ReplicaSlot {
    /// The labels that put a Pod in this slot.
    fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (keys::REPLICA_NAME_LABEL.to_string(), self.name.clone()),
            (
                keys::REPLICA_INDEX_LABEL.to_string(),
                self.index.to_string(),
            ),
            (keys::HOST_INDEX_LABEL.to_string(), self.host.to_string()),
        ])
    }

    fn label(&self, pod: &mut Pod) {
        pod.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .extend(self.labels());
    }
}

/// The name of replica `index` of a multi-host group: `<group>-` and five characters derived
/// from the cluster UID, the group and the index, so a stale view that asks again for a
/// replica already created asks for the same name.
fn replica_name(cluster: &RayCluster, group: &str, index: u32) -> String {
    let uid = cluster.metadata.uid.as_deref().unwrap_or_default();
    let suffix = build::pod_name_suffix(uid, &format!("{group}/replica"), index);
    format!("{group}-{suffix}")
}

/// Deletions for one worker group; returns the Pods to create (a replica slot each in a
/// multi-host group, `None` in a single-host one).
fn worker_group_actions(
    cluster: &RayCluster,
    group: &WorkerGroupSpec,
    pods: &[Pod],
    actions: &mut Vec<Action>,
) -> Vec<Option<ReplicaSlot>> {
    let to_delete: BTreeSet<&str> = group
        .scale_strategy
        .as_ref()
        .and_then(|s| s.workers_to_delete.as_ref())
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let members: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            !is_terminating(p)
                && node_type(p) == Some(WORKER_NODE_TYPE)
                && status::group(p) == Some(group.group_name.as_str())
        })
        .collect();
    let replica_of = |pod: &Pod| -> Option<String> {
        keys::value_in(pod.metadata.labels.as_ref(), keys::REPLICA_NAME_LABEL).map(str::to_string)
    };
    // A multi-host replica goes whole: naming one of its hosts names all of them, as in KubeRay.
    let replicas_to_delete: BTreeSet<String> = members
        .iter()
        .filter(|p| to_delete.contains(p.metadata.name.as_deref().unwrap_or_default()))
        .filter_map(|p| replica_of(p))
        .collect();
    let mut remaining: Vec<&Pod> = Vec::new();
    let mut unhealthy = false;
    for pod in members {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        if is_unhealthy(pod) {
            unhealthy = true;
            actions.push(delete(pod, &format!("the worker Pod is {}", phase(pod))));
        } else if to_delete.contains(name)
            || replica_of(pod).is_some_and(|r| replicas_to_delete.contains(&r))
        {
            actions.push(delete(pod, "listed in scaleStrategy.workersToDelete"));
        } else {
            remaining.push(pod);
        }
    }
    let hosts = sizing::group_hosts(group);
    if hosts > 1 {
        return multi_host_actions(cluster, group, hosts, remaining, unhealthy, actions);
    }
    let desired = usize::try_from(status::desired_pods(group)).unwrap_or(usize::MAX);
    if remaining.len() > desired && cluster.spec.autoscaling() {
        // The autoscaler alone picks the workers to remove (`workersToDelete`), as in KubeRay.
        Vec::new()
    } else if remaining.len() > desired {
        // Scale down: Pods that are not running yet go first, then the newest.
        let (not_ready, ready): (Vec<&Pod>, Vec<&Pod>) = remaining
            .iter()
            .partition(|p| !status::is_running_and_ready(p));
        let mut ready = ready;
        newest_first(&mut ready);
        let order = not_ready.into_iter().chain(ready);
        for pod in order.take(remaining.len() - desired) {
            actions.push(delete(pod, "scaling down"));
        }
        Vec::new()
    } else if unhealthy {
        // As KubeRay: replace unhealthy Pods on the next pass, once their deletion is seen.
        Vec::new()
    } else {
        vec![None; desired - remaining.len()]
    }
}

/// A multi-host group (`numOfHosts > 1`) is kept in whole replicas, each Pod labelled with its
/// replica ([`ReplicaSlot`]), so that Volcano binds a replica whole or not at all:
///
/// * Pods without a replica name (made before raygate labelled replicas) are labelled into new
///   replicas where they run, `numOfHosts` at a time, oldest first, since Volcano counts a Pod
///   without one into no sub-group; deleting them would restart a running Ray cluster's
///   workers for a label;
/// * scaling down deletes whole replicas: incomplete ones first, then those with a Pod that is
///   not running and ready, then the newest;
/// * scaling up first gives incomplete replicas their missing hosts, then adds replicas at the
///   lowest free indices.
fn multi_host_actions(
    cluster: &RayCluster,
    group: &WorkerGroupSpec,
    hosts: i32,
    remaining: Vec<&Pod>,
    unhealthy: bool,
    actions: &mut Vec<Action>,
) -> Vec<Option<ReplicaSlot>> {
    let hosts = u32::try_from(hosts).unwrap_or(1);
    let (labelled, mut unlabelled): (Vec<&Pod>, Vec<&Pod>) =
        remaining.into_iter().partition(|pod| {
            keys::value_in(pod.metadata.labels.as_ref(), keys::REPLICA_NAME_LABEL).is_some()
        });
    let adopted = adopt_into_replicas(cluster, group, hosts, &labelled, &mut unlabelled, actions);
    let mut replicas: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    for pod in labelled.into_iter().chain(&adopted) {
        if let Some(replica) =
            keys::value_in(pod.metadata.labels.as_ref(), keys::REPLICA_NAME_LABEL)
        {
            replicas.entry(replica).or_default().push(pod);
        }
    }
    let desired = u32::try_from(status::desired_pods(group) / i64::from(hosts)).unwrap_or(u32::MAX);
    let count = u32::try_from(replicas.len()).unwrap_or(u32::MAX);
    if count > desired && cluster.spec.autoscaling() {
        return Vec::new();
    }
    if count > desired {
        let newest = |pods: &[&Pod]| {
            pods.iter()
                .map(|p| p.metadata.creation_timestamp.clone())
                .max()
        };
        let mut order: Vec<(&str, &Vec<&Pod>)> = replicas.iter().map(|(k, v)| (*k, v)).collect();
        order.sort_by(|(an, a), (bn, b)| {
            let key = |pods: &[&Pod]| {
                (
                    pods.len() >= hosts as usize,
                    pods.iter().all(|p| status::is_running_and_ready(p)),
                )
            };
            key(a)
                .cmp(&key(b))
                .then_with(|| newest(b).cmp(&newest(a)))
                .then_with(|| bn.cmp(an))
        });
        for (_, pods) in order.into_iter().take((count - desired) as usize) {
            for pod in pods {
                actions.push(delete(pod, "scaling down by whole replicas"));
            }
        }
        return Vec::new();
    }
    if unhealthy {
        return Vec::new();
    }
    let mut creates = Vec::new();
    let mut used: BTreeSet<u32> = BTreeSet::new();
    for (name, pods) in &replicas {
        let index = pods.iter().find_map(|p| {
            keys::value_in(p.metadata.labels.as_ref(), keys::REPLICA_INDEX_LABEL)?
                .parse::<u32>()
                .ok()
        });
        let Some(index) = index else { continue };
        used.insert(index);
        let present: BTreeSet<u32> = pods
            .iter()
            .filter_map(|p| {
                keys::value_in(p.metadata.labels.as_ref(), keys::HOST_INDEX_LABEL)?
                    .parse()
                    .ok()
            })
            .collect();
        let missing = (hosts as usize).saturating_sub(pods.len());
        creates.extend(
            (0..hosts)
                .filter(|h| !present.contains(h))
                .take(missing)
                .map(|host| {
                    Some(ReplicaSlot {
                        name: (*name).to_string(),
                        index,
                        host,
                        slot: index.saturating_mul(hosts).saturating_add(host),
                    })
                }),
        );
    }
    let mut index = 0;
    for _ in count..desired {
        while used.contains(&index) {
            index += 1;
        }
        used.insert(index);
        let name = replica_name(cluster, &group.group_name, index);
        creates.extend((0..hosts).map(|host| {
            Some(ReplicaSlot {
                name: name.clone(),
                index,
                host,
                slot: index.saturating_mul(hosts).saturating_add(host),
            })
        }));
    }
    creates
}

/// Labels `unlabelled` Pods of a multi-host group into new replicas at the lowest indices the
/// `labelled` ones leave free, `hosts` Pods each, oldest first (the last one may be incomplete
/// and gets its missing hosts like any other). Returns the Pods as labelled, for the rest of the
/// pass to count.
fn adopt_into_replicas(
    cluster: &RayCluster,
    group: &WorkerGroupSpec,
    hosts: u32,
    labelled: &[&Pod],
    unlabelled: &mut [&Pod],
    actions: &mut Vec<Action>,
) -> Vec<Pod> {
    let mut used: BTreeSet<u32> = labelled
        .iter()
        .filter_map(|p| {
            keys::value_in(p.metadata.labels.as_ref(), keys::REPLICA_INDEX_LABEL)?
                .parse()
                .ok()
        })
        .collect();
    unlabelled.sort_by(|a, b| {
        let key = |p: &Pod| {
            (
                p.metadata.creation_timestamp.clone(),
                p.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    let mut adopted = Vec::with_capacity(unlabelled.len());
    let mut index = 0;
    for replica in unlabelled.chunks(hosts as usize) {
        while used.contains(&index) {
            index += 1;
        }
        used.insert(index);
        let name = replica_name(cluster, &group.group_name, index);
        for (host, pod) in (0..hosts).zip(replica) {
            let slot = ReplicaSlot {
                name: name.clone(),
                index,
                host,
                slot: index.saturating_mul(hosts).saturating_add(host),
            };
            actions.push(Action::LabelPod {
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone(),
                labels: slot.labels(),
            });
            let mut pod = (*pod).clone();
            slot.label(&mut pod);
            adopted.push(pod);
        }
    }
    adopted
}

fn newest_first(pods: &mut [&Pod]) {
    pods.sort_by(|a, b| {
        let key = |p: &Pod| {
            (
                p.metadata.creation_timestamp.clone(),
                p.metadata.name.clone(),
            )
        };
        key(b).cmp(&key(a))
    });
}

/// Adds the Volcano metadata with the function the webhook uses.
fn onboard(cluster: &RayCluster, pod: Pod, role: PodRole<'_>, warnings: &mut Vec<String>) -> Pod {
    let cluster_labels: Labels = cluster.meta().labels.clone().unwrap_or_default();
    let pod_labels: Labels = pod.metadata.labels.clone().unwrap_or_default();
    let Some(owner) = onboarding::gang_owner(&pod_labels, Some(&cluster_labels)) else {
        return pod;
    };
    let ray_role = match role {
        PodRole::Head => RayPodRole::Head,
        PodRole::Worker(group) => RayPodRole::Worker(group.group_name.clone()),
    };
    let membership = GangMembership::new(owner, &ray_role, &cluster_labels);
    let Ok(mut value) = serde_json::to_value(&pod) else {
        return pod;
    };
    let onboarding = onboarding::onboarding_patch(&value, &membership);
    warnings.extend(onboarding.warnings);
    if json_patch::patch(&mut value, &onboarding.patch).is_err() {
        return pod;
    }
    serde_json::from_value(value).unwrap_or(pod)
}

#[cfg(test)]
mod tests;
