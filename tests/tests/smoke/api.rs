//! API server basics and the controllers of kube-controller-manager, kube-scheduler and kwok.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams,
    PostParams, WatchEvent, WatchParams,
};
use kube::{Api, ResourceExt};
use raygate_e2e::{Env, TestNamespace};
use serde_json::json;

use super::{SETTLE, placement, pod, running_on_kwok};

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("a".to_string(), "1".to_string())])),
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn kwok_nodes_are_ready_with_realistic_capacity() {
    let env = Env::load();
    let nodes: Api<Node> = Api::all(env.client().await);
    for name in env.kwok_nodes() {
        let node = nodes
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("node {name}: {e}"));
        let status = node.status.unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let allocatable = status.allocatable.unwrap_or_default();
        let get = |k: &str| allocatable.get(k).map(|q| q.0.clone()).unwrap_or_default();
        assert!(ready, "node {name} is not Ready");
        assert_eq!(
            (get("cpu"), get("nvidia.com/gpu")),
            ("8".into(), "4".into()),
            "node {name} allocatable"
        );
    }
    assert_eq!(env.kwok_nodes().len(), 3);
}

#[tokio::test]
async fn default_scheduler_binds_a_pod_without_scheduler_name() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-default-scheduler").await;
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &pod("plain", None, "500m"))
        .await
        .expect("create pod");
    let running = ns
        .wait_for(
            "pod plain bound by kube-scheduler and Running on a kwok node",
            SETTLE,
            || async { Ok(Some(pods.get("plain").await?).filter(running_on_kwok)) },
        )
        .await;
    assert_eq!(
        running.spec.unwrap_or_default().scheduler_name.as_deref(),
        Some("default-scheduler")
    );
}

#[tokio::test]
async fn create_get_watch_patch() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-api").await;
    let maps: Api<ConfigMap> = ns.api();
    let created = maps
        .create(&PostParams::default(), &config_map("watched"))
        .await
        .expect("create");
    let fetched = maps.get("watched").await.expect("get");
    assert_eq!(fetched.uid(), created.uid());
    assert_eq!(fetched.data, created.data);

    let params = WatchParams::default()
        .fields("metadata.name=watched")
        .timeout(30);
    let mut events = maps
        .watch(&params, &created.resource_version().unwrap())
        .await
        .expect("watch")
        .boxed();
    let patched = maps
        .patch(
            "watched",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "2"}})),
        )
        .await
        .expect("patch");
    assert_eq!(
        patched
            .data
            .as_ref()
            .and_then(|d| d.get("a"))
            .map(String::as_str),
        Some("2")
    );
    let event = tokio::time::timeout(Duration::from_secs(30), events.try_next())
        .await
        .expect("a watch event within 30 s")
        .expect("watch stream")
        .expect("an event");
    match event {
        WatchEvent::Modified(cm) => {
            assert_eq!(cm.resource_version(), patched.resource_version());
            assert_eq!(
                cm.data.and_then(|d| d.get("a").cloned()).as_deref(),
                Some("2")
            );
        }
        other => panic!("expected Modified, got {other:?}"),
    }
}

#[tokio::test]
async fn status_subresource_of_a_raygate_crd() {
    let env = Env::load();
    // Out of the environment's reconciler's reach: it would write this RayJob's status too
    // (once seen racing the patches below).
    let ns = TestNamespace::with_labels(
        &env,
        "smoke-status",
        &[(raygate_e2e::reconciler::PRIVATE_RECONCILER_LABEL, "true")],
    )
    .await;
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("ray.io", "v1", "RayJob"));
    let jobs: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "status"},
        // Valid for raygate's webhook: a RayJob needs a rayClusterSpec or a clusterSelector.
        "spec": {"entrypoint": "python -c 'print(1)'", "shutdownAfterJobFinishes": false,
                 "clusterSelector": {"ray.io/cluster": "status-cluster"}},
        "status": {"jobStatus": "SUCCEEDED"},
    }))
    .unwrap();
    let created = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("create RayJob");
    assert_eq!(
        created.data["status"]["jobStatus"],
        json!(null),
        "status was set through the main resource"
    );

    let status = json!({"status": {"jobStatus": "RUNNING", "jobDeploymentStatus": "Running"}});
    let patched = jobs
        .patch_status("status", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch RayJob status");
    assert_eq!(patched.data["status"]["jobStatus"], json!("RUNNING"));
    assert_eq!(
        patched.data["spec"]["entrypoint"],
        created.data["spec"]["entrypoint"]
    );

    // The main resource ignores status; the status subresource ignores spec.
    let both =
        json!({"spec": {"entrypoint": "python -c 'print(2)'"}, "status": {"jobStatus": "FAILED"}});
    let via_main = jobs
        .patch("status", &PatchParams::default(), &Patch::Merge(&both))
        .await
        .expect("patch");
    assert_eq!(via_main.data["status"]["jobStatus"], json!("RUNNING"));
    assert_eq!(
        via_main.data["spec"]["entrypoint"],
        json!("python -c 'print(2)'")
    );
    let via_status = jobs
        .patch_status("status", &PatchParams::default(), &Patch::Merge(&both))
        .await
        .expect("patch status");
    assert_eq!(via_status.data["status"]["jobStatus"], json!("FAILED"));
    assert_eq!(
        via_status.data["spec"]["entrypoint"],
        json!("python -c 'print(2)'")
    );
}

#[tokio::test]
async fn finalizer_holds_a_deletion() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-finalizer").await;
    let maps: Api<ConfigMap> = ns.api();
    let mut held = config_map("held");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    maps.create(&PostParams::default(), &held)
        .await
        .expect("create");
    maps.delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = maps
        .get("held")
        .await
        .expect("a finalizer keeps the object");
    assert!(
        still.metadata.deletion_timestamp.is_some(),
        "no deletionTimestamp after delete"
    );

    let remove = json!({"metadata": {"finalizers": null}});
    maps.patch("held", &PatchParams::default(), &Patch::Merge(&remove))
        .await
        .expect("remove finalizer");
    ns.wait_for(
        "the configmap to be gone once its finalizer is removed",
        SETTLE,
        || async { Ok(maps.get_opt("held").await?.is_none().then_some(())) },
    )
    .await;
}

#[tokio::test]
async fn stale_resource_version_gets_409() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-conflict").await;
    let maps: Api<ConfigMap> = ns.api();
    let stale = maps
        .create(&PostParams::default(), &config_map("stale"))
        .await
        .expect("create");
    maps.patch(
        "stale",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "2"}})),
    )
    .await
    .expect("patch");
    match maps.replace("stale", &PostParams::default(), &stale).await {
        Err(kube::Error::Api(status)) if status.code == 409 => {
            assert_eq!(status.reason, "Conflict", "{status:?}");
        }
        other => {
            panic!("replace with a stale resourceVersion: expected 409 Conflict, got {other:?}")
        }
    }
}

#[tokio::test]
async fn owner_reference_garbage_collection() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-gc").await;
    let maps: Api<ConfigMap> = ns.api();
    let owner = maps
        .create(&PostParams::default(), &config_map("owner"))
        .await
        .expect("create owner");
    let mut child = config_map("child");
    child.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: owner.uid().unwrap(),
        ..OwnerReference::default()
    }]);
    maps.create(&PostParams::default(), &child)
        .await
        .expect("create child");
    maps.delete("owner", &DeleteParams::default())
        .await
        .expect("delete owner");
    ns.wait_for(
        "the garbage collector to delete the child of a deleted owner",
        SETTLE,
        || async { Ok(maps.get_opt("child").await?.is_none().then_some(())) },
    )
    .await;
}

#[tokio::test]
async fn namespace_deletion_finishes() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "smoke-ns-delete").await;
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &pod("doomed", None, "100m"))
        .await
        .expect("create pod");
    ns.wait_for("pod doomed Running", SETTLE, || async {
        Ok(Some(pods.get("doomed").await?)
            .filter(running_on_kwok)
            .map(|p| placement(&p)))
    })
    .await;
    let namespaces: Api<Namespace> = Api::all(ns.client());
    namespaces
        .delete(ns.name(), &DeleteParams::default())
        .await
        .expect("delete namespace");
    ns.wait_for(
        "the namespace controller to finish deleting the namespace",
        Duration::from_secs(120),
        || async { Ok(namespaces.get_opt(ns.name()).await?.is_none().then_some(())) },
    )
    .await;
}
