//! Plain configuration of the certificate sources (the CLI maps its flags onto these).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use crate::inject::InjectionTargets;
use crate::rotation::{LeafSpec, RotationPolicy};
use crate::{CertResolver, CertTask, FileSource, SelfManaged};

/// Where the serving certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CertSource {
    /// Mounted files, reloaded when they change.
    Files(FilesConfig),
    /// raygate's own CA in a Secret, rotated and injected by raygate.
    SelfManaged(SelfManagedConfig),
}

impl CertSource {
    /// Starts keeping `resolver` loaded from this source. `client` is used by the self-managed
    /// mode only.
    pub fn spawn(self, client: Client, resolver: Arc<CertResolver>) -> CertTask {
        match self {
            CertSource::Files(config) => FileSource::spawn(config, resolver),
            CertSource::SelfManaged(config) => SelfManaged::spawn(client, config, resolver),
        }
    }
}

/// Files mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilesConfig {
    /// PEM certificate chain, leaf first (`tls.crt` of a Secret volume).
    pub cert_path: PathBuf,
    /// PEM private key (`tls.key`).
    pub key_path: PathBuf,
    /// How often the files are re-read. The kubelet itself syncs Secret volumes only every
    /// minute or so, so a few seconds is plenty.
    pub poll_interval: Duration,
}

impl FilesConfig {
    /// `tls.crt` and `tls.key` in `dir`, polled every 5 s.
    pub fn in_dir(dir: impl Into<PathBuf>) -> FilesConfig {
        let dir = dir.into();
        FilesConfig {
            cert_path: dir.join("tls.crt"),
            key_path: dir.join("tls.key"),
            poll_interval: Duration::from_secs(5),
        }
    }
}

/// Self-managed mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelfManagedConfig {
    /// Namespace of raygate's Service and of the Secret.
    pub namespace: String,
    /// Name of the Secret holding the CA(s) and the serving certificate.
    pub secret_name: String,
    /// Name of the Service in front of the webhook server.
    pub service_name: String,
    /// More SANs for the serving certificate, e.g. `127.0.0.1` when the API server calls the
    /// webhook by URL on loopback.
    pub extra_sans: Vec<String>,
    /// The objects whose `caBundle` is kept equal to the CA bundle.
    pub targets: InjectionTargets,
    /// Lifetimes and waiting times.
    pub policy: RotationPolicy,
    /// How often the Secret and the injected bundles are checked even without a change
    /// notification (also how fast a reset `caBundle` is re-injected).
    pub resync_interval: Duration,
}

impl SelfManagedConfig {
    /// The serving certificate's SANs: `<svc>.<ns>.svc` (the name the API server dials, so
    /// first), `<svc>.<ns>`, `<svc>`, then the extra SANs, without duplicates.
    pub fn leaf_spec(&self) -> LeafSpec {
        let (svc, ns) = (&self.service_name, &self.namespace);
        let mut sans = vec![
            format!("{svc}.{ns}.svc"),
            format!("{svc}.{ns}"),
            svc.clone(),
        ];
        for extra in &self.extra_sans {
            if !sans.contains(extra) {
                sans.push(extra.clone());
            }
        }
        LeafSpec { sans }
    }

    /// The common name of a new CA.
    pub fn ca_name(&self) -> String {
        format!("{}.{} CA", self.service_name, self.namespace)
    }
}

/// Why a duration flag could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "invalid duration {input:?}: expected a whole number followed by ms, s, m, h or d (e.g. 90d, 12h, 30s, 500ms); a bare number has no unit and is refused"
)]
pub struct DurationError {
    input: String,
}

/// Parses `500ms`, `30s`, `15m`, `12h`, `90d`: the one syntax of every duration flag of the
/// CLI (the webhook's timeouts, certificate lifetimes and intervals, the reconciler's Lease
/// timings, `follow --timeout`). A bare number is refused rather than guessed at: `10` could
/// mean seconds to one reader and minutes to another.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let error = || DurationError {
        input: input.to_string(),
    };
    let trimmed = input.trim();
    let (number, milliseconds_per_unit) = [
        ("ms", 1),
        ("s", 1_000),
        ("m", 60_000),
        ("h", 3_600_000),
        ("d", 86_400_000),
    ]
    .into_iter()
    .find_map(|(unit, factor)| Some((trimmed.strip_suffix(unit)?, factor)))
    .ok_or_else(error)?;
    // `u64::from_str` takes a leading `+`; a duration flag does not.
    if !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(error());
    }
    let number: u64 = number.parse().map_err(|_| error())?;
    let milliseconds = number
        .checked_mul(milliseconds_per_unit)
        .ok_or_else(error)?;
    Ok(Duration::from_millis(milliseconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sans_name_the_service_first_and_drop_duplicates() {
        let config = SelfManagedConfig {
            namespace: "raygate-system".into(),
            secret_name: "raygate-webhook-cert".into(),
            service_name: "raygate-webhook".into(),
            extra_sans: vec!["127.0.0.1".into(), "raygate-webhook".into()],
            targets: InjectionTargets::default(),
            policy: RotationPolicy::default(),
            resync_interval: Duration::from_secs(60),
        };
        assert_eq!(
            config.leaf_spec().sans,
            [
                "raygate-webhook.raygate-system.svc",
                "raygate-webhook.raygate-system",
                "raygate-webhook",
                "127.0.0.1"
            ]
        );
        assert_eq!(
            config.leaf_spec().server_name(),
            "raygate-webhook.raygate-system.svc"
        );
    }

    #[test]
    fn durations_parse_with_units_and_reject_the_rest() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_duration("90d"), Ok(Duration::from_secs(7_776_000)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration(" 4s "), Ok(Duration::from_secs(4)));
        for bad in [
            "",
            "d",
            "ms",
            "10",
            "1.5h",
            "-3s",
            "+3s",
            "10w",
            "10 s",
            "5sm",
            "99999999999999999999d",
            "999999999999999999d",
        ] {
            let error = parse_duration(bad).unwrap_err();
            assert!(error.to_string().contains("invalid duration"), "{bad}");
        }
    }
}
