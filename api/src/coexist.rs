//! Coexisting with a KubeRay operator: PodGroups for RayJobs and RayClusters that KubeRay runs.
//!
//! Teams that already run KubeRay opt namespaces into Volcano one at a time instead of
//! restarting KubeRay with `--batch-scheduler=volcano` (which switches every namespace at once).
//! In a namespace whose Ray objects KubeRay runs ([`namespace_reconciler`] says
//! [`ReconcilerKind::Kuberay`]) and that is opted into Volcano, raygate's webhook gives
//! KubeRay's Pods their Volcano metadata and raygate's reconciler only keeps the PodGroup those
//! Pods point to. [`decide`] is that reconciler's whole judgement:
//!
//! * same name, owner and sizing as raygate's own mode (`crate::sizing`): `ray-<owner>-pg`,
//!   `minMember` = head + workers, `minResources` = head + workers + submitter;
//! * kept in sync with the spec while the RayJob runs and with a standalone cluster's spec;
//! * recomputed from the live cluster when a RayJob finishes or retries (KubeRay v1.7,
//!   docs/upstream.md, "KubeRay: Volcano adapter"), zeroed when its cluster is gone, when it or a
//!   standalone cluster is suspended (docs/upstream.md, "KubeRay: known defects", 9) or being
//!   deleted;
//! * per-group sub-gangs as in raygate's own mode, except that a multi-host group whose Pods
//!   KubeRay made without replica names is one sub-group of the whole group;
//! * never anything but PodGroups: RayClusters, Pods and Jobs stay KubeRay's;
//! * a PodGroup or cluster that shows KubeRay's own Volcano adapter at work is left alone
//!   ([`Change::KubeRayGangScheduled`]), so two writers never fight over one gang.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::decision::{self, Decision, EventNote, PodGroupSize, STEADY_REQUEUE};
use crate::keys;
use crate::lifecycle::DeploymentStatus;
use crate::onboarding::{self, Labels};
use crate::ray::v1::{RayCluster, RayJob};
use crate::sizing::{self, GangSize, SizingError};
use crate::validation::ReconcilerKind;
use crate::volcano::{PodGroup, SubGroupPolicySpec};

/// Value of [`keys::RECONCILER_LABEL`] handing a namespace to raygate's reconciler.
pub const RECONCILER_RAYGATE: &str = "raygate";
/// Value of [`keys::RECONCILER_LABEL`] handing a namespace to a KubeRay operator.
pub const RECONCILER_KUBERAY: &str = "kuberay";

/// Event reason when KubeRay's own Volcano adapter is found at work on an object.
pub const REASON_KUBERAY_GANG: &str = "KubeRayBatchSchedulerDetected";
/// Event reason when an object gets no PodGroup (e.g. a RayJob on an existing cluster).
pub const REASON_SKIPPED: &str = "GangSchedulingSkipped";

/// Which controller runs the Ray objects of a namespace with these labels: the
/// [`keys::RECONCILER_LABEL`] value, else `default` (the reconciler's `--reconciler`).
///
/// `Err` carries an unknown label value; the namespace is then left alone by every mode, since
/// guessing could put two controllers on one object.
pub fn namespace_reconciler(
    namespace_labels: Option<&Labels>,
    default: ReconcilerKind,
) -> Result<ReconcilerKind, String> {
    match namespace_labels.and_then(|l| l.get(keys::RECONCILER_LABEL)) {
        None => Ok(default),
        Some(v) if v == RECONCILER_RAYGATE => Ok(ReconcilerKind::Raygate),
        Some(v) if v == RECONCILER_KUBERAY => Ok(ReconcilerKind::Kuberay),
        Some(other) => Err(format!(
            "namespace label {}={other:?}: expected {RECONCILER_RAYGATE:?} or {RECONCILER_KUBERAY:?}",
            keys::RECONCILER_LABEL
        )),
    }
}

/// The object a PodGroup-only reconcile is about.
#[derive(Clone, Copy, Debug)]
pub enum Owner<'a> {
    /// A RayJob run by KubeRay.
    RayJob(&'a RayJob),
    /// A RayCluster run by KubeRay (one created by a RayJob joins the RayJob's gang).
    RayCluster(&'a RayCluster),
}

/// What a PodGroup-only reconcile observed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Snapshot<'a> {
    /// The PodGroup `ray-<owner>-pg`, if it exists.
    pub pod_group: Option<&'a PodGroup>,
    /// RayJobs: the cluster named in `status.rayClusterName`, if it exists (deleting or not).
    pub cluster: Option<&'a RayCluster>,
    /// Field manager of raygate's reconciler; a PodGroup spec written by any other manager
    /// (apart from Volcano's status writes) means another gang-scheduler sizes it.
    pub own_manager: &'a str,
    /// Whether the PodGroup CRD has `spec.subGroupPolicy` (Volcano v1.14); without it the
    /// PodGroup holds only `minMember` and `minResources` (see `crate::sizing`).
    pub sub_groups: bool,
    /// The Pods of the gang's cluster (labelled `ray.io/cluster=<cluster>`): a multi-host
    /// group whose worker Pods carry no replica name gets one sub-group for the whole group
    /// ([`sizing::whole_group_policy`]).
    pub pods: &'a [Pod],
}

/// What to do about the object's PodGroup.
#[derive(Clone, Debug)]
pub enum Change {
    /// The PodGroup is as it should be (or the object needs none).
    InSync,
    /// Create this PodGroup (AlreadyExists is success: the next reconcile compares).
    Create(Box<PodGroup>),
    /// Set `spec.minMember` and `spec.minResources` of the existing PodGroup, nothing else.
    Resize(PodGroupSize),
    /// KubeRay's own Volcano adapter gang-schedules the object: leave it alone and warn.
    KubeRayGangScheduled {
        /// Why raygate thinks so (Event note).
        message: String,
    },
    /// The object cannot get a PodGroup; warn once per reason, never retry on a timer.
    Skipped {
        /// Event note.
        message: String,
    },
}

/// One write of a PodGroup-only reconcile, or an Event about the owner.
#[derive(Clone, Debug)]
pub enum Action {
    /// Create the PodGroup (AlreadyExists is success: the next reconcile, woken by the
    /// PodGroup's watch event, judges whose it is).
    CreatePodGroup(Box<PodGroup>),
    /// Set `spec.minMember` and `spec.minResources` of the PodGroup (NotFound is success).
    ResizePodGroup(PodGroupSize),
    /// Record an Event on the owner.
    Event(EventNote),
}

impl decision::Action for Action {
    fn failure_reason(&self) -> Option<&'static str> {
        match self {
            Action::CreatePodGroup(_) => Some("FailedToCreatePodGroup"),
            Action::ResizePodGroup(_) => Some("FailedToUpdatePodGroup"),
            Action::Event(_) => None,
        }
    }

    fn event(&self) -> Option<&EventNote> {
        match self {
            Action::Event(note) => Some(note),
            _ => None,
        }
    }
}

/// The PodGroup-only reconcile of `owner`: [`change`] as writes, Events and a requeue.
pub fn decide(owner: Owner<'_>, observed: &Snapshot<'_>) -> Decision<Action> {
    let (actions, requeue_after) = match change(owner, observed) {
        Change::InSync => (Vec::new(), Some(STEADY_REQUEUE)),
        Change::Create(pg) => {
            let name = pg.metadata.name.clone().unwrap_or_default();
            let note = format!(
                "Created PodGroup {name} (minMember {})",
                pg.spec.min_member.unwrap_or(0)
            );
            (
                vec![
                    Action::CreatePodGroup(pg),
                    Action::Event(EventNote::normal("CreatedPodGroup", note)),
                ],
                Some(STEADY_REQUEUE),
            )
        }
        Change::Resize(size) => {
            let note = format!(
                "PodGroup {} resized to minMember {}",
                size.name, size.min_member
            );
            (
                vec![
                    Action::ResizePodGroup(size),
                    Action::Event(EventNote::normal("UpdatedPodGroup", note)),
                ],
                Some(STEADY_REQUEUE),
            )
        }
        // Neither changes until the object does: no timer.
        Change::KubeRayGangScheduled { message } => (
            vec![Action::Event(EventNote::warning(
                REASON_KUBERAY_GANG,
                message,
            ))],
            None,
        ),
        Change::Skipped { message } => (
            vec![Action::Event(EventNote::warning(REASON_SKIPPED, message))],
            None,
        ),
    };
    Decision {
        actions,
        requeue_after,
    }
}

/// What the object's PodGroup needs: the judgement behind [`decide`].
pub fn change(owner: Owner<'_>, observed: &Snapshot<'_>) -> Change {
    if let Some(message) = kuberay_gang_evidence(owner, observed) {
        return Change::KubeRayGangScheduled { message };
    }
    let wanted = match owner {
        Owner::RayJob(job) => ray_job_target(job, observed),
        Owner::RayCluster(cluster) => ray_cluster_target(cluster),
    };
    // Where the CRD has no subGroupPolicy the PodGroup gets none and it is never compared.
    let unindexed = unindexed_multi_host_groups(observed.pods);
    let sub_groups = |policies: Vec<SubGroupPolicySpec>| {
        observed
            .sub_groups
            .then(|| fit_to_pods(policies, &unindexed))
    };
    match wanted {
        Target::None => Change::InSync,
        Target::Skip(message) => Change::Skipped { message },
        Target::Zero => match observed.pod_group {
            Some(live) => resize(live, 0, BTreeMap::new(), sub_groups(Vec::new())),
            // Nothing holds resources; creating an empty gang would only add an object.
            None => Change::InSync,
        },
        Target::Settle(gang) => match observed.pod_group {
            Some(live) => {
                let policies = sub_groups(gang.sub_groups.clone());
                resize(live, gang.min_member, quantities(gang), policies)
            }
            None => Change::InSync,
        },
        Target::Desired(pg) => match observed.pod_group {
            None => {
                let mut pg = *pg;
                pg.metadata.labels.get_or_insert_with(BTreeMap::new).insert(
                    keys::MANAGED_BY_LABEL.to_string(),
                    keys::MANAGED_BY_RAYGATE.to_string(),
                );
                pg.spec.sub_group_policy = pg.spec.sub_group_policy.take().and_then(&sub_groups);
                Change::Create(Box::new(pg))
            }
            Some(live) => resize(
                live,
                pg.spec.min_member.unwrap_or(0),
                pg.spec.min_resources.unwrap_or_default(),
                sub_groups(pg.spec.sub_group_policy.unwrap_or_default()),
            ),
        },
    }
}

/// The worker groups with a Pod (not terminating) that carries no replica name. KubeRay names
/// multi-host replicas only with RayMultiHostIndexing (a feature gate before v1.7,
/// docs/reconciler.md, "Sub-gangs"); which of these groups are multi-host is the spec's to say,
/// so [`fit_to_pods`] changes only the policies that split a group by replica.
fn unindexed_multi_host_groups(pods: &[Pod]) -> BTreeSet<&str> {
    pods.iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter_map(|pod| {
            let labels = pod.metadata.labels.as_ref()?;
            let worker = labels.get(keys::RAY_NODE_TYPE_LABEL).map(String::as_str)
                == Some(keys::WORKER_NODE_TYPE);
            let indexed = labels
                .get(keys::REPLICA_NAME_LABEL)
                .is_some_and(|v| !v.is_empty());
            (worker && !indexed)
                .then(|| labels.get(keys::RAY_GROUP_LABEL).map(String::as_str))
                .flatten()
        })
        .collect()
}

/// `policies` with each replica-split policy of a group in `unindexed` turned into one
/// sub-group of the whole group, since Volcano would count none of its Pods into a replica.
fn fit_to_pods(
    policies: Vec<SubGroupPolicySpec>,
    unindexed: &BTreeSet<&str>,
) -> Vec<SubGroupPolicySpec> {
    policies
        .into_iter()
        .map(|policy| {
            if policy
                .name
                .as_deref()
                .is_some_and(|group| unindexed.contains(group))
            {
                sizing::whole_group_policy(policy)
            } else {
                policy
            }
        })
        .collect()
}

/// What the PodGroup should hold.
enum Target {
    /// No PodGroup of its own (a RayJob's cluster joins the RayJob's).
    None,
    /// No PodGroup can be made; the note says why.
    Skip(String),
    /// Exists with this size (created if missing).
    Desired(Box<PodGroup>),
    /// If it exists, holds what is actually left (a finished job's live cluster).
    Settle(GangSize),
    /// If it exists, holds nothing.
    Zero,
}

fn ray_job_target(job: &RayJob, observed: &Snapshot<'_>) -> Target {
    if job.metadata.deletion_timestamp.is_some() || job.spec.suspend == Some(true) {
        return Target::Zero;
    }
    if job.spec.ray_cluster_spec.is_none() {
        // docs/upstream.md, "KubeRay: known defects", 3: no error loop; KubeRay runs the job on the
        // user's cluster, whose own PodGroup (if it is a standalone cluster here) gang-schedules
        // it.
        return Target::Skip(format!(
            "RayJob runs on an existing RayCluster (spec.clusterSelector); it gets no PodGroup of its own ({})",
            key(&job.metadata)
        ));
    }
    let state = DeploymentStatus::parse(
        job.status
            .as_ref()
            .and_then(|s| s.job_deployment_status.as_deref()),
    );
    match state {
        // The cluster is being deleted for the suspension: nothing is left to hold.
        DeploymentStatus::Suspending | DeploymentStatus::Suspended => Target::Zero,
        // KubeRay v1.7's cleanup: what the live cluster still runs, or nothing once it is
        // gone (a finished K8sJobMode submitter is not counted).
        DeploymentStatus::Complete
        | DeploymentStatus::Failed
        | DeploymentStatus::ValidationFailed
        | DeploymentStatus::Retrying => match observed
            .cluster
            .filter(|c| c.metadata.deletion_timestamp.is_none() && c.spec.suspend != Some(true))
            .map(|c| sizing::cluster_gang(&c.spec, "spec"))
        {
            Some(Ok(gang)) => Target::Settle(gang),
            Some(Err(_)) | None => Target::Zero,
        },
        _ => match sizing::ray_job_pod_group(job) {
            Ok(pg) => Target::Desired(Box::new(pg)),
            Err(e) => Target::Skip(e.to_string()),
        },
    }
}

/// The RayJob whose gang a RayCluster's Pods join (its `RayJob` ownerReference or KubeRay's
/// originated-from labels); `None` for a standalone cluster, which has a PodGroup of its own.
pub fn cluster_ray_job(cluster: &RayCluster) -> Option<&str> {
    static NO_LABELS: Labels = Labels::new();
    onboarding::cluster_ray_job(
        cluster.metadata.labels.as_ref().unwrap_or(&NO_LABELS),
        cluster
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or_default(),
    )
}

fn ray_cluster_target(cluster: &RayCluster) -> Target {
    if cluster_ray_job(cluster).is_some() {
        return Target::None;
    }
    match sizing::ray_cluster_pod_group(cluster) {
        Err(SizingError::OwnedByRayJob { .. }) => Target::None,
        Err(e) => Target::Skip(e.to_string()),
        Ok(_) if cluster.metadata.deletion_timestamp.is_some() => Target::Zero,
        Ok(_) if cluster.spec.suspend == Some(true) => Target::Zero,
        Ok(pg) => Target::Desired(Box::new(pg)),
    }
}

fn resize(
    live: &PodGroup,
    min_member: i32,
    min_resources: BTreeMap<String, Quantity>,
    sub_groups: Option<Vec<SubGroupPolicySpec>>,
) -> Change {
    if !sizing::pod_group_holds_gang(
        &live.spec,
        min_member,
        &min_resources,
        sub_groups.as_deref(),
    ) {
        Change::Resize(PodGroupSize {
            name: live.metadata.name.clone().unwrap_or_default(),
            min_member,
            min_resources,
            sub_group_policy: sub_groups,
        })
    } else {
        Change::InSync
    }
}

fn quantities(gang: GangSize) -> BTreeMap<String, Quantity> {
    gang.min_resources
        .into_iter()
        .map(|(k, v)| (k, v.to_quantity()))
        .collect()
}

/// `<namespace>/<name>`, or the name alone when the namespace is empty (an offline manifest).
fn key(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// Signs that a KubeRay started with `--batch-scheduler=volcano` gang-schedules the object.
///
/// * The PodGroup `ray-<owner>-pg` exists without raygate's [`keys::MANAGED_BY_LABEL`]: KubeRay
///   (or someone else) created it.
/// * Another field manager than raygate's set its `spec.minMember` or `spec.minResources`:
///   KubeRay's adapter re-sizes a group it finds under its name. Volcano's own writes touch only
///   `status` (and drop empty fields, which claims nothing).
/// * A RayJob's cluster carries `scheduling.k8s.io/group-name`: KubeRay's adapter annotates the
///   RayCluster it creates in K8sJobMode; raygate's webhook annotates Pods, never clusters.
fn kuberay_gang_evidence(owner: Owner<'_>, observed: &Snapshot<'_>) -> Option<String> {
    if let Some(pg) = observed.pod_group {
        let name = pg.metadata.name.as_deref().unwrap_or_default();
        let ours = pg
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::MANAGED_BY_LABEL))
            .is_some_and(|v| v == keys::MANAGED_BY_RAYGATE);
        if !ours {
            return Some(format!(
                "PodGroup {name} was not created by raygate (no {}={} label): a KubeRay operator with --batch-scheduler=volcano gang-schedules this object; raygate leaves it alone. Run KubeRay without a batch scheduler to let raygate onboard this namespace.",
                keys::MANAGED_BY_LABEL,
                keys::MANAGED_BY_RAYGATE
            ));
        }
        if let Some(manager) = foreign_spec_manager(pg, observed.own_manager) {
            return Some(format!(
                "PodGroup {name}: spec.minMember/minResources written by field manager {manager:?}: a KubeRay operator with --batch-scheduler=volcano gang-schedules this object; raygate leaves it alone"
            ));
        }
    }
    if let (Owner::RayJob(_), Some(cluster)) = (owner, observed.cluster)
        && cluster
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(keys::POD_GROUP_ANNOTATION))
    {
        return Some(format!(
            "RayCluster {} carries {}: a KubeRay operator with --batch-scheduler=volcano gang-schedules this RayJob; raygate leaves it alone",
            key(&cluster.metadata),
            keys::POD_GROUP_ANNOTATION
        ));
    }
    None
}

/// The first field manager other than `own` owning `spec.minMember` or `spec.minResources`.
fn foreign_spec_manager<'a>(pg: &'a PodGroup, own: &str) -> Option<&'a str> {
    pg.metadata
        .managed_fields
        .iter()
        .flatten()
        .find_map(|entry| {
            let manager = entry.manager.as_deref().unwrap_or_default();
            if manager == own {
                return None;
            }
            let spec = entry.fields_v1.as_ref()?.0.get("f:spec")?;
            (spec.get("f:minMember").is_some() || spec.get("f:minResources").is_some())
                .then_some(manager)
        })
}

#[cfg(test)]
mod tests;
