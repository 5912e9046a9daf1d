//! raygate's own rules (compat `raygate`): where KubeRay v1.7 lets a broken object through and
//! it then fails silently, loops, or behaves differently from what the manifest says.
//!
//! Each constant is the stable rule name; its doc comment says why the rule exists (citing the
//! defects of docs/upstream.md, "KubeRay: known defects", by number) and whether it is an error
//! (the object is rejected) or a warning (accepted, the user is told). The policy, from defect 19:
//! reject where the failure is certain, warn where it is not.

/// **Error.** Worker group names must be unique within a cluster. KubeRay checks this only in
/// its optional, off-by-default webhook; with duplicates the controller creates and deletes the
/// groups' Pods in a loop (defect 5). Field: the second and later `groupName`s.
pub const WORKER_GROUP_DUPLICATE_NAME: &str = "worker-group-duplicate-name";

/// **Error.** A worker group name becomes the value of the `ray.io/group` Pod label (and of
/// Volcano's `volcano.sh/task-spec`), so it must be a valid label value; otherwise every Pod
/// create is refused by the API server and the cluster never comes up (defect 19: outcome
/// certain).
pub const WORKER_GROUP_NAME_INVALID: &str = "worker-group-name-invalid";

/// **Warning.** `replicas` outside `[minReplicas, maxReplicas]` is not an error in KubeRay: it is
/// silently clamped. Users usually did not mean it, and gang sizing uses the clamped count
/// (docs/upstream.md, "KubeRay: validation"; defect 11).
pub const WORKER_GROUP_REPLICAS_OUT_OF_RANGE: &str = "worker-group-replicas-out-of-range";

/// **Error.** `numOfHosts < 1`. KubeRay has no rule (docs/upstream.md, "KubeRay: validation"); the
/// value multiplies every Pod count and resource quantity, so 0 or a negative number yields groups
/// with no Pods and nonsensical gang sizes (defects 10–12).
pub const WORKER_GROUP_NUM_OF_HOSTS: &str = "worker-group-num-of-hosts";

/// **Warning.** The Ray container (`containers[0]`) of the head or a worker group has no CPU or no
/// memory request or limit: the PodGroup's `minResources` then counts 0 for it and Volcano reserves
/// nothing, so the gang can be admitted into a queue that cannot hold it (docs/upstream.md,
/// "KubeRay: Volcano adapter"; defects 11–12). Not certain to fail, hence a warning.
pub const RAY_CONTAINER_NO_RESOURCES: &str = "ray-container-no-resources";

/// **Error.** `submissionMode` is not one of `K8sJobMode`, `HTTPMode`, `InteractiveMode`,
/// `SidecarMode`. The CRD has no enum and KubeRay does not check it; an unknown mode fails only
/// when the submit command is built, or leaves the job waiting forever (docs/upstream.md,
/// "KubeRay: RayJob API"; defect 19).
pub const RAYJOB_UNKNOWN_SUBMISSION_MODE: &str = "rayjob-unknown-submission-mode";

/// **Warning.** Both `clusterSelector` and `rayClusterSpec` are set: the selector wins and the
/// cluster spec is silently ignored (docs/upstream.md, "KubeRay: RayJob API").
pub const RAYJOB_CLUSTER_SPEC_IGNORED: &str = "rayjob-cluster-spec-ignored";

/// **Warning.** `shutdownAfterJobFinishes` with `clusterSelector`: accepted by KubeRay, but the
/// existing cluster is never deleted (docs/upstream.md, "KubeRay: validation"; defect 16).
pub const RAYJOB_CLUSTER_SELECTOR_SHUTDOWN: &str = "rayjob-cluster-selector-shutdown";

/// **Error.** A K8sJobMode `submitterPodTemplate` with no containers. KubeRay uses the template
/// verbatim; the Job is refused by the API server and the RayJob stays Initializing with only an
/// event (docs/upstream.md, "KubeRay: RayJob submitter"; defect 6).
pub const RAYJOB_SUBMITTER_NO_CONTAINERS: &str = "rayjob-submitter-no-containers";

/// **Error.** A K8sJobMode `submitterPodTemplate` without `restartPolicy`. A Pod's default is
/// `Always`, which the Job API refuses, so the RayJob hangs (docs/upstream.md,
/// "KubeRay: RayJob submitter"; defect 6).
///
/// Decision: reject rather than default. Admission *validation* cannot change the object, and a
/// silent default in a mutating webhook would make the stored object differ from what the user
/// applied (and from what plain KubeRay would do with the same YAML). The message tells the user
/// to set `restartPolicy: Never`, which is what KubeRay's own default submitter uses.
pub const RAYJOB_SUBMITTER_RESTART_POLICY_MISSING: &str = "rayjob-submitter-restart-policy-missing";

/// **Error.** A K8sJobMode `submitterPodTemplate` whose `restartPolicy` is neither `Never` nor
/// `OnFailure` (e.g. `Always`): Jobs only allow those two, so the Job create fails
/// (docs/upstream.md, "KubeRay: RayJob submitter"; defect 6).
pub const RAYJOB_SUBMITTER_RESTART_POLICY_INVALID: &str = "rayjob-submitter-restart-policy-invalid";

/// **Error.** A `submitterPodTemplate` container without a `name`: the Job is refused
/// (docs/upstream.md, "KubeRay: RayJob submitter"; defect 6).
pub const RAYJOB_SUBMITTER_CONTAINER_NAME_MISSING: &str = "rayjob-submitter-container-name-missing";

/// **Error.** A `submitterPodTemplate` container without an `image`: KubeRay does not fill it in
/// for a user template, so the Job is refused (docs/upstream.md, "KubeRay: RayJob submitter";
/// defect 6).
pub const RAYJOB_SUBMITTER_CONTAINER_IMAGE_MISSING: &str =
    "rayjob-submitter-container-image-missing";

/// **Warning.** `submitterPodTemplate` in HTTPMode or InteractiveMode, where no submitter Job
/// exists: the template is silently ignored (docs/upstream.md, "KubeRay: RayJob API").
pub const RAYJOB_SUBMITTER_TEMPLATE_IGNORED: &str = "rayjob-submitter-template-ignored";

/// **Warning.** A RayJob queued by Kueue (label `kueue.x-k8s.io/queue-name`) whose head + worker
/// groups + K8sJobMode submitter exceed Kueue's 18 PodSets per Workload: Kueue's webhook does not
/// count the submitter, so the job passes admission and is then never admitted (defect 23).
/// Derived from Kueue's code, not confirmed by a test upstream, hence a warning.
pub const RAYJOB_KUEUE_POD_SET_LIMIT: &str = "rayjob-kueue-pod-set-limit";

/// **Warning.** Empty `entrypoint` outside InteractiveMode: KubeRay accepts it and submits an empty
/// command, which fails only once the cluster is up (docs/upstream.md, "KubeRay: validation";
/// defect 19). Not certain to fail (a K8sJobMode `submitterPodTemplate` with its own `command`
/// never uses the entrypoint), hence a warning.
pub const RAYJOB_ENTRYPOINT_EMPTY: &str = "rayjob-entrypoint-empty";

/// **Error.** `entrypointResources` that is not a JSON object of numbers: KubeRay passes it on
/// unchecked and the submission fails once the cluster is up (HTTPMode: JSON decoding; CLI: `ray
/// job submit` rejects it) (docs/upstream.md, "KubeRay: validation"; defect 19: outcome certain).
pub const RAYJOB_ENTRYPOINT_RESOURCES_INVALID: &str = "rayjob-entrypoint-resources-invalid";

/// **Error.** `metadata` set while `rayClusterSpec.rayVersion` does not parse or is below 2.6.0,
/// in K8sJobMode or SidecarMode: KubeRay fails only when it builds the submit command, with the
/// same messages as here (docs/upstream.md, "KubeRay: RayJob submitter"; defect 19).
pub const RAYJOB_METADATA_RAY_VERSION: &str = "rayjob-metadata-ray-version";

/// **Error, `--reconciler raygate` only.** GCS fault tolerance (`gcsFaultToleranceOptions`, or
/// annotation `ray.io/ft-enabled: "true"`): not run by raygate's reconciler.
pub const UNSUPPORTED_GCS_FAULT_TOLERANCE: &str = "unsupported-gcs-fault-tolerance";
/// **Error, `--reconciler raygate` only.** `tlsOptions` (mTLS): not run by raygate's reconciler.
pub const UNSUPPORTED_TLS: &str = "unsupported-tls";
/// **Error, `--reconciler raygate` only.** `historyServerOptions`: not run by raygate's
/// reconciler.
pub const UNSUPPORTED_HISTORY_SERVER: &str = "unsupported-history-server";
/// **Error, `--reconciler raygate` only.** `networkPolicy`: not run by raygate's reconciler.
pub const UNSUPPORTED_NETWORK_POLICY: &str = "unsupported-network-policy";
/// **Error, `--reconciler raygate` only.** `authOptions.enableK8sTokenAuth: true`: raygate's
/// reconciler runs token authentication with a token in a Secret only, not with Kubernetes
/// service-account tokens.
pub const UNSUPPORTED_K8S_TOKEN_AUTH: &str = "unsupported-k8s-token-auth";

/// The rules that refuse a feature raygate's own reconciler does not run (`--reconciler raygate`
/// only): each names the field and says to run the object with KubeRay or remove the field.
pub const UNSUPPORTED_BY_RAYGATE_RECONCILER: [&str; 5] = [
    UNSUPPORTED_GCS_FAULT_TOLERANCE,
    UNSUPPORTED_TLS,
    UNSUPPORTED_HISTORY_SERVER,
    UNSUPPORTED_NETWORK_POLICY,
    UNSUPPORTED_K8S_TOKEN_AUTH,
];

/// Every raygate rule name, in catalogue order.
pub const ALL: [&str; 23] = [
    WORKER_GROUP_DUPLICATE_NAME,
    WORKER_GROUP_NAME_INVALID,
    WORKER_GROUP_REPLICAS_OUT_OF_RANGE,
    WORKER_GROUP_NUM_OF_HOSTS,
    RAY_CONTAINER_NO_RESOURCES,
    RAYJOB_UNKNOWN_SUBMISSION_MODE,
    RAYJOB_CLUSTER_SPEC_IGNORED,
    RAYJOB_CLUSTER_SELECTOR_SHUTDOWN,
    RAYJOB_SUBMITTER_NO_CONTAINERS,
    RAYJOB_SUBMITTER_RESTART_POLICY_MISSING,
    RAYJOB_SUBMITTER_RESTART_POLICY_INVALID,
    RAYJOB_SUBMITTER_CONTAINER_NAME_MISSING,
    RAYJOB_SUBMITTER_CONTAINER_IMAGE_MISSING,
    RAYJOB_SUBMITTER_TEMPLATE_IGNORED,
    RAYJOB_KUEUE_POD_SET_LIMIT,
    RAYJOB_ENTRYPOINT_EMPTY,
    RAYJOB_ENTRYPOINT_RESOURCES_INVALID,
    RAYJOB_METADATA_RAY_VERSION,
    UNSUPPORTED_GCS_FAULT_TOLERANCE,
    UNSUPPORTED_TLS,
    UNSUPPORTED_HISTORY_SERVER,
    UNSUPPORTED_NETWORK_POLICY,
    UNSUPPORTED_K8S_TOKEN_AUTH,
];
