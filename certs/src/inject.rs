//! Writing the CA bundle into the objects that make the API server call raygate: every
//! webhook of the named Mutating/ValidatingWebhookConfigurations and the conversion webhook of
//! the named CRDs. Only `caBundle` fields are patched (JSON patch guarded by `test`
//! operations), never whole objects, and only where they differ.

use std::collections::HashMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The objects whose `caBundle` raygate keeps equal to its CA bundle.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InjectionTargets {
    /// Names of MutatingWebhookConfigurations.
    pub mutating_webhook_configurations: Vec<String>,
    /// Names of ValidatingWebhookConfigurations.
    pub validating_webhook_configurations: Vec<String>,
    /// Names of CRDs whose `spec.conversion.strategy` is `Webhook`.
    pub crds: Vec<String>,
}

/// Why the bundle could not be injected into an object.
#[derive(Debug, thiserror::Error)]
#[error("injecting the CA bundle into {kind} {name}: {source}")]
pub struct InjectError {
    /// The object's kind.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// The JSON patch setting `clientConfig.caBundle` of every webhook of a webhook configuration
/// (given as JSON) to `bundle` (base64), or `None` when all of them already carry it. Each
/// replacement is guarded by a `test` of the webhook's name, so a concurrent reorder of the
/// list fails the patch instead of writing into the wrong webhook.
pub fn webhook_configuration_patch(configuration: &Value, bundle: &str) -> Option<Value> {
    let webhooks = configuration.get("webhooks")?.as_array()?;
    let mut operations = Vec::new();
    for (index, webhook) in webhooks.iter().enumerate() {
        let current = webhook
            .pointer("/clientConfig/caBundle")
            .and_then(Value::as_str);
        if current == Some(bundle) || webhook.get("clientConfig").is_none() {
            continue;
        }
        operations.push(json!({"op": "test", "path": format!("/webhooks/{index}/name"), "value": webhook.get("name")}));
        operations.push(json!({"op": "add", "path": format!("/webhooks/{index}/clientConfig/caBundle"), "value": bundle}));
    }
    (!operations.is_empty()).then_some(Value::Array(operations))
}

/// The JSON patch setting `spec.conversion.webhook.clientConfig.caBundle` of a CRD (given as
/// JSON) to `bundle` (base64), or `None` when the CRD converts without a webhook or already
/// carries the bundle.
pub fn crd_patch(crd: &Value, bundle: &str) -> Option<Value> {
    let conversion = crd.pointer("/spec/conversion")?;
    if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
        return None;
    }
    let client_config = conversion.pointer("/webhook/clientConfig")?;
    if client_config.get("caBundle").and_then(Value::as_str) == Some(bundle) {
        return None;
    }
    Some(json!([
        {"op": "test", "path": "/spec/conversion/strategy", "value": "Webhook"},
        {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": bundle},
    ]))
}

/// Keeps the targets' `caBundle` equal to a CA bundle. It remembers, per target, the
/// resourceVersion at which it last found (or wrote) the bundle, so a steady-state check costs
/// one metadata read per target instead of a full read (the `ray.io` CRDs are ~1 MiB each).
pub struct Injector {
    client: Client,
    targets: InjectionTargets,
    /// (kind, name) → (resourceVersion, base64 bundle) known to be in place.
    in_place: HashMap<(String, String), (String, String)>,
}

impl Injector {
    /// An injector for `targets`.
    pub fn new(client: Client, targets: InjectionTargets) -> Injector {
        Injector {
            client,
            targets,
            in_place: HashMap::new(),
        }
    }

    /// Injects the PEM `bundle` into every target that exists and differs; returns how many
    /// objects were patched. A missing target is skipped (it may be installed later; the next
    /// resync catches up).
    pub async fn inject(&mut self, bundle_pem: &str) -> Result<usize, InjectError> {
        let bundle = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bundle_pem);
        let targets = self.targets.clone();
        let mut patched = 0;
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        for name in &targets.mutating_webhook_configurations {
            patched += self
                .patch_one(&mutating, name, &bundle, webhook_configuration_patch)
                .await?;
        }
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        for name in &targets.validating_webhook_configurations {
            patched += self
                .patch_one(&validating, name, &bundle, webhook_configuration_patch)
                .await?;
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for name in &targets.crds {
            patched += self.patch_one(&crds, name, &bundle, crd_patch).await?;
        }
        Ok(patched)
    }

    async fn patch_one<K>(
        &mut self,
        api: &Api<K>,
        name: &str,
        bundle: &str,
        build: fn(&Value, &str) -> Option<Value>,
    ) -> Result<usize, InjectError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    {
        let kind = K::kind(&());
        let error = |source| InjectError {
            kind: kind.to_string(),
            name: name.to_string(),
            source,
        };
        let key = (kind.to_string(), name.to_string());
        let Some(metadata) = api.get_metadata_opt(name).await.map_err(error)? else {
            tracing::debug!(%kind, name, "CA bundle target does not exist (yet)");
            self.in_place.remove(&key);
            return Ok(0);
        };
        let version = metadata.resource_version().unwrap_or_default();
        if self
            .in_place
            .get(&key)
            .is_some_and(|(v, b)| *v == version && b == bundle)
        {
            return Ok(0);
        }
        let Some(object) = api.get_opt(name).await.map_err(error)? else {
            self.in_place.remove(&key);
            return Ok(0);
        };
        let json = serde_json::to_value(&object).unwrap_or(Value::Null);
        let Some(operations) = build(&json, bundle) else {
            let version = object.resource_version().unwrap_or_default();
            self.in_place.insert(key, (version, bundle.to_string()));
            return Ok(0);
        };
        let patch: json_patch::Patch = serde_json::from_value(operations)
            .expect("the operations built above are a JSON patch");
        let written = api
            .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
            .map_err(error)?;
        let version = written.resource_version().unwrap_or_default();
        self.in_place.insert(key, (version, bundle.to_string()));
        tracing::info!(%kind, name, "injected the CA bundle");
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_webhooks_with_another_bundle_are_patched() {
        let configuration = json!({"webhooks": [
            {"name": "a.raygate.io", "clientConfig": {"caBundle": "NEW"}},
            {"name": "b.raygate.io", "clientConfig": {"caBundle": "OLD", "service": {"name": "s"}}},
            {"name": "c.raygate.io", "clientConfig": {"url": "https://127.0.0.1"}},
        ]});
        let patch = webhook_configuration_patch(&configuration, "NEW").unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/webhooks/1/name", "value": "b.raygate.io"},
                {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "NEW"},
                {"op": "test", "path": "/webhooks/2/name", "value": "c.raygate.io"},
                {"op": "add", "path": "/webhooks/2/clientConfig/caBundle", "value": "NEW"},
            ])
        );
        let mut patched = configuration.clone();
        let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut patched, &patch).unwrap();
        assert_eq!(
            patched["webhooks"][1]["clientConfig"]["service"]["name"],
            "s"
        );
        assert_eq!(webhook_configuration_patch(&patched, "NEW"), None);
        assert_eq!(webhook_configuration_patch(&json!({}), "NEW"), None);
    }

    #[test]
    fn a_reordered_list_fails_the_guard() {
        let configuration = json!({"webhooks": [{"name": "a", "clientConfig": {}}]});
        let patch: json_patch::Patch =
            serde_json::from_value(webhook_configuration_patch(&configuration, "X").unwrap())
                .unwrap();
        let mut reordered = json!({"webhooks": [{"name": "b", "clientConfig": {}}]});
        assert!(json_patch::patch(&mut reordered, &patch).is_err());
    }

    #[test]
    fn crds_are_patched_only_for_webhook_conversion() {
        let webhook = json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"name": "raygate", "namespace": "ns"}}}}}});
        let patch = crd_patch(&webhook, "B").unwrap();
        let mut patched = webhook.clone();
        let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut patched, &patch).unwrap();
        assert_eq!(
            patched["spec"]["conversion"]["webhook"]["clientConfig"],
            json!({"service": {"name": "raygate", "namespace": "ns"}, "caBundle": "B"})
        );
        assert_eq!(crd_patch(&patched, "B"), None);
        let none = json!({"spec": {"conversion": {"strategy": "None"}}});
        assert_eq!(crd_patch(&none, "B"), None);
        assert_eq!(crd_patch(&json!({"spec": {}}), "B"), None);
    }
}
