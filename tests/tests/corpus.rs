//! Every object of the manifest corpus (`tests/corpus/`, `manifests/examples/`, the blocks of
//! `docs/`) through a server-side dry-run create on the real API server with raygate's webhook:
//! the API server accepts exactly the objects raygate's own check accepts (the one
//! `raygate validate` runs), except those a header lists as refused on purpose
//! (`# api-server-rejects:`, `tests/corpus/README.md`). Nothing is stored.
//! Run inside the environment: `tests/env/control-plane exec -- cargo test -p raygate-e2e --test corpus`.

use raygate_api::check::check_object;
use raygate_api::keys::RECONCILER_LABEL;
use raygate_api::validation::ReconcilerKind;
use raygate_e2e::corpus::{Manifest, dry_run_create, manifests, object_key};
use raygate_e2e::{Env, TestNamespace};
use serde_json::Value;

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
