//! `raygate manifests`: print everything needed to install raygate, or only its webhook
//! configurations (for an API server that reaches raygate by URL, as in the test environment).

use std::path::PathBuf;

use anyhow::{Context, Result};
use raygate_api::manifests::{
    InstallOptions, WebhookClient, render_yaml, webhook_configurations_yaml,
};

use crate::EXIT_VALID;

/// Flags selecting the webhook configurations alone.
#[derive(clap::Args)]
pub struct WebhookConfigurationArgs {
    /// Print only the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration
    /// (the same scope, rules and failure policies as the installation).
    #[arg(long)]
    webhook_configurations: bool,
    /// Reach the webhooks at URL + path (e.g. `https://127.0.0.1:9443`) instead of through
    /// raygate's Service.
    #[arg(long, value_name = "URL", requires = "webhook_configurations")]
    webhook_url: Option<String>,
    /// PEM file of the CA that signed raygate's serving certificate, written into every
    /// webhook's `caBundle` (without it, raygate's self-managed certificates inject it).
    #[arg(long, value_name = "FILE", requires = "webhook_url")]
    ca_bundle_file: Option<PathBuf>,
}

/// Prints the installation for `namespace` and `image` (or only its webhook configurations)
/// as multi-document YAML.
pub fn run(namespace: String, image: String, webhooks: WebhookConfigurationArgs) -> Result<u8> {
    if !webhooks.webhook_configurations {
        print!("{}", render_yaml(&InstallOptions { namespace, image }));
        return Ok(EXIT_VALID);
    }
    let client = match webhooks.webhook_url {
        None => WebhookClient::Service,
        Some(base) => {
            let ca_bundle = webhooks
                .ca_bundle_file
                .map(|file| {
                    std::fs::read_to_string(&file)
                        .with_context(|| format!("--ca-bundle-file {}", file.display()))
                })
                .transpose()?;
            WebhookClient::Url { base, ca_bundle }
        }
    };
    print!("{}", webhook_configurations_yaml(&namespace, &client));
    Ok(EXIT_VALID)
}
