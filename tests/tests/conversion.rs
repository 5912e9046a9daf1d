//! raygate's conversion webhook on the real API server: `ray.io/v1alpha1` and `ray.io/v1` side
//! by side without losing a field.
//!
//! `control-plane up` points the `ray.io` CRDs' conversion webhook at the raygate webhook server
//! it starts (`https://127.0.0.1:9443/convert`); with raygate installed in-cluster, the CRDs of
//! the installation name its Service (`tests/run` runs this suite both ways).

use std::process::Stdio;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use raygate_api::conversion::v1_only_paths;
use raygate_api::keys;
use raygate_e2e::{Env, TestNamespace};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

/// The objects with KubeRay-only features (the in-tree autoscaler, GCS fault tolerance) live
/// where KubeRay runs Ray objects, so that they are admitted whichever controller the
/// installation runs by default (docs/reconciler.md, "Coexisting with KubeRay").
const KUBERAY_RUNS_THEM: (&str, &str) = raygate_e2e::kuberay::RECONCILER_LABEL;

fn api(ns: &TestNamespace, version: &str, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("ray.io", version, kind));
    Api::namespaced_with(ns.client(), ns.name(), &resource)
}

async fn create(ns: &TestNamespace, mut object: Value) -> DynamicObject {
    object["metadata"]["namespace"] = json!(ns.name());
    let version = object["apiVersion"]
        .as_str()
        .unwrap()
        .trim_start_matches("ray.io/")
        .to_owned();
    let kind = object["kind"].as_str().unwrap().to_owned();
    let dynamic: DynamicObject = serde_json::from_value(object).expect("an object");
    api(ns, &version, &kind)
        .create(&PostParams::default(), &dynamic)
        .await
        .unwrap_or_else(|e| panic!("creating the {version} {kind}: {e}"))
}

async fn get(ns: &TestNamespace, version: &str, kind: &str, name: &str) -> Value {
    let object = api(ns, version, kind)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("reading {kind} {name} through {version}: {e}"));
    serde_json::to_value(object).unwrap()
}

/// Runs `kubectl ARGS` inside the environment with `stdin`, returning stdout; panics with
/// stderr on failure.
async fn kubectl(env: &Env, args: &[&str], stdin: Option<&[u8]>) -> String {
    let mut child = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl runs");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input).await.unwrap();
        drop(pipe);
    }
    let output = child.wait_with_output().await.expect("kubectl finishes");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn has_path(object: &Value, path: &str) -> bool {
    fn walk(value: &Value, parts: &[&str]) -> bool {
        let Some((first, rest)) = parts.split_first() else {
            return true;
        };
        match first.strip_suffix("[*]") {
            Some(name) => value
                .get(name)
                .and_then(Value::as_array)
                .is_some_and(|items| items.iter().any(|i| walk(i, rest))),
            None => value.get(*first).is_some_and(|v| walk(v, rest)),
        }
    }
    walk(object, &path.split('.').collect::<Vec<_>>())
}

/// A v1alpha1 RayJob as KubeRay's v1.0 docs published it (`ray-job.sample.yaml`).
fn docs_v1alpha1_rayjob() -> Value {
    json!({
        "apiVersion": "ray.io/v1alpha1",
        "kind": "RayJob",
        "metadata": {"name": "rayjob-sample"},
        "spec": {
            "entrypoint": "python /home/ray/samples/sample_code.py",
            "runtimeEnvYAML": "pip:\n  - requests==2.26.0\n  - pendulum==2.1.2\nenv_vars:\n  counter_name: \"test_counter\"\n",
            "rayClusterSpec": {
                "rayVersion": "2.9.0",
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-host": "0.0.0.0"},
                    "template": {"spec": {"containers": [{
                        "name": "ray-head", "image": "rayproject/ray:2.9.0",
                        "ports": [{"containerPort": 6379, "name": "gcs-server"},
                                  {"containerPort": 8265, "name": "dashboard"},
                                  {"containerPort": 10001, "name": "client"}],
                        "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "200m"}},
                    }]}},
                },
                "workerGroupSpecs": [{
                    "replicas": 1, "minReplicas": 1, "maxReplicas": 5, "groupName": "small-group",
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{
                        "name": "ray-worker", "image": "rayproject/ray:2.9.0",
                        "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "200m"}},
                    }]}},
                }],
            },
        },
    })
}

#[tokio::test]
async fn a_v1alpha1_rayjob_from_older_docs_is_accepted_and_readable_as_v1() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "conv-docs").await;
    let manifest = docs_v1alpha1_rayjob();
    create(&ns, manifest.clone()).await;

    let v1 = get(&ns, "v1", "RayJob", "rayjob-sample").await;
    assert_eq!(v1["apiVersion"], "ray.io/v1");
    // Everything the manifest said is there; v1 adds only its own defaults.
    let spec = &v1["spec"];
    assert_eq!(spec["entrypoint"], manifest["spec"]["entrypoint"]);
    assert_eq!(spec["runtimeEnvYAML"], manifest["spec"]["runtimeEnvYAML"]);
    let cluster = &spec["rayClusterSpec"];
    assert_eq!(
        cluster["headGroupSpec"]["rayStartParams"],
        json!({"dashboard-host": "0.0.0.0"})
    );
    assert_eq!(
        cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["image"],
        "rayproject/ray:2.9.0"
    );
    assert_eq!(cluster["workerGroupSpecs"][0]["groupName"], "small-group");
    assert_eq!(cluster["workerGroupSpecs"][0]["maxReplicas"], 5);
    assert_eq!(spec["submissionMode"], "K8sJobMode", "v1's default applies");
    let annotations = v1["metadata"]["annotations"].as_object();
    assert!(
        annotations.is_none_or(|a| !a.contains_key(keys::V1_FIELDS_ANNOTATION)),
        "the reserved annotation never shows in v1: {annotations:?}"
    );

    // Both versions list it, with kubectl.
    for resource in ["rayjobs.v1alpha1.ray.io", "rayjobs.v1.ray.io"] {
        let names = kubectl(
            &env,
            &[
                "get",
                resource,
                "-n",
                ns.name(),
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ],
            None,
        )
        .await;
        assert_eq!(names.trim(), "rayjob-sample", "kubectl get {resource}");
    }
    let listed = kubectl(
        &env,
        &[
            "get",
            "rayjobs.v1alpha1.ray.io",
            "-n",
            ns.name(),
            "-o",
            "json",
        ],
        None,
    )
    .await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["items"][0]["apiVersion"], "ray.io/v1alpha1");
    assert_eq!(
        listed["items"][0]["spec"]["entrypoint"],
        manifest["spec"]["entrypoint"]
    );

    // raygate's reconciler (running in the environment, reading v1) takes it up: the cluster
    // name is written to status and the RayCluster exists.
    let cluster_name = ns
        .wait_for(
            "raygate's reconciler to create the RayJob's RayCluster",
            std::time::Duration::from_secs(90),
            || async {
                let v1 = get(&ns, "v1", "RayJob", "rayjob-sample").await;
                let Some(name) = v1["status"]["rayClusterName"].as_str().map(str::to_string) else {
                    return Ok(None);
                };
                let cluster = kubectl(
                    &env,
                    &[
                        "get",
                        "rayclusters.v1.ray.io",
                        "-n",
                        ns.name(),
                        "-o",
                        "name",
                    ],
                    None,
                )
                .await;
                Ok(cluster.contains(&name).then_some(name))
            },
        )
        .await;
    assert!(cluster_name.starts_with("rayjob-sample-"), "{cluster_name}");
}

/// A v1 RayJob with v1-only fields at every level of the spec.
fn v1_rayjob_with_v1_only_fields() -> Value {
    json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "modern", "labels": {"team": "a"}, "annotations": {"note": "kept"}},
        "spec": {
            "entrypoint": "python train.py",
            "backoffLimit": 3,
            "submissionMode": "HTTPMode",
            "activeDeadlineSeconds": 3600,
            "preRunningDeadlineSeconds": 600,
            "submitterConfig": {"backoffLimit": 4},
            "managedBy": "ray.io/kuberay-operator",
            "deletionStrategy": {"deletionRules": [
                {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 30}},
                {"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED", "ttlSeconds": 600}},
            ]},
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "enableInTreeAutoscaling": true,
                "autoscalerOptions": {"version": "v2", "upscalingMode": "Default"},
                "headGroupSpec": {
                    "labels": {"zone": "a"},
                    "resources": {"CPU": "0"},
                    "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0"}]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu", "replicas": 1, "minReplicas": 0, "maxReplicas": 2,
                        "numOfHosts": 2, "idleTimeoutSeconds": 120, "priority": 5,
                        "labels": {"accelerator": "h100"}, "resources": {"GPU": "1"},
                        "rayStartParams": {"metrics-export-port": "8080"},
                        "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]}},
                    },
                    {
                        "groupName": "cpu", "replicas": 1, "minReplicas": 0, "maxReplicas": 2,
                        "suspend": false,
                        "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]}},
                    },
                ],
            },
        },
    })
}

#[tokio::test]
async fn a_v1_rayjob_written_back_through_v1alpha1_keeps_every_field() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "conv-replace", &[KUBERAY_RUNS_THEM]).await;
    create(&ns, v1_rayjob_with_v1_only_fields()).await;
    let before = get(&ns, "v1", "RayJob", "modern").await;
    for path in [
        "spec.backoffLimit",
        "spec.submissionMode",
        "spec.deletionStrategy",
    ] {
        assert!(has_path(&before, path), "{path} stored");
    }

    // Read through v1alpha1: no v1-only field shows, the annotation carries them.
    let alpha = get(&ns, "v1alpha1", "RayJob", "modern").await;
    assert_eq!(alpha["apiVersion"], "ray.io/v1alpha1");
    for path in v1_only_paths("RayJob") {
        assert!(!has_path(&alpha, &path), "{path} visible through v1alpha1");
    }
    assert!(alpha["metadata"]["annotations"][keys::V1_FIELDS_ANNOTATION].is_string());
    assert_eq!(alpha["metadata"]["annotations"]["note"], "kept");
    assert_eq!(
        alpha["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"],
        json!({}),
        "v1alpha1's required rayStartParams is filled in"
    );

    // `kubectl get … -o yaml | kubectl replace -f -` on the v1alpha1 endpoint.
    let yaml = kubectl(
        &env,
        &[
            "get",
            "rayjobs.v1alpha1.ray.io",
            "modern",
            "-n",
            ns.name(),
            "-o",
            "yaml",
        ],
        None,
    )
    .await;
    kubectl(&env, &["replace", "-f", "-"], Some(yaml.as_bytes())).await;
    let after = get(&ns, "v1", "RayJob", "modern").await;
    assert_eq!(
        after["spec"], before["spec"],
        "the v1 spec survives a v1alpha1 replace"
    );
    assert_eq!(after["metadata"]["labels"], before["metadata"]["labels"]);
    assert_eq!(
        after["metadata"]["annotations"],
        before["metadata"]["annotations"]
    );

    // An edit through v1alpha1 (an old client changing the entrypoint and swapping the worker
    // groups) changes what it says and nothing else.
    let mut edited: Value = serde_json::from_str(
        &kubectl(
            &env,
            &[
                "get",
                "rayjobs.v1alpha1.ray.io",
                "modern",
                "-n",
                ns.name(),
                "-o",
                "json",
            ],
            None,
        )
        .await,
    )
    .unwrap();
    edited["spec"]["entrypoint"] = json!("python train.py --resume");
    edited["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        .as_array_mut()
        .unwrap()
        .reverse();
    kubectl(
        &env,
        &["replace", "-f", "-"],
        Some(edited.to_string().as_bytes()),
    )
    .await;
    let edited_v1 = get(&ns, "v1", "RayJob", "modern").await;
    let mut expected = before["spec"].clone();
    expected["entrypoint"] = json!("python train.py --resume");
    expected["rayClusterSpec"]["workerGroupSpecs"]
        .as_array_mut()
        .unwrap()
        .reverse();
    assert_eq!(edited_v1["spec"], expected);
}

#[tokio::test]
async fn a_raycluster_keeps_its_v1_only_fields_through_v1alpha1() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "conv-cluster", &[KUBERAY_RUNS_THEM]).await;
    let mut cluster = v1_rayjob_with_v1_only_fields()["spec"]["rayClusterSpec"].clone();
    cluster["upgradeStrategy"] = json!({"type": "Recreate"});
    cluster["gcsFaultToleranceOptions"] = json!({"redisAddress": "redis:6379"});
    create(
        &ns,
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "modern"}, "spec": cluster}),
    )
    .await;
    let before = get(&ns, "v1", "RayCluster", "modern").await;
    let yaml = kubectl(
        &env,
        &[
            "get",
            "rayclusters.v1alpha1.ray.io",
            "modern",
            "-n",
            ns.name(),
            "-o",
            "yaml",
        ],
        None,
    )
    .await;
    assert!(
        !yaml.contains("upgradeStrategy:"),
        "v1-only field visible through v1alpha1"
    );
    kubectl(&env, &["replace", "-f", "-"], Some(yaml.as_bytes())).await;
    let after = get(&ns, "v1", "RayCluster", "modern").await;
    assert_eq!(after["spec"], before["spec"]);
    for resource in ["rayclusters.v1alpha1.ray.io", "rayclusters.v1.ray.io"] {
        let names = kubectl(
            &env,
            &["get", resource, "-n", ns.name(), "-o", "name"],
            None,
        )
        .await;
        assert_eq!(
            names.trim(),
            "raycluster.ray.io/modern",
            "kubectl get {resource}"
        );
    }
}
