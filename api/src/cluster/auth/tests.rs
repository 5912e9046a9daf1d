use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;
use crate::cluster::build::{BuildOptions, PodRole, build_pod};

const CLUSTER: &str = r#"
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: secure, namespace: team, uid: u-1}
spec:
  rayVersion: "2.60.0"
  enableInTreeAutoscaling: true
  authOptions: {mode: token}
  headGroupSpec:
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.60.0
        - name: log-shipper
          image: busybox
  workerGroupSpecs:
  - groupName: small
    replicas: 1
    template:
      spec:
        initContainers:
        - name: fetch-data
          image: busybox
        containers:
        - name: ray-worker
          image: rayproject/ray:2.60.0
          env: [{name: RAY_AUTH_MODE, value: token}]
"#;

fn cluster(patch: serde_json::Value) -> RayCluster {
    let mut value: serde_json::Value =
        serde_saphyr::from_str(CLUSTER).unwrap_or_else(|e| panic!("bad test YAML: {e}"));
    json_patch::merge(&mut value, &patch);
    serde_json::from_value(value).expect("a RayCluster")
}

fn pods(c: &RayCluster) -> (Pod, Pod) {
    let group = &c.spec.worker_group_specs.as_ref().expect("groups")[0];
    let options = BuildOptions::default();
    (
        build_pod(c, PodRole::Head, "secure-head-x", &options),
        build_pod(c, PodRole::Worker(group), "secure-small-worker-x", &options),
    )
}

/// The token variables of `container`: `(RAY_AUTH_MODE value, Secret and key of RAY_AUTH_TOKEN)`.
fn token_of(container: &Container) -> (Option<String>, Option<(String, String)>) {
    let env = container.env.as_deref().unwrap_or_default();
    let mode = env
        .iter()
        .filter(|e| e.name == "RAY_AUTH_MODE")
        .map(|e| e.value.clone().unwrap_or_default())
        .collect::<Vec<_>>();
    assert!(mode.len() <= 1, "{}: {mode:?}", container.name);
    let token = env
        .iter()
        .filter(|e| e.name == "RAY_AUTH_TOKEN")
        .map(|e| {
            let selector = e
                .value_from
                .as_ref()
                .and_then(|v| v.secret_key_ref.as_ref())
                .expect("RAY_AUTH_TOKEN comes from a Secret, never a literal value");
            assert!(e.value.is_none());
            (selector.name.clone(), selector.key.clone())
        })
        .collect::<Vec<_>>();
    assert!(token.len() <= 1, "{}: {token:?}", container.name);
    (mode.first().cloned(), token.first().cloned())
}

#[test]
fn every_ray_process_reads_the_token_from_the_clusters_secret() {
    let c = cluster(json!({}));
    let (head, worker) = pods(&c);
    let expected = (
        Some("token".to_string()),
        Some(("secure".to_string(), "auth_token".to_string())),
    );
    let head_spec = head.spec.as_ref().expect("spec");
    let names: Vec<&str> = head_spec
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["ray-head", "log-shipper", "autoscaler"]);
    assert_eq!(token_of(&head_spec.containers[0]), expected);
    assert_eq!(token_of(&head_spec.containers[2]), expected);
    assert_eq!(
        token_of(&head_spec.containers[1]),
        (None, None),
        "the user's own sidecar"
    );
    let worker_spec = worker.spec.as_ref().expect("spec");
    // The template's own RAY_AUTH_MODE is kept, not doubled.
    assert_eq!(token_of(&worker_spec.containers[0]), expected);
    let init = worker_spec
        .init_containers
        .as_deref()
        .expect("init containers");
    assert_eq!(
        token_of(&init[0]),
        (None, None),
        "the user's own init container"
    );
    assert_eq!(init[1].name, "wait-gcs-ready");
    assert_eq!(token_of(&init[1]), expected);
}

#[test]
fn a_secret_of_the_users_is_read_and_not_created() {
    let c = cluster(json!({"spec": {"authOptions": {"secretName": "team-token"}}}));
    assert_eq!(created_secret_name(&c), None);
    assert_eq!(
        secret_name(&c.spec, "secure").as_deref(),
        Some("team-token")
    );
    let (head, _) = pods(&c);
    assert_eq!(
        token_of(&head.spec.expect("spec").containers[0]).1,
        Some(("team-token".to_string(), "auth_token".to_string()))
    );
}

#[test]
fn without_token_mode_nothing_is_added_or_created() {
    for auth in [json!(null), json!({"mode": "disabled"})] {
        let c = cluster(json!({"spec": {"authOptions": auth}}));
        assert_eq!(created_secret_name(&c), None);
        assert_eq!(secret_name(&c.spec, "secure"), None);
        let (head, worker) = pods(&c);
        assert_eq!(
            token_of(&head.spec.expect("spec").containers[0]),
            (None, None)
        );
        let worker_spec = worker.spec.expect("spec");
        // Only the template's own variable.
        assert_eq!(
            token_of(&worker_spec.containers[0]),
            (Some("token".to_string()), None)
        );
    }
}

#[test]
fn the_created_secret_is_named_labelled_and_owned_like_kuberays() {
    let long = "a".repeat(60);
    let c = cluster(json!({"metadata": {"name": long}}));
    let name = created_secret_name(&c).expect("created");
    assert_eq!(name, "a".repeat(50), "cut to KubeRay's 50 characters");
    let secret = build_secret(&c, "s3cr3t");
    assert_eq!(secret.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(secret.metadata.namespace.as_deref(), Some("team"));
    assert_eq!(
        secret.metadata.labels.as_ref().expect("labels")["ray.io/cluster"],
        long
    );
    let owner = &secret.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("RayCluster", "u-1", Some(true))
    );
    assert_eq!(
        secret.string_data.expect("data"),
        BTreeMap::from([(TOKEN_KEY.to_string(), "s3cr3t".to_string())])
    );
}
