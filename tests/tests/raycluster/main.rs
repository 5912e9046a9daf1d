//! raygate's RayCluster controller on the real control plane: head Service and Pods, Volcano
//! gang scheduling in opted-in namespaces, the default scheduler elsewhere, scaling, suspend,
//! garbage collection and leader election.
//!
//! Each test labels its namespace so the environment's reconciler leaves it alone, and starts
//! its own `raygate reconcile` for that namespace only, so tests never share a reconciler.
//! Run inside the environment: `tests/env/control-plane exec -- cargo test -p raygate-e2e
//! --test raycluster`.

mod leader;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use raygate_api::cluster::upgrade;
use raygate_api::keys::{NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE};
use raygate_api::ray::v1::{RayCluster, RayClusterUpgradeStrategy};
use raygate_api::volcano::PodGroup;
use raygate_e2e::reconciler::{PRIVATE_RECONCILER_LABEL, Reconciler};
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

/// Generous bound for anything the reconciler, a scheduler or kwok does.
const SETTLE: Duration = Duration::from_secs(90);

/// A namespace of this test, opted into Volcano or not, out of the environment reconciler's
/// reach.
async fn namespace(env: &Env, prefix: &str, volcano: bool) -> TestNamespace {
    let mut labels = vec![(PRIVATE_RECONCILER_LABEL, "true")];
    if volcano {
        labels.push((NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE));
    }
    TestNamespace::with_labels(env, prefix, &labels).await
}

/// A RayCluster `name`: one head and `replicas` workers in group `small` (min 0, max 5), each
/// Pod asking for 100m CPU and 128Mi.
fn ray_cluster(name: &str, replicas: i32) -> RayCluster {
    let container = |role: &str| {
        json!({"name": format!("ray-{role}"), "image": "rayproject/ray:2.60.0",
               "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("head")]}}
            },
            "workerGroupSpecs": [{
                "groupName": "small",
                "replicas": replicas,
                "minReplicas": 0,
                "maxReplicas": 5,
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("worker")]}}
            }]
        }
    }))
    .expect("a valid RayCluster")
}

async fn create(ns: &TestNamespace, cluster: &RayCluster) -> RayCluster {
    ns.api::<RayCluster>()
        .create(&PostParams::default(), cluster)
        .await
        .expect("create RayCluster")
}

/// Pods of cluster `name` that are not being deleted.
async fn live_pods(ns: &TestNamespace, name: &str) -> anyhow::Result<Vec<Pod>> {
    Ok(ns
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("ray.io/cluster={name}")))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

fn label<'a>(pod: &'a Pod, key: &str) -> &'a str {
    pod.labels()
        .get(key)
        .map(String::as_str)
        .unwrap_or_default()
}

fn running_on_kwok(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    phase == Some("Running") && node.is_some_and(|n| n.starts_with("kwok-node-"))
}

/// Waits until the cluster has `1 + workers` Pods, all Running on kwok nodes, and its status
/// says `ready` with that many ready workers; returns the Pods.
async fn wait_ready(ns: &TestNamespace, name: &str, workers: usize) -> Vec<Pod> {
    let clusters = ns.api::<RayCluster>();
    ns.wait_for(
        &format!("RayCluster {name} ready with {workers} running workers"),
        SETTLE,
        || async {
            let pods = live_pods(ns, name).await?;
            let cluster = clusters.get(name).await?;
            let status = cluster.status.unwrap_or_default();
            let ready = pods.len() == workers + 1
                && pods.iter().all(running_on_kwok)
                && status.state.as_deref() == Some("ready")
                && status.ready_worker_replicas == Some(workers as i32)
                && status.desired_worker_replicas == Some(workers as i32);
            Ok(ready.then_some(pods))
        },
    )
    .await
}

async fn set_replicas(ns: &TestNamespace, name: &str, replicas: i32) {
    let patch =
        json!([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas}]);
    ns.api::<RayCluster>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(patch).expect("a JSON patch")),
        )
        .await
        .expect("patch replicas");
}

async fn merge_spec(ns: &TestNamespace, name: &str, spec: serde_json::Value) {
    ns.api::<RayCluster>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .expect("patch RayCluster spec");
}

#[tokio::test]
async fn a_raycluster_in_a_volcano_namespace_is_gang_scheduled_by_volcano() {
    let env = Env::load();
    let ns = namespace(&env, "rc-volcano", true).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    create(&ns, &ray_cluster("demo", 2)).await;

    let pods = wait_ready(&ns, "demo", 2).await;
    for pod in &pods {
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(
            spec.scheduler_name.as_deref(),
            Some("volcano"),
            "{}",
            pod.name_any()
        );
        let annotations = pod.annotations();
        assert_eq!(annotations["scheduling.k8s.io/group-name"], "ray-demo-pg");
        let task = if label(pod, "ray.io/node-type") == "head" {
            "headgroup"
        } else {
            "small"
        };
        assert_eq!(annotations["volcano.sh/task-spec"], task);
        assert_eq!(label(pod, "ray.io/is-ray-node"), "yes");
        assert_eq!(pod.owner_references()[0].kind, "RayCluster");
    }
    let heads: Vec<&Pod> = pods
        .iter()
        .filter(|p| label(p, "ray.io/node-type") == "head")
        .collect();
    assert_eq!(heads.len(), 1);
    assert!(
        heads[0].name_any().starts_with("demo-head-"),
        "{}",
        heads[0].name_any()
    );
    let args = heads[0].spec.as_ref().expect("spec").containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(
        args.iter().any(|a| a.contains("ray start --head")),
        "{args:?}"
    );

    let pg = ns
        .api::<PodGroup>()
        .get("ray-demo-pg")
        .await
        .expect("PodGroup ray-demo-pg");
    assert_eq!(pg.spec.min_member, Some(3));
    let min_resources = pg.spec.min_resources.clone().expect("minResources");
    assert_eq!(min_resources["cpu"].0, "300m");
    assert_eq!(pg.owner_references()[0].kind, "RayCluster");
    // Volcano admitted and ran the gang as one.
    ns.wait_for("PodGroup ray-demo-pg Running", SETTLE, || async {
        let pg = ns.api::<PodGroup>().get("ray-demo-pg").await?;
        let status = pg.status.unwrap_or_default();
        Ok((status.phase.as_deref() == Some("Running") && status.running == Some(3)).then_some(()))
    })
    .await;

    let svc = ns
        .api::<Service>()
        .get("demo-head-svc")
        .await
        .expect("head Service");
    let ports: Vec<(String, i32)> = svc
        .spec
        .clone()
        .expect("spec")
        .ports
        .expect("ports")
        .into_iter()
        .map(|p| (p.name.unwrap_or_default(), p.port))
        .collect();
    for wanted in [("dashboard", 8265), ("client", 10001), ("gcs-server", 6379)] {
        assert!(
            ports.contains(&(wanted.0.to_string(), wanted.1)),
            "{wanted:?} missing in {ports:?}"
        );
    }
    let cluster = ns
        .api::<RayCluster>()
        .get("demo")
        .await
        .expect("RayCluster");
    let status = cluster.status.clone().expect("status");
    assert_eq!(status.observed_generation, cluster.metadata.generation);
    assert_eq!(status.available_worker_replicas, Some(2));
    assert_eq!(
        status.endpoints.as_ref().expect("endpoints")["dashboard"],
        "8265"
    );
    let head = status.head.expect("status.head");
    assert_eq!(head.service_name.as_deref(), Some("demo-head-svc"));
    assert_eq!(head.pod_name, Some(heads[0].name_any()));
    let conditions = status.conditions.expect("conditions");
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "RayClusterProvisioned" && c.status == "True"),
        "{conditions:?}"
    );
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "HeadPodReady" && c.status == "True"),
        "{conditions:?}"
    );

    // Drift on the PodGroup is undone (only minMember / minResources are written).
    ns.api::<PodGroup>()
        .patch(
            "ray-demo-pg",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"minMember": 7}})),
        )
        .await
        .expect("patch PodGroup");
    ns.wait_for("PodGroup minMember back to 3", SETTLE, || async {
        let pg = ns.api::<PodGroup>().get("ray-demo-pg").await?;
        Ok((pg.spec.min_member == Some(3)).then_some(()))
    })
    .await;
}

#[tokio::test]
async fn a_raycluster_in_a_plain_namespace_uses_the_default_scheduler_and_no_podgroup() {
    let env = Env::load();
    let ns = namespace(&env, "rc-plain", false).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    create(&ns, &ray_cluster("plain", 2)).await;
    let pods = wait_ready(&ns, "plain", 2).await;
    for pod in &pods {
        let scheduler = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref());
        assert_eq!(scheduler, Some("default-scheduler"), "{}", pod.name_any());
        assert!(
            !pod.annotations()
                .contains_key("scheduling.k8s.io/group-name")
        );
    }
    let groups = ns
        .api::<PodGroup>()
        .list(&ListParams::default())
        .await
        .expect("list PodGroups");
    assert!(
        groups.items.is_empty(),
        "PodGroups: {:?}",
        groups
            .items
            .iter()
            .map(|g| g.name_any())
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn replicas_scale_up_and_down_and_workers_to_delete_are_replaced() {
    let env = Env::load();
    let ns = namespace(&env, "rc-scale", false).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    create(&ns, &ray_cluster("scale", 2)).await;
    wait_ready(&ns, "scale", 2).await;
    set_replicas(&ns, "scale", 4).await;
    wait_ready(&ns, "scale", 4).await;
    set_replicas(&ns, "scale", 9).await;
    wait_ready(&ns, "scale", 5).await; // clamped to maxReplicas
    set_replicas(&ns, "scale", 1).await;
    let pods = wait_ready(&ns, "scale", 1).await;

    let worker = pods
        .iter()
        .find(|p| label(p, "ray.io/node-type") == "worker")
        .expect("a worker")
        .name_any();
    merge_spec(&ns, "scale", json!({"workerGroupSpecs": [{
        "groupName": "small", "replicas": 1, "minReplicas": 0, "maxReplicas": 5, "rayStartParams": {},
        "scaleStrategy": {"workersToDelete": [worker.clone()]},
        "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}
    }]}))
    .await;
    ns.wait_for(
        &format!("worker {worker} replaced by a new one"),
        SETTLE,
        || async {
            let pods = live_pods(&ns, "scale").await?;
            let workers: Vec<String> = pods
                .iter()
                .filter(|p| label(p, "ray.io/node-type") == "worker")
                .map(|p| p.name_any())
                .collect();
            Ok(
                (workers.len() == 1 && workers[0] != worker && pods.iter().all(running_on_kwok))
                    .then_some(()),
            )
        },
    )
    .await;
}

#[tokio::test]
async fn multi_host_pods_of_a_raygate_before_sub_gangs_are_labelled_into_replicas_not_restarted() {
    let env = Env::load();
    let ns = namespace(&env, "rc-adopt", true).await;
    let mut cluster = ray_cluster("adopt", 2);
    cluster.spec.worker_group_specs.as_mut().expect("groups")[0].num_of_hosts = Some(2);
    let mut reconciler = Reconciler::start(&env, &ns, None).await;
    create(&ns, &cluster).await;
    let pods = wait_ready(&ns, "adopt", 4).await;
    // The hosts find each other by the headless worker Service: the control plane's endpoint
    // controller lists the four workers behind it, and not the head.
    let headless = ns
        .api::<Service>()
        .get("adopt-headless")
        .await
        .expect("the headless worker Service");
    assert_eq!(
        headless.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()),
        Some("None")
    );
    let worker_ips: BTreeSet<String> = pods
        .iter()
        .filter(|p| label(p, "ray.io/node-type") == "worker")
        .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
        .collect();
    assert_eq!(worker_ips.len(), 4, "{worker_ips:?}");
    ns.wait_for("the four workers behind adopt-headless", SETTLE, || async {
        let slices = ns
            .api::<EndpointSlice>()
            .list(&ListParams::default().labels("kubernetes.io/service-name=adopt-headless"))
            .await?;
        let listed: BTreeSet<String> = slices
            .items
            .iter()
            .flat_map(|s| s.endpoints.iter().flatten())
            .flat_map(|e| e.addresses.clone())
            .collect();
        Ok((listed == worker_ips).then_some(()))
    })
    .await;
    reconciler.kill().await;
    drop(reconciler);

    // What a raygate before sub-gangs left: multi-host workers without replica labels.
    let replica_keys = [
        "ray.io/worker-group-replica-name",
        "ray.io/worker-group-replica-index",
        "ray.io/replica-host-index",
    ];
    let workers: Vec<&Pod> = pods
        .iter()
        .filter(|p| label(p, "ray.io/node-type") == "worker")
        .collect();
    for pod in &workers {
        let remove: Vec<serde_json::Value> = replica_keys
            .iter()
            .map(|key| json!({"op": "remove", "path": format!("/metadata/labels/{}", key.replace('/', "~1"))}))
            .collect();
        ns.api::<Pod>()
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::<()>::Json(serde_json::from_value(json!(remove)).expect("a JSON patch")),
            )
            .await
            .expect("strip the replica labels");
    }
    let uids = |pods: &[Pod]| -> std::collections::BTreeSet<String> {
        pods.iter().filter_map(|p| p.uid()).collect()
    };
    let before = uids(&pods);

    // The upgraded raygate labels them into two replicas of two hosts, in place.
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    let replicas = ns
        .wait_for("every worker labelled into a replica", SETTLE, || async {
            let pods = live_pods(&ns, "adopt").await?;
            let mut replicas: std::collections::BTreeMap<String, Vec<String>> = Default::default();
            for pod in pods
                .iter()
                .filter(|p| label(p, "ray.io/node-type") == "worker")
            {
                replicas
                    .entry(label(pod, replica_keys[0]).to_string())
                    .or_default()
                    .push(label(pod, replica_keys[2]).to_string());
            }
            Ok((!replicas.contains_key("") && replicas.len() == 2).then_some(replicas))
        })
        .await;
    for hosts in replicas.values() {
        let mut hosts = hosts.clone();
        hosts.sort();
        assert_eq!(hosts, ["0", "1"], "{replicas:?}");
    }
    for _ in 0..5 {
        let pods = wait_ready(&ns, "adopt", 4).await;
        assert_eq!(uids(&pods), before, "a Pod was deleted or made again");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test]
async fn suspend_deletes_every_pod_and_zeroes_the_podgroup_and_resume_recreates_them() {
    let env = Env::load();
    let ns = namespace(&env, "rc-suspend", true).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    create(&ns, &ray_cluster("sus", 2)).await;
    wait_ready(&ns, "sus", 2).await;
    merge_spec(&ns, "sus", json!({"suspend": true})).await;
    ns.wait_for("every Pod gone and state suspended", SETTLE, || async {
        let all = ns
            .api::<Pod>()
            .list(&ListParams::default().labels("ray.io/cluster=sus"))
            .await?;
        let cluster = ns.api::<RayCluster>().get("sus").await?;
        let state = cluster.status.and_then(|s| s.state);
        Ok((all.items.is_empty() && state.as_deref() == Some("suspended")).then_some(()))
    })
    .await;
    let pg = ns
        .api::<PodGroup>()
        .get("ray-sus-pg")
        .await
        .expect("PodGroup");
    // Absent and 0 are the same: Volcano writes PodGroups back with Go's omitempty.
    assert_eq!(
        pg.spec.min_member.unwrap_or(0),
        0,
        "a suspended cluster holds no gang"
    );
    merge_spec(&ns, "sus", json!({"suspend": false})).await;
    wait_ready(&ns, "sus", 2).await;
    let pg = ns
        .api::<PodGroup>()
        .get("ray-sus-pg")
        .await
        .expect("PodGroup");
    assert_eq!(pg.spec.min_member, Some(3));
}

/// UIDs of `pods`.
fn uids(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter().filter_map(|p| p.uid()).collect()
}

#[tokio::test]
async fn upgrade_strategy_recreate_replaces_every_pod_on_a_spec_change_but_not_on_scaling() {
    let env = Env::load();
    let ns = namespace(&env, "rc-recreate", true).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    let mut cluster = ray_cluster("up", 1);
    cluster.spec.upgrade_strategy = Some(RayClusterUpgradeStrategy {
        type_: Some("Recreate".to_string()),
    });
    create(&ns, &cluster).await;
    let first = wait_ready(&ns, "up", 1).await;

    // Scaling is not an upgrade: the Pods that run stay.
    set_replicas(&ns, "up", 2).await;
    let scaled = wait_ready(&ns, "up", 2).await;
    assert!(
        uids(&first).is_subset(&uids(&scaled)),
        "scaling replaced Pods: {:?} → {:?}",
        uids(&first),
        uids(&scaled)
    );

    // A new image is: every Pod is replaced by one made from the new spec.
    let image = "rayproject/ray:2.61.0";
    let patch = json!([
        {"op": "replace", "path": "/spec/headGroupSpec/template/spec/containers/0/image", "value": image},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/template/spec/containers/0/image", "value": image},
    ]);
    let upgraded = ns
        .api::<RayCluster>()
        .patch(
            "up",
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(patch).expect("a JSON patch")),
        )
        .await
        .expect("patch the images");
    let old = uids(&scaled);
    let pods = ns
        .wait_for(
            "three new Pods with the new image, Running",
            SETTLE,
            || async {
                let pods = live_pods(&ns, "up").await?;
                let replaced = pods.len() == 3
                    && pods.iter().all(running_on_kwok)
                    && uids(&pods).is_disjoint(&old)
                    && pods.iter().all(|p| {
                        p.spec
                            .as_ref()
                            .and_then(|s| s.containers[0].image.as_deref())
                            == Some(image)
                    });
                Ok(replaced.then_some(pods))
            },
        )
        .await;
    let head = pods
        .iter()
        .find(|p| label(p, "ray.io/node-type") == "head")
        .expect("a head");
    assert_eq!(
        head.annotations().get(upgrade::RECREATE_HASH_ANNOTATION),
        Some(&upgrade::spec_hash(&upgraded)),
        "the new head is stamped with the new spec"
    );
    let pods_now = uids(&pods);
    // Nothing more is replaced once the Pods match the spec.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        uids(&live_pods(&ns, "up").await.expect("list Pods")),
        pods_now
    );
}

#[tokio::test]
async fn deleting_the_raycluster_removes_its_children_by_owner_reference() {
    let env = Env::load();
    let ns = namespace(&env, "rc-delete", true).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    create(&ns, &ray_cluster("gone", 1)).await;
    wait_ready(&ns, "gone", 1).await;
    ns.api::<RayCluster>()
        .delete("gone", &DeleteParams::background())
        .await
        .expect("delete RayCluster");
    ns.wait_for(
        "Service, Pods and PodGroup garbage-collected",
        SETTLE,
        || async {
            let pods = ns.api::<Pod>().list(&ListParams::default()).await?;
            let svc = ns.api::<Service>().get_opt("gone-head-svc").await?;
            let pg = ns.api::<PodGroup>().get_opt("ray-gone-pg").await?;
            Ok((pods.items.is_empty() && svc.is_none() && pg.is_none()).then_some(()))
        },
    )
    .await;
}

#[tokio::test]
async fn a_rayjob_cluster_joins_the_rayjob_gang_and_foreign_clusters_are_left_alone() {
    let env = Env::load();
    let ns = namespace(&env, "rc-owned", true).await;
    let _reconciler = Reconciler::start(&env, &ns, None).await;
    let mut owned = ray_cluster("job-abc12", 1);
    owned.metadata.labels = Some(
        [
            ("ray.io/originated-from-crd", "RayJob"),
            ("ray.io/originated-from-cr-name", "job"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    create(&ns, &owned).await;
    let mut foreign = ray_cluster("foreign", 1);
    foreign.spec.managed_by = Some("kueue.x-k8s.io/multikueue".to_string());
    create(&ns, &foreign).await;

    let pods = ns
        .wait_for("both Pods of the RayJob's cluster", SETTLE, || async {
            let pods = live_pods(&ns, "job-abc12").await?;
            Ok((pods.len() == 2).then_some(pods))
        })
        .await;
    for pod in &pods {
        assert_eq!(
            pod.annotations()["scheduling.k8s.io/group-name"],
            "ray-job-pg"
        );
        assert_eq!(label(pod, "ray.io/originated-from-cr-name"), "job");
    }
    assert!(
        ns.api::<PodGroup>()
            .get_opt("ray-job-abc12-pg")
            .await
            .expect("get")
            .is_none()
    );
    // The reconciler has seen both clusters by now; the foreign one got nothing.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        assert!(live_pods(&ns, "foreign").await.expect("list").is_empty());
        assert!(
            ns.api::<Service>()
                .get_opt("foreign-head-svc")
                .await
                .expect("get")
                .is_none()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let foreign = ns.api::<RayCluster>().get("foreign").await.expect("get");
    assert!(foreign.status.is_none(), "{:?}", foreign.status);
}
