use std::process::Command;

use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::cluster::build::{BuildOptions, PodRole, build_pod};
use crate::ray::v1::RayCluster;

const CLUSTER: &str = r#"
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: demo, namespace: team, uid: u-1}
spec:
  rayVersion: "2.60.0"
  headGroupSpec:
    rayStartParams: {port: "7000"}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.60.0
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
          imagePullPolicy: Always
          securityContext: {runAsUser: 1000}
          env: [{name: RAY_USE_TLS, value: "1"}]
          volumeMounts: [{name: certs, mountPath: /etc/ray/tls}]
          resources: {requests: {cpu: "1"}}
        volumes: [{name: certs, secret: {secretName: demo-tls}}]
"#;

fn cluster() -> RayCluster {
    serde_saphyr::from_str(CLUSTER).unwrap_or_else(|e| panic!("bad test YAML: {e}"))
}

fn worker(c: &RayCluster, options: &BuildOptions) -> Pod {
    let group = &c.spec.worker_group_specs.as_ref().expect("groups")[0];
    build_pod(c, PodRole::Worker(group), "demo-small-worker-x", options)
}

fn init_containers(pod: &Pod) -> Vec<Container> {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.clone())
        .unwrap_or_default()
}

#[test]
fn a_worker_waits_for_its_heads_gcs_after_its_own_init_containers() {
    let c = cluster();
    let pod = worker(&c, &BuildOptions::default());
    let init = init_containers(&pod);
    let names: Vec<&str> = init.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["fetch-data", CONTAINER_NAME]);
    let wait = &init[1];
    assert_eq!(wait.image.as_deref(), Some("rayproject/ray:2.60.0"));
    assert_eq!(wait.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(
        wait.security_context.as_ref().and_then(|s| s.run_as_user),
        Some(1000)
    );
    assert_eq!(
        wait.command.as_deref(),
        Some(&["/bin/bash".to_string(), "-c".into(), "--".into()][..])
    );
    let script = &wait.args.as_ref().expect("args")[0];
    assert!(
        script.contains("ray health-check --address demo-head-svc.team.svc.cluster.local:7000"),
        "{script}"
    );
    // The template's environment and mounts, not those raygate adds to the Ray container; then
    // the head's address, as every init container gets it.
    let env: Vec<(&str, Option<&str>)> = wait
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref()))
        .collect();
    assert_eq!(
        env,
        [
            ("RAY_USE_TLS", Some("1")),
            ("FQ_RAY_IP", Some("demo-head-svc.team.svc.cluster.local")),
            ("RAY_IP", Some("demo-head-svc")),
        ]
    );
    let users = &init[0];
    let users_env: Vec<&str> = users
        .env
        .iter()
        .flatten()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(
        users_env,
        ["FQ_RAY_IP", "RAY_IP"],
        "the user's init container too"
    );
    let mounts: Vec<&str> = wait
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(mounts, ["/etc/ray/tls"]);
    let resources = wait.resources.as_ref().expect("resources");
    for list in [&resources.requests, &resources.limits] {
        let list = list.as_ref().expect("a resource list");
        assert_eq!(list["cpu"].0, "200m");
        assert_eq!(list["memory"].0, "256Mi");
    }
}

#[test]
fn the_head_and_an_opted_out_operator_get_no_wait() {
    let c = cluster();
    let head = build_pod(&c, PodRole::Head, "demo-head-x", &BuildOptions::default());
    assert!(init_containers(&head).is_empty());
    let opted_out = worker(
        &c,
        &BuildOptions {
            wait_gcs_ready: false,
            ..BuildOptions::default()
        },
    );
    let names: Vec<String> = init_containers(&opted_out)
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["fetch-data"]);
}

#[test]
fn a_template_with_its_own_wait_gcs_ready_keeps_it() {
    let mut c = cluster();
    let template = &mut c.spec.worker_group_specs.as_mut().expect("groups")[0].template;
    let spec = template.spec.as_mut().expect("spec");
    spec.init_containers = Some(vec![Container {
        name: CONTAINER_NAME.to_string(),
        image: Some("mine".to_string()),
        ..Container::default()
    }]);
    let init = init_containers(&worker(&c, &BuildOptions::default()));
    assert_eq!(init.len(), 1);
    assert_eq!(init[0].image.as_deref(), Some("mine"));
}

/// Runs the script with a `ray` on `PATH` that answers `ray_exit_code` and records its
/// arguments; returns the script's exit status, output and the recorded arguments.
fn run_script(ray_exit_code: i32) -> (bool, String, String) {
    let dir = std::env::temp_dir().join(format!(
        "raygate-gcs-wait-{}-{ray_exit_code}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let ray = dir.join("ray");
    let calls = dir.join("calls");
    std::fs::write(
        &ray,
        format!(
            "#!/bin/bash\necho \"$@\" >> {}\nexit {ray_exit_code}\n",
            calls.display()
        ),
    )
    .expect("write the fake ray");
    let mut permissions = std::fs::metadata(&ray).expect("metadata").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&ray, permissions).expect("chmod the fake ray");
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("timeout")
        .args(["2", "/bin/bash", "-c", "--"])
        .arg(script("head.ns.svc.cluster.local:6379"))
        .env("PATH", path)
        .output()
        .expect("run bash");
    let recorded = std::fs::read_to_string(&calls).unwrap_or_default();
    std::fs::remove_dir_all(&dir).expect("remove the temporary directory");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        recorded,
    )
}

#[test]
fn the_script_ends_when_the_gcs_answers_and_keeps_waiting_while_it_does_not() {
    let (ok, stdout, calls) = run_script(0);
    assert!(ok, "{stdout}");
    assert_eq!(stdout, "GCS is ready.\n");
    assert_eq!(
        calls,
        "health-check --address head.ns.svc.cluster.local:6379\n"
    );

    // A GCS that never answers: the loop is still polling when `timeout` stops it.
    let (ok, stdout, calls) = run_script(1);
    assert!(!ok, "{stdout}");
    assert!(
        stdout.starts_with(
            "0 seconds elapsed: waiting for the GCS at head.ns.svc.cluster.local:6379 to be ready.\n"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("GCS is ready"), "{stdout}");
    assert_eq!(calls.lines().count(), 1, "{calls}");
}
