use std::collections::{BTreeMap, BTreeSet};
use std::pin::pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use serde_json::json;

use super::*;

/// The error of a read from a [`World`] kind that is down.
#[derive(Debug, PartialEq)]
struct Unreachable(&'static str);

/// Objects by `namespace/name` (Namespaces by name), and a record of every read, so that a test
/// also sees which reads a decision made.
#[derive(Default)]
struct World {
    namespaces: BTreeMap<String, Labels>,
    ray_clusters: BTreeMap<String, ObjectMeta>,
    ray_jobs: BTreeMap<String, ObjectMeta>,
    jobs: BTreeMap<String, ObjectMeta>,
    /// Kinds whose reads fail.
    down: BTreeSet<&'static str>,
    reads: Mutex<Vec<String>>,
}

impl World {
    fn read<T: Clone>(
        &self,
        kind: &'static str,
        objects: &BTreeMap<String, T>,
        key: String,
    ) -> Result<Option<T>, Unreachable> {
        self.reads
            .lock()
            .expect("no test panics while holding it")
            .push(format!("{kind} {key}"));
        if self.down.contains(kind) {
            return Err(Unreachable(kind));
        }
        Ok(objects.get(&key).cloned())
    }

    fn reads(&self) -> Vec<String> {
        self.reads
            .lock()
            .expect("no test panics while holding it")
            .clone()
    }
}

impl PodLookups for World {
    type Error = Unreachable;

    async fn namespace_labels(&self, name: &str) -> Result<Option<Labels>, Unreachable> {
        self.read("Namespace", &self.namespaces, name.to_string())
    }

    async fn ray_cluster(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, Unreachable> {
        self.read(
            "RayCluster",
            &self.ray_clusters,
            format!("{namespace}/{name}"),
        )
    }

    async fn ray_job(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ObjectMeta>, Unreachable> {
        self.read("RayJob", &self.ray_jobs, format!("{namespace}/{name}"))
    }

    fn cached_ray_job(&self, namespace: &str, name: &str) -> Option<ObjectMeta> {
        let key = format!("{namespace}/{name}");
        self.read("cached RayJob", &self.ray_jobs, key)
            .expect("a cached read cannot fail")
    }

    async fn job(&self, namespace: &str, name: &str) -> Result<Option<ObjectMeta>, Unreachable> {
        self.read("Job", &self.jobs, format!("{namespace}/{name}"))
    }
}

fn meta(object: Value) -> ObjectMeta {
    serde_json::from_value(object).expect("well-formed metadata")
}

/// Opted-in namespace `ml` and unlabelled `web`; in `ml`, standalone RayCluster `demo`, RayJob
/// `train` (queue `research`) with its cluster (labelled with a stale queue, to tell whose
/// labels a Pod gets) and its submitter Job.
fn world() -> World {
    let ray_job_owner = json!([{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "train",
                                "uid": "j-train", "controller": true}]);
    World {
        namespaces: BTreeMap::from([
            (
                "ml".into(),
                Labels::from([("raygate.io/scheduler".into(), "volcano".into())]),
            ),
            ("web".into(), Labels::from([("team".into(), "web".into())])),
        ]),
        ray_clusters: BTreeMap::from([
            (
                "ml/demo".into(),
                meta(json!({"name": "demo", "namespace": "ml", "uid": "c-demo",
                    "labels": {"volcano.sh/queue-name": "batch", "ray.io/priority-class-name": "high"}})),
            ),
            (
                "ml/train-raycluster-x".into(),
                meta(
                    json!({"name": "train-raycluster-x", "namespace": "ml", "uid": "c-train",
                    "labels": {"volcano.sh/queue-name": "stale"},
                    "ownerReferences": ray_job_owner}),
                ),
            ),
        ]),
        ray_jobs: BTreeMap::from([(
            "ml/train".into(),
            meta(json!({"name": "train", "namespace": "ml", "uid": "j-train",
                "labels": {"volcano.sh/queue-name": "research"}})),
        )]),
        jobs: BTreeMap::from([(
            "ml/train".into(),
            meta(json!({"name": "train", "namespace": "ml", "uid": "job-1",
                "ownerReferences": ray_job_owner})),
        )]),
        ..World::default()
    }
}

/// A Ray Pod of `cluster` in namespace `ml` as KubeRay creates it.
fn ray_pod(node_type: &str, group: &str, cluster: &str) -> Value {
    json!({"metadata": {"namespace": "ml",
            "labels": {"ray.io/node-type": node_type, "ray.io/group": group, "ray.io/cluster": cluster}},
        "spec": {"containers": []}})
}

/// A Pod of batch Job `job` in namespace `ml`, labelled only as the Job controller labels it
/// (as KubeRay v1.5.0's submitter Pods are).
fn job_pod(job: &str) -> Value {
    json!({"metadata": {"namespace": "ml", "labels": {"batch.kubernetes.io/job-name": job},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                 "uid": "job-1", "controller": true}]},
        "spec": {"containers": []}})
}

/// The decision, from a world whose reads never wait.
fn decide(
    world: &World,
    pod: &Value,
    namespace: Option<&str>,
) -> Result<PodOnboarding, Unreachable> {
    let opt_in = OptInLabel::default();
    let review = pin!(review_pod(pod, namespace, &opt_in, world));
    match review.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(decision) => decision,
        Poll::Pending => panic!("in-memory reads are always ready"),
    }
}

/// The Pod as the onboarding decision leaves it, and the decision's warnings.
fn onboard(world: &World, pod: &Value) -> (Value, Vec<String>) {
    match decide(world, pod, Some("ml")) {
        Ok(PodOnboarding::Onboarded(onboarding)) => {
            let mut patched = pod.clone();
            json_patch::patch(&mut patched, &onboarding.patch).expect("the patch applies");
            (patched, onboarding.warnings)
        }
        other => panic!("not onboarded: {other:?}"),
    }
}

/// `(scheduler, PodGroup, task, queue, priority class)` of a patched Pod.
fn placement(pod: &Value) -> [&str; 5] {
    [
        "/spec/schedulerName",
        "/metadata/annotations/scheduling.k8s.io~1group-name",
        "/metadata/annotations/volcano.sh~1task-spec",
        "/metadata/labels/volcano.sh~1queue-name",
        "/metadata/labels/ray.io~1priority-class-name",
    ]
    .map(|pointer| pod.pointer(pointer).and_then(Value::as_str).unwrap_or("-"))
}

#[test]
fn a_ray_pod_in_an_opted_in_namespace_joins_its_clusters_gang() {
    let world = world();
    let (pod, warnings) = onboard(&world, &ray_pod("head", "headgroup", "demo"));
    assert_eq!(
        placement(&pod),
        ["volcano", "ray-demo-pg", "headgroup", "batch", "high"]
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    // A standalone cluster's Pods need no RayJob.
    assert_eq!(world.reads(), ["Namespace ml", "RayCluster ml/demo"]);
}

#[test]
fn a_rayjobs_cluster_pod_joins_the_rayjobs_gang_with_its_labels() {
    let world = world();
    let worker = ray_pod("worker", "gpu", "train-raycluster-x");
    let (pod, _) = onboard(&world, &worker);
    assert_eq!(
        placement(&pod),
        ["volcano", "ray-train-pg", "gpu", "research", "-"]
    );
    assert_eq!(
        world.reads(),
        [
            "Namespace ml",
            "RayCluster ml/train-raycluster-x",
            "RayJob ml/train"
        ]
    );
    // Once the RayJob is gone, the labels KubeRay copied to its cluster stand in.
    let mut orphaned = self::world();
    orphaned.ray_jobs.clear();
    let (pod, _) = onboard(&orphaned, &worker);
    assert_eq!(
        placement(&pod),
        ["volcano", "ray-train-pg", "gpu", "stale", "-"]
    );
}

#[test]
fn pods_outside_opted_in_namespaces_are_left_alone() {
    let world = world();
    let mut pod = ray_pod("head", "headgroup", "demo");
    for namespace in ["web", "nowhere"] {
        pod["metadata"]["namespace"] = json!(namespace);
        assert_eq!(
            decide(&world, &pod, Some(namespace)),
            Ok(PodOnboarding::LeftAlone),
            "{namespace}"
        );
    }
    // The request's namespace wins over the Pod's own.
    assert_eq!(
        decide(&world, &pod, Some("web")),
        Ok(PodOnboarding::LeftAlone)
    );
    pod["metadata"]["namespace"] = json!("web");
    assert!(matches!(
        decide(&world, &pod, Some("ml")),
        Ok(PodOnboarding::Onboarded(_))
    ));
}

#[test]
fn mirror_pods_and_ordinary_pods_are_left_alone_unread() {
    let world = world();
    let mut mirror = ray_pod("head", "headgroup", "demo");
    mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "x"});
    let plain = json!({"metadata": {"labels": {"app": "web"}}, "spec": {}});
    for pod in [mirror, plain] {
        assert_eq!(
            decide(&world, &pod, Some("ml")),
            Ok(PodOnboarding::LeftAlone)
        );
    }
    assert!(world.reads().is_empty(), "{:?}", world.reads());
}

#[test]
fn a_rayjobs_submitter_job_pod_joins_the_rayjobs_gang() {
    let world = world();
    let (pod, warnings) = onboard(&world, &job_pod("train"));
    assert_eq!(
        placement(&pod),
        ["volcano", "ray-train-pg", "submittergroup", "research", "-"]
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        world.reads(),
        ["Namespace ml", "cached RayJob ml/train", "Job ml/train"]
    );
}

#[test]
fn a_submitter_labelled_as_one_joins_the_rayjobs_gang_without_reading_a_cluster() {
    let world = world();
    let submitter = json!({"metadata": {"namespace": "ml",
            "labels": {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "train",
                       "ray.io/cluster": "train-raycluster-x"}},
        "spec": {}});
    let (pod, _) = onboard(&world, &submitter);
    assert_eq!(
        placement(&pod),
        ["volcano", "ray-train-pg", "submittergroup", "research", "-"]
    );
    assert_eq!(world.reads(), ["Namespace ml", "RayJob ml/train"]);
}

#[test]
fn ordinary_job_pods_are_left_alone() {
    let world = world();
    assert_eq!(
        decide(&world, &job_pod("etl"), Some("ml")),
        Ok(PodOnboarding::LeftAlone)
    );
    // No RayJob of its name at hand: the Job itself is not read.
    assert_eq!(world.reads(), ["Namespace ml", "cached RayJob ml/etl"]);
    // A Job of a RayJob's name that the RayJob does not control, and one that is gone.
    let mut unowned = self::world();
    unowned.jobs.insert(
        "ml/train".into(),
        meta(json!({"name": "train", "namespace": "ml", "uid": "job-2"})),
    );
    let mut gone = self::world();
    gone.jobs.clear();
    for world in [unowned, gone] {
        assert_eq!(
            decide(&world, &job_pod("train"), Some("ml")),
            Ok(PodOnboarding::LeftAlone)
        );
    }
}

#[test]
fn a_pod_of_a_missing_raycluster_joins_its_gang_with_a_warning() {
    let world = world();
    let (pod, warnings) = onboard(&world, &ray_pod("worker", "gpu", "gone"));
    assert_eq!(placement(&pod), ["volcano", "ray-gone-pg", "gpu", "-", "-"]);
    assert_eq!(
        warnings,
        [
            "metadata.labels[\"ray.io/cluster\"]: RayCluster \"gone\" not found; the Pod joins its gang without the owner's queue and priority"
        ]
    );
    // The patch's own warnings follow the lookup's.
    let mut pod = ray_pod("worker", "gpu", "gone");
    pod["spec"]["schedulerName"] = json!("mine");
    let (_, warnings) = onboard(&world, &pod);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[1].starts_with("spec.schedulerName is \"mine\""));
}

#[test]
fn a_ray_pod_naming_no_owner_is_warned_about() {
    let world = world();
    let mut pod = ray_pod("worker", "gpu", "");
    assert_eq!(
        decide(&world, &pod, Some("ml")),
        Ok(PodOnboarding::NoGang {
            warning: "metadata.labels: this gpu Pod names no RayCluster or RayJob (\"ray.io/cluster\"), so raygate cannot gang-schedule it".into()
        })
    );
    pod["metadata"]["labels"]
        .as_object_mut()
        .expect("labels")
        .remove("ray.io/cluster");
    assert!(matches!(
        decide(&world, &pod, Some("ml")),
        Ok(PodOnboarding::NoGang { .. })
    ));
    assert_eq!(world.reads(), ["Namespace ml", "Namespace ml"]);
}

#[test]
fn a_failed_read_ends_the_review() {
    let cases = [
        ("Namespace", ray_pod("head", "headgroup", "demo")),
        ("RayCluster", ray_pod("head", "headgroup", "demo")),
        ("RayJob", ray_pod("worker", "gpu", "train-raycluster-x")),
        ("Job", job_pod("train")),
    ];
    for (kind, pod) in cases {
        let mut world = world();
        world.down.insert(kind);
        assert_eq!(
            decide(&world, &pod, Some("ml")),
            Err(Unreachable(kind)),
            "{kind}"
        );
    }
}

#[test]
fn reviews_without_a_namespace_or_a_spec_are_malformed() {
    let world = world();
    let mut pod = ray_pod("head", "headgroup", "demo");
    pod["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("namespace");
    assert_eq!(
        decide(&world, &pod, None),
        Ok(PodOnboarding::Malformed(MalformedPod::NoNamespace))
    );
    assert_eq!(
        decide(&world, &pod, Some("")),
        Ok(PodOnboarding::Malformed(MalformedPod::NoNamespace))
    );
    assert_eq!(
        MalformedPod::NoNamespace.to_string(),
        "request.namespace: Required value: a Pod is namespaced"
    );
    // The Pod's own namespace stands in for the request's.
    let pod = ray_pod("head", "headgroup", "demo");
    assert!(matches!(
        decide(&world, &pod, None),
        Ok(PodOnboarding::Onboarded(_))
    ));
    let mut specless = pod;
    specless.as_object_mut().expect("pod").remove("spec");
    let decision = decide(&world, &specless, Some("ml"));
    assert_eq!(decision, Ok(PodOnboarding::Malformed(MalformedPod::NoSpec)));
    assert_eq!(
        MalformedPod::NoSpec.to_string(),
        "request.object.spec: Required value: a Pod has a spec object, which raygate adds spec.schedulerName to"
    );
}
