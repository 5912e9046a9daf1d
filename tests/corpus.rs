//! Every manifest of the corpus (`tests/corpus/`, `manifests/examples/`, the blocks of `docs/`)
//! through the built `raygate`: `validate` and `podgroup` answer what each header promises, and
//! `convert` to the other `ray.io` version and back gives back the objects of every valid one.
//! The header convention is in `tests/corpus/README.md`.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Output, Stdio};

use raygate_api::input::{as_the_api_server_reads, parse_documents};
use raygate_e2e::corpus::{
    FindingSummary, Manifest, PodGroupSummary, corpus, manifests, object_key, report_key,
};
use serde_json::Value;

fn raygate(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_raygate"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("raygate starts");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    match pipe.write_all(stdin.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => panic!("writing stdin: {e}"),
        _ => drop(pipe),
    }
    child.wait_with_output().expect("raygate finishes")
}

/// `raygate <command> -o json <header flags> -f -` on the manifest's text.
fn run(command: &str, manifest: &Manifest) -> Output {
    let mut args = vec![command, "-o", "json"];
    args.extend(manifest.expect.flags.iter().map(String::as_str));
    args.extend(["-f", "-"]);
    raygate(&args, &manifest.text)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Panics with every problem found, one manifest per line.
fn assert_no_problems(problems: &[String], checked: usize) {
    assert!(
        problems.is_empty(),
        "{} of {checked} manifests disagree with their headers:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

fn validate_problems(manifest: &Manifest) -> Vec<String> {
    let name = &manifest.name;
    let expect = &manifest.expect;
    let output = run("validate", manifest);
    let mut problems = Vec::new();
    if output.status.code() != Some(expect.exit) {
        problems.push(format!(
            "{name}: validate exits {:?}, expected {}: {}{}",
            output.status.code(),
            expect.exit,
            text(&output.stdout),
            text(&output.stderr)
        ));
        return problems;
    }
    let reports: Vec<Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{name}: validate -o json: {e}"));
    let errors: Vec<String> = reports
        .iter()
        .flat_map(|r| r["findings"].as_array().cloned().unwrap_or_default())
        .filter(|f| f["severity"] == "error")
        .map(|f| {
            let part = |key: &str| f[key].as_str().unwrap_or_default().to_string();
            format!("{}: {}", part("field"), part("message"))
        })
        .collect();
    for message in &expect.messages {
        if !errors.iter().any(|e| e.contains(message.as_str())) {
            problems.push(format!("{name}: no error contains {message:?}: {errors:?}"));
        }
    }
    let Some(pinned) = &expect.pinned else {
        return problems;
    };
    let mut findings: Vec<FindingSummary> =
        reports.iter().flat_map(FindingSummary::of_report).collect();
    findings.sort();
    if findings != pinned.findings {
        problems.push(format!(
            "{name}: findings\n  are       {findings:?}\n  expected  {:?}",
            pinned.findings
        ));
    }
    let valid: BTreeSet<String> = reports
        .iter()
        .filter(|r| r["valid"] == true)
        .map(report_key)
        .collect();
    if valid != pinned.valid {
        problems.push(format!(
            "{name}: valid objects are {valid:?}, expected {:?}",
            pinned.valid
        ));
    }
    let reported: BTreeSet<String> = reports.iter().map(report_key).collect();
    let rejected: BTreeSet<String> = pinned
        .findings
        .iter()
        .filter(|f| f.severity == "error")
        .map(|f| f.object.clone())
        .collect();
    let promised: BTreeSet<String> = pinned.valid.union(&rejected).cloned().collect();
    if reported != promised {
        problems.push(format!(
            "{name}: reports on {reported:?}, the header names {promised:?}"
        ));
    }
    problems
}

#[test]
fn every_manifest_is_validated_as_its_header_says() {
    let manifests = manifests();
    let problems: Vec<String> = manifests.iter().flat_map(validate_problems).collect();
    assert_no_problems(&problems, manifests.len());
}

fn podgroup_problems(manifest: &Manifest) -> Vec<String> {
    let name = &manifest.name;
    let expect = &manifest.expect;
    let output = run("podgroup", manifest);
    if output.status.code() != Some(expect.podgroup_exit) {
        return vec![format!(
            "{name}: podgroup exits {:?}, expected {}: {}",
            output.status.code(),
            expect.podgroup_exit,
            text(&output.stderr)
        )];
    }
    let Some(pinned) = &expect.pinned else {
        return Vec::new();
    };
    let printed = text(&output.stdout);
    let mut groups: Vec<PodGroupSummary> = if printed.trim().is_empty() {
        Vec::new()
    } else {
        let value: Value = serde_json::from_str(&printed)
            .unwrap_or_else(|e| panic!("{name}: podgroup -o json: {e}"));
        match value["kind"].as_str() {
            Some("List") => value["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(PodGroupSummary::of)
                .collect(),
            _ => vec![PodGroupSummary::of(&value)],
        }
    };
    groups.sort();
    if groups == pinned.pod_groups {
        Vec::new()
    } else {
        vec![format!(
            "{name}: PodGroups\n  are       {groups:?}\n  expected  {:?}",
            pinned.pod_groups
        )]
    }
}

#[test]
fn every_manifest_gets_the_pod_groups_its_header_says() {
    let manifests = manifests();
    let problems: Vec<String> = manifests.iter().flat_map(podgroup_problems).collect();
    assert_no_problems(&problems, manifests.len());
}

/// The objects of a YAML or JSON text as the API server reads what kubectl sends: also, a null
/// field of `metadata` is the absent one (ObjectMeta's fields are Go maps and strings that
/// `omitempty` drops), which `convert` may leave out (Helm writes `annotations:` with nothing).
fn read_back(name: &str, text: &str) -> Vec<Value> {
    parse_documents(name, text)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .map(|doc| {
            let mut object = as_the_api_server_reads(&doc.value);
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.retain(|_, value| !value.is_null());
            }
            object
        })
        .collect()
}

fn round_trip_problems(manifest: &Manifest) -> Vec<String> {
    let name = &manifest.name;
    let objects = read_back(name, &manifest.text);
    let versions: BTreeSet<&str> = objects
        .iter()
        .filter(|o| raygate_api::check::ray_kind(o).is_some())
        .filter_map(|o| o["apiVersion"].as_str())
        .collect();
    let (there, back) = match versions.iter().copied().collect::<Vec<_>>()[..] {
        [] | ["ray.io/v1"] => ("ray.io/v1alpha1", "ray.io/v1"),
        ["ray.io/v1alpha1"] => ("ray.io/v1", "ray.io/v1alpha1"),
        _ => return vec![format!("{name}: mixes ray.io versions {versions:?}")],
    };
    let converted = raygate(&["convert", "--to", there, "-f", "-"], &manifest.text);
    if !converted.status.success() {
        return vec![format!(
            "{name}: convert --to {there}: {}",
            text(&converted.stderr)
        )];
    }
    let middle = text(&converted.stdout);
    let mut problems = Vec::new();
    for object in read_back(name, &middle) {
        if raygate_api::check::ray_kind(&object).is_some() && object["apiVersion"] != there {
            problems.push(format!(
                "{name}: convert --to {there} left {} at {}",
                object_key(&object),
                object["apiVersion"]
            ));
        }
    }
    let restored = raygate(&["convert", "--to", back, "-f", "-"], &middle);
    if !restored.status.success() {
        problems.push(format!(
            "{name}: convert --to {back}: {}",
            text(&restored.stderr)
        ));
    } else if read_back(name, &text(&restored.stdout)) != objects {
        problems.push(format!(
            "{name}: {there} and back to {back} is not the input:\n{}",
            text(&restored.stdout)
        ));
    }
    problems
}

#[test]
fn convert_to_the_other_version_and_back_gives_back_every_valid_manifest() {
    let manifests: Vec<Manifest> = manifests()
        .into_iter()
        .filter(|m| m.expect.exit == 0)
        .collect();
    assert!(
        manifests.len() >= 20,
        "only {} valid manifests",
        manifests.len()
    );
    let problems: Vec<String> = manifests.iter().flat_map(round_trip_problems).collect();
    assert_no_problems(&problems, manifests.len());
}

/// What `tests/corpus/README.md` says the corpus covers, so that it does not silently shrink.
#[test]
fn the_corpus_covers_the_styles_and_features_it_promises() {
    let corpus = corpus();
    assert!(corpus.len() >= 25, "{} corpus files", corpus.len());
    let objects: Vec<(String, Value)> = corpus
        .iter()
        .flat_map(|m| m.objects().into_iter().map(|o| (m.name.clone(), o)))
        .collect();
    let has = |what: &str, test: &dyn Fn(&Value) -> bool| {
        assert!(
            objects.iter().any(|(_, o)| test(o)),
            "no corpus object has {what}"
        );
    };
    let kind = |o: &Value, k: &str| o["kind"] == k;
    for mode in ["K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode"] {
        has(mode, &|o| {
            kind(o, "RayJob")
                && o["spec"]["submissionMode"].as_str().unwrap_or("K8sJobMode") == mode
        });
    }
    has("a submitterPodTemplate", &|o| {
        !o["spec"]["submitterPodTemplate"].is_null()
    });
    has("a clusterSelector", &|o| {
        !o["spec"]["clusterSelector"].is_null()
    });
    has("an autoscaler", &|o| {
        o["spec"]["enableInTreeAutoscaling"] == true
    });
    has("numOfHosts > 1", &|o| {
        o["spec"]["workerGroupSpecs"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g["numOfHosts"].as_i64() > Some(1)))
    });
    has("several worker groups", &|o| {
        o["spec"]["workerGroupSpecs"]
            .as_array()
            .is_some_and(|g| g.len() > 2)
    });
    has("a suspended RayCluster", &|o| {
        kind(o, "RayCluster") && o["spec"]["suspend"] == true
    });
    has("a generateName", &|o| {
        !o["metadata"]["generateName"].is_null()
    });
    has("ray.io/v1alpha1", &|o| o["apiVersion"] == "ray.io/v1alpha1");
    has("another kind", &|o| {
        raygate_api::check::ray_kind(o).is_none()
    });
    let files = |test: &dyn Fn(&Manifest) -> bool| corpus.iter().filter(|m| test(m)).count();
    assert!(files(&|m| m.name.ends_with(".json")) >= 2, "JSON files");
    assert!(
        files(&|m| m.text.contains("kind: List") || m.text.contains("\"kind\": \"List\"")) >= 2,
        "kind: List files"
    );
    assert!(
        files(&|m| m.text.contains("# Source: ")) >= 2,
        "Helm output"
    );
    assert!(files(&|m| m.text.contains("<<: *")) >= 1, "merge keys");
    assert!(files(&|m| m.expect.exit == 1) >= 10, "invalid files");
}
