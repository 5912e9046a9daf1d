//! Every object of the manifest corpus (`tests/corpus/`, `manifests/examples/`, the blocks of
//! `docs/`) through a server-side dry-run create on the real API server with raygate's webhook:
//! the API server accepts exactly the objects raygate's own check accepts (the one
//! `raygate validate` runs), except those a header lists as refused on purpose
//! (`# api-server-rejects:`, `tests/corpus/README.md`). Nothing is stored.
//! Run inside the environment: `tests/env/control-plane exec -- cargo test -p raygate-e2e --test corpus`.

use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::{Scope, pinned_kind};
use raygate_api::check::check_object;
use raygate_api::keys::RECONCILER_LABEL;
use raygate_api::validation::ReconcilerKind;
use raygate_e2e::corpus::{Manifest, manifests, object_key};
use raygate_e2e::{Env, TestNamespace};
use serde_json::Value;

/// What the API server answered a dry-run create: `Ok` when it accepted the object, `Err` with
/// its message when it refused it (a 4xx status).
async fn dry_run_create(ns: &TestNamespace, object: &Value) -> Result<(), String> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = pinned_kind(&ns.client(), &gvk)
        .await
        .unwrap_or_else(|e| panic!("the API server does not serve {api_version} {kind}: {e}"));
    let mut object = object.clone();
    // Namespaced objects go into the test's namespace, whatever the file says.
    let api = if capabilities.scope == Scope::Cluster {
        Api::<DynamicObject>::all_with(ns.client(), &resource)
    } else {
        object["metadata"]["namespace"] = Value::String(ns.name().to_string());
        Api::<DynamicObject>::namespaced_with(ns.client(), ns.name(), &resource)
    };
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    let params = PostParams {
        dry_run: true,
        field_manager: Some("raygate-e2e".into()),
    };
    match api.create(&params, &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if (400..500).contains(&status.code) => Err(status.message),
        Err(e) => panic!("asking the API server about {api_version} {kind}: {e}"),
    }
}

/// Whether raygate accepts the object: other kinds are not checked, so accepted.
fn raygate_accepts(manifest: &Manifest, object: &Value) -> bool {
    check_object(object.clone(), &manifest.expect.validation_context())
        .is_none_or(|checked| checked.report.valid)
}

#[tokio::test]
async fn the_api_server_accepts_exactly_what_raygate_validate_accepts() {
    let env = Env::load();
    // Not opted into Volcano: there the webhook's findings are exactly those of raygate
    // validate (api/src/admission/rules.rs, `evaluate`); queue, policy and gang rules of opted-in
    // namespaces depend on the cluster, not the manifest.
    // Each namespace names the controller it is judged for, as `raygate validate --reconciler`
    // does, whatever the environment's webhook defaults to.
    let own =
        TestNamespace::with_labels(&env, "corpus-raygate", &[(RECONCILER_LABEL, "raygate")]).await;
    let kuberay =
        TestNamespace::with_labels(&env, "corpus-kuberay", &[(RECONCILER_LABEL, "kuberay")]).await;
    let (mut accepted, mut refused) = (0, 0);
    let mut problems = Vec::new();
    for manifest in manifests() {
        let ns = match manifest.expect.reconciler() {
            ReconcilerKind::Raygate => &own,
            ReconcilerKind::Kuberay => &kuberay,
        };
        for object in manifest.objects() {
            let key = object_key(&object);
            let on_purpose = manifest.expect.api_server_rejects.contains(&key);
            let expected = raygate_accepts(&manifest, &object) && !on_purpose;
            match (expected, dry_run_create(ns, &object).await) {
                (true, Ok(())) => accepted += 1,
                (false, Err(_)) => refused += 1,
                (true, Err(message)) => problems.push(format!(
                    "{}: {key}: raygate accepts it, the API server refuses it: {message}",
                    manifest.name
                )),
                (false, Ok(())) if on_purpose => problems.push(format!(
                    "{}: {key}: the header says the API server refuses it, but it accepts it",
                    manifest.name
                )),
                (false, Ok(())) => problems.push(format!(
                    "{}: {key}: raygate reports an error, the API server accepts it",
                    manifest.name
                )),
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} disagreements:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        accepted >= 35 && refused >= 20,
        "only {accepted} objects accepted and {refused} refused"
    );
}
