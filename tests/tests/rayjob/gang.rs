//! Gang scheduling against real capacity: each test gets kwok nodes of its own (a pool reserved
//! by label and taint; the RayJob's pods select and tolerate it), so what fits is exactly what
//! the test says, whatever else runs on the shared nodes. kwok Pods run no Ray, so each test
//! runs a reconciler of its own pointed at the environment's shared Ray head.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use raygate_api::ray::v1::RayJob;
use raygate_api::volcano::PodGroup;
use raygate_e2e::nodes::{FakeNode, placement};
use raygate_e2e::reconciler::{PRIVATE_RECONCILER_LABEL, Reconciler};
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{RUN, create, events_about, pods, ray_job, wait_status};

/// Opted into Volcano, and reconciled by the test's own reconciler.
const OPT_IN: [(&str, &str); 2] = [
    ("raygate.io/scheduler", "volcano"),
    (PRIVATE_RECONCILER_LABEL, "true"),
];

/// `job` with its head, workers and submitter (KubeRay's default one, 500m / 200Mi, as a
/// `submitterPodTemplate`) placed in `pool` only.
pub(crate) fn pinned(mut job: RayJob, pool: &str) -> RayJob {
    let (selector, tolerations) = placement(pool);
    let place = |pod: &mut PodSpec| {
        pod.node_selector = Some(selector.clone());
        pod.tolerations = Some(tolerations.clone());
    };
    let cluster = job
        .spec
        .ray_cluster_spec
        .as_mut()
        .expect("a rayClusterSpec");
    place(
        cluster
            .head_group_spec
            .template
            .spec
            .get_or_insert_with(PodSpec::default),
    );
    for group in cluster.worker_group_specs.iter_mut().flatten() {
        place(group.template.spec.get_or_insert_with(PodSpec::default));
    }
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(memory.into())),
        ])
    };
    let mut submitter = PodSpec {
        containers: vec![Container {
            name: "ray-job-submitter".into(),
            image: Some("rayproject/ray:2.60.0".into()),
            resources: Some(ResourceRequirements {
                requests: Some(quantities("500m", "200Mi")),
                limits: Some(quantities("1", "1Gi")),
                ..Default::default()
            }),
            ..Container::default()
        }],
        restart_policy: Some("Never".into()),
        ..PodSpec::default()
    };
    place(&mut submitter);
    job.spec.submitter_pod_template = Some(Box::new(PodTemplateSpec {
        metadata: None,
        spec: Some(submitter),
    }));
    job
}

/// The node each pod of the namespace is bound to (`None`: not bound).
async fn placements(ns: &TestNamespace, selector: &str) -> Vec<(String, Option<String>)> {
    pods(ns, selector)
        .await
        .into_iter()
        .map(|p: Pod| {
            (
                p.metadata.name.unwrap_or_default(),
                p.spec.and_then(|s| s.node_name),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_submitter_is_outside_the_gang_so_a_cluster_that_fills_its_node_still_runs() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "rayjob-gang-fit", &OPT_IN).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    let pool = ns.name().to_string();
    // Room for head (500m, 2Gi) + 2 workers (250m, 1Gi each) + the submitter (500m, 200Mi) =
    // 1500m / 4296Mi, and not for one more Ray pod: 104Mi and no CPU are left after them.
    let node = FakeNode::create(
        &env,
        &ns,
        &pool,
        0,
        &[("cpu", "1500m"), ("memory", "4400Mi"), ("pods", "110")],
    )
    .await;
    create(
        &ns,
        &pinned(
            ray_job("fit", "python -c \"print('the gang fit')\"", 2, json!({})),
            &pool,
        ),
    )
    .await;
    let pg = ns
        .wait_for("PodGroup ray-fit-pg", RUN, || async {
            Ok(ns.api::<PodGroup>().get_opt("ray-fit-pg").await?)
        })
        .await;
    assert_eq!(
        pg.spec.min_member,
        Some(3),
        "head + 2 workers; the submitter, created only once they run, is not waited for"
    );
    let min_resources = pg.spec.min_resources.unwrap();
    assert_eq!(
        (
            min_resources["cpu"].0.as_str(),
            min_resources["memory"].0.as_str()
        ),
        ("1500m", "4296Mi"),
        "minResources holds the submitter too: exactly the node"
    );

    let done = wait_status(&ns, "fit", "the RayJob to be Complete", |s| {
        s.job_deployment_status.as_deref() == Some("Complete")
    })
    .await;
    assert_eq!(done.job_status.as_deref(), Some("SUCCEEDED"));
    let cluster = done.ray_cluster_name.unwrap();
    let ray_pods = placements(&ns, &format!("ray.io/cluster={cluster}")).await;
    let submitter = placements(&ns, "job-name=fit").await;
    assert_eq!(
        (ray_pods.len(), submitter.len()),
        (3, 1),
        "{}",
        ns.dump().await
    );
    for (pod, bound) in ray_pods.iter().chain(&submitter) {
        assert_eq!(
            bound.as_deref(),
            Some(node.name()),
            "{pod} ran on the pool's node\n{}",
            ns.dump().await
        );
    }
}

#[tokio::test]
async fn a_gang_larger_than_its_nodes_binds_nothing_says_why_and_runs_once_capacity_arrives() {
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "rayjob-gang-wait", &OPT_IN).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    let pool = ns.name().to_string();
    // 900m: the head (500m) and one worker (250m) would fit, the second worker would not; the
    // gang is head + 2 workers.
    let first = FakeNode::create(
        &env,
        &ns,
        &pool,
        0,
        &[("cpu", "900m"), ("memory", "16Gi"), ("pods", "110")],
    )
    .await;
    create(
        &ns,
        &pinned(
            ray_job(
                "big",
                "python -c \"print('the gang got room')\"",
                2,
                json!({}),
            ),
            &pool,
        ),
    )
    .await;

    let waiting = wait_status(
        &ns,
        "big",
        "the RayJob to explain that its gang does not fit",
        |s| {
            s.job_deployment_status.as_deref() == Some("Initializing")
                && s.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("Waiting for gang scheduling"))
        },
    )
    .await;
    let message = waiting.message.unwrap();
    eprintln!("status.message while the gang waits: {message}");
    assert!(
        message.contains("all 3 Pods of PodGroup ray-big-pg"),
        "{message}"
    );
    let cluster = waiting.ray_cluster_name.unwrap();
    let selector = format!("ray.io/cluster={cluster}");
    let ray_pods = ns
        .wait_for("the cluster's 3 pods to exist", RUN, || async {
            let found = placements(&ns, &selector).await;
            Ok((found.len() == 3).then_some(found))
        })
        .await;
    for (pod, bound) in &ray_pods {
        assert_eq!(
            bound,
            &None,
            "{pod}: all or nothing, and not all fit\n{}",
            ns.dump().await
        );
    }
    let pg = ns.api::<PodGroup>().get("ray-big-pg").await.unwrap();
    let dump = ns.dump().await;
    let unschedulable = pg
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .find(|c| c.type_.as_deref() == Some("Unschedulable"))
        .unwrap_or_else(|| panic!("Volcano's condition\n{dump}"));
    assert_eq!(unschedulable.status.as_deref(), Some("True"));
    if let Some(volcano) = unschedulable.message.as_deref().filter(|m| !m.is_empty()) {
        assert!(
            message.ends_with(volcano),
            "the status carries Volcano's words: {message}"
        );
    }
    let events = events_about(&ns, "big").await.unwrap();
    assert!(
        events.iter().any(|e| {
            e.reason.as_deref() == Some("InsufficientNodeResources")
                && e.type_.as_deref() == Some("Warning")
        }),
        "a Warning Event on the RayJob\n{}",
        ns.dump().await
    );
    let job = ns.api::<RayJob>().get("big").await.unwrap();
    assert_eq!(
        job.status.unwrap().job_deployment_status.as_deref(),
        Some("Initializing"),
        "still waiting"
    );

    // More capacity in the pool: the whole gang is bound at once and the job runs. 1000m leaves
    // room for the submitter (500m) on one of the two nodes wherever the gang lands.
    let second = FakeNode::create(
        &env,
        &ns,
        &pool,
        1,
        &[("cpu", "1000m"), ("memory", "16Gi"), ("pods", "110")],
    )
    .await;
    let done = wait_status(&ns, "big", "the RayJob to be Complete", |s| {
        s.job_deployment_status.as_deref() == Some("Complete")
    })
    .await;
    assert_eq!(done.job_status.as_deref(), Some("SUCCEEDED"));
    assert!(
        !done
            .message
            .as_deref()
            .unwrap_or_default()
            .starts_with("Waiting for gang scheduling"),
        "{:?}",
        done.message
    );
    let nodes = [first.name(), second.name()];
    for (pod, bound) in placements(&ns, &selector).await {
        assert!(
            bound.as_deref().is_some_and(|n| nodes.contains(&n)),
            "{pod} on {bound:?}\n{}",
            ns.dump().await
        );
    }
}
