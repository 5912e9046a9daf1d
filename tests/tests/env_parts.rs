//! What `tests/env/control-plane up` builds for its settings (`control-plane parts`): the
//! environment of `tests/env/dev` (real nodes only, raygate installed with its chart) builds
//! what it runs and nothing else, while the test environment keeps every part its suites use.
//!
//! No environment is needed: `parts` only reads the settings, here with a state directory of
//! the test's own, so that the running environment's recorded shape does not count.

use std::path::Path;
use std::process::Command;

/// `tests/env/control-plane parts` with state directory `state` and none of the shape's
/// settings from the caller's environment.
fn parts_command(state: &Path) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("env/control-plane");
    let mut command = Command::new(script);
    command.arg("parts").env("RAYGATE_STATE", state);
    for name in [
        "RAYGATE_KWOK_NODES",
        "RAYGATE_NO_RAY",
        "RAYGATE_REAL_NODES",
        "RAYGATE_ENV_INSTALL",
        "RAYGATE_ENV_KUBERAY",
    ] {
        command.env_remove(name);
    }
    command
}

/// `control-plane parts` with these settings, one part per element.
fn parts(settings: &[(&str, &str)]) -> Vec<String> {
    let state = std::env::temp_dir().join(format!("raygate-env-parts-{}", std::process::id()));
    parts_in(&state, settings)
}

/// `control-plane parts` with state directory `state` and these settings.
fn parts_in(state: &Path, settings: &[(&str, &str)]) -> Vec<String> {
    let output = parts_command(state)
        .envs(settings.iter().copied())
        .output()
        .expect("running tests/env/control-plane");
    assert!(
        output.status.success(),
        "control-plane parts {settings:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("UTF-8 output")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The parts of the demo's environment: real nodes only, raygate installed with its chart.
const DEMO_PARTS: [&str; 7] = [
    "kube",
    "etcd",
    "volcano",
    "helm",
    "coredns",
    "images",
    "raygate-image",
];

#[test]
fn the_demo_environment_builds_only_what_it_runs() {
    assert_eq!(
        parts(&[("RAYGATE_KWOK_NODES", "0"), ("RAYGATE_ENV_INSTALL", "helm")]),
        DEMO_PARTS,
        "no kwok, KubeRay or Ray venv, and raygate's image (its one release build)"
    );
}

#[test]
fn the_test_environment_builds_kwok_kuberay_and_the_ray_venv() {
    assert_eq!(
        parts(&[]),
        [
            "kube", "etcd", "volcano", "helm", "kwok", "kuberay", "ray", "coredns", "images"
        ],
        "raygate runs as host processes: no image"
    );
}

#[test]
fn kuberay_and_the_shared_ray_head_are_built_when_asked_for_without_kwok() {
    assert_eq!(
        parts(&[
            ("RAYGATE_KWOK_NODES", "0"),
            ("RAYGATE_ENV_KUBERAY", "1"),
            ("RAYGATE_NO_RAY", "0"),
            ("RAYGATE_REAL_NODES", "0"),
        ]),
        ["kube", "etcd", "volcano", "helm", "kuberay", "ray"],
    );
}

#[test]
fn a_bad_kwok_node_count_is_refused_naming_the_setting() {
    let output = parts_command(&std::env::temp_dir().join("raygate-env-parts-bad"))
        .env("RAYGATE_KWOK_NODES", "three")
        .output()
        .expect("running control-plane");
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "RAYGATE_KWOK_NODES: 0 to 999, not three"
    );
}

/// Commands after `up` (also run inside the environment, where its env file is applied) take
/// the shape `up` recorded, not a default.
#[test]
fn later_commands_take_the_shape_up_recorded() {
    let state = std::env::temp_dir().join(format!("raygate-env-parts-up-{}", std::process::id()));
    std::fs::create_dir_all(&state).expect("creating the state directory");
    std::fs::write(state.join("shape"), "install=helm kwok-nodes=0 no-ray=1\n")
        .expect("recording the shape");
    let recorded = parts_in(&state, &[]);
    std::fs::remove_dir_all(&state).expect("removing the state directory");
    assert_eq!(recorded, DEMO_PARTS);
}
