//! `raygate manifests` on the real API server: every object of the rendering passes a
//! server-side dry run (apply, or replace for what the environment already has) (schemas, RBAC rules, CEL match conditions, webhook configurations,
//! CRDs with their conversion stanza), and nothing is left behind.

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use raygate_api::manifests::{InstallOptions, render};
use raygate_e2e::{Env, TestNamespace};

#[tokio::test]
async fn the_whole_rendering_passes_a_server_side_dry_run_apply() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "install").await;
    let client = ns.client();
    let options = InstallOptions {
        namespace: ns.name().to_owned(),
        image: "registry.local/raygate:e2e".to_owned(),
    };
    let params = PatchParams::apply("raygate-e2e-install").dry_run().force();
    let mut applied = Vec::new();
    for object in render(&options) {
        let api_version = object["apiVersion"].as_str().expect("apiVersion");
        let kind = object["kind"].as_str().expect("kind");
        let name = object["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_owned();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let (resource, capabilities) =
            pinned_kind(&client, &GroupVersionKind::gvk(group, version, kind))
                .await
                .unwrap_or_else(|e| panic!("{kind} {api_version} is not served: {e}"));
        let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
            Some(namespace) => {
                assert_eq!(
                    capabilities.scope,
                    kube::discovery::Scope::Namespaced,
                    "{kind}"
                );
                Api::namespaced_with(client.clone(), namespace, &resource)
            }
            None => Api::all_with(client.clone(), &resource),
        };
        // An object the environment already has (its Namespace, the ray.io CRDs whose
        // conversion the environment points at loopback) is replaced as a whole, so that fields
        // another manager owns cannot mix into the dry run.
        let existing = api.get_opt(&name).await.expect("reading the live object");
        let answer = match existing {
            Some(live) => {
                let mut replacement: DynamicObject =
                    serde_json::from_value(object.clone()).expect("an object");
                replacement.metadata.resource_version = live.metadata.resource_version;
                api.replace(
                    &name,
                    &PostParams {
                        dry_run: true,
                        field_manager: Some("raygate-e2e-install".into()),
                    },
                    &replacement,
                )
                .await
            }
            None => api.patch(&name, &params, &Patch::Apply(&object)).await,
        }
        .unwrap_or_else(|e| panic!("the API server refused {kind} {name}: {e}"));
        assert_eq!(answer.metadata.name.as_deref(), Some(name.as_str()));
        applied.push(format!("{kind}/{name}"));
    }
    assert_eq!(applied.len(), 14, "{applied:?}");
    // A dry run leaves no trace: raygate's Deployment does not exist afterwards.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    assert!(deployments.get_opt("raygate").await.expect("get").is_none());
}
