//! `raygate manifests` on the real API server: every object of the rendering passes a
//! server-side dry run (apply, or replace for what the environment already has) (schemas, RBAC
//! rules, CEL match conditions, webhook configurations, CRDs with their conversion stanza), and
//! nothing is left behind; the environment's live webhook configurations are the rendering's;
//! and README.md's permissions table is what the rendering grants.

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use raygate_api::manifests::{InstallOptions, render};
use raygate_e2e::{Env, TestNamespace, rbac};

#[tokio::test]
async fn the_whole_rendering_passes_a_server_side_dry_run_apply() {
    let env = Env::load();
    let ns = TestNamespace::new(&env, "install").await;
    let client = ns.client();
    let options = InstallOptions {
        namespace: ns.name().to_owned(),
        image: "registry.local/raygate:e2e".to_owned(),
        ..InstallOptions::default()
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
    // Namespace, 3 CRDs, ServiceAccount, ClusterRole and binding, Role and binding, the
    // certificate Secret, the leader Lease, Service, Deployment, PodDisruptionBudget and the two
    // webhook configurations.
    assert_eq!(applied.len(), 16, "{applied:?}");
    // A dry run leaves no trace: raygate's Deployment does not exist afterwards.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    assert!(deployments.get_opt("raygate").await.expect("get").is_none());
}

/// The environment installs raygate's webhook configurations from the same renderer as
/// `manifests/install.yaml` (`tests/env/control-plane`, `raygate manifests
/// --webhook-configurations`): every field the rendering sets is live as rendered (scope,
/// rules, matchConditions, failure policies, timeouts), and only the clientConfig differs, a
/// URL on loopback instead of the Service.
#[tokio::test]
async fn the_environments_webhook_configurations_are_the_installations_but_for_the_url() {
    let env = Env::load();
    let client = env.client().await;
    let url = env.var("RAYGATE_WEBHOOK_URL").to_owned();
    let namespace = env.var("RAYGATE_WEBHOOK_NAMESPACE");
    let installed = render(&InstallOptions {
        namespace: namespace.to_owned(),
        ..InstallOptions::default()
    });
    let mut compared = 0;
    for (kind, resource) in [
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    ] {
        let rendered = installed
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("the rendering has no {kind}"));
        let api: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &kube::api::ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
                resource,
            ),
        );
        let live = api
            .get(rendered["metadata"]["name"].as_str().expect("name"))
            .await
            .unwrap_or_else(|e| panic!("the environment has no {kind}: {e}"));
        let live_webhooks = live.data["webhooks"].as_array().expect("live webhooks");
        let rendered_webhooks = rendered["webhooks"].as_array().expect("rendered webhooks");
        let names = |webhooks: &[serde_json::Value]| -> Vec<String> {
            webhooks
                .iter()
                .map(|w| w["name"].as_str().expect("name").to_owned())
                .collect()
        };
        assert_eq!(names(live_webhooks), names(rendered_webhooks), "{kind}");
        for (live, rendered) in live_webhooks.iter().zip(rendered_webhooks) {
            let name = rendered["name"].as_str().expect("name");
            for (field, value) in rendered.as_object().expect("a webhook") {
                if field == "clientConfig" {
                    let path = value["service"]["path"].as_str().expect("service path");
                    assert_eq!(
                        live[field]["url"].as_str(),
                        Some(format!("{url}{path}").as_str()),
                        "{name}: clientConfig {}",
                        live[field]
                    );
                    assert!(live[field].get("service").is_none(), "{name}");
                } else {
                    assert_eq!(&live[field], value, "{name}: {field}");
                }
            }
            compared += 1;
        }
    }
    assert_eq!(
        compared, 8,
        "every webhook of the installation is in the environment"
    );
}

#[test]
fn the_readme_permissions_table_is_what_the_rendering_grants() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let documented = rbac::documented(&readme);
    let rendered = rbac::rendered(&render(&InstallOptions::default()));
    let missing: Vec<_> = rendered.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&rendered).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "granted but not in README.md: {missing:?}\nin README.md but not granted: {extra:?}"
    );
}
