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

    // As kubectl applies the documents before a syntax error, the objects before it get their
    // verdicts (and skip notes); the exit code is still the one for unreadable input.
    let valid = std::fs::read_to_string(example("rayjob.yaml")).expect("the example");
    let broken = format!("{valid}\n---\napiVersion: v1\nkind: ConfigMap\n---\nkind: [\n");
    let output = raygate(&["validate", "-o", "json", "-f", "-"], Some(&broken));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let reports: Value = serde_json::from_str(&stdout(&output)).expect("JSON reports");
    assert_eq!(reports.as_array().map(Vec::len), Some(1), "{reports}");
    assert_eq!(reports[0]["name"], "rayjob-sample");
    assert_eq!(reports[0]["valid"], true);
    let text = stderr(&output);
    let line: usize = text
        .strip_prefix("error: -:")
        .and_then(|rest| rest.split(':').next())
        .and_then(|line| line.parse().ok())
        .unwrap_or_else(|| panic!("no location: {text}"));
    // The bracket opens on the last line; the parser finds it unclosed at the end.
    assert!(line >= valid.lines().count() + 6, "{text}");
    assert!(
        text.contains("note: -: document 2 is ConfigMap (v1)"),
        "{text}"
    );
}

#[test]
fn the_documents_before_a_bad_separator_get_their_verdicts() {
    let valid = std::fs::read_to_string(example("rayjob.yaml")).expect("the example");
    let broken = format!("{valid}---\napiVersion: ray.io/v1\nkind: RayJob\n--- {{a: 1}}\n");
    let output = raygate(&["validate", "-f", "-"], Some(&broken));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    // The nameless RayJob the bad line ends is lost, as kubectl loses it.
    assert_eq!(stdout(&output), "rayjob.ray.io/rayjob-sample valid\n");
    let line = valid.lines().count() + 4;
    assert!(
        stderr(&output).starts_with(&format!("error: -:{line}:4: kubectl allows only a comment")),
        "{}",
        stderr(&output)
    );
}

/// The example RayJob with `edit` applied to its JSON.
fn example_job(edit: impl FnOnce(&mut Value)) -> String {
    let text = std::fs::read_to_string(example("rayjob.yaml")).expect("the example");
    let mut job = raygate_api::input::parse_documents("rayjob.yaml", &text)
        .expect("readable")
        .remove(0)
        .value;
    edit(&mut job);
    serde_json::to_string(&job).expect("JSON")
}

#[test]
fn unknown_fields_follow_kubectl_s_validate_flag() {
    let typo = example_job(|job| {
        job["spec"]["entrypont"] = job["spec"]["entrypoint"].take();
    });
    let strict = "* spec.entrypont: strict decoding error: unknown field \"spec.entrypont\"";
    for flags in [
        &[][..],
        &["--validate"],
        &["--validate=strict"],
        &["--validate=true"],
    ] {
        let args = [&["validate", "-f", "-"], flags].concat();
        let output = raygate(&args, Some(&typo));
        assert_eq!(
            output.status.code(),
            Some(1),
            "{flags:?}: {}",
            stdout(&output)
        );
        assert!(
            stdout(&output).starts_with("The RayJob \"rayjob-sample\" is invalid:\n")
                && stdout(&output).contains(strict),
            "{flags:?}: {}",
            stdout(&output)
        );
    }
    let output = raygate(&["validate", "--validate=warn", "-f", "-"], Some(&typo));
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(
        stdout(&output).contains(
            "Warning: rayjob.ray.io/rayjob-sample: spec.entrypont: unknown field \"spec.entrypont\""
        ),
        "{}",
        stdout(&output)
    );
    for ignore in ["--validate=ignore", "--validate=false"] {
        let output = raygate(&["validate", ignore, "-f", "-"], Some(&typo));
        assert_eq!(output.status.code(), Some(0), "{ignore}");
        assert!(
            !stdout(&output).contains("entrypont"),
            "{}",
            stdout(&output)
        );
    }
    let output = raygate(&["validate", "--validate=yes", "-f", "-"], Some(&typo));
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("invalid - validate option \"yes\"; must be one of: strict (or true), warn, ignore (or false)"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn podgroup_refuses_what_validate_refuses_under_the_same_validate_flag() {
    let typo = example_job(|job| job["spec"]["entrypont"] = "x".into());
    let output = raygate(&["podgroup", "-f", "-"], Some(&typo));
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("strict decoding error: unknown field \"spec.entrypont\""),
        "{}",
        stderr(&output)
    );
    let output = raygate(&["podgroup", "--validate=warn", "-f", "-"], Some(&typo));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("name: ray-rayjob-sample-pg"),
        "{}",
        stdout(&output)
    );
    let v2 = example_job(|job| job["apiVersion"] = "ray.io/v2".into());
    let output = raygate(&["podgroup", "-f", "-"], Some(&v2));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("no matches for kind"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn the_api_server_s_metadata_rules_apply() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit, &str); 4] = [
        (
            "no name",
            |job| {
                job["metadata"].as_object_mut().unwrap().remove("name");
            },
            "* metadata.name: Required value: name or generateName is required",
        ),
        (
            "a name that is no DNS-1123 subdomain",
            |job| job["metadata"]["name"] = "Sample_Job".into(),
            "* metadata.name: Invalid value: \"Sample_Job\": a lowercase RFC 1123 subdomain",
        ),
        (
            "a label value too long",
            |job| job["metadata"]["labels"]["team"] = "x".repeat(64).into(),
            "must be no more than 63 bytes",
        ),
        (
            "annotations over 256 KiB with kubectl apply's copy",
            |job| {
                job["metadata"]["annotations"] = serde_json::json!({"notes": "x".repeat(200_000)})
            },
            "* metadata.annotations: Too long: may not be more than 262144 bytes; ",
        ),
    ];
    for (what, edit, expected) in cases {
        let output = raygate(&["validate", "-f", "-"], Some(&example_job(edit)));
        assert_eq!(output.status.code(), Some(1), "{what}: {}", stdout(&output));
        assert!(
            stdout(&output).contains(expected),
            "{what}: {}",
            stdout(&output)
        );
    }
}

#[test]
fn unserved_ray_versions_and_kinds_are_errors_others_are_skipped() {
    let v2 = example_job(|job| job["apiVersion"] = "ray.io/v2".into());
    let output = raygate(&["validate", "-o", "json", "-f", "-"], Some(&v2));
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let reports: Value = serde_json::from_str(&stdout(&output)).expect("JSON reports");
    assert_eq!(reports[0]["findings"][0]["rule"], "no-kind-match");
    assert_eq!(
        reports[0]["findings"][0]["message"],
        "no matches for kind \"RayJob\" in version \"ray.io/v2\": raygate's CRDs serve ray.io/v1 and ray.io/v1alpha1 RayJob and RayCluster"
    );
    let plural = example_job(|job| job["kind"] = "RayJobs".into());
    let output = raygate(&["validate", "-f", "-"], Some(&plural));
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("no matches for kind \"RayJobs\" in version \"ray.io/v1\""));
    let service = example_job(|job| job["kind"] = "RayService".into());
    let output = raygate(&["validate", "-f", "-"], Some(&service));
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("is RayService (ray.io/v1)"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_syntax_error_is_located_once_by_its_header() {
    // The header was once one line and column past the position in the parser's text.
    let output = raygate(
        &["validate", "-f", "-"],
        Some("metadata:\n  name: a\n labels: {}\n"),
    );
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(text.starts_with("error: -:3:2: "), "{text}");
    assert!(!text.contains("line") && !text.contains("column"), "{text}");
    let output = raygate(
        &["validate", "-f", "-"],
        Some("kind: A\nspec:\n  x: [1, 2\n  y: 3\n"),
    );
    let text = stderr(&output);
    assert!(text.starts_with("error: -:4:4: "), "{text}");
    assert!(!text.contains("line") && !text.contains("column"), "{text}");
}

#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    let one = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: c}\nspec:\n  headGroupSpec:\n    template: {spec: {containers: [{name: h, image: i, resources: {limits: {cpu: 1, memory: 1Gi}}}]}}\n---\n";
    for args in [&["podgroup", "-f", "-"][..], &["crds"][..]] {
        let input = one.repeat(3_000);
        let mut child = Command::new(env!("CARGO_BIN_EXE_raygate"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("raygate starts");
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
        // `| head -c 100`: read a little, then close the pipe.
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let mut start = [0u8; 100];
        std::io::Read::read_exact(&mut stdout, &mut start).expect("some output");
        drop(stdout);
        let output = child.wait_with_output().expect("raygate finishes");
        writer.join().expect("input written");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            !stderr(&output).contains("Broken pipe"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
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
fn podgroup_prints_the_sub_gangs() {
    let input = r#"
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: mixed, namespace: ml}
spec:
  headGroupSpec:
    rayStartParams: {}
    template: {spec: {containers: [{name: ray-head, image: rayproject/ray:2.60.0}]}}
  workerGroupSpecs:
  - groupName: cpu
    replicas: 8
    minReplicas: 0
    maxReplicas: 8
    rayStartParams: {}
    template: {spec: {containers: [{name: w, image: rayproject/ray:2.60.0}]}}
  - groupName: tpu
    replicas: 2
    minReplicas: 1
    maxReplicas: 2
    numOfHosts: 4
    rayStartParams: {}
    template: {spec: {containers: [{name: w, image: rayproject/ray:2.60.0}]}}
"#;
    let output = raygate(&["podgroup", "-o", "json", "-f", "-"], Some(input));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let pg: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(pg["spec"]["minMember"], 17);
    assert_eq!(
        pg["spec"]["subGroupPolicy"],
        serde_json::json!([
            {"name": "cpu",
             "labelSelector": {"matchLabels": {"ray.io/group": "cpu", "ray.io/node-type": "worker"}},
             "matchLabelKeys": ["ray.io/group"], "subGroupSize": 8, "minSubGroups": 1},
            {"name": "tpu",
             "labelSelector": {"matchLabels": {"ray.io/group": "tpu", "ray.io/node-type": "worker"}},
             "matchLabelKeys": ["ray.io/worker-group-replica-name"], "subGroupSize": 4,
             "minSubGroups": 2}
        ])
    );
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
    // No namespace written: the object is named alone, not "/shared-job".
    assert!(
        stderr(&output).contains("RayJob shared-job "),
        "{}",
        stderr(&output)
    );
}

#[test]
fn an_empty_namespace_is_not_shown() {
    let input = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: c, namespace: ''}\nspec:\n  headGroupSpec:\n    template: {spec: {containers: [{name: h, image: i, resources: {limits: {cpu: 1, memory: 1Gi}}}]}}\n";
    let output = raygate(&["validate", "-f", "-"], Some(input));
    assert_eq!(
        stdout(&output),
        "raycluster.ray.io/c valid\n",
        "{}",
        stderr(&output)
    );
}

#[test]
fn podgroup_refuses_objects_validate_rejects() {
    let input = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: tpu}\nspec:\n  headGroupSpec:\n    template: {spec: {containers: [{name: h, image: i}]}}\n  workerGroupSpecs:\n  - groupName: g\n    numOfHosts: 0\n    replicas: 1\n    minReplicas: 1\n    maxReplicas: 1\n    template: {spec: {containers: [{name: w, image: i}]}}\n";
    let validate = raygate(&["validate", "-f", "-"], Some(input));
    assert_eq!(validate.status.code(), Some(1), "{}", stdout(&validate));
    let output = raygate(&["podgroup", "-f", "-"], Some(input));
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert_eq!(stdout(&output), "");
    let message = stdout(&validate)
        .lines()
        .find(|l| l.contains("numOfHosts"))
        .expect("validate names numOfHosts")
        .to_string();
    assert!(stderr(&output).contains(&message), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("gets no PodGroup"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn podgroup_judges_objects_for_the_reconciler_validate_judges_them_for() {
    // raygate's own reconciler (the default of both commands) does not run GCS fault tolerance;
    // podgroup once judged every object for KubeRay and printed this cluster's PodGroup although
    // validate rejected it.
    let input = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: elastic}\nspec:\n  gcsFaultToleranceOptions: {redisAddress: 'redis:6379'}\n  headGroupSpec:\n    template: {spec: {containers: [{name: h, image: i, resources: {requests: {cpu: 1, memory: 1Gi}}}]}}\n";
    let validate = raygate(&["validate", "-f", "-"], Some(input));
    assert_eq!(validate.status.code(), Some(1), "{}", stdout(&validate));
    let output = raygate(&["podgroup", "-f", "-"], Some(input));
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("unsupported-gcs-fault-tolerance"),
        "{}",
        stderr(&output)
    );
    let kuberay = raygate(
        &["podgroup", "--reconciler", "kuberay", "-f", "-"],
        Some(input),
    );
    assert_eq!(kuberay.status.code(), Some(0), "{}", stderr(&kuberay));
    assert!(
        stdout(&kuberay).contains("name: ray-elastic-pg"),
        "{}",
        stdout(&kuberay)
    );
}

#[test]
fn objects_with_only_a_generate_name_are_named_by_it() {
    let input = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {generateName: batch-}\nspec:\n  headGroupSpec:\n    template: {spec: {containers: [{name: h, image: i}]}}\n";
    let output = raygate(&["validate", "-f", "-"], Some(input));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("raycluster.ray.io/batch-<random> valid\n"),
        "{}",
        stdout(&output)
    );
    let output = raygate(&["podgroup", "-f", "-"], Some(input));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("name: ray-batch-<random>-pg\n"),
        "{}",
        stdout(&output)
    );
    assert!(!stdout(&output).contains("ray--pg"), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("generateName \"batch-\" and no name"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn feature_gates_and_reconciler_change_the_verdict() {
    let job = "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: j}\nspec:\n  entrypoint: x\n  deletionStrategy:\n    deletionRules:\n    - policy: DeleteCluster\n      condition: {jobStatus: SUCCEEDED}\n  rayClusterSpec:\n    gcsFaultToleranceOptions: {redisAddress: 'redis:6379'}\n    headGroupSpec:\n      template: {spec: {containers: [{name: h, image: i}]}}\n";
    // raygate's own reconciler is the default everywhere (the install runs it), and it does not
    // run GCS fault tolerance; KubeRay does.
    let own = raygate(&["validate", "-f", "-"], Some(job));
    assert_eq!(own.status.code(), Some(1));
    assert!(stdout(&own).contains("compat: raygate"), "{}", stdout(&own));
    assert_eq!(
        raygate(
            &["validate", "--reconciler", "kuberay", "-f", "-"],
            Some(job)
        )
        .status
        .code(),
        Some(0)
    );
    let gated = raygate(
        &[
            "validate",
            "--reconciler",
            "kuberay",
            "--feature-gates",
            "RayJobDeletionPolicy=false",
            "-f",
            "-",
        ],
        Some(job),
    );
    assert_eq!(gated.status.code(), Some(1));
    assert!(stdout(&gated).contains("RayJobDeletionPolicy feature gate must be enabled"));
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

#[test]
fn convert_migrates_ray_objects_and_passes_everything_else_through() {
    let input = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: b}
---
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: job, namespace: team}
spec:
  backoffLimit: 2
  rayClusterSpec:
    headGroupSpec:
      template: {spec: {containers: [{name: ray-head, image: rayproject/ray}]}}
";
    let alpha = raygate(
        &["convert", "-f", "-", "--to", "ray.io/v1alpha1"],
        Some(input),
    );
    assert!(alpha.status.success(), "{}", stderr(&alpha));
    let docs = raygate_api::input::parse_documents("out", &stdout(&alpha)).expect("YAML out");
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0].value["kind"], "ConfigMap");
    assert_eq!(docs[0].value["data"]["a"], "b");
    let job = &docs[1].value;
    assert_eq!(job["apiVersion"], "ray.io/v1alpha1");
    assert!(job["spec"].get("backoffLimit").is_none());
    assert_eq!(job["spec"]["entrypoint"], "");
    assert!(job["metadata"]["annotations"]["raygate.io/v1-fields"].is_string());

    let back = raygate(
        &["convert", "-f", "-", "--to", "ray.io/v1"],
        Some(&stdout(&alpha)),
    );
    assert!(back.status.success(), "{}", stderr(&back));
    let original = raygate_api::input::parse_documents("in", input).unwrap();
    let restored = raygate_api::input::parse_documents("out", &stdout(&back)).unwrap();
    assert_eq!(
        restored
            .into_iter()
            .map(|d| d.value)
            .collect::<Vec<Value>>(),
        original
            .into_iter()
            .map(|d| d.value)
            .collect::<Vec<Value>>()
    );
}

#[test]
fn convert_keeps_what_kubectl_reads_yaml_1_1_values_as() {
    let input = "\
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: c}
spec:
  enableInTreeAutoscaling: yes
  headGroupSpec:
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.9.0
          env: [{name: FLAG, value: 'on'}, {name: MODE, value: \"0777\"}]
        volumes: [{name: v, configMap: {name: c, defaultMode: 0777}}]
";
    let output = raygate(
        &["convert", "-f", "-", "--to", "ray.io/v1alpha1"],
        Some(input),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("defaultMode: 511"), "{text}");
    assert!(text.contains("enableInTreeAutoscaling: true"), "{text}");
    assert!(text.contains("value: \"on\""), "{text}");
    assert!(text.contains("value: \"0777\""), "{text}");
}

#[test]
fn convert_reports_what_cannot_be_converted() {
    let input = "\
apiVersion: ray.io/v1alpha1
kind: RayCluster
metadata:
  name: c
  annotations: {raygate.io/v1-fields: 'not json'}
spec: {headGroupSpec: {rayStartParams: {}, template: {}}}
";
    let out = raygate(&["convert", "-f", "-", "--to", "ray.io/v1"], Some(input));
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).starts_with(
            "error: -: document 1: metadata.annotations[raygate.io/v1-fields]: Invalid value: not the JSON raygate writes"
        ),
        "{}",
        stderr(&out)
    );
    let bad_flag = raygate(&["convert", "-f", "-", "--to", "ray.io/v2"], Some(input));
    assert_eq!(bad_flag.status.code(), Some(2));
}

#[test]
fn manifests_render_the_installation_for_a_namespace_and_image() {
    let out = raygate(
        &[
            "manifests",
            "--namespace",
            "ops",
            "--image",
            "example.com/raygate:1",
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let docs = raygate_api::input::parse_documents("install", &stdout(&out)).expect("YAML");
    let deployment = docs
        .iter()
        .find(|d| d.value["kind"] == "Deployment")
        .expect("a Deployment");
    assert_eq!(deployment.value["metadata"]["namespace"], "ops");
    assert_eq!(
        deployment.value["spec"]["template"]["spec"]["containers"][0]["image"],
        "example.com/raygate:1"
    );
    let defaults = raygate(&["manifests"], None);
    let committed =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/install.yaml"))
            .expect("manifests/install.yaml");
    assert_eq!(
        stdout(&defaults),
        committed,
        "the committed rendering is the default one"
    );
}

#[test]
fn manifests_refuse_feature_gates_the_installed_process_would_refuse() {
    let out = raygate(&["manifests", "--feature-gates", "NoSuchGate=true"], None);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let message = stderr(&out);
    assert!(
        message.contains("'--feature-gates <GATES>'")
            && message.contains("unknown feature gate \"NoSuchGate\"")
            && message.contains("RayJobDeletionPolicy"),
        "{message}"
    );
    let out = raygate(
        &["manifests", "--feature-gates", "RayJobDeletionPolicy=true"],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("--feature-gates=RayJobDeletionPolicy=true"),
        "the gates reach the Deployment as written"
    );
}

#[test]
fn manifests_render_the_webhook_configurations_alone_for_a_url_and_ca() {
    let dir = std::env::temp_dir().join(format!("raygate-cli-ca-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("a temporary directory");
    let ca = dir.join("ca.crt");
    fs::write(&ca, "-----BEGIN CERTIFICATE-----\nAA==\n").expect("CA file written");
    let out = raygate(
        &[
            "manifests",
            "--namespace",
            "ops",
            "--webhook-configurations",
            "--webhook-url",
            "https://127.0.0.1:9443",
            "--ca-bundle-file",
            ca.to_str().expect("UTF-8 path"),
        ],
        None,
    );
    fs::remove_dir_all(&dir).expect("temporary directory removed");
    assert!(out.status.success(), "{}", stderr(&out));
    let docs: Vec<serde_json::Value> =
        raygate_api::input::parse_documents("webhooks", &stdout(&out))
            .expect("YAML")
            .into_iter()
            .map(|d| d.value)
            .collect();
    let expected = raygate_api::manifests::webhook_configurations(
        &raygate_api::manifests::InstallOptions {
            namespace: "ops".to_owned(),
            ..Default::default()
        },
        &raygate_api::manifests::WebhookClient::Url {
            base: "https://127.0.0.1:9443".to_owned(),
            ca_bundle: Some("-----BEGIN CERTIFICATE-----\nAA==\n".to_owned()),
        },
    );
    assert_eq!(docs, expected);

    let missing = raygate(
        &[
            "manifests",
            "--webhook-configurations",
            "--webhook-url",
            "https://127.0.0.1:9443",
            "--ca-bundle-file",
            "/nonexistent/ca.crt",
        ],
        None,
    );
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("--ca-bundle-file /nonexistent/ca.crt"),
        "{}",
        stderr(&missing)
    );
    let url_alone = raygate(&["manifests", "--webhook-url", "https://x"], None);
    assert_eq!(url_alone.status.code(), Some(2), "{}", stderr(&url_alone));
}

/// Writes `text` to a file of its own and returns its path.
fn nodes_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("raygate-cli-nodes-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    fs::write(&path, text).expect("nodes file");
    path.to_string_lossy().into_owned()
}

#[test]
fn validate_with_nodes_warns_about_what_no_node_could_hold() {
    let tiny = nodes_file(
        "tiny.yaml",
        "apiVersion: v1\nkind: NodeList\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: real-1}\n  status: {allocatable: {cpu: 900m, memory: 8Gi}}\n",
    );
    let output = raygate(
        &["validate", "-f", &example("rayjob.yaml"), "--nodes", &tiny],
        None,
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "rayjob.ray.io/rayjob-sample valid\n\
         Warning: rayjob.ray.io/rayjob-sample: spec.rayClusterSpec.headGroupSpec.template.spec: head Pod asks cpu 1; the largest node offers 900m (real-1) [ray-object-infeasible, compat: raygate]\n\
         Warning: rayjob.ray.io/rayjob-sample: spec.rayClusterSpec.workerGroupSpecs[0].template.spec: worker group \"small\" needs 2 Pods at once; the nodes they may run on hold at most 1 of them, even empty [ray-object-infeasible, compat: raygate]\n"
    );

    let big = nodes_file(
        "big.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {cpu: '8', memory: 32Gi}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: b}\nstatus: {allocatable: {cpu: '8', memory: 32Gi}}\n",
    );
    let output = raygate(
        &["validate", "-f", &example("rayjob.yaml"), "--nodes", &big],
        None,
    );
    assert_eq!(stdout(&output), "rayjob.ray.io/rayjob-sample valid\n");

    let empty = nodes_file("empty.yaml", "apiVersion: v1\nkind: List\nitems: []\n");
    let output = raygate(
        &["validate", "-f", &example("rayjob.yaml"), "--nodes", &empty],
        None,
    );
    assert!(
        stdout(&output).contains("Warning: rayjob.ray.io/rayjob-sample: spec.rayClusterSpec: the cluster has no schedulable nodes yet; feasibility not checked (a QueuePolicy's nodeTemplates can name the nodes an autoscaler adds) [feasibility-not-checked, compat: raygate]"),
        "{}",
        stdout(&output)
    );

    let not_nodes = nodes_file(
        "pods.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
    );
    let output = raygate(
        &[
            "validate",
            "-f",
            &example("rayjob.yaml"),
            "--nodes",
            &not_nodes,
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        format!("error: {not_nodes}: document 1 is Pod (v1), not a v1 Node\n")
    );
    assert_eq!(stdout(&output), "");
}

#[test]
fn validate_cluster_without_a_reachable_cluster_is_unreadable_input_and_excludes_nodes() {
    let missing =
        std::env::temp_dir().join(format!("raygate-cli-no-kubeconfig-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_raygate"))
        .args(["validate", "-f", &example("rayjob.yaml"), "--cluster"])
        .env("KUBECONFIG", &missing)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", &missing)
        .output()
        .expect("raygate runs");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).starts_with(
            "error: no Kubernetes client (KUBECONFIG, ~/.kube/config or in-cluster config)"
        ),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        stdout(&output),
        "",
        "no verdict without the nodes asked for"
    );

    let nodes = nodes_file("conflict.yaml", "apiVersion: v1\nkind: List\nitems: []\n");
    let output = raygate(
        &[
            "validate",
            "-f",
            &example("rayjob.yaml"),
            "--cluster",
            "--nodes",
            &nodes,
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("'--cluster' cannot be used with '--nodes <FILE>'"),
        "{}",
        stderr(&output)
    );
}
