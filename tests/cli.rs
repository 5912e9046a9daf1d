//! The `raygate` command-line contract: output shapes, exit codes, examples.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn raygate(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_raygate"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("raygate starts");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    // raygate may exit (e.g. on a bad flag) before it reads its input.
    match pipe.write_all(stdin.unwrap_or("").as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => drop(pipe),
    }
    child.wait_with_output().expect("raygate finishes")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/examples")
}

fn example(name: &str) -> String {
    examples().join(name).to_string_lossy().into_owned()
}

#[test]
fn every_example_behaves_as_its_header_says() {
    let mut checked = 0;
    for entry in fs::read_dir(examples()).expect("examples exist") {
        let path = entry.expect("readable entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable example");
        let expected: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# expect-error: "))
            .collect();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let output = raygate(&["validate", "-f", &path.to_string_lossy()], None);
        if name.starts_with("invalid-") {
            assert!(!expected.is_empty(), "{name} has no # expect-error: header");
            assert_eq!(output.status.code(), Some(1), "{name}: {}", stdout(&output));
            for message in expected {
                assert!(
                    stdout(&output).contains(message),
                    "{name}: expected {message:?} in:\n{}",
                    stdout(&output)
                );
            }
        } else {
            assert!(
                expected.is_empty(),
                "{name} is valid but has # expect-error:"
            );
            assert_eq!(
                output.status.code(),
                Some(0),
                "{name}:\n{}{}",
                stdout(&output),
                stderr(&output)
            );
        }
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} examples found");
}

#[test]
fn json_output_has_the_documented_shape() {
    let output = raygate(
        &[
            "validate",
            "-o",
            "json",
            "-f",
            &example("rayjob.yaml"),
            "-f",
            &example("invalid-raycluster-min-greater-than-max.yaml"),
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    let reports: Value = serde_json::from_str(&stdout(&output)).expect("JSON array");
    let reports = reports.as_array().expect("an array");
    assert_eq!(reports.len(), 2);
    for report in reports {
        let keys: Vec<&str> = report
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "apiVersion",
                "findings",
                "kind",
                "name",
                "namespace",
                "valid"
            ]
        );
    }
    assert_eq!(reports[0]["kind"], "RayJob");
    assert_eq!(reports[0]["name"], "rayjob-sample");
    assert_eq!(reports[0]["valid"], true);
    assert_eq!(reports[1]["valid"], false);
    let finding = &reports[1]["findings"][0];
    let keys: Vec<&str> = finding
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["compat", "field", "message", "rule", "severity"]);
    assert_eq!(finding["severity"], "error");
    assert_eq!(finding["compat"], "kuberay");
}

#[test]
fn stdin_lists_and_other_kinds() {
    let input = r#"{"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "ok"},
         "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "i"}]}}}}}
    ]}"#;
    let output = raygate(&["validate", "-o", "json", "-f", "-"], Some(input));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let reports: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(reports.as_array().unwrap().len(), 1);
    assert!(
        stderr(&output).contains("ConfigMap (v1)"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn unreadable_input_exits_2_with_a_location() {
    let output = raygate(
        &["validate", "-f", "-"],
        Some("kind: RayJob\nspec: [1, 2\n  x: 1\n"),
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).starts_with("error: -:"),
        "{}",
        stderr(&output)
    );

    let output = raygate(&["validate", "-f", "/nonexistent/rayjob.yaml"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("/nonexistent/rayjob.yaml"));
}

#[test]
fn text_output_reads_like_kubectl() {
    let output = raygate(
        &[
            "validate",
            "-f",
            &example("invalid-rayjob-suspend-without-shutdown.yaml"),
        ],
        None,
    );
    let text = stdout(&output);
    assert!(
        text.starts_with("The RayJob \"suspended-forever\" is invalid:\n* spec.suspend: "),
        "{text}"
    );
    let output = raygate(&["validate", "-f", &example("rayjob.yaml")], None);
    assert_eq!(
        stdout(&output).lines().next(),
        Some("rayjob.ray.io/rayjob-sample valid")
    );
}

#[test]
fn podgroup_prints_the_gang() {
    let output = raygate(
        &["podgroup", "-o", "json", "-f", &example("rayjob.yaml")],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let pg: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(pg["apiVersion"], "scheduling.volcano.sh/v1beta1");
    assert_eq!(pg["kind"], "PodGroup");
    assert_eq!(pg["metadata"]["name"], "ray-rayjob-sample-pg");
    assert_eq!(pg["spec"]["minMember"], 3);
    assert_eq!(pg["spec"]["minResources"]["cpu"], "2500m");
    assert_eq!(pg["spec"]["minResources"]["memory"], "4296Mi");
    assert_eq!(pg["spec"]["queue"], "default");

    let output = raygate(
        &[
            "podgroup",
            "-f",
            &example("rayjob.yaml"),
            "-f",
            &example("raycluster.yaml"),
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(text.matches("kind: PodGroup").count(), 2, "{text}");
    assert!(text.contains("name: ray-raycluster-gpu-pg"), "{text}");
    assert!(text.contains("minMember: 5"), "{text}");
}

#[test]
fn podgroup_reports_what_cannot_be_sized() {
    let output = raygate(
        &[
            "podgroup",
            "-f",
            &example("invalid-rayjob-backoff-limit-type.yaml"),
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("RayJob/wordy"),
        "{}",
        stderr(&output)
    );
    let selector = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: shared-job}\nspec:\n  clusterSelector: {ray.io/cluster: shared}\n";
    let output = raygate(&["podgroup", "-f", "-"], Some(selector));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("existing RayCluster"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn feature_gates_and_reconciler_change_the_verdict() {
    let job = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: j}\nspec:\n  entrypoint: x\n  deletionStrategy:\n    deletionRules:\n    - policy: DeleteCluster\n      condition: {jobStatus: SUCCEEDED}\n  rayClusterSpec:\n    enableInTreeAutoscaling: true\n    headGroupSpec:\n      template: {spec: {containers: [{name: h, image: i}]}}\n";
    assert_eq!(
        raygate(&["validate", "-f", "-"], Some(job)).status.code(),
        Some(0)
    );
    let gated = raygate(
        &[
            "validate",
            "--feature-gates",
            "RayJobDeletionPolicy=false",
            "-f",
            "-",
        ],
        Some(job),
    );
    assert_eq!(gated.status.code(), Some(1));
    assert!(stdout(&gated).contains("RayJobDeletionPolicy feature gate must be enabled"));
    let own = raygate(
        &["validate", "--reconciler", "raygate", "-f", "-"],
        Some(job),
    );
    assert_eq!(own.status.code(), Some(1));
    assert!(stdout(&own).contains("compat: raygate"), "{}", stdout(&own));
    let bad = raygate(
        &["validate", "--feature-gates", "Nope=true", "-f", "-"],
        Some(job),
    );
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn crds_are_printed() {
    let output = raygate(&["crds"], None);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    assert!(text.contains("name: rayjobs.ray.io"));
    assert!(text.contains("name: rayclusters.ray.io"));
    assert!(text.contains("name: queuepolicies.raygate.io"));
}
