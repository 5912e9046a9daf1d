//! Certificate flags shared by `raygate webhook` and `raygate run`, mapped onto
//! `raygate_certs::CertSource`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use raygate_certs::config::parse_duration;
use raygate_certs::inject::InjectionTargets;
use raygate_certs::rotation::RotationPolicy;
use raygate_certs::{CertSource, FilesConfig, SelfManagedConfig};

/// Where the webhook's serving certificate comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CertMode {
    /// Mounted certificate and key files (`--tls-cert-file`, `--tls-key-file`), reloaded when
    /// they change (Secret volume updates included).
    Files,
    /// raygate's own CA and certificate in a Secret shared by every replica, rotated before
    /// expiry, with the CA bundle written into the webhook configurations and CRDs.
    SelfManaged,
}

/// Serving-certificate flags.
#[derive(Clone, Debug, clap::Args)]
pub struct CertArgs {
    /// Certificate mode. Default: `files` when --tls-cert-file is given, else `self-managed`.
    #[arg(long, value_enum, env = "RAYGATE_CERT_MODE")]
    cert_mode: Option<CertMode>,
    /// Files mode: PEM certificate chain, leaf first.
    #[arg(long, value_name = "FILE", env = "RAYGATE_TLS_CERT_FILE")]
    tls_cert_file: Option<PathBuf>,
    /// Files mode: PEM private key.
    #[arg(long, value_name = "FILE", env = "RAYGATE_TLS_KEY_FILE")]
    tls_key_file: Option<PathBuf>,
    /// Files mode: how often the files are re-read (e.g. 5s).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    cert_poll_interval: Duration,
    /// Self-managed mode: namespace of raygate's Service and certificate Secret.
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "POD_NAMESPACE",
        default_value = "raygate-system"
    )]
    webhook_namespace: String,
    /// Self-managed mode: the Service in front of the webhook; the certificate's SANs are
    /// `<svc>.<ns>.svc`, `<svc>.<ns>` and `<svc>`.
    #[arg(
        long,
        value_name = "NAME",
        env = "RAYGATE_WEBHOOK_SERVICE",
        default_value = "raygate"
    )]
    webhook_service: String,
    /// Self-managed mode: the Secret holding the CAs and the certificate. Annotate it with
    /// `raygate.io/rotate-ca=<anything>` to rotate the CA now.
    #[arg(
        long,
        value_name = "NAME",
        env = "RAYGATE_CERT_SECRET",
        default_value = raygate_api::manifests::SELF_MANAGED_SECRET
    )]
    cert_secret: String,
    /// Self-managed mode: more SANs (DNS names or IP addresses, comma-separated), e.g.
    /// 127.0.0.1 when the API server calls the webhook by URL on loopback.
    #[arg(
        long = "cert-extra-san",
        value_name = "NAME|IP",
        value_delimiter = ',',
        env = "RAYGATE_CERT_EXTRA_SANS"
    )]
    cert_extra_sans: Vec<String>,
    /// Self-managed mode: MutatingWebhookConfigurations whose caBundle raygate maintains
    /// (comma-separated; empty for none).
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        default_value = "raygate"
    )]
    mutating_webhook_configuration: Vec<String>,
    /// Self-managed mode: ValidatingWebhookConfigurations whose caBundle raygate maintains
    /// (comma-separated; empty for none).
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        default_value = "raygate"
    )]
    validating_webhook_configuration: Vec<String>,
    /// Self-managed mode: CRDs whose conversion webhook caBundle raygate maintains
    /// (comma-separated; empty for none).
    #[arg(
        long = "conversion-crd",
        value_name = "NAMES",
        value_delimiter = ',',
        default_value = "rayjobs.ray.io,rayclusters.ray.io"
    )]
    conversion_crds: Vec<String>,
    /// Self-managed mode: lifetime of a new CA (rotated after two thirds of it).
    #[arg(long, value_name = "DURATION", default_value = "365d", value_parser = parse_duration)]
    ca_lifetime: Duration,
    /// Self-managed mode: lifetime of a new serving certificate (renewed after two thirds).
    #[arg(long, value_name = "DURATION", default_value = "90d", value_parser = parse_duration)]
    cert_lifetime: Duration,
    /// Self-managed mode: how long a new CA is trusted before certificates it signed are
    /// served.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    ca_propagation_delay: Duration,
    /// Self-managed mode: how long the old CA stays trusted after the switch.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    ca_overlap: Duration,
    /// Self-managed mode: how often the Secret and the injected caBundles are checked without
    /// a change notification (also how fast a reset caBundle is restored).
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    cert_resync_interval: Duration,
}

impl CertArgs {
    /// The certificate source these flags describe.
    pub fn source(&self) -> Result<CertSource> {
        let mode = self.cert_mode.unwrap_or(if self.tls_cert_file.is_some() {
            CertMode::Files
        } else {
            CertMode::SelfManaged
        });
        match mode {
            CertMode::Files => {
                let (Some(cert_path), Some(key_path)) = (&self.tls_cert_file, &self.tls_key_file)
                else {
                    bail!("--cert-mode files needs both --tls-cert-file and --tls-key-file");
                };
                Ok(CertSource::Files(FilesConfig {
                    cert_path: cert_path.clone(),
                    key_path: key_path.clone(),
                    poll_interval: self.cert_poll_interval,
                }))
            }
            CertMode::SelfManaged => {
                if self.tls_cert_file.is_some() || self.tls_key_file.is_some() {
                    bail!("--tls-cert-file and --tls-key-file need --cert-mode files");
                }
                let policy = RotationPolicy {
                    ca_lifetime: lifetime("ca-lifetime", self.ca_lifetime)?,
                    leaf_lifetime: lifetime("cert-lifetime", self.cert_lifetime)?,
                    propagation_delay: lifetime("ca-propagation-delay", self.ca_propagation_delay)?,
                    overlap: lifetime("ca-overlap", self.ca_overlap)?,
                };
                Ok(CertSource::SelfManaged(SelfManagedConfig {
                    namespace: self.webhook_namespace.clone(),
                    secret_name: self.cert_secret.clone(),
                    service_name: self.webhook_service.clone(),
                    extra_sans: names(&self.cert_extra_sans),
                    targets: InjectionTargets {
                        mutating_webhook_configurations: names(
                            &self.mutating_webhook_configuration,
                        ),
                        validating_webhook_configurations: names(
                            &self.validating_webhook_configuration,
                        ),
                        crds: names(&self.conversion_crds),
                    },
                    policy,
                    resync_interval: self.cert_resync_interval.max(Duration::from_secs(1)),
                }))
            }
        }
    }
}

fn lifetime(flag: &str, value: Duration) -> Result<time::Duration> {
    if value.is_zero() {
        bail!("--{flag}: must be longer than 0s");
    }
    Ok(time::Duration::try_from(value)?)
}

fn names(values: &[String]) -> Vec<String> {
    values
        .iter()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        certs: CertArgs,
    }

    fn source(args: &[&str]) -> Result<CertSource> {
        let mut argv = vec!["raygate"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)?.certs.source()
    }

    #[test]
    fn default_is_self_managed_for_the_installed_manifests() {
        let Ok(CertSource::SelfManaged(config)) = source(&[]) else {
            panic!("self-managed by default");
        };
        assert_eq!(config.service_name, "raygate");
        assert_eq!(config.secret_name, "raygate-webhook-cert");
        assert_eq!(config.targets.mutating_webhook_configurations, ["raygate"]);
        assert_eq!(
            config.targets.crds,
            ["rayjobs.ray.io", "rayclusters.ray.io"]
        );
        assert_eq!(config.policy.ca_lifetime, time::Duration::days(365));
        assert_eq!(config.policy.overlap, time::Duration::minutes(10));
    }

    #[test]
    fn files_mode_follows_the_file_flags() {
        let Ok(CertSource::Files(config)) = source(&[
            "--tls-cert-file",
            "/c/tls.crt",
            "--tls-key-file",
            "/c/tls.key",
        ]) else {
            panic!("files mode");
        };
        assert_eq!(config.cert_path, PathBuf::from("/c/tls.crt"));
        assert_eq!(config.poll_interval, Duration::from_secs(5));
        let error = source(&["--cert-mode", "files", "--tls-cert-file", "/c/tls.crt"]).unwrap_err();
        assert!(error.to_string().contains("--tls-key-file"), "{error}");
        let error = source(&["--cert-mode", "self-managed", "--tls-cert-file", "/c"]).unwrap_err();
        assert!(error.to_string().contains("--cert-mode files"), "{error}");
    }

    #[test]
    fn self_managed_flags_map_onto_the_config() {
        let Ok(CertSource::SelfManaged(config)) = source(&[
            "--webhook-namespace=rg",
            "--cert-extra-san=127.0.0.1,webhook.local",
            "--validating-webhook-configuration=",
            "--ca-propagation-delay=2s",
            "--ca-overlap=5s",
        ]) else {
            panic!("self-managed");
        };
        assert_eq!(config.namespace, "rg");
        assert_eq!(config.extra_sans, ["127.0.0.1", "webhook.local"]);
        assert!(config.targets.validating_webhook_configurations.is_empty());
        assert_eq!(config.policy.propagation_delay, time::Duration::seconds(2));
        assert_eq!(config.policy.overlap, time::Duration::seconds(5));
        let error = source(&["--ca-overlap=0s"]).unwrap_err();
        assert!(error.to_string().contains("--ca-overlap"), "{error}");
        assert!(source(&["--ca-lifetime=1y"]).is_err());
    }
}
