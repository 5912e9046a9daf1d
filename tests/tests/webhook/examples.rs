//! `kubectl apply` of every example in manifests/examples through raygate's webhook: each
//! invalid one fails with its `# expect-error:` message, each valid one is stored; server-side
//! dry run answers the same and stores nothing.

use kube::api::DynamicObject;
use raygate_e2e::examples::{example, examples};
use raygate_e2e::{Env, TestNamespace};

use super::{OPT_IN, kubectl, ray_resource, webhook_up};

/// `(kind, name)` of an object of an example.
fn kind_and_name(object: &serde_json::Value) -> (&str, &str) {
    (
        object["kind"].as_str().expect("kind"),
        object["metadata"]["name"].as_str().expect("name"),
    )
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
        examples.iter().any(|e| e.is_valid()) && examples.iter().any(|e| !e.is_valid()),
        "both valid and invalid examples exist"
    );
    for example in &examples {
        let file = example.path_str();
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
            if example.is_valid() {
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
            for (kind, name) in example.objects.iter().map(kind_and_name) {
                let stored = exists(&ns, kind, name).await;
                let should_exist = !dry_run && example.is_valid();
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
    let example = example("invalid-raycluster-min-greater-than-max.yaml");
    let output = kubectl(&["apply", "-n", ns.name(), "-f", example.path_str()]).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "admission webhook \"rayobjects.validate.raygate.io\" denied the request: spec.workerGroupSpecs[0].minReplicas: worker group small has minReplicas 5 greater than maxReplicas 2"
        ),
        "{stderr}"
    );
}
