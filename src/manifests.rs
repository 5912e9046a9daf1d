//! `raygate manifests`: print everything needed to install raygate, or only its webhook
//! configurations (for an API server that reaches raygate by URL, as in the test environment).
//!
//! Every setting is also a value of the Helm chart (`manifests/chart/values.yaml`); where the
//! same setting is a flag of `raygate run` it has the same name here.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use raygate_api::keys;
use raygate_api::manifests::{
    Certificates, FailurePolicy, InstallOptions, Resources, WebhookClient, render_yaml,
    webhook_configurations_yaml,
};

use crate::EXIT_VALID;
use crate::flags::{OptInArgs, Reconciler};

/// Print everything needed to install raygate (CRDs, RBAC, Deployment, Service, webhooks).
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    install: Box<InstallArgs>,
    #[command(flatten)]
    webhooks: WebhookConfigurationArgs,
}

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
}

/// `--cert-mode` of an installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InstallCertMode {
    /// raygate's own CA and certificate, rotated and injected by raygate.
    SelfManaged,
    /// A cert-manager Certificate (`--cert-manager-issuer`, default a self-signed Issuer of
    /// the installation's own); cert-manager's CA injector writes the CA bundles.
    CertManager,
    /// A `kubernetes.io/tls` Secret you create (`--tls-secret`), with its CA from
    /// `--ca-bundle-file`.
    Files,
}

/// `--failure-policy` of the webhooks of opted-in namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailurePolicyArg {
    /// Refuse what raygate cannot check (Ray Pods, RayJobs, RayClusters) while it is down.
    Fail,
    /// Let it through unchecked (and Pods not onboarded into Volcano) while raygate is down.
    Ignore,
}

/// The settings of an installation (the Helm chart's values of the same meaning).
#[derive(clap::Args)]
pub struct InstallArgs {
    /// Namespace raygate runs in.
    #[arg(long, short = 'n', default_value = keys::DEFAULT_NAMESPACE)]
    namespace: String,
    /// Container image of raygate.
    #[arg(long, default_value = raygate_api::manifests::DEFAULT_IMAGE)]
    image: String,
    /// `imagePullPolicy` of raygate's container.
    #[arg(long, default_value = "IfNotPresent", value_name = "POLICY")]
    image_pull_policy: String,
    /// Replicas of the Deployment (2 or more get a PodDisruptionBudget).
    #[arg(long, default_value_t = 2, value_name = "N")]
    replicas: u32,
    #[command(flatten)]
    opt_in: OptInArgs,
    /// `failurePolicy` of the webhooks of opted-in namespaces (QueuePolicies are always
    /// checked: `Fail`).
    #[arg(long, value_enum, default_value_t = FailurePolicyArg::Fail)]
    failure_policy: FailurePolicyArg,
    /// Where the webhook's serving certificate comes from.
    #[arg(long, value_enum, env = "RAYGATE_CERT_MODE", default_value_t = InstallCertMode::SelfManaged)]
    cert_mode: InstallCertMode,
    /// cert-manager mode: the issuer to use, `KIND/NAME` (e.g. `ClusterIssuer/corp-ca`).
    #[arg(long, value_name = "KIND/NAME")]
    cert_manager_issuer: Option<String>,
    /// Files mode: the `kubernetes.io/tls` Secret (in raygate's namespace) to serve.
    #[arg(long, value_name = "NAME")]
    tls_secret: Option<String>,
    /// PEM file of the CA that signed raygate's serving certificate, written into every
    /// webhook's `caBundle` (files mode, or with `--webhook-url`).
    #[arg(long, value_name = "FILE")]
    ca_bundle_file: Option<PathBuf>,
    /// Serve the admission and conversion webhook.
    #[arg(long, env = "RAYGATE_ENABLE_WEBHOOK", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    enable_webhook: bool,
    /// Run the reconciler.
    #[arg(long, env = "RAYGATE_ENABLE_RECONCILER", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    enable_reconciler: bool,
    /// Controller of the RayJobs and RayClusters of namespaces without the
    /// `raygate.io/reconciler` label.
    #[arg(long, value_enum, env = "RAYGATE_RECONCILER", default_value_t = Reconciler::Raygate, value_name = "RECONCILER")]
    reconciler: Reconciler,
    /// Label selector on Namespaces (e.g. `team=ml,!legacy`): the reconciler leaves the Ray
    /// objects of namespaces it does not select alone; empty runs them everywhere.
    #[arg(
        long,
        env = "RAYGATE_NAMESPACE_SELECTOR",
        default_value = "",
        value_name = "SELECTOR"
    )]
    namespace_selector: String,
    /// KubeRay feature gates, e.g. `RayJobDeletionPolicy=true`, checked as the installed
    /// process checks them (a gate it would refuse is refused here, not in a crash-looping Pod).
    #[arg(long, env = "RAYGATE_FEATURE_GATES", default_value = "", value_name = "GATES", value_parser = checked_feature_gates)]
    feature_gates: String,
    /// Resource requests of raygate's container, `NAME=QUANTITY,...`.
    #[arg(
        long,
        default_value = "cpu=100m,memory=64Mi",
        value_name = "NAME=QUANTITY,..."
    )]
    requests: String,
    /// Resource limits of raygate's container, `NAME=QUANTITY,...`.
    #[arg(
        long,
        default_value = "cpu=1,memory=256Mi",
        value_name = "NAME=QUANTITY,..."
    )]
    limits: String,
    /// Log format of raygate's container (`text` or `json`).
    #[arg(long, value_enum, env = "RAYGATE_LOG_FORMAT", default_value_t = crate::logging::LogFormat::Text)]
    log_format: crate::logging::LogFormat,
    /// `nodeSelector` of raygate's Pods, `KEY=VALUE,...`.
    #[arg(long, default_value = "", value_name = "KEY=VALUE,...")]
    node_selector: String,
    /// A toleration of raygate's Pods, `KEY[=VALUE]:EFFECT` (e.g. `dedicated=infra:NoSchedule`);
    /// repeat the flag for more.
    #[arg(long = "toleration", value_name = "KEY[=VALUE]:EFFECT")]
    tolerations: Vec<String>,
}

/// `--feature-gates` as written, once `raygate run` would accept it.
fn checked_feature_gates(
    written: &str,
) -> Result<String, <raygate_api::features::FeatureGates as std::str::FromStr>::Err> {
    written
        .parse::<raygate_api::features::FeatureGates>()
        .map(|_| written.to_owned())
}

/// `KEY[=VALUE]:EFFECT` as a toleration: `Equal` with a value, `Exists` without.
fn toleration(input: &str) -> Result<serde_json::Value> {
    const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
    let parsed = input
        .rsplit_once(':')
        .and_then(|(key_value, effect)| EFFECTS.contains(&effect).then_some((key_value, effect)));
    let Some((key_value, effect)) = parsed else {
        bail!(
            "--toleration {input:?}: expected KEY[=VALUE]:EFFECT with EFFECT one of {}, e.g. dedicated=infra:NoSchedule",
            EFFECTS.join(", ")
        );
    };
    Ok(match key_value.split_once('=') {
        Some((key, value)) => {
            serde_json::json!({"key": key, "operator": "Equal", "value": value, "effect": effect})
        }
        None => serde_json::json!({"key": key_value, "operator": "Exists", "effect": effect}),
    })
}

/// `NAME=VALUE,...` as a map; `flag` names the flag in errors.
fn pairs(flag: &str, input: &str) -> Result<BTreeMap<String, String>> {
    input
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| match item.split_once('=') {
            Some((name, value)) if !name.is_empty() && !value.is_empty() => {
                Ok((name.to_owned(), value.to_owned()))
            }
            _ => bail!("--{flag} {input:?}: {item:?} is not NAME=VALUE, e.g. cpu=100m"),
        })
        .collect()
}

impl InstallArgs {
    /// The checked settings, and the CA bundle of `--ca-bundle-file`.
    fn options(self) -> Result<(InstallOptions, Option<String>)> {
        if !self.enable_webhook && !self.enable_reconciler {
            bail!("--enable-webhook=false and --enable-reconciler=false leave nothing to run");
        }
        let ca_bundle = self
            .ca_bundle_file
            .as_ref()
            .map(|file| {
                std::fs::read_to_string(file)
                    .with_context(|| format!("--ca-bundle-file {}", file.display()))
            })
            .transpose()?;
        let certificates = match self.cert_mode {
            InstallCertMode::SelfManaged => Certificates::SelfManaged,
            InstallCertMode::CertManager => {
                let issuer = self
                    .cert_manager_issuer
                    .as_deref()
                    .map(|spec| match spec.split_once('/') {
                        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {
                            Ok((kind.to_owned(), name.to_owned()))
                        }
                        _ => bail!(
                            "--cert-manager-issuer {spec:?}: expected KIND/NAME, e.g. ClusterIssuer/corp-ca"
                        ),
                    })
                    .transpose()?;
                Certificates::CertManager { issuer }
            }
            InstallCertMode::Files => Certificates::Files {
                secret: self.tls_secret.clone().context(
                    "--cert-mode files needs --tls-secret NAME (a kubernetes.io/tls Secret)",
                )?,
                ca_bundle: ca_bundle.clone(),
            },
        };
        let options = InstallOptions {
            namespace: self.namespace,
            image: self.image,
            image_pull_policy: self.image_pull_policy,
            replicas: self.replicas,
            opt_in_label: self.opt_in.label(),
            failure_policy: match self.failure_policy {
                FailurePolicyArg::Fail => FailurePolicy::Fail,
                FailurePolicyArg::Ignore => FailurePolicy::Ignore,
            },
            certificates,
            webhook: self.enable_webhook,
            reconciler: self.enable_reconciler,
            default_reconciler: match self.reconciler {
                Reconciler::Raygate => "raygate",
                Reconciler::Kuberay => "kuberay",
            }
            .to_owned(),
            namespace_selector: self.namespace_selector,
            feature_gates: self.feature_gates,
            resources: Resources {
                requests: pairs("requests", &self.requests)?,
                limits: pairs("limits", &self.limits)?,
            },
            log_format: match self.log_format {
                crate::logging::LogFormat::Text => "text",
                crate::logging::LogFormat::Json => "json",
            }
            .to_owned(),
            node_selector: pairs("node-selector", &self.node_selector)?,
            tolerations: self
                .tolerations
                .iter()
                .map(|t| toleration(t))
                .collect::<Result<_>>()?,
        };
        Ok((options, ca_bundle))
    }
}

/// Prints the installation (or only its webhook configurations) as multi-document YAML.
pub fn run(args: Args) -> Result<u8> {
    let Args { install, webhooks } = args;
    let (options, ca_bundle) = install.options()?;
    if !webhooks.webhook_configurations {
        io::stdout()
            .lock()
            .write_all(render_yaml(&options).as_bytes())?;
        return Ok(EXIT_VALID);
    }
    let client = match webhooks.webhook_url {
        None => WebhookClient::Service,
        Some(base) => WebhookClient::Url { base, ca_bundle },
    };
    io::stdout()
        .lock()
        .write_all(webhook_configurations_yaml(&options, &client).as_bytes())?;
    Ok(EXIT_VALID)
}
