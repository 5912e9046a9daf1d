//! What a Ray Pod needs to join its Volcano gang, as a minimal JSON patch.
//!
//! One decision for both shells: the mutating webhook patches Pods created by anyone (raygate's
//! reconciler or KubeRay), and the reconciler applies the same patch to the Pods and submitter
//! templates it creates, so scheduling is right even while the webhook is down.
//!
//! [`review_pod`] is the whole decision on a Pod CREATE (which Pods are onboarded, into which
//! gang), with the objects it reads supplied by the caller ([`PodLookups`]).
//!
//! The patch only adds what is missing. A value the user set to something else is left alone
//! and reported as a warning: silently overwriting it would surprise them, and Volcano would
//! not gang-schedule the Pod either way.

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, ReplaceOperation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;

use crate::keys;

mod review;

pub use review::{MalformedPod, PodLookups, PodOnboarding, review_pod};

/// The scheduler name the API server gives a Pod that names none.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// What a Ray Pod is, read from the labels KubeRay (and raygate) put on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RayPodRole {
    /// The head Pod.
    Head,
    /// A worker Pod of the named group.
    Worker(String),
    /// The Pod of a RayJob's K8sJobMode submitter Job.
    Submitter,
}

impl RayPodRole {
    /// The role's `volcano.sh/task-spec` value.
    pub fn task(&self) -> &str {
        match self {
            RayPodRole::Head => keys::HEAD_TASK,
            RayPodRole::Worker(group) => group,
            RayPodRole::Submitter => keys::SUBMITTER_TASK,
        }
    }
}

/// Labels of a Pod or another object.
pub type Labels = BTreeMap<String, String>;

/// The RayJob an object was created for, from `ray.io/originated-from-crd=RayJob` and
/// `ray.io/originated-from-cr-name`.
pub fn originating_ray_job(labels: &Labels) -> Option<&str> {
    (keys::value_in(labels, keys::ORIGINATED_FROM_CRD_LABEL) == Some("RayJob"))
        .then(|| keys::value_in(labels, keys::ORIGINATED_FROM_CR_NAME_LABEL))
        .flatten()
}

/// Whether a Pod is a mirror Pod (kubelet-managed static Pod), which admission must not touch.
pub fn is_mirror_pod(pod_annotations: &Labels) -> bool {
    pod_annotations.contains_key(keys::MIRROR_POD_ANNOTATION)
}

/// The role of a Pod, or `None` when it is not a Ray Pod.
pub fn ray_pod_role(pod_labels: &Labels) -> Option<RayPodRole> {
    match keys::value_in(pod_labels, keys::RAY_NODE_TYPE_LABEL) {
        Some("head") => Some(RayPodRole::Head),
        Some("worker") => keys::value_in(pod_labels, keys::RAY_GROUP_LABEL)
            .map(|g| RayPodRole::Worker(g.to_string())),
        Some(_) => None,
        None => originating_ray_job(pod_labels).map(|_| RayPodRole::Submitter),
    }
}

/// The object whose PodGroup a Ray Pod joins: the RayJob for everything a RayJob created (its
/// submitter, and the Pods of the cluster it created, told by that cluster's labels), otherwise
/// the Pod's RayCluster. `cluster_labels` are the labels of the Pod's RayCluster, when known.
pub fn gang_owner<'a>(
    pod_labels: &'a Labels,
    cluster_labels: Option<&'a Labels>,
) -> Option<&'a str> {
    gang_owner_of_cluster_job(pod_labels, cluster_labels.and_then(originating_ray_job))
}

/// [`gang_owner`] when the caller already knows which RayJob, if any, created the Pod's
/// RayCluster (see [`cluster_ray_job`]).
pub fn gang_owner_of_cluster_job<'a>(
    pod_labels: &'a Labels,
    cluster_ray_job: Option<&'a str>,
) -> Option<&'a str> {
    match ray_pod_role(pod_labels)? {
        RayPodRole::Submitter => originating_ray_job(pod_labels),
        RayPodRole::Head | RayPodRole::Worker(_) => cluster_ray_job
            .filter(|job| !job.is_empty())
            .or_else(|| originating_ray_job(pod_labels))
            .or_else(|| keys::value_in(pod_labels, keys::RAY_CLUSTER_LABEL)),
    }
}

/// The RayJob that created a RayCluster: its `ray.io` ownerReference of kind `RayJob` (set on
/// every cluster KubeRay or raygate creates for a RayJob), else the originated-from labels.
pub fn cluster_ray_job<'a>(
    cluster_labels: &'a Labels,
    owner_references: &'a [OwnerReference],
) -> Option<&'a str> {
    owner_references
        .iter()
        .find(|owner| {
            owner.kind == "RayJob"
                && owner.api_version.starts_with("ray.io/")
                && !owner.name.is_empty()
        })
        .map(|owner| owner.name.as_str())
        .or_else(|| originating_ray_job(cluster_labels))
}

/// The batch/v1 Job that controls a Pod: the Pod's controller ownerReference of kind `Job`,
/// named as its [`keys::JOB_NAME_LABEL`] label says (the Job controller sets both). `None` for
/// every other Pod.
///
/// KubeRay v1.5.0 labels a RayJob's submitter Job but not the Job's Pod template, so its
/// submitter Pod is known only through this Job (see [`submitter_job_ray_job`]).
pub fn controlling_job<'a>(
    pod_labels: &'a Labels,
    pod_owner_references: &'a [OwnerReference],
) -> Option<&'a str> {
    let name = keys::value_in(pod_labels, keys::JOB_NAME_LABEL)?;
    pod_owner_references
        .iter()
        .any(|owner| {
            owner.controller == Some(true)
                && owner.kind == "Job"
                && owner.api_version == "batch/v1"
                && owner.name == name
        })
        .then_some(name)
}

/// The RayJob whose submitter `job` (a Job's metadata) is: `ray_job` (the RayJob named as the
/// Job, which is how KubeRay and raygate name a submitter Job) when the Job's controller
/// ownerReference is that very RayJob (kind, `ray.io` group, name and UID). `None` for an
/// ordinary Job, and for a leftover Job of a deleted RayJob that a new one of the same name
/// replaced.
pub fn submitter_job_ray_job<'a>(job: &ObjectMeta, ray_job: &'a ObjectMeta) -> Option<&'a str> {
    let name = ray_job.name.as_deref().filter(|n| !n.is_empty())?;
    let uid = ray_job.uid.as_deref().filter(|u| !u.is_empty())?;
    job.owner_references
        .iter()
        .flatten()
        .any(|owner| {
            owner.controller == Some(true)
                && owner.kind == "RayJob"
                && owner.api_version.starts_with("ray.io/")
                && owner.name == name
                && owner.uid == uid
        })
        .then_some(name)
}

/// Where a Pod belongs in Volcano, as the caller resolved it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangMembership {
    /// Name of the PodGroup (`ray-<owner>-pg`).
    pub pod_group: String,
    /// `volcano.sh/task-spec` value.
    pub task: String,
    /// `volcano.sh/queue-name` of the owner, copied as a Pod label.
    pub queue: Option<String>,
    /// `ray.io/priority-class-name` of the owner, copied as a Pod label.
    pub priority_class: Option<String>,
}

impl GangMembership {
    /// The membership of a Pod in the gang of `owner` (a RayJob or RayCluster name), with the
    /// queue and priority labels of the owner.
    pub fn new(owner: &str, role: &RayPodRole, owner_labels: &Labels) -> Self {
        GangMembership {
            pod_group: keys::pod_group_name(owner),
            task: role.task().to_string(),
            queue: keys::value_in(owner_labels, keys::QUEUE_LABEL).map(str::to_string),
            priority_class: keys::value_in(owner_labels, keys::PRIORITY_CLASS_LABEL)
                .map(str::to_string),
        }
    }
}

/// A patch that onboards a Pod, and what was left alone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Onboarding {
    /// Operations to apply, against the Pod as it is; empty when nothing is missing.
    pub patch: Patch,
    /// One kubectl-style sentence per value the user set to something else.
    pub warnings: Vec<String>,
}

/// What `pod` (a Pod, or a Pod template's `{metadata, spec}`) lacks to join `membership`'s gang:
/// `spec.schedulerName: volcano`, the PodGroup and task annotations, and the owner's queue and
/// priority labels. Applying the patch and calling this again yields an empty patch.
pub fn onboarding_patch(pod: &Value, membership: &GangMembership) -> Onboarding {
    let mut out = Onboarding::default();
    let scheduler = pod.pointer("/spec/schedulerName").and_then(Value::as_str);
    match scheduler {
        None => out.add(&["spec", "schedulerName"], keys::VOLCANO_SCHEDULER_NAME.into()),
        Some(DEFAULT_SCHEDULER_NAME) | Some("") => out.replace(
            &["spec", "schedulerName"],
            keys::VOLCANO_SCHEDULER_NAME.into(),
        ),
        Some(keys::VOLCANO_SCHEDULER_NAME) => {}
        Some(other) => out.warnings.push(format!(
            "spec.schedulerName is {other:?}: raygate leaves it, so Volcano does not gang-schedule this Pod"
        )),
    }
    let annotations = [
        (
            keys::POD_GROUP_ANNOTATION,
            Some(membership.pod_group.as_str()),
        ),
        (keys::TASK_SPEC_ANNOTATION, Some(membership.task.as_str())),
    ];
    out.map_entries(pod, "annotations", &annotations);
    let labels = [
        (keys::QUEUE_LABEL, membership.queue.as_deref()),
        (
            keys::PRIORITY_CLASS_LABEL,
            membership.priority_class.as_deref(),
        ),
    ];
    out.map_entries(pod, "labels", &labels);
    out
}

impl Onboarding {
    fn add(&mut self, path: &[&str], value: Value) {
        self.patch.0.push(PatchOperation::Add(AddOperation {
            path: PointerBuf::from_tokens(path.iter().copied()),
            value,
        }));
    }

    fn replace(&mut self, path: &[&str], value: Value) {
        self.patch.0.push(PatchOperation::Replace(ReplaceOperation {
            path: PointerBuf::from_tokens(path.iter().copied()),
            value,
        }));
    }

    /// Adds the missing `metadata.<map>` entries; creates the map in one operation when the
    /// object has none (a JSON patch cannot add into a missing parent).
    fn map_entries(&mut self, pod: &Value, map: &str, wanted: &[(&str, Option<&str>)]) {
        let existing = pod.get("metadata").and_then(|m| m.get(map));
        let Some(Value::Object(existing)) = existing else {
            let entries: serde_json::Map<String, Value> = wanted
                .iter()
                .filter_map(|(k, v)| Some(((*k).to_string(), Value::String((*v)?.to_string()))))
                .collect();
            if !entries.is_empty() {
                self.add(&["metadata", map], Value::Object(entries));
            }
            return;
        };
        for (key, value) in wanted {
            let Some(value) = value else { continue };
            match existing.get(*key).and_then(Value::as_str) {
                None => self.add(&["metadata", map, key], (*value).into()),
                Some(current) if current == *value => {}
                Some(current) => self.warnings.push(format!(
                    "metadata.{map}[{key:?}] is {current:?}, not {value:?}: raygate leaves it"
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    fn membership() -> GangMembership {
        GangMembership::new(
            "demo",
            &RayPodRole::Worker("gpu".into()),
            &labels(&[
                ("volcano.sh/queue-name", "research"),
                ("ray.io/priority-class-name", "high"),
            ]),
        )
    }

    fn apply(pod: &Value, patch: &Patch) -> Value {
        let mut pod = pod.clone();
        json_patch::patch(&mut pod, patch).expect("the patch applies");
        pod
    }

    #[test]
    fn mirror_pods_are_told_apart() {
        assert!(is_mirror_pod(&labels(&[(
            "kubernetes.io/config.mirror",
            "x"
        )])));
        assert!(!is_mirror_pod(&labels(&[])));
    }

    #[test]
    fn roles_come_from_kuberay_labels() {
        let head = labels(&[("ray.io/node-type", "head"), ("ray.io/cluster", "c")]);
        let worker = labels(&[("ray.io/node-type", "worker"), ("ray.io/group", "gpu")]);
        let submitter = labels(&[
            ("ray.io/originated-from-crd", "RayJob"),
            ("ray.io/originated-from-cr-name", "demo"),
        ]);
        assert_eq!(ray_pod_role(&head), Some(RayPodRole::Head));
        assert_eq!(
            ray_pod_role(&worker),
            Some(RayPodRole::Worker("gpu".into()))
        );
        assert_eq!(ray_pod_role(&submitter), Some(RayPodRole::Submitter));
        assert_eq!(ray_pod_role(&labels(&[("app", "web")])), None);
        assert_eq!(
            ray_pod_role(&labels(&[("ray.io/node-type", "redis-cleanup")])),
            None
        );
        assert_eq!(
            ray_pod_role(&labels(&[("ray.io/node-type", "worker")])),
            None
        );
        assert_eq!(RayPodRole::Submitter.task(), "submittergroup");
        assert_eq!(RayPodRole::Head.task(), "headgroup");
    }

    #[test]
    fn the_gang_belongs_to_the_rayjob_for_everything_it_created() {
        let pod = labels(&[
            ("ray.io/node-type", "head"),
            ("ray.io/cluster", "demo-x7k2p"),
        ]);
        let job_cluster = labels(&[
            ("ray.io/originated-from-crd", "RayJob"),
            ("ray.io/originated-from-cr-name", "demo"),
        ]);
        assert_eq!(gang_owner(&pod, Some(&job_cluster)), Some("demo"));
        assert_eq!(gang_owner(&pod, Some(&labels(&[]))), Some("demo-x7k2p"));
        assert_eq!(gang_owner(&pod, None), Some("demo-x7k2p"));
        let submitter = labels(&[
            ("ray.io/originated-from-crd", "RayJob"),
            ("ray.io/originated-from-cr-name", "demo"),
        ]);
        assert_eq!(gang_owner(&submitter, None), Some("demo"));
        assert_eq!(gang_owner(&labels(&[]), None), None);
    }

    fn owner(api_version: &str, kind: &str, name: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u".into(),
            ..OwnerReference::default()
        }
    }

    #[test]
    fn a_cluster_belongs_to_the_rayjob_that_owns_it_or_is_labelled_with() {
        let unlabelled = labels(&[]);
        let owned = [owner("ray.io/v1", "RayJob", "demo")];
        assert_eq!(cluster_ray_job(&unlabelled, &owned), Some("demo"));
        let foreign = [
            owner("example.com/v1", "RayJob", "other"),
            owner("apps/v1", "Deployment", "d"),
        ];
        assert_eq!(cluster_ray_job(&unlabelled, &foreign), None);
        let labelled = labels(&[
            ("ray.io/originated-from-crd", "RayJob"),
            ("ray.io/originated-from-cr-name", "from-label"),
        ]);
        assert_eq!(cluster_ray_job(&labelled, &[]), Some("from-label"));
        assert_eq!(cluster_ray_job(&labelled, &owned), Some("demo"));
        let pod = labels(&[
            ("ray.io/node-type", "worker"),
            ("ray.io/group", "g"),
            ("ray.io/cluster", "c"),
        ]);
        assert_eq!(gang_owner_of_cluster_job(&pod, Some("demo")), Some("demo"));
        assert_eq!(gang_owner_of_cluster_job(&pod, Some("")), Some("c"));
        assert_eq!(gang_owner_of_cluster_job(&pod, None), Some("c"));
    }

    fn controller(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            uid: uid.into(),
            controller: Some(true),
            ..owner(api_version, kind, name)
        }
    }

    #[test]
    fn a_job_pod_is_known_by_its_controlling_job() {
        let pod = labels(&[("batch.kubernetes.io/job-name", "demo")]);
        let by_job = [controller("batch/v1", "Job", "demo", "j")];
        assert_eq!(controlling_job(&pod, &by_job), Some("demo"));
        // Not the controller, another kind or group, another name, or no label: not a Job Pod.
        assert_eq!(
            controlling_job(&pod, &[owner("batch/v1", "Job", "demo")]),
            None
        );
        assert_eq!(
            controlling_job(&pod, &[controller("example.com/v1", "Job", "demo", "j")]),
            None
        );
        assert_eq!(
            controlling_job(&pod, &[controller("apps/v1", "ReplicaSet", "demo", "r")]),
            None
        );
        assert_eq!(
            controlling_job(&pod, &[controller("batch/v1", "Job", "other", "j")]),
            None
        );
        assert_eq!(controlling_job(&labels(&[]), &by_job), None);
        assert_eq!(controlling_job(&pod, &[]), None);
    }

    fn meta(name: &str, uid: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            uid: Some(uid.into()),
            owner_references: Some(owners),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_job_is_a_submitter_only_of_the_rayjob_that_controls_it() {
        let ray_job = meta("demo", "rj-1", vec![]);
        let submitter = meta(
            "demo",
            "job-1",
            vec![controller("ray.io/v1", "RayJob", "demo", "rj-1")],
        );
        assert_eq!(submitter_job_ray_job(&submitter, &ray_job), Some("demo"));
        // An ordinary Job that happens to share the RayJob's name.
        let ordinary = meta("demo", "job-2", vec![]);
        assert_eq!(submitter_job_ray_job(&ordinary, &ray_job), None);
        // Owned, but not as controller; by another group's RayJob; by a CronJob.
        for owners in [
            vec![owner("ray.io/v1", "RayJob", "demo")],
            vec![controller("example.com/v1", "RayJob", "demo", "rj-1")],
            vec![controller("batch/v1", "CronJob", "demo", "rj-1")],
        ] {
            assert_eq!(
                submitter_job_ray_job(&meta("demo", "job-3", owners.clone()), &ray_job),
                None,
                "{owners:?}"
            );
        }
        // The Job of a deleted RayJob, now replaced by a new one of the same name.
        let recreated = meta("demo", "rj-2", vec![]);
        assert_eq!(submitter_job_ray_job(&submitter, &recreated), None);
        // A RayJob without a UID (never the case for a stored object) matches nothing.
        assert_eq!(
            submitter_job_ray_job(&submitter, &meta("demo", "", vec![])),
            None
        );
    }

    #[test]
    fn a_bare_pod_gets_everything_and_the_patch_is_idempotent() {
        let pod = json!({"metadata": {"name": "w"}, "spec": {"containers": []}});
        let onboarding = onboarding_patch(&pod, &membership());
        assert!(onboarding.warnings.is_empty());
        let patched = apply(&pod, &onboarding.patch);
        assert_eq!(patched["spec"]["schedulerName"], "volcano");
        assert_eq!(
            patched["metadata"]["annotations"],
            json!({"scheduling.k8s.io/group-name": "ray-demo-pg", "volcano.sh/task-spec": "gpu"})
        );
        assert_eq!(
            patched["metadata"]["labels"],
            json!({"volcano.sh/queue-name": "research", "ray.io/priority-class-name": "high"})
        );
        let again = onboarding_patch(&patched, &membership());
        assert_eq!(again, Onboarding::default());
    }

    #[test]
    fn the_defaulted_scheduler_is_replaced_and_existing_maps_are_extended() {
        let pod = json!({
            "metadata": {"annotations": {"team": "nlp"}, "labels": {"ray.io/node-type": "worker"}},
            "spec": {"schedulerName": "default-scheduler"}
        });
        let onboarding = onboarding_patch(&pod, &membership());
        assert_eq!(onboarding.patch.0.len(), 5, "{}", onboarding.patch);
        let patched = apply(&pod, &onboarding.patch);
        assert_eq!(patched["spec"]["schedulerName"], "volcano");
        assert_eq!(patched["metadata"]["annotations"]["team"], "nlp");
        assert_eq!(
            patched["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
            "ray-demo-pg"
        );
        assert_eq!(patched["metadata"]["labels"]["ray.io/node-type"], "worker");
        assert_eq!(
            patched["metadata"]["labels"]["volcano.sh/queue-name"],
            "research"
        );
    }

    #[test]
    fn user_values_are_never_overwritten_but_warned_about() {
        let pod = json!({
            "metadata": {
                "annotations": {"scheduling.k8s.io/group-name": "mine", "volcano.sh/task-spec": "gpu"},
                "labels": {"volcano.sh/queue-name": "other"}
            },
            "spec": {"schedulerName": "my-scheduler"}
        });
        let onboarding = onboarding_patch(&pod, &membership());
        let patched = apply(&pod, &onboarding.patch);
        assert_eq!(patched["spec"]["schedulerName"], "my-scheduler");
        assert_eq!(
            patched["metadata"]["annotations"]["scheduling.k8s.io/group-name"],
            "mine"
        );
        assert_eq!(
            patched["metadata"]["labels"]["volcano.sh/queue-name"],
            "other"
        );
        assert_eq!(
            patched["metadata"]["labels"]["ray.io/priority-class-name"],
            "high"
        );
        assert_eq!(onboarding.warnings.len(), 3, "{:?}", onboarding.warnings);
        assert!(onboarding.warnings[0].starts_with("spec.schedulerName is \"my-scheduler\""));
    }

    #[test]
    fn owners_without_queue_or_priority_add_no_labels() {
        let membership = GangMembership::new("c", &RayPodRole::Head, &labels(&[]));
        let pod = json!({"metadata": {}, "spec": {"schedulerName": "volcano"}});
        let onboarding = onboarding_patch(&pod, &membership);
        let patched = apply(&pod, &onboarding.patch);
        assert!(patched["metadata"].get("labels").is_none());
        assert_eq!(
            patched["metadata"]["annotations"]["volcano.sh/task-spec"],
            "headgroup"
        );
        assert_eq!(onboarding.patch.0.len(), 1);
    }

    #[test]
    fn keys_with_slashes_are_escaped_in_pointers() {
        let pod = json!({"metadata": {"annotations": {}}, "spec": {"schedulerName": "volcano"}});
        let onboarding = onboarding_patch(&pod, &membership());
        let paths: Vec<String> = onboarding
            .patch
            .0
            .iter()
            .map(|op| match op {
                PatchOperation::Add(add) => add.path.to_string(),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            paths,
            [
                "/metadata/annotations/scheduling.k8s.io~1group-name",
                "/metadata/annotations/volcano.sh~1task-spec",
                "/metadata/labels",
            ]
        );
    }
}
