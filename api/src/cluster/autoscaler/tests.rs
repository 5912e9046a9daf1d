use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};
use serde_json::json;

use super::*;
use crate::cluster::build::{BuildOptions, PodRole, build_pod};

const CLUSTER: &str = r#"
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: elastic, namespace: team, uid: u-1}
spec:
  rayVersion: "2.60.0"
  enableInTreeAutoscaling: true
  headGroupSpec:
    rayStartParams: {num-cpus: "0"}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.60.0
          resources: {requests: {cpu: "1", memory: 2Gi}}
  workerGroupSpecs:
  - groupName: small
    minReplicas: 0
    maxReplicas: 4
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.60.0
          resources: {requests: {cpu: "1", memory: 1Gi}}
"#;

fn cluster(patch: serde_json::Value) -> RayCluster {
    let mut value: serde_json::Value =
        serde_saphyr::from_str(CLUSTER).unwrap_or_else(|e| panic!("bad test YAML: {e}"));
    json_patch::merge(&mut value, &patch);
    serde_json::from_value(value).expect("a RayCluster")
}

fn head(c: &RayCluster) -> Pod {
    build_pod(c, PodRole::Head, "elastic-head-x", &BuildOptions::default())
}

fn worker(c: &RayCluster) -> Pod {
    let group = &c.spec.worker_group_specs.as_ref().expect("groups")[0];
    build_pod(
        c,
        PodRole::Worker(group),
        "elastic-small-worker-x",
        &BuildOptions::default(),
    )
}

fn containers(pod: &Pod) -> &[Container] {
    &pod.spec.as_ref().expect("spec").containers
}

fn env<'a>(container: &'a Container, name: &str) -> Option<&'a EnvVar> {
    container.env.iter().flatten().find(|e| e.name == name)
}

fn value<T: serde::Serialize>(item: &T) -> serde_json::Value {
    serde_json::to_value(item).expect("serializable")
}

#[test]
fn the_head_runs_the_autoscaler_as_kuberay_builds_it() {
    let c = cluster(json!({}));
    let pod = head(&c);
    let spec = pod.spec.as_ref().expect("spec");
    assert_eq!(spec.service_account_name.as_deref(), Some("elastic"));
    assert_eq!(spec.restart_policy, None);
    let [ray, autoscaler] = containers(&pod) else {
        panic!("two containers: {:?}", containers(&pod));
    };
    assert_eq!(
        value(autoscaler),
        json!({
            "name": "autoscaler",
            "image": "rayproject/ray:2.60.0",
            "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/bash", "-c", "--"],
            "args": [START_COMMAND],
            "env": [
                {"name": "RAY_CLUSTER_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}}},
                {"name": "RAY_CLUSTER_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "RAY_HEAD_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "KUBERAY_CRD_VER", "value": "v1"},
                {"name": "KUBERAY_GEN_AUTOSCALER_START_CMD", "value": START_COMMAND},
            ],
            "resources": {
                "limits": {"cpu": "500m", "memory": "512Mi"},
                "requests": {"cpu": "500m", "memory": "512Mi"},
            },
            "volumeMounts": [{"name": "ray-logs", "mountPath": "/tmp/ray"}],
        })
    );
    // The Ray container shares the log volume, starts without Ray's own monitor, and gets no
    // version variable while `version` is unset.
    let mounts: Vec<&str> = ray
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(mounts, ["/dev/shm", "/tmp/ray"]);
    let volumes: Vec<serde_json::Value> = spec.volumes.iter().flatten().map(value).collect();
    assert_eq!(
        volumes,
        [
            json!({"name": "shared-mem", "emptyDir": {"medium": "Memory"}}),
            json!({"name": "ray-logs", "emptyDir": {}}),
        ]
    );
    assert!(ray.args.as_ref().expect("args")[0].contains(" --no-monitor "));
    assert!(env(ray, "RAY_enable_autoscaler_v2").is_none());
    // Workers get no sidecar.
    assert_eq!(containers(&worker(&c)).len(), 1);
}

#[test]
fn autoscaler_options_replace_or_extend_the_container() {
    let c = cluster(json!({"spec": {"autoscalerOptions": {
        "image": "example/autoscaler:1",
        "imagePullPolicy": "Always",
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        "env": [{"name": "AUTOSCALER_LOG", "value": "debug"}],
        "envFrom": [{"configMapRef": {"name": "tuning"}}],
        "volumeMounts": [{"name": "extra", "mountPath": "/extra"}],
        "securityContext": {"runAsNonRoot": true},
        "args": ["ulimit -n 65536; $KUBERAY_GEN_AUTOSCALER_START_CMD"],
        "upscalingMode": "Conservative",
        "idleTimeoutSeconds": 30,
    }}}));
    let pod = head(&c);
    let autoscaler = &containers(&pod)[1];
    assert_eq!(autoscaler.image.as_deref(), Some("example/autoscaler:1"));
    assert_eq!(autoscaler.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(
        value(&autoscaler.resources),
        json!({"requests": {"cpu": "100m", "memory": "256Mi"}})
    );
    assert_eq!(
        env(autoscaler, "AUTOSCALER_LOG").and_then(|e| e.value.as_deref()),
        Some("debug")
    );
    assert_eq!(
        env(autoscaler, "KUBERAY_GEN_AUTOSCALER_START_CMD").and_then(|e| e.value.as_deref()),
        Some(START_COMMAND),
        "KubeRay's variables stay"
    );
    assert_eq!(autoscaler.env_from.as_ref().map(Vec::len), Some(1));
    let mounts: Vec<&str> = autoscaler
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(mounts, ["/extra", "/tmp/ray"]);
    assert_eq!(
        value(&autoscaler.security_context),
        json!({"runAsNonRoot": true})
    );
    assert_eq!(
        autoscaler.command.as_deref(),
        Some(&["/bin/bash".to_string(), "-c".into(), "--".into()][..])
    );
    assert_eq!(
        autoscaler.args.as_deref(),
        Some(&["ulimit -n 65536; $KUBERAY_GEN_AUTOSCALER_START_CMD".to_string()][..])
    );
}

#[test]
fn the_autoscaler_version_sets_the_ray_containers_variable_and_v2_restarts_nothing() {
    for (version, variable, restart) in [("v1", "false", None), ("v2", "true", Some("Never"))] {
        let c = cluster(json!({"spec": {"autoscalerOptions": {"version": version}}}));
        let pod = head(&c);
        assert_eq!(
            env(&containers(&pod)[0], "RAY_enable_autoscaler_v2").and_then(|e| e.value.as_deref()),
            Some(variable),
            "{version}"
        );
        assert_eq!(env(&containers(&pod)[1], "RAY_enable_autoscaler_v2"), None);
        assert_eq!(
            pod.spec.as_ref().expect("spec").restart_policy.as_deref(),
            restart
        );
        let worker = worker(&c);
        assert_eq!(
            worker
                .spec
                .as_ref()
                .expect("spec")
                .restart_policy
                .as_deref(),
            restart
        );
    }
}

#[test]
fn the_autoscalers_access_is_named_labelled_and_owned_as_kuberay_makes_it() {
    let c = cluster(json!({}));
    let meta = json!({
        "name": "elastic",
        "namespace": "team",
        "labels": {
            "ray.io/cluster": "elastic",
            "app.kubernetes.io/name": "kuberay",
            "app.kubernetes.io/created-by": "kuberay-operator",
        },
        "ownerReferences": [{
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "elastic", "uid": "u-1",
            "controller": true, "blockOwnerDeletion": true,
        }],
    });
    assert_eq!(
        value(&build_service_account(&c)),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
    );
    let rbac = "rbac.authorization.k8s.io/v1";
    assert_eq!(
        value(&build_role(&c)),
        json!({"apiVersion": rbac, "kind": "Role", "metadata": meta, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
            {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
        ]})
    );
    assert_eq!(
        value(&build_role_binding(&c)),
        json!({"apiVersion": rbac, "kind": "RoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "elastic"},
            "subjects": [{"kind": "ServiceAccount", "name": "elastic", "namespace": "team"}]})
    );
}

#[test]
fn long_or_numeric_names_are_cut_as_kuberay_cuts_them() {
    assert_eq!(check_name("elastic"), "elastic");
    let long = format!("{}-tail", "a".repeat(60));
    let cut = check_name(&long);
    assert_eq!(cut.len(), 50);
    assert!(long.ends_with(&cut));
    assert_eq!(check_name("7-days"), "r-days");
    assert_eq!(
        check_name(&format!("{}-x", "1".repeat(49))),
        format!("r{}-x", "1".repeat(47))
    );
}
