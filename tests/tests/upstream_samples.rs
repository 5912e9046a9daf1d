//! KubeRay's own sample manifests (`config/samples/` of the KubeRay module the environment
//! builds, `$RAYGATE_KUBERAY_SAMPLES`; tests/env/README.md) as the real-world YAML they are:
//! people start from them, so raygate must read them as KubeRay does.
//!
//! * raygate's check accepts every RayJob and RayCluster among them when KubeRay runs it; when
//!   raygate's own reconciler runs it, the only errors are the features that reconciler does not
//!   run (`UNSUPPORTED_BY_RAYGATE_RECONCILER`), and everything else gets a PodGroup (but a
//!   RayJob on an existing cluster, which joins that cluster's);
//! * `ray.io/v1 → v1alpha1 → v1` gives each object back unchanged;
//! * on the real API server, with raygate's CRDs and webhook: every object is admitted where
//!   KubeRay runs it, and exactly those raygate accepts where raygate's reconciler runs it; and a
//!   stored object written back through `v1alpha1` reads as it was;
//! * KubeRay's Volcano samples, applied unchanged with `kubectl apply` in a namespace opted into
//!   Volcano, run under raygate's reconciler as a gang in the queue they name, their PodGroup the
//!   one `raygate podgroup` prints for the same file.
//!
//! The samples are read where the build put them, never copied into the repository. Run inside
//! the environment: `tests/env/control-plane exec -- cargo test -p raygate-e2e --test upstream_samples`.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use raygate_api::check::{Checked, check_object, ray_kind};
use raygate_api::conversion::{RayVersion, convert};
use raygate_api::finding::Severity;
use raygate_api::input::parse_documents;
use raygate_api::keys::{
    NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE, POD_GROUP_ANNOTATION, RAY_CLUSTER_LABEL,
    RAY_NODE_TYPE_LABEL, RECONCILER_LABEL, TASK_SPEC_ANNOTATION,
};
use raygate_api::ray::v1::{RayCluster, RayJob};
use raygate_api::sizing::SizingError;
use raygate_api::validation::raygate_rules::UNSUPPORTED_BY_RAYGATE_RECONCILER;
use raygate_api::validation::{ReconcilerKind, ValidationContext};
use raygate_api::volcano::{PodGroup, Queue};
use raygate_e2e::cleanup::DeleteOnDrop;
use raygate_e2e::corpus::{dry_run_create, object_key};
use raygate_e2e::{Env, TestNamespace, kubectl};
use serde_json::{Value, json};

/// Fewer Ray objects than this means the samples were not found where they should be: KubeRay
/// v1.5.0 has 54 RayJobs and RayClusters among them (32 RayClusters, 22 RayJobs), v1.6.2 has 55.
const AT_LEAST: usize = 50;

/// One RayJob or RayCluster of a sample file.
struct Sample {
    /// The file, relative to the samples directory, and the object's `Kind/name`.
    key: String,
    object: Value,
}

/// The samples, read once for all the tests of this binary.
static SAMPLES: LazyLock<Vec<Sample>> = LazyLock::new(|| read_samples(&Env::load()));

fn read_samples(env: &Env) -> Vec<Sample> {
    let dir = PathBuf::from(env.var("RAYGATE_KUBERAY_SAMPLES"));
    let mut files = Vec::new();
    yaml_files(&dir, &mut files);
    files.sort();
    let mut samples = Vec::new();
    for path in files {
        let name = path
            .strip_prefix(&dir)
            .unwrap_or(&path)
            .display()
            .to_string();
        let text =
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let documents = parse_documents(&name, &text).unwrap_or_else(|e| panic!("{e}"));
        for object in documents.into_iter().map(|doc| doc.value) {
            if ray_kind(&object).is_some() {
                let key = format!("{name}: {}", object_key(&object));
                samples.push(Sample { key, object });
            }
        }
    }
    assert!(
        samples.len() >= AT_LEAST,
        "only {} RayJobs and RayClusters under {} (tests/env/build kuberay copies KubeRay's samples there)",
        samples.len(),
        dir.display()
    );
    samples
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.expect("a readable directory entry").path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

fn context(reconciler: ReconcilerKind) -> ValidationContext {
    ValidationContext {
        reconciler,
        ..ValidationContext::default()
    }
}

/// raygate's check of `object` for `reconciler`.
fn check(object: &Value, reconciler: ReconcilerKind) -> Checked {
    check_object(object.clone(), &context(reconciler)).expect("a Ray object")
}

/// The error findings of a check, as `(rule, "field: message")`.
fn errors(checked: &Checked) -> Vec<(&str, String)> {
    (checked.report.findings.iter())
        .filter(|f| f.severity == Severity::Error)
        .map(|f| (f.rule.as_str(), format!("{}: {}", f.field, f.message)))
        .collect()
}

#[test]
fn raygate_refuses_a_kuberay_sample_only_for_a_feature_its_reconciler_does_not_run() {
    let mut problems = Vec::new();
    let mut refused_by_raygate = 0;
    for sample in SAMPLES.iter() {
        for (_, error) in errors(&check(&sample.object, ReconcilerKind::Kuberay)) {
            problems.push(format!("{} (KubeRay runs it): {error}", sample.key));
        }
        let checked = check(&sample.object, ReconcilerKind::Raygate);
        let raygate_errors = errors(&checked);
        for (rule, error) in &raygate_errors {
            if !UNSUPPORTED_BY_RAYGATE_RECONCILER.contains(rule) {
                problems.push(format!("{} (raygate runs it): {error}", sample.key));
            } else if !error.contains("--reconciler kuberay") {
                problems.push(format!("{}: {error} does not say what to do", sample.key));
            }
        }
        if raygate_errors.is_empty() {
            match checked.pod_group() {
                // Its Pods are the selected cluster's, gang-scheduled with that cluster.
                Some(Ok(_)) | Some(Err(SizingError::ClusterSelector(_))) => {}
                Some(Err(e)) => problems.push(format!("{}: no PodGroup: {e}", sample.key)),
                None => problems.push(format!("{}: not readable as ray.io/v1", sample.key)),
            }
        } else {
            refused_by_raygate += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The GCS fault tolerance samples are there in every KubeRay release.
    assert!(
        refused_by_raygate > 0,
        "no sample uses a feature raygate's reconciler refuses"
    );
}

#[test]
fn every_kuberay_sample_converts_to_v1alpha1_and_back_unchanged() {
    let mut problems = Vec::new();
    for sample in SAMPLES.iter() {
        let round_trip = convert(sample.object.clone(), RayVersion::V1alpha1)
            .and_then(|old| convert(old, RayVersion::V1));
        match round_trip {
            Ok(back) if back == sample.object => {}
            Ok(back) => problems.push(format!(
                "{}: changed:\n  sent {}\n  back {}",
                sample.key, sample.object, back
            )),
            Err(e) => problems.push(format!("{}: {e}", sample.key)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test]
async fn the_api_server_admits_every_kuberay_sample_raygate_accepts() {
    let env = Env::load();
    let kuberay = TestNamespace::with_labels(
        &env,
        "samples-kuberay",
        &[raygate_e2e::kuberay::RECONCILER_LABEL],
    )
    .await;
    let own =
        TestNamespace::with_labels(&env, "samples-raygate", &[(RECONCILER_LABEL, "raygate")]).await;
    let mut problems = Vec::new();
    let mut refused = 0;
    for sample in SAMPLES.iter() {
        if let Err(message) = dry_run_create(&kuberay, &sample.object).await {
            problems.push(format!(
                "{} (KubeRay runs it): refused: {message}",
                sample.key
            ));
        }
        let accepted = errors(&check(&sample.object, ReconcilerKind::Raygate)).is_empty();
        match (accepted, dry_run_create(&own, &sample.object).await) {
            (true, Ok(())) => {}
            (false, Err(_)) => refused += 1,
            (true, Err(message)) => problems.push(format!(
                "{} (raygate runs it): raygate's check accepts it, the API server refuses it: {message}",
                sample.key
            )),
            (false, Ok(())) => problems.push(format!(
                "{} (raygate runs it): raygate's check refuses it, the API server admits it",
                sample.key
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        refused > 0,
        "the webhook refused no sample where raygate runs it"
    );
}

fn api(ns: &TestNamespace, version: &str, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("ray.io", version, kind));
    Api::namespaced_with(ns.client(), ns.name(), &resource)
}

/// The parts of a stored object a conversion must keep: everything the user wrote, and the
/// annotations (raygate keeps v1-only fields there while an object is read as `v1alpha1`).
fn written(object: &DynamicObject) -> Value {
    let value = serde_json::to_value(object).expect("an object as JSON");
    json!({
        "labels": value["metadata"]["labels"],
        "annotations": value["metadata"]["annotations"],
        "spec": value["spec"],
    })
}

#[tokio::test]
async fn a_stored_kuberay_sample_written_back_through_v1alpha1_reads_as_it_was() {
    let env = Env::load();
    // Nothing reconciles Ray objects here: no KubeRay operator watches this namespace.
    let ns = TestNamespace::with_labels(
        &env,
        "samples-stored",
        &[raygate_e2e::kuberay::RECONCILER_LABEL],
    )
    .await;
    let mut problems = Vec::new();
    for (i, sample) in SAMPLES.iter().enumerate() {
        let mut object = sample.object.clone();
        let kind = object["kind"].as_str().expect("a kind").to_owned();
        // Several samples share a name; each gets its own.
        let name = format!("sample-{i}");
        object["metadata"]["name"] = json!(name);
        object["metadata"]["namespace"] = json!(ns.name());
        if let Some(meta) = object["metadata"].as_object_mut() {
            meta.remove("generateName");
        }
        let created: DynamicObject = serde_json::from_value(object).expect("an object");
        let v1 = api(&ns, "v1", &kind);
        let stored = v1
            .create(&PostParams::default(), &created)
            .await
            .unwrap_or_else(|e| panic!("{}: creating it: {e}", sample.key));
        let old = api(&ns, "v1alpha1", &kind);
        let as_v1alpha1 = old
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("{}: reading it as v1alpha1: {e}", sample.key));
        old.replace(&name, &PostParams::default(), &as_v1alpha1)
            .await
            .unwrap_or_else(|e| panic!("{}: writing it back as v1alpha1: {e}", sample.key));
        let reread = v1
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("{}: reading it as v1: {e}", sample.key));
        if written(&reread) != written(&stored) {
            problems.push(format!(
                "{}: changed:\n  stored {}\n  now    {}",
                sample.key,
                written(&stored),
                written(&reread)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// KubeRay's two Volcano samples: a Queue (`kuberay-test-queue`) and a RayCluster or a RayJob
/// (with its ConfigMap) labelled `ray.io/scheduler-name: volcano` and
/// `volcano.sh/queue-name: kuberay-test-queue`.
const VOLCANO_SAMPLES: [&str; 2] = [
    "ray-cluster.volcano-scheduler-queue.yaml",
    "ray-job.volcano-scheduler-queue.yaml",
];

/// How long a sample's gang may take to be scheduled and run on the kwok nodes.
const GANG_RUNS: Duration = Duration::from_secs(120);

/// The one Ray object of a sample file and the PodGroup `raygate podgroup` makes of it.
fn ray_object_and_pod_group(path: &Path) -> (Value, PodGroup) {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let name = path.display().to_string();
    let object = (parse_documents(&name, &text).unwrap_or_else(|e| panic!("{e}")))
        .into_iter()
        .map(|doc| doc.value)
        .find(|object| ray_kind(object).is_some())
        .unwrap_or_else(|| panic!("{name}: no RayJob or RayCluster"));
    let group = (check(&object, ReconcilerKind::Raygate).pod_group())
        .unwrap_or_else(|| panic!("{name}: not readable as ray.io/v1"))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (object, group)
}

/// The name of the RayCluster whose Pods `object` (a RayCluster, or a RayJob once it has one)
/// runs, if it is known yet.
async fn cluster_of(ns: &TestNamespace, object: &Value) -> anyhow::Result<Option<String>> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if object["kind"] == "RayCluster" {
        return Ok(Some(name.to_owned()));
    }
    let job = ns.api::<RayJob>().get(name).await?;
    Ok(job
        .status
        .and_then(|s| s.ray_cluster_name)
        .filter(|n| !n.is_empty()))
}

#[tokio::test]
async fn kuberays_volcano_samples_applied_unchanged_run_as_a_gang_in_their_queue() {
    let env = Env::load();
    let dir = PathBuf::from(env.var("RAYGATE_KUBERAY_SAMPLES"));
    // Dropped after the namespace (declared first), so no PodGroup is left in the queue.
    let _queue = DeleteOnDrop::<Queue>::new(&env.kube_config().await, "kuberay-test-queue");
    let ns = TestNamespace::with_labels(
        &env,
        "samples-volcano",
        &[
            (NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE),
            (RECONCILER_LABEL, "raygate"),
        ],
    )
    .await;
    for sample in VOLCANO_SAMPLES {
        let path = dir.join(sample);
        let (object, expected) = ray_object_and_pod_group(&path);
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let file = path.display().to_string();
        // As users apply it: the file as it is, Queue and ConfigMap included.
        kubectl::stdout(&["apply", "-n", ns.name(), "-f", &file]).await;

        let group_name = expected.metadata.name.clone().expect("a PodGroup name");
        let group = ns
            .wait_for(&format!("PodGroup {group_name}"), GANG_RUNS, || async {
                Ok(ns.api::<PodGroup>().get_opt(&group_name).await?)
            })
            .await;
        assert_eq!(
            (group.spec.queue.as_deref(), group.spec.min_member),
            (Some("kuberay-test-queue"), Some(3)),
            "{sample}: the gang is the head and two workers, in the queue the sample names"
        );
        assert_eq!(
            group.spec.min_resources, expected.spec.min_resources,
            "{sample}: the PodGroup in the cluster is the one `raygate podgroup` prints"
        );

        let cluster = ns
            .wait_for(
                &format!("the RayCluster of {kind} {name}"),
                GANG_RUNS,
                || cluster_of(&ns, &object),
            )
            .await;
        let selector = format!("{RAY_CLUSTER_LABEL}={cluster},{RAY_NODE_TYPE_LABEL}");
        let params = ListParams::default().labels(&selector);
        let pods = ns
            .wait_for(
                &format!("3 Running Pods of {cluster}"),
                GANG_RUNS,
                || async {
                    let pods = ns.api::<Pod>().list(&params).await?.items;
                    let running = pods
                        .iter()
                        .filter(|p| {
                            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                        })
                        .count();
                    Ok((running == 3).then_some(pods))
                },
            )
            .await;
        for pod in &pods {
            let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
            let annotations = pod.metadata.annotations.clone().unwrap_or_default();
            assert_eq!(
                pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()),
                Some("volcano"),
                "{sample}: Pod {pod_name}"
            );
            assert_eq!(
                annotations.get(POD_GROUP_ANNOTATION),
                Some(&group_name),
                "{sample}: Pod {pod_name}"
            );
            assert!(
                annotations.contains_key(TASK_SPEC_ANNOTATION),
                "{sample}: Pod {pod_name} has no {TASK_SPEC_ANNOTATION}"
            );
        }
        // Out of the queue (capability 4 CPUs) before the next sample's gang of 3 comes.
        let deleted = match kind.as_str() {
            "RayJob" => ns
                .api::<RayJob>()
                .delete(&name, &DeleteParams::default())
                .await
                .map(drop),
            _ => (ns.api::<RayCluster>())
                .delete(&name, &DeleteParams::default())
                .await
                .map(drop),
        };
        deleted.unwrap_or_else(|e| panic!("{sample}: deleting {kind} {name}: {e}"));
        ns.wait_for(
            &format!("the Pods of {cluster} gone"),
            GANG_RUNS,
            || async {
                Ok(ns
                    .api::<Pod>()
                    .list(&params)
                    .await?
                    .items
                    .is_empty()
                    .then_some(()))
            },
        )
        .await;
    }
}
