//! `kubectl apply` of every example in manifests/examples through raygate's webhook: each
//! invalid one fails with its `# expect-error:` message, each valid one is stored; server-side
//! dry run answers the same and stores nothing.

use std::fs;
use std::path::{Path, PathBuf};

use kube::api::DynamicObject;
use raygate_api::input::parse_documents;
use raygate_e2e::{Env, TestNamespace};

use super::{OPT_IN, kubectl, ray_resource, webhook_up};

struct Example {
    path: PathBuf,
    name: String,
    expected_errors: Vec<String>,
    /// `(kind, name)` of every object in the file.
    objects: Vec<(String, String)>,
}

fn examples() -> Vec<Example> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples");
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = fs::read_to_string(&path).expect("readable example");
            let expected_errors = text
                .lines()
                .filter_map(|line| line.strip_prefix("# expect-error:"))
                .map(|message| message.trim().to_string())
                .collect();
            let objects = parse_documents(&name, &text)
                .unwrap_or_else(|e| panic!("{e}"))
                .into_iter()
                .map(|doc| {
                    (
                        doc.value["kind"].as_str().expect("kind").to_string(),
                        doc.value["metadata"]["name"]
                            .as_str()
                            .expect("name")
                            .to_string(),
                    )
                })
                .collect();
            Example {
                path,
                name,
                expected_errors,
                objects,
            }
        })
        .collect()
}

async fn exists(ns: &TestNamespace, kind: &str, name: &str) -> bool {
    kube::Api::<DynamicObject>::namespaced_with(ns.client(), ns.name(), &ray_resource(kind))
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading {kind} {name}: {e}"))
        .is_some()
}

#[tokio::test]
async fn kubectl_apply_of_every_example_fails_or_succeeds_as_it_says_and_dry_run_leaves_no_trace() {
    let _webhook = webhook_up().await;
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "webhook-examples", &[OPT_IN]).await;
    let examples = examples();
    assert!(
        examples.iter().any(|e| e.expected_errors.is_empty())
            && examples.iter().any(|e| !e.expected_errors.is_empty()),
        "both valid and invalid examples exist"
    );
    for example in &examples {
        let file = example.path.to_str().expect("UTF-8 path");
        for dry_run in [true, false] {
            let mut args = vec!["apply", "-n", ns.name(), "-f", file];
            if dry_run {
                args.push("--dry-run=server");
            }
            let output = kubectl(&args).await;
            let stderr = String::from_utf8_lossy(&output.stderr);
            let what = format!(
                "{} (dry run: {dry_run}): kubectl says {stderr:?}",
                example.name
            );
            if example.expected_errors.is_empty() {
                assert!(output.status.success(), "{what}");
            } else {
                assert!(!output.status.success(), "{what}");
                for expected in &example.expected_errors {
                    assert!(
                        stderr.contains(expected.as_str()),
                        "{what}: lacks {expected:?}"
                    );
                }
            }
            for (kind, name) in &example.objects {
                let stored = exists(&ns, kind, name).await;
                let should_exist = !dry_run && example.expected_errors.is_empty();
                assert_eq!(
                    stored, should_exist,
                    "{what}: {kind} {name} stored: {stored}"
                );
            }
        }
    }
}

#[tokio::test]
async fn webhook_denials_name_the_webhook_and_the_field() {
    let _webhook = webhook_up().await;
    let env = Env::load();
    let ns = TestNamespace::with_labels(&env, "webhook-denial", &[OPT_IN]).await;
    let example = examples()
        .into_iter()
        .find(|e| e.name == "invalid-raycluster-min-greater-than-max.yaml")
        .expect("the example exists");
    let output = kubectl(&[
        "apply",
        "-n",
        ns.name(),
        "-f",
        example.path.to_str().unwrap(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "admission webhook \"rayobjects.validate.raygate.io\" denied the request: spec.workerGroupSpecs[0].minReplicas: worker group small has minReplicas 5 greater than maxReplicas 2"
        ),
        "{stderr}"
    );
}
