//! Every name, label, annotation and finalizer raygate reads or writes, in one place.
//!
//! The webhook, the reconciler and the CLI all take their keys from here, so they cannot drift
//! apart. Values marked "KubeRay" or "Volcano" are upstream conventions and must not change.

/// Namespace label that opts a namespace into Volcano onboarding.
pub const NAMESPACE_OPT_IN_LABEL: &str = "raygate.io/scheduler";
/// Value of [`NAMESPACE_OPT_IN_LABEL`] that opts a namespace in.
pub const NAMESPACE_OPT_IN_VALUE: &str = "volcano";
/// Namespace label choosing which controller runs the namespace's RayJobs and RayClusters:
/// `raygate` (raygate's own reconciler) or `kuberay` (a KubeRay operator; raygate's reconciler
/// then only keeps the PodGroups, see [`crate::coexist`]). Without it, the reconciler's
/// `--reconciler` setting decides.
pub const RECONCILER_LABEL: &str = "raygate.io/reconciler";
/// Label on every PodGroup raygate's reconciler creates for a KubeRay-run object, telling it
/// apart from one KubeRay's own Volcano adapter created under the same name.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`] on raygate's PodGroups.
pub const MANAGED_BY_RAYGATE: &str = "raygate";
/// `spec.schedulerName` given to every Ray Pod in an opted-in namespace.
pub const VOLCANO_SCHEDULER_NAME: &str = "volcano";

/// Pod annotation linking a Pod to its PodGroup (Volcano).
pub const POD_GROUP_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// Pod annotation naming the Pod's role inside its gang (Volcano).
pub const TASK_SPEC_ANNOTATION: &str = "volcano.sh/task-spec";
/// Task name of the head Pod.
pub const HEAD_TASK: &str = "headgroup";
/// Task name of the RayJob submitter Pod.
pub const SUBMITTER_TASK: &str = "submittergroup";

/// Label on RayJob / RayCluster choosing the Volcano queue (KubeRay convention).
pub const QUEUE_LABEL: &str = "volcano.sh/queue-name";
/// Label on RayJob / RayCluster choosing the PodGroup priority class (KubeRay convention).
pub const PRIORITY_CLASS_LABEL: &str = "ray.io/priority-class-name";
/// Label on RayJob / RayCluster choosing the PodGroup network-topology mode.
pub const NETWORK_TOPOLOGY_MODE_LABEL: &str = "volcano.sh/network-topology-mode";
/// Label on RayJob / RayCluster choosing the highest network tier allowed.
pub const NETWORK_TOPOLOGY_TIER_LABEL: &str = "volcano.sh/network-topology-highest-tier-allowed";
/// Namespace annotation naming the namespace's default queue (Volcano convention).
pub const NAMESPACE_QUEUE_ANNOTATION: &str = "scheduling.volcano.sh/queue-name";
/// Volcano's default queue.
pub const DEFAULT_QUEUE: &str = "default";

/// Label carrying the RayCluster name on every Ray Pod (KubeRay).
pub const RAY_CLUSTER_LABEL: &str = "ray.io/cluster";
/// Label carrying `head` or `worker` on every Ray Pod (KubeRay).
pub const RAY_NODE_TYPE_LABEL: &str = "ray.io/node-type";
/// Label carrying `headgroup` or the worker group name on every Ray Pod (KubeRay).
pub const RAY_GROUP_LABEL: &str = "ray.io/group";
/// Label naming the replica of a multi-host worker group (`numOfHosts > 1`) a Pod belongs to,
/// `<group>-<5 characters>`, the same on every host of the replica (KubeRay, feature gate
/// RayMultiHostIndexing). raygate's sub-gangs split a multi-host group by it.
pub const REPLICA_NAME_LABEL: &str = "ray.io/worker-group-replica-name";
/// Label with the index of a Pod's replica in its worker group, `0` to `replicas - 1`
/// (KubeRay, RayMultiHostIndexing).
pub const REPLICA_INDEX_LABEL: &str = "ray.io/worker-group-replica-index";
/// Label with the index of a Pod's host inside its multi-host replica, `0` to
/// `numOfHosts - 1` (KubeRay, RayMultiHostIndexing).
pub const HOST_INDEX_LABEL: &str = "ray.io/replica-host-index";
/// Label of the headless worker Service of a cluster with a multi-host group: the cluster's
/// name (KubeRay).
pub const HEADLESS_WORKER_SERVICE_LABEL: &str = "ray.io/headless-worker-svc";
/// Label naming the custom resource a RayCluster or submitter was created for (KubeRay).
pub const ORIGINATED_FROM_CR_NAME_LABEL: &str = "ray.io/originated-from-cr-name";
/// Label naming the kind of that custom resource, e.g. `RayJob` (KubeRay).
pub const ORIGINATED_FROM_CRD_LABEL: &str = "ray.io/originated-from-crd";
/// Annotation switching on legacy GCS fault tolerance (KubeRay).
pub const FT_ENABLED_ANNOTATION: &str = "ray.io/ft-enabled";
/// Annotation with the legacy GCS fault-tolerance storage namespace (KubeRay).
pub const EXTERNAL_STORAGE_NAMESPACE_ANNOTATION: &str = "ray.io/external-storage-namespace";

/// Label the Job controller puts on every Pod of a batch/v1 Job, naming the Job (Kubernetes).
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// Annotation the kubelet puts on mirror Pods of static Pods (Kubernetes).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Finalizer on every RayJob the reconciler manages (KubeRay).
pub const RAYJOB_FINALIZER: &str = "ray.io/rayjob-finalizer";
/// `spec.managedBy` value of the KubeRay operator, which raygate's reconciler also honours.
pub const KUBERAY_MANAGED_BY: &str = "ray.io/kuberay-operator";

/// Whether a RayJob's or RayCluster's `spec.managedBy` hands it to another controller (e.g.
/// Kueue's MultiKueue): anything but unset or [`KUBERAY_MANAGED_BY`], whose place raygate's
/// reconciler takes.
pub fn managed_elsewhere(managed_by: Option<&str>) -> bool {
    managed_by.is_some_and(|m| m != KUBERAY_MANAGED_BY)
}
/// `spec.managedBy` value that hands a RayJob to Kueue's MultiKueue.
pub const MULTIKUEUE_MANAGED_BY: &str = "kueue.x-k8s.io/multikueue";

/// raygate's own API group.
pub const RAYGATE_GROUP: &str = "raygate.io";
/// Annotation that keeps v1-only fields while an object is seen through `ray.io/v1alpha1`.
pub const V1_FIELDS_ANNOTATION: &str = "raygate.io/v1-fields";

/// Namespace raygate is installed into unless told otherwise.
pub const DEFAULT_NAMESPACE: &str = "raygate-system";
/// Name of raygate's ServiceAccount, Deployment, Service, RBAC objects and webhook
/// configurations.
pub const APP_NAME: &str = "raygate";
/// The environment raygate's container runs with: mimalloc's options, which it reads from the
/// environment before `main` (the binary cannot set them itself).
///
/// * Arena eager commit (on by default on Linux) keeps every page raygate ever used in its RSS:
///   freed memory is only marked reusable. Off, freed memory leaves the RSS: 12 MiB of the
///   webhook's 40 MiB in the load benchmark (`webhook/benches/load.rs`, which runs its server
///   with the same environment), at no measurable CPU cost.
/// * Transparent huge pages: mimalloc asks the kernel for them on its arenas, and where the
///   kernel grants them (`always` or `madvise` in `/sys/kernel/mm/transparent_hugepage/enabled`)
///   every 2 MiB region the heap touches is resident whole. Off (mimalloc then disables them
///   for the process), the reconciler's peak RSS over 500 RayJobs fell from 89 to 61 MiB
///   (`rayjob-bench`, which runs it with the same environment; docs/reconciler.md, "Memory").
pub const CONTAINER_ENV: [(&str, &str); 2] = [
    ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
    ("MIMALLOC_ALLOW_THP", "0"),
];
/// How long a stopping webhook server keeps its open connections (`--drain-timeout`), in
/// seconds: longer than the 90 s for which the API server keeps an unused connection before
/// it closes it itself, so that raygate never closes one the API server may be sending a review
/// on (`webhook/src/server.rs`, `serve`). A connection still open then is closed regardless.
pub const DRAIN_TIMEOUT_SECONDS: u64 = 100;
/// Port of raygate's Service that the API server calls webhooks on.
pub const SERVICE_PORT: i32 = 443;
/// HTTPS port the webhook server listens on inside the Pod.
pub const WEBHOOK_PORT: i32 = 9443;
/// Plain-HTTP port of `/healthz`, `/readyz` and `/metrics` inside the Pod: one listener,
/// whichever parts run (`--metrics-address`).
pub const HEALTH_PORT: i32 = 9090;
/// Webhook server path of ConversionReviews (`ray.io` CRDs' `spec.conversion.webhook`).
pub const CONVERT_PATH: &str = "/convert";
/// Webhook server path of the Pod-onboarding mutation (AdmissionReview of Pods).
pub const MUTATE_PODS_PATH: &str = "/mutate/pods";
/// Webhook server path of the RayJob / RayCluster mutation (queue defaulting).
pub const MUTATE_RAY_PATH: &str = "/mutate/ray";
/// Webhook server path of RayJob / RayCluster validation.
pub const VALIDATE_RAY_PATH: &str = "/validate/ray";
/// Webhook server path of QueuePolicy validation.
pub const VALIDATE_QUEUE_POLICY_PATH: &str = "/validate/queuepolicy";
/// Webhook server path of the opt-in label guard (AdmissionReview of Namespaces).
pub const VALIDATE_NAMESPACE_PATH: &str = "/validate/namespace";
/// Webhook server path of the queue check of Volcano Pods that name no PodGroup.
pub const VALIDATE_VOLCANO_POD_PATH: &str = "/validate/volcano-pod";
/// Webhook server path of PodGroup validation against QueuePolicies.
pub const VALIDATE_POD_GROUP_PATH: &str = "/validate/podgroup";
/// Label the API server sets on every Namespace to its name (tamper-resistant selector key).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What stands for the characters the API server appends to a `generateName` (five random
/// ones), in names raygate shows before the object exists.
pub const GENERATED_SUFFIX: &str = "<random>";

// KubeRay's object vocabulary: the labels, annotations and ports of the Pods and Services
// raygate builds as KubeRay v1.7 does (docs/upstream.md).

/// `ray.io/node-type` of the head Pod.
pub const HEAD_NODE_TYPE: &str = "head";
/// `ray.io/node-type` of worker Pods.
pub const WORKER_NODE_TYPE: &str = "worker";
/// `ray.io/group` of the head Pod.
pub const HEAD_GROUP: &str = "headgroup";
/// Label `ray.io/identifier` (`<cluster>-head` / `<cluster>-worker`).
pub const IDENTIFIER_LABEL: &str = "ray.io/identifier";
/// Label `ray.io/is-ray-node` (`yes`).
pub const IS_RAY_NODE_LABEL: &str = "ray.io/is-ray-node";
/// Label `app.kubernetes.io/name` (`kuberay`).
pub const APP_NAME_LABEL: &str = "app.kubernetes.io/name";
/// Label `app.kubernetes.io/created-by`, on everything the RayCluster and RayJob controllers
/// create.
pub const CREATED_BY_LABEL: &str = "app.kubernetes.io/created-by";
/// Value of [`CREATED_BY_LABEL`]: KubeRay's, so tools that select on it keep working.
pub const CREATED_BY_VALUE: &str = "kuberay-operator";
/// Annotation that keeps the user's container command untouched.
pub const OVERWRITE_CONTAINER_CMD_ANNOTATION: &str = "ray.io/overwrite-container-cmd";
/// Default Kubernetes cluster DNS domain.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// Default GCS port of the head.
pub const DEFAULT_GCS_PORT: i32 = 6379;
/// Default dashboard port of the head.
pub const DEFAULT_DASHBOARD_PORT: i32 = 8265;
/// Default Ray client port of the head.
pub const DEFAULT_CLIENT_PORT: i32 = 10001;
/// Name of the head Service KubeRay gives `owner` (a RayCluster, or a RayJob's own head
/// Service): `<owner>-head-svc`.
pub fn head_service_name(owner: &str) -> String {
    format!("{owner}-head-svc")
}

/// The name to show for an object: its `name`, else its `generateName` followed by
/// [`GENERATED_SUFFIX`], else `<unnamed>`.
pub fn display_name(name: Option<&str>, generate_name: Option<&str>) -> String {
    match (
        name.filter(|n| !n.is_empty()),
        generate_name.filter(|g| !g.is_empty()),
    ) {
        (Some(name), _) => name.to_string(),
        (None, Some(prefix)) => format!("{prefix}{GENERATED_SUFFIX}"),
        (None, None) => "<unnamed>".to_string(),
    }
}

/// Name of the PodGroup for a RayJob or a standalone RayCluster: `ray-<owner>-pg`.
pub fn pod_group_name(owner: &str) -> String {
    format!("ray-{owner}-pg")
}

/// The value of `key` in a label or annotation map, if it is set to something: an empty value
/// reads as unset, as KubeRay and Volcano read them.
pub fn value_in<'m>(
    map: impl Into<Option<&'m std::collections::BTreeMap<String, String>>>,
    key: &str,
) -> Option<&'m str> {
    (map.into()?.get(key))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// Whether Pod `labels` are those of `cluster`'s head Pod (KubeRay labels it with the cluster's
/// name and node type `head`).
pub fn is_head_pod_of(
    labels: Option<&std::collections::BTreeMap<String, String>>,
    cluster: &str,
) -> bool {
    labels.is_some_and(|labels| {
        labels.get(RAY_CLUSTER_LABEL).map(String::as_str) == Some(cluster)
            && labels.get(RAY_NODE_TYPE_LABEL).map(String::as_str) == Some(HEAD_NODE_TYPE)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_say_what_the_api_server_will_pick() {
        assert_eq!(display_name(Some("demo"), Some("x-")), "demo");
        assert_eq!(display_name(Some(""), Some("job-")), "job-<random>");
        assert_eq!(display_name(None, Some("job-")), "job-<random>");
        assert_eq!(display_name(None, None), "<unnamed>");
    }

    #[test]
    fn an_empty_or_missing_value_reads_as_unset() {
        let map = std::collections::BTreeMap::from([
            ("set".to_string(), "x".to_string()),
            ("empty".to_string(), String::new()),
        ]);
        assert_eq!(value_in(&map, "set"), Some("x"));
        assert_eq!(value_in(&map, "empty"), None);
        assert_eq!(value_in(&map, "missing"), None);
        assert_eq!(value_in(None, "set"), None);
    }

    #[test]
    fn a_head_pod_is_picked_by_its_cluster_and_node_type() {
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let head = labels(&[(RAY_CLUSTER_LABEL, "demo"), (RAY_NODE_TYPE_LABEL, "head")]);
        let worker = labels(&[(RAY_CLUSTER_LABEL, "demo"), (RAY_NODE_TYPE_LABEL, "worker")]);
        assert!(is_head_pod_of(Some(&head), "demo"));
        assert!(!is_head_pod_of(Some(&head), "other"));
        assert!(!is_head_pod_of(Some(&worker), "demo"));
        assert!(!is_head_pod_of(None, "demo"));
    }

    #[test]
    fn pod_group_name_wraps_owner() {
        assert_eq!(pod_group_name("demo"), "ray-demo-pg");
    }
}
