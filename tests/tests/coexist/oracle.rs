//! KubeRay's own Volcano adapter as the oracle: a KubeRay operator started with
//! `--batch-scheduler=volcano` sizes PodGroups in its namespace, raygate's PodGroup-only mode sizes
//! them for the same objects next to a KubeRay without a batch scheduler, and the two are compared
//! field by field. Every difference must be one of the deliberate deviations of docs/upstream.md,
//! "KubeRay: known defects", listed in [`DEVIATIONS`]. The same operator also runs in a namespace
//! opted into raygate, where raygate must notice it and step aside.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use raygate_api::volcano::PodGroup;
use raygate_e2e::kuberay::KubeRay;
use raygate_e2e::{Env, TestNamespace};
use serde_json::{Value, json};

use super::{
    KUBERAY, OPT_IN, SETTLE, container, create, events, head, min_resources, pod_group, ray_job,
    workers,
};

/// `(object, field)` pairs where raygate deliberately differs from KubeRay (v1.5.0 and v1.6.2),
/// and why.
const DEVIATIONS: &[(&str, &str, &str)] = &[(
    "unset-replicas",
    "minResources",
    "upstream defect 11: KubeRay multiplies worker resources by the raw `replicas` (0 here) but counts minReplicas Pods in minMember; raygate uses the clamped count for both",
)];

/// The objects compared: name → manifest (without labels; the test adds them).
fn cases() -> Vec<(&'static str, Value)> {
    let sleeper = "python -c 'print(1)'";
    let gpu_workers = json!({
        "groupName": "gpu", "replicas": 2, "minReplicas": 0, "maxReplicas": 4,
        "rayStartParams": {},
        "template": {"spec": {"containers": [container("ray-worker", "2", "8Gi", Some("1"))]}}
    });
    let mut multi_host = workers("tpu", 2);
    multi_host["numOfHosts"] = json!(2);
    let mut unset = workers("lazy", 0);
    unset.as_object_mut().expect("an object").remove("replicas");
    unset["minReplicas"] = json!(2);
    let mut autoscaled = workers("elastic", 3);
    autoscaled["minReplicas"] = json!(1);
    autoscaled["maxReplicas"] = json!(5);
    let cluster_spec = |groups: Vec<Value>, extra: Value| {
        let mut spec =
            json!({"rayVersion": "2.60.0", "headGroupSpec": head(), "workerGroupSpecs": groups});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        spec
    };
    let job_with = |name: &str, groups: Vec<Value>, extra_spec: Value, cluster_extra: Value| {
        let mut job = ray_job(name, sleeper, extra_spec);
        job["spec"]["rayClusterSpec"] = cluster_spec(groups, cluster_extra);
        job
    };
    vec![
        (
            "multi-groups",
            job_with(
                "multi-groups",
                vec![workers("small", 2), {
                    let mut big = workers("big", 1);
                    big["template"]["spec"]["containers"][0] =
                        container("ray-worker", "2", "4Gi", None);
                    big
                }],
                json!({}),
                json!({}),
            ),
        ),
        (
            "multi-host",
            job_with("multi-host", vec![multi_host], json!({}), json!({})),
        ),
        (
            "gpus",
            job_with("gpus", vec![gpu_workers], json!({}), json!({})),
        ),
        (
            "custom-submitter",
            job_with(
                "custom-submitter",
                vec![workers("small", 1)],
                json!({
                    "submitterPodTemplate": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [container("ray-job-submitter", "1", "1Gi", None)]
                    }}
                }),
                json!({}),
            ),
        ),
        (
            "http-mode",
            job_with(
                "http-mode",
                vec![workers("small", 2)],
                json!({"submissionMode": "HTTPMode"}),
                json!({}),
            ),
        ),
        (
            "sidecar-mode",
            job_with(
                "sidecar-mode",
                vec![workers("small", 1)],
                json!({"submissionMode": "SidecarMode"}),
                json!({}),
            ),
        ),
        (
            "autoscaling",
            job_with(
                "autoscaling",
                vec![autoscaled],
                json!({}),
                json!({"enableInTreeAutoscaling": true}),
            ),
        ),
        (
            "unset-replicas",
            job_with("unset-replicas", vec![unset], json!({}), json!({})),
        ),
        (
            "standalone",
            json!({
                "apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": "standalone"},
                "spec": cluster_spec(vec![workers("small", 2)], json!({}))
            }),
        ),
    ]
}

/// Pins every Ray Pod of the object to a node that does not exist: the gangs are sized and
/// admitted but never run, so no job completes (and no cleanup re-sizes a group) before the
/// comparison, and no submitter is ever created.
fn pin_nowhere(object: &mut Value) {
    let spec = if object["kind"] == "RayJob" {
        &mut object["spec"]["rayClusterSpec"]
    } else {
        &mut object["spec"]
    };
    let selector = json!({"e2e.raygate.io/no-such-node": "true"});
    spec["headGroupSpec"]["template"]["spec"]["nodeSelector"] = selector.clone();
    if let Some(groups) = spec["workerGroupSpecs"].as_array_mut() {
        for group in groups {
            group["template"]["spec"]["nodeSelector"] = selector.clone();
        }
    }
}

fn queue_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "scheduling.volcano.sh",
        "v1beta1",
        "Queue",
    ))
}

/// The PodGroup fields compared.
fn summary(pg: &PodGroup) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("minMember", pg.spec.min_member.unwrap_or(0).to_string()),
        ("minResources", format!("{:?}", min_resources(pg))),
        ("queue", pg.spec.queue.clone().unwrap_or_default()),
        (
            "priorityClassName",
            pg.spec.priority_class_name.clone().unwrap_or_default(),
        ),
    ])
}

#[tokio::test]
async fn raygate_sizes_gangs_as_kuberays_volcano_adapter_and_steps_aside_when_it_runs() {
    let env = Env::load();
    let oracle = TestNamespace::with_labels(&env, "coexist-oracle", &[KUBERAY]).await;
    let detect = TestNamespace::with_labels(&env, "coexist-detect", &[OPT_IN, KUBERAY]).await;
    let raygate = TestNamespace::with_labels(&env, "coexist-raygate", &[OPT_IN, KUBERAY]).await;
    let _volcano_kuberay = KubeRay::start(&env, &[&oracle, &detect], Some("volcano")).await;
    let _plain_kuberay = KubeRay::start(&env, &[&raygate], None).await;

    // A queue of 8 CPUs (each gang fits, as raygate's webhook demands): at most that much of
    // the cluster is reserved by these gangs while they are compared.
    let queue_name = format!("q-{}", oracle.name());
    let queues: kube::Api<DynamicObject> = kube::Api::all_with(oracle.client(), &queue_resource());
    let queue: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": queue_name},
        "spec": {"weight": 1, "reclaimable": false, "capability": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"}}
    }))
    .expect("a Queue");
    queues
        .create(&PostParams::default(), &queue)
        .await
        .expect("creating the comparison queue");

    let labels = json!({"volcano.sh/queue-name": queue_name, "ray.io/priority-class-name": "high"});
    for (_, mut object) in cases() {
        object["metadata"]["labels"] = labels.clone();
        pin_nowhere(&mut object);
        create(&oracle, object.clone()).await;
        create(&raygate, object).await;
    }

    // Both sides settle (sizes can be written twice: compare once stable).
    let mut table = Vec::new();
    let mut unexplained = Vec::new();
    for (name, _) in cases() {
        let group = format!("ray-{name}-pg");
        let theirs = oracle
            .wait_for(&format!("KubeRay's {group}"), SETTLE, || async {
                Ok(pod_group(&oracle, &group).await)
            })
            .await;
        let ours = raygate
            .wait_for(&format!("raygate's {group}"), SETTLE, || async {
                Ok(pod_group(&raygate, &group).await)
            })
            .await;
        let (theirs, ours) = (summary(&theirs), summary(&ours));
        for (field, kuberay_value) in &theirs {
            let raygate_value = &ours[field];
            let deviation = DEVIATIONS
                .iter()
                .find(|(case, f, _)| *case == name && f == field)
                .map(|(_, _, why)| *why);
            let verdict = match (kuberay_value == raygate_value, deviation) {
                (true, _) => "same",
                (false, Some(why)) => why,
                (false, None) => {
                    unexplained.push(format!(
                        "{name}.{field}: KubeRay {kuberay_value} vs raygate {raygate_value}"
                    ));
                    "UNEXPLAINED"
                }
            };
            table.push(format!(
                "| {name} | {field} | {kuberay_value} | {raygate_value} | {verdict} |"
            ));
        }
    }
    println!(
        "| object | field | KubeRay {} --batch-scheduler=volcano | raygate coexist | verdict |\n|---|---|---|---|---|\n{}",
        env.var("RAYGATE_KUBERAY_VERSION"),
        table.join("\n")
    );

    // raygate steps aside where KubeRay gang-schedules itself: a warning Event, and the group
    // keeps KubeRay's sizing (which differs from raygate's for this spec, so an overwrite
    // would show).
    let mut detect_job = cases()
        .into_iter()
        .find(|(n, _)| *n == "unset-replicas")
        .expect("the unset-replicas case")
        .1;
    detect_job["metadata"]["labels"] = labels.clone();
    pin_nowhere(&mut detect_job);
    create(&detect, detect_job).await;
    let warning = detect
        .wait_for(
            "raygate's KubeRayBatchSchedulerDetected event",
            SETTLE,
            || async {
                Ok(events(&detect, "KubeRayBatchSchedulerDetected")
                    .await
                    .into_iter()
                    .next())
            },
        )
        .await;
    assert!(warning.starts_with("RayJob/unset-replicas:"), "{warning}");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let kuberays = pod_group(&detect, "ray-unset-replicas-pg")
        .await
        .expect("KubeRay's PodGroup");
    let oracle_group = pod_group(&oracle, "ray-unset-replicas-pg")
        .await
        .expect("the oracle's PodGroup");
    assert_eq!(
        summary(&kuberays)["minResources"],
        summary(&oracle_group)["minResources"],
        "raygate left KubeRay's sizing alone"
    );

    queues
        .delete(&queue_name, &DeleteParams::default())
        .await
        .expect("deleting the comparison queue");
    assert!(
        unexplained.is_empty(),
        "differences that are no deliberate deviation:\n{}",
        unexplained.join("\n")
    );
}
