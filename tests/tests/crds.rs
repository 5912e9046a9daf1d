//! raygate's `ray.io` CRDs on the real API server, against raygate's offline checks: every valid
//! example is stored, defaulted exactly as `raygate_api::crd::apply_defaults` defaults it, and
//! an example the offline schema check rejects is rejected by kube-apiserver with the same
//! message. Run inside the environment: `tests/env/control-plane exec -- cargo test -p raygate-e2e`.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use raygate_api::crd;
use raygate_e2e::examples::{example, examples};
use raygate_e2e::{Env, TestNamespace};
use serde_json::Value;

fn api_for(ns: &TestNamespace, object: &Value) -> Api<DynamicObject> {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let kind = object["kind"].as_str().expect("kind");
    let (group, version) = api_version.split_once('/').expect("group/version");
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    Api::namespaced_with(ns.client(), ns.name(), &resource)
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        field_manager: Some("raygate-e2e".into()),
    }
}

async fn create(ns: &TestNamespace, object: &Value) -> Result<DynamicObject, kube::Error> {
    let mut object = object.clone();
    object["metadata"]["namespace"] = Value::String(ns.name().to_string());
    let dynamic: DynamicObject = serde_json::from_value(object).expect("an object");
    api_for(ns, &serde_json::to_value(&dynamic).unwrap())
        .create(&dry_run(), &dynamic)
        .await
}

#[tokio::test]
async fn valid_examples_are_stored_and_defaulted_as_raygate_defaults_them() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "crds-valid").await;
    let mut checked = 0;
    for example in examples().into_iter().filter(|e| e.is_valid()) {
        let name = &example.name;
        for object in example.objects {
            let stored = create(&ns, &object)
                .await
                .unwrap_or_else(|e| panic!("{name}: the API server refused it: {e}"));
            let mut offline = object.clone();
            let api_version = object["apiVersion"].as_str().unwrap();
            let kind = object["kind"].as_str().unwrap();
            crd::apply_defaults(api_version, kind, &mut offline).expect("known kind");
            assert_eq!(
                stored.data["spec"], offline["spec"],
                "{name}: the API server's defaulted spec differs from raygate's"
            );
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} valid examples were checked");
}

#[tokio::test]
async fn schema_errors_match_the_api_servers_message() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "crds-invalid").await;
    let example = example("invalid-rayjob-backoff-limit-type.yaml");
    let name = &example.name;
    let object = &example.objects[0];
    let offline = crd::validate_schema("ray.io/v1", "RayJob", object);
    let finding = offline
        .iter()
        .find(|f| f.is_error())
        .unwrap_or_else(|| panic!("{name}: raygate finds no schema error"));
    let expected = api_server_wording(&finding.field, &finding.message);
    match create(&ns, object).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(
                status.message.contains(&expected),
                "{name}: the API server says {:?}, raygate says {expected:?}",
                status.message
            );
        }
        other => panic!("{name}: expected a 422 from the API server, got {other:?}"),
    }
}

/// The API server's text for raygate's type error: raygate echoes what was written where the API
/// server repeats the type it found (`Invalid value: "three"` for `Invalid value: "string"`) and
/// adds what to write after `; ` (`docs/validation-rules.md`, message style).
fn api_server_wording(field: &str, message: &str) -> String {
    let sentence = message.split("; ").next().unwrap_or(message);
    let subject = format!(": {field} in body ");
    let (_, rest) = sentence
        .split_once(&subject)
        .unwrap_or_else(|| panic!("{message:?} names no {field}"));
    let found = rest.rsplit(": ").next().unwrap_or_default();
    format!("{field}: Invalid value: {found}{subject}{rest}")
}
