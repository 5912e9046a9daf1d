//! PodGroup sizing: the gang that schedules a RayJob or a standalone RayCluster.
//!
//! Follows KubeRay v1.7's Volcano adapter (docs/upstream.md, "KubeRay: Volcano adapter") with two
//! deliberate fixes:
//!
//! * one replica count for both `minMember` and `minResources`: `replicas` clamped into
//!   `[minReplicas, maxReplicas]`, unset meaning `minReplicas` (KubeRay multiplies resources by the
//!   raw `replicas`, so an unset `replicas` counts Pods but no resources — docs/upstream.md,
//!   "KubeRay: known defects", 11);
//! * every per-replica quantity is multiplied by `numOfHosts` (defect 10).
//!
//! The submitter is never counted in `minMember` — it waits for the cluster, so counting it
//! would deadlock the gang (ray-project/kuberay#3972) — but its resources are in `minResources`
//! so that the queue reserves room for it.
//!
//! `minMember` counts Pods, not which Pods: Pods beyond a group's minimum (an autoscaled group
//! above `minReplicas`) can stand in for a group that cannot be placed at all
//! (ray-project/kuberay#4656). So the gang also carries one Volcano sub-group policy per worker
//! group that must have Pods ([`sub_group_policies`]): a single-host group is one sub-group of
//! its minimum Pod count, a multi-host group one sub-group per replica of `numOfHosts` Pods, at
//! least its minimum replica count of them. `minMember` and `minResources` are unchanged by it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use crate::keys;
use crate::quantity::{ParseQuantityError, ResourceQuantity};
use crate::ray::v1::{RayCluster, RayClusterSpec, RayJob, WorkerGroupSpec};
use crate::volcano::{
    NetworkTopologySpec, PodGroup, PodGroupSpec, PodGroupStatus, SubGroupPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// CPU request of KubeRay's default submitter container.
pub const DEFAULT_SUBMITTER_CPU: &str = "500m";
/// Memory request of KubeRay's default submitter container.
pub const DEFAULT_SUBMITTER_MEMORY: &str = "200Mi";

/// Resource name → total quantity.
pub type Resources = BTreeMap<String, ResourceQuantity>;

/// The size of a gang.
#[derive(Clone, Debug, PartialEq)]
pub struct GangSize {
    /// Pods that must be schedulable together: the head and the workers, never the submitter.
    pub min_member: i32,
    /// Resources the queue must reserve: head, workers and (for RayJobs) the submitter.
    pub min_resources: Resources,
    /// Which Pods must be among them: one sub-group policy per worker group with a minimum
    /// (see [`sub_group_policies`]).
    pub sub_groups: Vec<SubGroupPolicySpec>,
}

/// Why an object cannot be sized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizingError {
    /// A RayJob that runs on an existing cluster has no gang of its own.
    #[error(
        "gang scheduling does not support RayJob {0} referencing an existing RayCluster (spec.clusterSelector); remove the clusterSelector or run it outside a Volcano-enabled namespace"
    )]
    ClusterSelector(String),
    /// A RayCluster created by a RayJob is scheduled in its RayJob's gang.
    #[error("RayCluster {cluster} belongs to RayJob {job}; its Pods join the RayJob's PodGroup")]
    OwnedByRayJob {
        /// The cluster.
        cluster: String,
        /// The RayJob that created it.
        job: String,
    },
    /// A quantity in a Pod template is not a valid Kubernetes quantity.
    #[error("{field}: {source}")]
    Quantity {
        /// Where the quantity is.
        field: String,
        /// What is wrong with it.
        source: ParseQuantityError,
    },
    /// A label that must hold a number does not.
    #[error(
        "failed to convert {label} label to int: {value:?} is not an integer, for podgroup {pod_group}"
    )]
    TierLabel {
        /// The label.
        label: &'static str,
        /// Its value.
        value: String,
        /// The PodGroup being built.
        pod_group: String,
    },
}

/// Replicas a group must have, after clamping and suspension (without autoscaling
/// `clamp(replicas ?? min, min, max)`, with it `minReplicas`; 0 for a suspended group).
fn group_min_replicas(group: &WorkerGroupSpec, autoscaling: bool) -> i32 {
    if group.suspend == Some(true) {
        return 0;
    }
    let min = group.min_replicas.unwrap_or(0).max(0);
    let max = group.max_replicas.unwrap_or(i32::MAX).max(0);
    if autoscaling {
        min
    } else {
        group.replicas.unwrap_or(min).clamp(min.min(max), max)
    }
}

/// Hosts per replica of a group (`numOfHosts`, at least 1).
pub fn group_hosts(group: &WorkerGroupSpec) -> i32 {
    group.num_of_hosts.unwrap_or(1).max(1)
}

/// Pods per group, after clamping and suspension: replicas × `numOfHosts`.
pub(crate) fn worker_group_replicas(group: &WorkerGroupSpec, autoscaling: bool) -> i64 {
    i64::from(group_min_replicas(group, autoscaling)) * i64::from(group_hosts(group))
}

/// The sub-group policies of a RayCluster spec: one per worker group that must have Pods
/// (suspended groups and groups whose minimum is 0 get none), named after the group and
/// covering its worker Pods (`ray.io/node-type=worker`, `ray.io/group=<group>`):
///
/// * a single-host group is one sub-group (split by `ray.io/group`, which all its Pods share)
///   of its minimum Pod count, and it must be placeable (`minSubGroups: 1`);
/// * a multi-host group (`numOfHosts > 1`) is split by replica
///   ([`keys::REPLICA_NAME_LABEL`]) into sub-groups of `numOfHosts` Pods, and its minimum
///   replica count of them must be placeable. A replica binds whole or not at all, also one
///   above the minimum.
///
/// The minimum is the one `minMember` counts: `clamp(replicas ?? min, min, max)`, or
/// `minReplicas` with autoscaling.
pub fn sub_group_policies(spec: &RayClusterSpec) -> Vec<SubGroupPolicySpec> {
    let autoscaling = spec.autoscaling();
    spec.worker_group_specs
        .iter()
        .flatten()
        .filter_map(|group| {
            let replicas = group_min_replicas(group, autoscaling);
            if replicas <= 0 {
                return None;
            }
            let hosts = group_hosts(group);
            let (key, size, min) = if hosts > 1 {
                (keys::REPLICA_NAME_LABEL, hosts, replicas)
            } else {
                (keys::RAY_GROUP_LABEL, replicas, 1)
            };
            Some(SubGroupPolicySpec {
                name: Some(group.group_name.clone()),
                label_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([
                        (keys::RAY_GROUP_LABEL.to_string(), group.group_name.clone()),
                        (
                            keys::RAY_NODE_TYPE_LABEL.to_string(),
                            keys::WORKER_NODE_TYPE.to_string(),
                        ),
                    ])),
                    match_expressions: None,
                }),
                match_label_keys: Some(vec![key.to_string()]),
                sub_group_size: Some(size),
                min_sub_groups: Some(min),
                network_topology: None,
            })
        })
        .collect()
}

/// The policy of a multi-host group whose Pods carry no replica name (KubeRay before v1.7
/// without RayMultiHostIndexing): one sub-group of the whole group, split by `ray.io/group`
/// like a single-host group, of its minimum Pod count (`numOfHosts` × its minimum replicas).
///
/// Volcano puts a Pod without the split label in no sub-group, so the per-replica policy of
/// [`sub_group_policies`] would keep such a gang pending forever; this one still binds the
/// group's required Pods all together or not at all, only not replica by replica. Any other
/// policy is returned as it is.
pub fn whole_group_policy(policy: SubGroupPolicySpec) -> SubGroupPolicySpec {
    let by_replica = policy
        .match_label_keys
        .as_deref()
        .is_some_and(|k| k.iter().any(|k| k == keys::REPLICA_NAME_LABEL));
    if !by_replica {
        return policy;
    }
    let size = policy
        .sub_group_size
        .unwrap_or(1)
        .saturating_mul(policy.min_sub_groups.unwrap_or(0));
    SubGroupPolicySpec {
        match_label_keys: Some(vec![keys::RAY_GROUP_LABEL.to_string()]),
        sub_group_size: Some(size),
        min_sub_groups: Some(1),
        ..policy
    }
}

/// Requests of a Pod's regular containers, limits filling in names without a request.
///
/// Init containers and Pod overhead are ignored, as in KubeRay, so that a gang sized by raygate
/// matches one sized by KubeRay for the same spec.
pub fn pod_resources(spec: Option<&PodSpec>, field: &str) -> Result<Resources, SizingError> {
    pod_resources_at(spec, &|| field.to_string())
}

/// [`pod_resources`] with the field path of the Pod spec built only for an error (a gang is
/// sized for every checked object, and almost none has a bad quantity).
fn pod_resources_at(
    spec: Option<&PodSpec>,
    field: &dyn Fn() -> String,
) -> Result<Resources, SizingError> {
    let mut total = Resources::new();
    let Some(spec) = spec else {
        return Ok(total);
    };
    for (i, container) in spec.containers.iter().enumerate() {
        add_container(&mut total, container).map_err(|(kind, name, source)| {
            SizingError::Quantity {
                field: format!("{}.containers[{i}].resources.{kind}.{name}", field()),
                source,
            }
        })?;
    }
    Ok(total)
}

/// One container's requests, limits filling in names without a request (as the API server
/// defaults them); `None` when a quantity does not parse.
pub(crate) fn container_resources(container: &Container) -> Option<Resources> {
    let mut total = Resources::new();
    add_container(&mut total, container).ok()?;
    Some(total)
}

/// Adds one container's requests (limits filling in names without a request) to `total`; on a
/// bad quantity, where it is (`requests` or `limits`, the resource name) and why.
fn add_container(
    total: &mut Resources,
    container: &Container,
) -> Result<(), (&'static str, String, ParseQuantityError)> {
    let Some(resources) = container.resources.as_ref() else {
        return Ok(());
    };
    let empty = BTreeMap::new();
    // Both maps are sorted: walk them together, in name order, a request before a limit.
    let mut requests = resources
        .requests
        .as_ref()
        .unwrap_or(&empty)
        .iter()
        .peekable();
    let mut limits = resources
        .limits
        .as_ref()
        .unwrap_or(&empty)
        .iter()
        .peekable();
    loop {
        let take_request = match (requests.peek(), limits.peek()) {
            (None, None) => break,
            (Some((request, _)), Some((limit, _))) => request <= limit,
            (Some(_), None) => true,
            (None, Some(_)) => false,
        };
        let (kind, entry) = if take_request {
            let entry = requests.next();
            if let Some((request, _)) = entry
                && limits.peek().is_some_and(|(limit, _)| *limit == request)
            {
                limits.next();
            }
            ("requests", entry)
        } else {
            ("limits", limits.next())
        };
        let Some((name, quantity)) = entry else {
            break;
        };
        let value = ResourceQuantity::try_from(quantity).map_err(|e| (kind, name.clone(), e))?;
        add_quantity(total, name, value);
    }
    Ok(())
}

/// Adds `value` to the total of `name`, allocating the name only for a new entry.
pub(crate) fn add_quantity(total: &mut Resources, name: &str, value: ResourceQuantity) {
    match total.get_mut(name) {
        Some(sum) => *sum += value,
        None => {
            total.insert(name.to_string(), ResourceQuantity::ZERO + value);
        }
    }
}

fn add_into(total: &mut Resources, part: &Resources, times: i64) {
    if times == 0 {
        return;
    }
    for (name, quantity) in part {
        add_quantity(total, name, quantity.times(times));
    }
}

/// The gang of a RayCluster spec, without any submitter. `field` prefixes error paths.
pub fn cluster_gang(spec: &RayClusterSpec, field: &str) -> Result<GangSize, SizingError> {
    let autoscaling = spec.autoscaling();
    let mut min_member: i64 = 1;
    let mut min_resources = pod_resources_at(spec.head_group_spec.template.spec.as_ref(), &|| {
        format!("{field}.headGroupSpec.template.spec")
    })?;
    for (i, group) in spec.worker_group_specs.iter().flatten().enumerate() {
        let pods = worker_group_replicas(group, autoscaling);
        min_member = min_member.saturating_add(pods);
        let per_pod = pod_resources_at(group.template.spec.as_ref(), &|| {
            format!("{field}.workerGroupSpecs[{i}].template.spec")
        })?;
        add_into(&mut min_resources, &per_pod, pods);
    }
    Ok(GangSize {
        min_member: i32::try_from(min_member).unwrap_or(i32::MAX),
        min_resources,
        sub_groups: sub_group_policies(spec),
    })
}

/// Resources of the RayJob's submitter: its template in K8sJobMode, KubeRay's default
/// container (500m CPU, 200Mi memory) in K8sJobMode without a template and in SidecarMode, and
/// nothing in HTTPMode and InteractiveMode (no submitter Pod exists).
/// KubeRay's default is shared, not copied.
pub fn submitter_resources(job: &RayJob) -> Result<Cow<'static, Resources>, SizingError> {
    let mode = job.spec.submission_mode.as_deref().unwrap_or("K8sJobMode");
    match (mode, job.spec.submitter_pod_template.as_deref()) {
        ("K8sJobMode", Some(PodTemplateSpec { spec, .. })) => Ok(Cow::Owned(pod_resources(
            spec.as_ref(),
            "spec.submitterPodTemplate.spec",
        )?)),
        ("K8sJobMode" | "SidecarMode", _) => Ok(Cow::Borrowed(&DEFAULT_SUBMITTER_RESOURCES)),
        _ => Ok(Cow::Owned(Resources::new())),
    }
}

/// Requests of KubeRay's default submitter container, parsed once: every K8sJobMode RayJob
/// without a submitter template adds them to its gang.
static DEFAULT_SUBMITTER_RESOURCES: LazyLock<Resources> = LazyLock::new(|| {
    [
        ("cpu", DEFAULT_SUBMITTER_CPU),
        ("memory", DEFAULT_SUBMITTER_MEMORY),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name.to_string(), value.parse().ok()?)))
    .collect()
});

/// The gang of a RayJob: its cluster, plus the submitter's resources (never its Pod count).
pub fn ray_job_gang(job: &RayJob) -> Result<GangSize, SizingError> {
    let Some(spec) = job.spec.ray_cluster_spec.as_ref() else {
        return Err(SizingError::ClusterSelector(object_key(job.meta())));
    };
    let mut gang = cluster_gang(spec, "spec.rayClusterSpec")?;
    let submitter = submitter_resources(job)?;
    add_into(&mut gang.min_resources, &submitter, 1);
    Ok(gang)
}

/// `<namespace>/<name>`, or the name alone when the namespace is empty (an offline manifest).
fn object_key(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// The PodGroup that gang-schedules a RayJob.
pub fn ray_job_pod_group(job: &RayJob) -> Result<PodGroup, SizingError> {
    ray_job_pod_group_of_size(job, ray_job_gang(job)?)
}

/// The PodGroup of a RayJob whose gang is already known (see [`ray_job_gang`]).
pub fn ray_job_pod_group_of_size(job: &RayJob, gang: GangSize) -> Result<PodGroup, SizingError> {
    pod_group(job.meta(), "RayJob", gang)
}

/// The PodGroup of a standalone RayCluster; clusters created by a RayJob have none of their own.
pub fn ray_cluster_pod_group(cluster: &RayCluster) -> Result<PodGroup, SizingError> {
    ray_cluster_pod_group_of_size(cluster, cluster_gang(&cluster.spec, "spec")?)
}

/// The PodGroup of a standalone RayCluster whose gang is already known (see [`cluster_gang`]).
pub fn ray_cluster_pod_group_of_size(
    cluster: &RayCluster,
    gang: GangSize,
) -> Result<PodGroup, SizingError> {
    // The same answer as the webhook's Pod onboarding gives: a RayJob-owned cluster's Pods
    // join the RayJob's PodGroup, so the cluster must not get one of its own.
    if let Some(job) = crate::coexist::cluster_ray_job(cluster) {
        return Err(SizingError::OwnedByRayJob {
            cluster: object_key(cluster.meta()),
            job: job.to_owned(),
        });
    }
    pod_group(cluster.meta(), "RayCluster", gang)
}

/// Whether a live PodGroup already holds the wanted gang: the same `minMember`, the same
/// resource names with equal quantities (`1000m` equals `1`) and, when `sub_groups` is given,
/// the same sub-group policies, so that a reconciler resizes a PodGroup only on real drift.
/// `sub_groups` is `None` where the PodGroup CRD has no `subGroupPolicy` (the API server drops
/// the field, so comparing it would read as drift forever).
///
/// Volcano writes PodGroups back with Go's `omitempty`: an absent `minMember` is 0 and an absent
/// `minResources` is empty (otherwise a zeroed gang would read as drift on every reconcile); the
/// API server fills in the CRD's defaults of a policy (`subGroupSize: 1`, `minSubGroups: 0`). A
/// quantity that does not parse on either side never matches, so the group is rewritten.
pub fn pod_group_holds_gang(
    live: &PodGroupSpec,
    min_member: i32,
    min_resources: &BTreeMap<String, Quantity>,
    sub_groups: Option<&[SubGroupPolicySpec]>,
) -> bool {
    if live.min_member.unwrap_or(0) != min_member {
        return false;
    }
    if let Some(wanted) = sub_groups {
        let live = live.sub_group_policy.as_deref().unwrap_or_default();
        if live.len() != wanted.len()
            || live
                .iter()
                .zip(wanted)
                .any(|(l, w)| normalized_policy(l) != normalized_policy(w))
        {
            return false;
        }
    }
    let parse = |map: &BTreeMap<String, Quantity>| -> Option<Resources> {
        map.iter()
            .map(|(name, q)| Some((name.clone(), ResourceQuantity::try_from(q).ok()?)))
            .collect()
    };
    let empty = BTreeMap::new();
    match (
        parse(live.min_resources.as_ref().unwrap_or(&empty)),
        parse(min_resources),
    ) {
        (Some(live), Some(wanted)) => live == wanted,
        _ => false,
    }
}

/// A policy as the API server stores it: the CRD's defaults filled in, empty lists and maps
/// the same as absent ones.
fn normalized_policy(policy: &SubGroupPolicySpec) -> SubGroupPolicySpec {
    let selector = policy.label_selector.as_ref().map(|s| LabelSelector {
        match_labels: s.match_labels.clone().filter(|m| !m.is_empty()),
        match_expressions: s.match_expressions.clone().filter(|e| !e.is_empty()),
    });
    SubGroupPolicySpec {
        name: policy.name.clone().filter(|n| !n.is_empty()),
        label_selector: selector,
        match_label_keys: policy.match_label_keys.clone().filter(|k| !k.is_empty()),
        sub_group_size: Some(policy.sub_group_size.unwrap_or(1)),
        min_sub_groups: Some(policy.min_sub_groups.unwrap_or(0)),
        network_topology: policy.network_topology.clone(),
    }
}

fn pod_group(owner: &ObjectMeta, kind: &str, gang: GangSize) -> Result<PodGroup, SizingError> {
    let owner_name = owner.name.clone().unwrap_or_default();
    let name = keys::pod_group_name(&owner_name);
    let labels = owner.labels.as_ref();
    let label = |key: &str| {
        labels
            .and_then(|l| l.get(key))
            .filter(|v| !v.is_empty())
            .cloned()
    };
    let highest_tier_allowed = label(keys::NETWORK_TOPOLOGY_TIER_LABEL)
        .map(|value| {
            value.parse::<i32>().map_err(|_| SizingError::TierLabel {
                label: keys::NETWORK_TOPOLOGY_TIER_LABEL,
                value,
                pod_group: name.clone(),
            })
        })
        .transpose()?;
    let mode = label(keys::NETWORK_TOPOLOGY_MODE_LABEL);
    let network_topology =
        (mode.is_some() || highest_tier_allowed.is_some()).then_some(NetworkTopologySpec {
            mode,
            highest_tier_allowed,
        });
    let mut pg = PodGroup::new(
        &name,
        PodGroupSpec {
            min_member: Some(gang.min_member),
            min_resources: Some(
                gang.min_resources
                    .into_iter()
                    .map(|(k, v)| (k, v.to_quantity()))
                    .collect(),
            ),
            queue: label(keys::QUEUE_LABEL),
            priority_class_name: label(keys::PRIORITY_CLASS_LABEL),
            network_topology,
            min_task_member: None,
            sub_group_policy: (!gang.sub_groups.is_empty()).then_some(gang.sub_groups),
        },
    );
    pg.metadata.namespace = owner.namespace.clone();
    pg.metadata.annotations = Some(owner.annotations.clone().unwrap_or_default());
    pg.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "ray.io/v1".to_string(),
        kind: kind.to_string(),
        name: owner_name,
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    pg.status = Some(PodGroupStatus {
        phase: Some("Pending".to_string()),
        ..PodGroupStatus::default()
    });
    Ok(pg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(yaml: &str) -> RayJob {
        serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}"))
    }

    fn cluster(yaml: &str) -> RayCluster {
        serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("bad test YAML: {e}"))
    }

    fn resources(pg: &PodGroup) -> BTreeMap<String, String> {
        pg.spec
            .min_resources
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect()
    }

    fn expect(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const HEAD: &str = r#"
    headGroupSpec:
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray:2.60.0
            resources:
              requests: {cpu: "1", memory: 2Gi}
"#;

    fn job_yaml(extra_spec: &str, workers: &str) -> String {
        format!(
            r#"
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: demo
  namespace: ml
  uid: 1234
  labels: {{volcano.sh/queue-name: research, ray.io/priority-class-name: high}}
  annotations: {{team: nlp}}
spec:
  entrypoint: python train.py
{extra_spec}
  rayClusterSpec:
{HEAD}
    workerGroupSpecs:
{workers}
"#
        )
    }

    const TWO_WORKERS: &str = r#"
    - groupName: small
      replicas: 2
      minReplicas: 0
      maxReplicas: 5
      template:
        spec:
          containers:
          - name: ray-worker
            resources:
              requests: {cpu: 500m, memory: 1Gi}
"#;

    #[test]
    fn rayjob_gang_counts_head_and_workers_but_only_submitter_resources() {
        let pg = ray_job_pod_group(&job(&job_yaml("", TWO_WORKERS))).unwrap();
        assert_eq!(pg.metadata.name.as_deref(), Some("ray-demo-pg"));
        assert_eq!(pg.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(pg.spec.min_member, Some(3));
        // head 1 + 2×500m + default submitter 500m; 2Gi + 2×1Gi + 200Mi
        assert_eq!(
            resources(&pg),
            expect(&[("cpu", "2500m"), ("memory", "4296Mi")])
        );
        assert_eq!(pg.spec.queue.as_deref(), Some("research"));
        assert_eq!(pg.spec.priority_class_name.as_deref(), Some("high"));
        let owner = &pg.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("RayJob", "demo", Some(true))
        );
        assert_eq!(
            pg.metadata
                .annotations
                .unwrap()
                .get("team")
                .map(String::as_str),
            Some("nlp")
        );
        assert_eq!(pg.status.unwrap().phase.as_deref(), Some("Pending"));
    }

    #[test]
    fn submitter_depends_on_mode_and_template() {
        let custom = r#"  submitterPodTemplate:
    spec:
      restartPolicy: Never
      containers:
      - name: submit
        resources:
          requests: {cpu: 200m}
          limits: {cpu: "1", memory: 64Mi}"#;
        for (extra, cpu, memory) in [
            ("", "2500m", "4296Mi"),
            ("  submissionMode: SidecarMode", "2500m", "4296Mi"),
            ("  submissionMode: HTTPMode", "2", "4Gi"),
            ("  submissionMode: InteractiveMode", "2", "4Gi"),
            (custom, "2200m", "4160Mi"),
        ] {
            let pg = ray_job_pod_group(&job(&job_yaml(extra, TWO_WORKERS))).unwrap();
            assert_eq!(pg.spec.min_member, Some(3), "{extra}");
            assert_eq!(
                resources(&pg),
                expect(&[("cpu", cpu), ("memory", memory)]),
                "{extra}"
            );
        }
    }

    #[test]
    fn replicas_are_clamped_and_multiplied_by_hosts_for_members_and_resources() {
        let workers = r#"
    - groupName: unset-replicas
      minReplicas: 2
      maxReplicas: 4
      template: {spec: {containers: [{name: w, resources: {requests: {cpu: "1"}}}]}}
    - groupName: too-many
      replicas: 10
      minReplicas: 1
      maxReplicas: 3
      numOfHosts: 2
      template: {spec: {containers: [{name: w, resources: {requests: {cpu: "1"}}}]}}
    - groupName: too-few
      replicas: 0
      minReplicas: 1
      maxReplicas: 3
      template: {spec: {containers: [{name: w, resources: {requests: {cpu: "1"}}}]}}
"#;
        let gang = ray_job_gang(&job(&job_yaml("  submissionMode: HTTPMode", workers))).unwrap();
        // 1 head + 2 + 3×2 + 1
        assert_eq!(gang.min_member, 10);
        assert_eq!(gang.min_resources["cpu"].to_string(), "10");
    }

    #[test]
    fn autoscaling_uses_min_replicas_and_suspended_groups_drop_out() {
        let workers = r#"
    - groupName: gpu
      replicas: 4
      minReplicas: 1
      maxReplicas: 8
      numOfHosts: 2
      template:
        spec:
          containers:
          - name: w
            resources:
              limits: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "4"}
    - groupName: parked
      suspend: true
      replicas: 3
      minReplicas: 3
      maxReplicas: 3
      template: {spec: {containers: [{name: w, resources: {requests: {cpu: "1"}}}]}}
"#;
        let mut rayjob = job(&job_yaml("  submissionMode: HTTPMode", workers));
        let without = ray_job_gang(&rayjob).unwrap();
        assert_eq!(without.min_member, 9);
        assert_eq!(without.min_resources["nvidia.com/gpu"].to_string(), "32");
        rayjob
            .spec
            .ray_cluster_spec
            .as_mut()
            .unwrap()
            .enable_in_tree_autoscaling = Some(true);
        let with = ray_job_gang(&rayjob).unwrap();
        assert_eq!(with.min_member, 3);
        assert_eq!(with.min_resources["nvidia.com/gpu"].to_string(), "8");
        assert_eq!(with.min_resources["cpu"].to_string(), "17");
        assert_eq!(with.min_resources["memory"].to_string(), "66Gi");
    }

    #[test]
    fn limits_fill_in_missing_requests_per_container() {
        let spec: PodSpec = serde_saphyr::from_str(
            r#"
containers:
- name: a
  resources:
    requests: {cpu: 250m}
    limits: {cpu: "2", memory: 1Gi}
- name: b
  resources:
    limits: {memory: 512Mi, example.com/fpga: 1}
- name: c
initContainers:
- name: init
  resources: {requests: {cpu: "100"}}
"#,
        )
        .unwrap();
        let total = pod_resources(Some(&spec), "spec").unwrap();
        let printed: Vec<_> = total.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(printed, ["cpu=250m", "example.com/fpga=1", "memory=1536Mi"]);
    }

    #[test]
    fn bad_quantities_name_the_field() {
        let workers = r#"
    - groupName: w
      replicas: 1
      template: {spec: {containers: [{name: w, resources: {requests: {cpu: lots}}}]}}
"#;
        let err = ray_job_gang(&job(&job_yaml("", workers))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].resources.requests.cpu: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }

    #[test]
    fn cluster_selector_jobs_have_no_gang() {
        let rayjob = job(
            "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: j, namespace: ns}\nspec:\n  clusterSelector: {ray.io/cluster: shared}\n",
        );
        assert_eq!(
            ray_job_pod_group(&rayjob).unwrap_err(),
            SizingError::ClusterSelector("ns/j".into())
        );
    }

    #[test]
    fn standalone_cluster_has_its_own_group_and_rayjob_clusters_do_not() {
        let yaml = format!(
            "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: c\n  namespace: ns\n  labels: {{volcano.sh/network-topology-mode: hard, volcano.sh/network-topology-highest-tier-allowed: \"2\"}}\nspec:\n{HEAD}\n    workerGroupSpecs: []\n"
        )
        .replace("\n    ", "\n  ");
        let pg = ray_cluster_pod_group(&cluster(&yaml)).unwrap();
        assert_eq!(pg.metadata.name.as_deref(), Some("ray-c-pg"));
        assert_eq!(pg.spec.min_member, Some(1));
        assert_eq!(resources(&pg), expect(&[("cpu", "1"), ("memory", "2Gi")]));
        assert_eq!(pg.spec.queue, None);
        assert_eq!(pg.metadata.annotations, Some(BTreeMap::new()));
        let topology = pg.spec.network_topology.unwrap();
        assert_eq!(
            (topology.mode.as_deref(), topology.highest_tier_allowed),
            (Some("hard"), Some(2))
        );

        let owned = yaml.replace(
            "labels: {",
            "labels: {ray.io/originated-from-crd: RayJob, ray.io/originated-from-cr-name: j, ",
        );
        assert!(matches!(
            ray_cluster_pod_group(&cluster(&owned)),
            Err(SizingError::OwnedByRayJob { .. })
        ));
        // Owned by a RayJob without KubeRay's labels: still the RayJob's, as for onboarding.
        let owner_only = yaml.replace(
            "  namespace: ns\n",
            "  namespace: ns\n  ownerReferences: [{apiVersion: ray.io/v1, kind: RayJob, name: j, uid: u}]\n",
        );
        assert_eq!(
            ray_cluster_pod_group(&cluster(&owner_only)).unwrap_err(),
            SizingError::OwnedByRayJob {
                cluster: "ns/c".into(),
                job: "j".into()
            }
        );
        let bad_tier = yaml.replace("\"2\"", "two");
        assert!(matches!(
            ray_cluster_pod_group(&cluster(&bad_tier)),
            Err(SizingError::TierLabel { .. })
        ));
    }

    #[test]
    fn a_live_pod_group_holds_the_gang_only_with_equal_member_count_and_quantities() {
        let quantities = |pairs: &[(&str, &str)]| -> BTreeMap<String, Quantity> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect()
        };
        let live = |min_member: Option<i32>, min_resources: Option<&[(&str, &str)]>| PodGroupSpec {
            min_member,
            min_resources: min_resources.map(quantities),
            ..PodGroupSpec::default()
        };
        let cpu = quantities(&[("cpu", "1")]);
        // Quantities compare by value, not by spelling.
        assert!(pod_group_holds_gang(
            &live(Some(2), Some(&[("cpu", "1000m")])),
            2,
            &cpu,
            None
        ));
        assert!(!pod_group_holds_gang(
            &live(Some(2), Some(&[("cpu", "1")])),
            3,
            &cpu,
            None
        ));
        assert!(!pod_group_holds_gang(
            &live(Some(2), Some(&[("cpu", "2")])),
            2,
            &cpu,
            None
        ));
        assert!(!pod_group_holds_gang(
            &live(Some(2), Some(&[("cpu", "1"), ("memory", "1Gi")])),
            2,
            &cpu,
            None
        ));
        // Volcano's omitempty: a zeroed gang comes back without minMember and minResources,
        // which must not read as drift (or every reconcile would patch it again).
        assert!(pod_group_holds_gang(
            &live(None, None),
            0,
            &BTreeMap::new(),
            None
        ));
        assert!(!pod_group_holds_gang(&live(None, None), 0, &cpu, None));
        assert!(pod_group_holds_gang(
            &live(None, Some(&[("cpu", "1")])),
            0,
            &cpu,
            None
        ));
        assert!(!pod_group_holds_gang(
            &live(None, Some(&[("cpu", "1")])),
            1,
            &cpu,
            None
        ));
        // A quantity that does not parse, on either side, never matches.
        assert!(!pod_group_holds_gang(
            &live(Some(1), Some(&[("cpu", "lots")])),
            1,
            &quantities(&[("cpu", "lots")]),
            None
        ));
        assert!(!pod_group_holds_gang(
            &live(Some(1), Some(&[("cpu", "1")])),
            1,
            &quantities(&[("cpu", "x")]),
            None
        ));
    }

    const GPU_AND_CPU: &str = r#"
    - groupName: cpu
      replicas: 8
      minReplicas: 4
      maxReplicas: 8
      template: {spec: {containers: [{name: w, resources: {requests: {cpu: "1"}}}]}}
    - groupName: gpu
      replicas: 4
      minReplicas: 4
      maxReplicas: 4
      template: {spec: {containers: [{name: w, resources: {limits: {nvidia.com/gpu: "1"}}}]}}
    - groupName: tpu
      replicas: 3
      minReplicas: 2
      maxReplicas: 3
      numOfHosts: 4
      template: {spec: {containers: [{name: w, resources: {limits: {google.com/tpu: "4"}}}]}}
    - groupName: elastic
      minReplicas: 0
      maxReplicas: 5
      template: {spec: {containers: [{name: w}]}}
    - groupName: parked
      suspend: true
      replicas: 2
      template: {spec: {containers: [{name: w}]}}
"#;

    /// (name, selector, keys, size, min) of each policy.
    fn policy_rows(pg: &PodGroup) -> Vec<(String, String, String, i32, i32)> {
        pg.spec
            .sub_group_policy
            .iter()
            .flatten()
            .map(|p| {
                let selector = p
                    .label_selector
                    .as_ref()
                    .and_then(|s| s.match_labels.as_ref());
                let selector: Vec<String> = selector
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                (
                    p.name.clone().unwrap_or_default(),
                    selector.join(","),
                    p.match_label_keys.clone().unwrap_or_default().join(","),
                    p.sub_group_size.unwrap_or(-1),
                    p.min_sub_groups.unwrap_or(-1),
                )
            })
            .collect()
    }

    #[test]
    fn every_worker_group_with_a_minimum_is_a_sub_gang_and_multi_host_replicas_bind_whole() {
        let pg = ray_job_pod_group(&job(&job_yaml("", GPU_AND_CPU))).unwrap();
        // minMember and minResources are what they are without sub-groups: 1 + 8 + 4 + 3×4.
        assert_eq!(pg.spec.min_member, Some(25));
        let row = |name: &str, key: &str, size: i32, min: i32| {
            (
                name.to_string(),
                format!("ray.io/group={name},ray.io/node-type=worker"),
                key.to_string(),
                size,
                min,
            )
        };
        assert_eq!(
            policy_rows(&pg),
            [
                row("cpu", "ray.io/group", 8, 1),
                row("gpu", "ray.io/group", 4, 1),
                row("tpu", "ray.io/worker-group-replica-name", 4, 3),
            ]
        );

        // With autoscaling the minimum is minReplicas, as for minMember: the 4 CPU workers above
        // it cannot stand in for a GPU worker.
        let mut rayjob = job(&job_yaml("", GPU_AND_CPU));
        rayjob
            .spec
            .ray_cluster_spec
            .as_mut()
            .unwrap()
            .enable_in_tree_autoscaling = Some(true);
        let pg = ray_job_pod_group(&rayjob).unwrap();
        assert_eq!(pg.spec.min_member, Some(17));
        assert_eq!(
            policy_rows(&pg),
            [
                row("cpu", "ray.io/group", 4, 1),
                row("gpu", "ray.io/group", 4, 1),
                row("tpu", "ray.io/worker-group-replica-name", 4, 2),
            ]
        );
    }

    #[test]
    fn a_head_only_cluster_has_no_sub_groups_and_the_policy_serializes_as_volcanos_crd() {
        let pg = ray_job_pod_group(&job(&job_yaml("", "      []"))).unwrap();
        assert_eq!(pg.spec.sub_group_policy, None);
        let pg = ray_job_pod_group(&job(&job_yaml("", GPU_AND_CPU))).unwrap();
        let json = serde_json::to_value(&pg.spec).unwrap();
        assert_eq!(
            json["subGroupPolicy"][2],
            serde_json::json!({
                "name": "tpu",
                "labelSelector": {"matchLabels": {"ray.io/group": "tpu", "ray.io/node-type": "worker"}},
                "matchLabelKeys": ["ray.io/worker-group-replica-name"],
                "subGroupSize": 4,
                "minSubGroups": 3
            })
        );
    }

    #[test]
    fn sub_group_policies_are_drift_only_when_they_differ_from_the_stored_form() {
        let pg = ray_job_pod_group(&job(&job_yaml("", GPU_AND_CPU))).unwrap();
        let wanted = pg.spec.sub_group_policy.clone().unwrap();
        let min_member = pg.spec.min_member.unwrap();
        let min_resources = pg.spec.min_resources.clone().unwrap();
        let holds = |live: &PodGroupSpec, sub_groups: Option<&[SubGroupPolicySpec]>| {
            pod_group_holds_gang(live, min_member, &min_resources, sub_groups)
        };
        assert!(holds(&pg.spec, Some(&wanted)));
        // The API server fills in the CRD's defaults and drops empty lists: still in sync.
        let mut defaulted = wanted.clone();
        defaulted[0].min_sub_groups = Some(0);
        let mut live = pg.spec.clone();
        live.sub_group_policy = Some(defaulted.clone());
        let mut wanted_unset = defaulted;
        wanted_unset[0].min_sub_groups = None;
        assert!(holds(&live, Some(&wanted_unset)));
        // A PodGroup from before sub-gangs, or with another size, is drift …
        let mut old = pg.spec.clone();
        old.sub_group_policy = None;
        assert!(!holds(&old, Some(&wanted)));
        let mut resized = pg.spec.clone();
        resized.sub_group_policy.as_mut().unwrap()[2].min_sub_groups = Some(2);
        assert!(!holds(&resized, Some(&wanted)));
        // … unless the CRD has no subGroupPolicy, when the field is never compared.
        assert!(holds(&old, None));
        // No policies wanted: an absent and an empty list are the same.
        assert!(holds(&old, Some(&[])));
    }
}
