//! Minting and reading certificates: a self-signed CA, a serving certificate signed by it, and
//! the facts the rotation decisions need (validity, SANs, who signed a certificate).
//!
//! Nothing here reads the clock: every function that depends on time takes `now`.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use time::{Duration, OffsetDateTime};
use x509_parser::extensions::GeneralName;

use crate::ring_provider;

/// How far `notBefore` is set in the past, so that a certificate minted by one machine is
/// already valid on another whose clock is a little behind.
pub const CLOCK_SKEW_ALLOWANCE: Duration = Duration::minutes(5);

/// Why certificate material could not be minted or read.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen could not generate a key or sign a certificate.
    #[error("cannot mint {what}: {source}")]
    Mint {
        /// What was being minted.
        what: &'static str,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// A PEM certificate could not be decoded or parsed as X.509.
    #[error("{what}: not a PEM X.509 certificate: {reason}")]
    Certificate {
        /// Which certificate (e.g. the Secret key it came from).
        what: String,
        /// What was wrong with it.
        reason: String,
    },
    /// A PEM private key could not be read, or does not belong to its certificate.
    #[error("{what}: {reason}")]
    Key {
        /// Which key (e.g. the Secret key it came from).
        what: String,
        /// What was wrong with it.
        reason: String,
    },
}

/// A certificate's validity window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// `notBefore`.
    pub not_before: OffsetDateTime,
    /// `notAfter`.
    pub not_after: OffsetDateTime,
}

impl Validity {
    /// The window `[now - CLOCK_SKEW_ALLOWANCE, now + lifetime]`.
    pub fn starting(now: OffsetDateTime, lifetime: Duration) -> Validity {
        Validity {
            not_before: truncate_to_seconds(now - CLOCK_SKEW_ALLOWANCE),
            not_after: truncate_to_seconds(now + lifetime),
        }
    }

    /// The moment after which less than a third of the lifetime remains: the time to renew
    /// (cert-manager's default of renewing at two thirds of the lifetime).
    pub fn renew_at(&self) -> OffsetDateTime {
        self.not_after - (self.not_after - self.not_before) / 3
    }

    /// Whether `now` lies inside the window.
    pub fn contains(&self, now: OffsetDateTime) -> bool {
        self.not_before <= now && now <= self.not_after
    }
}

/// X.509 times have a resolution of one second.
fn truncate_to_seconds(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_nanosecond(0).unwrap_or(t)
}

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PemPair {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PKCS#8 PEM.
    pub key_pem: String,
}

/// Mints a self-signed CA (ECDSA P-256) valid for `validity`, named `common_name`.
pub fn mint_ca(common_name: &str, validity: Validity) -> Result<PemPair, PkiError> {
    let mint = |source| PkiError::Mint {
        what: "the CA",
        source,
    };
    let key = KeyPair::generate().map_err(mint)?;
    let mut params = CertificateParams::new(Vec::new()).map_err(mint)?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.distinguished_name = distinguished_name(common_name);
    params.not_before = validity.not_before;
    params.not_after = validity.not_after;
    let cert = params.self_signed(&key).map_err(mint)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Mints a serving certificate (ECDSA P-256, ServerAuth) for `sans` signed by `ca`.
///
/// A SAN that parses as an IP address becomes an IP SAN, anything else a DNS SAN. The window
/// is clipped to the CA's, so the leaf never outlives its issuer.
pub fn mint_leaf(ca: &PemPair, sans: &[String], validity: Validity) -> Result<PemPair, PkiError> {
    let mint = |source| PkiError::Mint {
        what: "the serving certificate",
        source,
    };
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(|e| PkiError::Key {
        what: "CA key".into(),
        reason: e.to_string(),
    })?;
    let ca_validity = parse_certificate("CA certificate", &ca.cert_pem)?.validity;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).map_err(mint)?;
    let key = KeyPair::generate().map_err(mint)?;
    let mut params = CertificateParams::new(sans.to_vec()).map_err(mint)?;
    params.distinguished_name = distinguished_name(sans.first().map_or("raygate", String::as_str));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = validity.not_before.max(ca_validity.not_before);
    params.not_after = validity.not_after.min(ca_validity.not_after);
    let cert = params.signed_by(&key, &issuer).map_err(mint)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "raygate");
    name.push(DnType::CommonName, common_name);
    name
}

/// What the rotation logic needs to know about one certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateFacts {
    /// The DER encoding of the (first) certificate.
    pub der: CertificateDer<'static>,
    /// Its validity window.
    pub validity: Validity,
    /// Its subject alternative names: DNS names as written, IP addresses in their canonical
    /// text form.
    pub sans: BTreeSet<String>,
}

/// Parses the first certificate of a PEM string. `what` names it in errors.
pub fn parse_certificate(what: &str, pem: &str) -> Result<CertificateFacts, PkiError> {
    let bad = |reason: String| PkiError::Certificate {
        what: what.to_string(),
        reason,
    };
    let der = CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .ok_or_else(|| bad("no CERTIFICATE block".into()))?
        .map_err(|e| bad(e.to_string()))?;
    facts_from_der(der).map_err(bad)
}

/// [`parse_certificate`] for a DER certificate.
pub fn facts_from_der(der: CertificateDer<'static>) -> Result<CertificateFacts, String> {
    let (_, x509) = x509_parser::parse_x509_certificate(&der).map_err(|e| e.to_string())?;
    let validity = Validity {
        not_before: x509.validity().not_before.to_datetime(),
        not_after: x509.validity().not_after.to_datetime(),
    };
    let mut sans = BTreeSet::new();
    if let Some(extension) = x509.subject_alternative_name().map_err(|e| e.to_string())? {
        for name in &extension.value.general_names {
            match name {
                GeneralName::DNSName(dns) => {
                    sans.insert((*dns).to_string());
                }
                GeneralName::IPAddress(bytes) => {
                    let ip = match bytes.len() {
                        4 => <[u8; 4]>::try_from(*bytes).map(IpAddr::from).ok(),
                        16 => <[u8; 16]>::try_from(*bytes).map(IpAddr::from).ok(),
                        _ => None,
                    };
                    if let Some(ip) = ip {
                        sans.insert(ip.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    drop(x509);
    Ok(CertificateFacts {
        der,
        validity,
        sans,
    })
}

/// Whether `key_pem` is the private key of the certificate `cert_pem`.
pub fn key_matches(cert_pem: &str, key_pem: &str) -> bool {
    crate::certified_key_from_pem(cert_pem.as_bytes(), key_pem.as_bytes()).is_ok()
}

/// Whether `leaf` verifies as a TLS server certificate for `server_name` at `now` with `ca` as
/// the only trust anchor: signature, validity and name, as a TLS client would check it.
pub fn verifies_under(
    leaf: &CertificateDer<'static>,
    ca: &CertificateDer<'static>,
    server_name: &str,
    now: OffsetDateTime,
) -> bool {
    let mut roots = RootCertStore::empty();
    if roots.add(ca.clone()).is_err() {
        return false;
    }
    let Ok(verifier) =
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), ring_provider()).build()
    else {
        return false;
    };
    let Ok(name) = ServerName::try_from(server_name.to_string()) else {
        return false;
    };
    let Ok(seconds) = u64::try_from(now.unix_timestamp()) else {
        return false;
    };
    verifier
        .verify_server_cert(
            leaf,
            &[],
            &name,
            &[],
            UnixTime::since_unix_epoch(std::time::Duration::from_secs(seconds)),
        )
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()
    }

    fn sans() -> Vec<String> {
        vec![
            "raygate-webhook".into(),
            "raygate-webhook.raygate-system".into(),
            "raygate-webhook.raygate-system.svc".into(),
            "127.0.0.1".into(),
        ]
    }

    #[test]
    fn ca_has_the_requested_window_and_is_a_ca() {
        let validity = Validity::starting(now(), Duration::days(365));
        let ca = mint_ca("raygate-ca", validity).unwrap();
        let facts = parse_certificate("ca", &ca.cert_pem).unwrap();
        assert_eq!(facts.validity, validity);
        assert_eq!(facts.validity.not_before, now() - CLOCK_SKEW_ALLOWANCE);
        assert_eq!(facts.validity.not_after, now() + Duration::days(365));
        let (_, x509) = x509_parser::parse_x509_certificate(&facts.der).unwrap();
        assert!(x509.is_ca());
        assert!(key_matches(&ca.cert_pem, &ca.key_pem));
    }

    #[test]
    fn leaf_carries_dns_and_ip_sans_and_verifies_under_its_ca_only() {
        let ca = mint_ca("ca-a", Validity::starting(now(), Duration::days(365))).unwrap();
        let other = mint_ca("ca-b", Validity::starting(now(), Duration::days(365))).unwrap();
        let leaf = mint_leaf(&ca, &sans(), Validity::starting(now(), Duration::days(90))).unwrap();
        let facts = parse_certificate("leaf", &leaf.cert_pem).unwrap();
        assert_eq!(facts.sans, sans().into_iter().collect());
        assert!(key_matches(&leaf.cert_pem, &leaf.key_pem));
        assert!(!key_matches(&leaf.cert_pem, &ca.key_pem));
        let ca_der = parse_certificate("ca", &ca.cert_pem).unwrap().der;
        let other_der = parse_certificate("other", &other.cert_pem).unwrap().der;
        let name = "raygate-webhook.raygate-system.svc";
        assert!(verifies_under(&facts.der, &ca_der, name, now()));
        assert!(!verifies_under(&facts.der, &other_der, name, now()));
        assert!(!verifies_under(&facts.der, &ca_der, "elsewhere.svc", now()));
        assert!(!verifies_under(
            &facts.der,
            &ca_der,
            name,
            now() + Duration::days(91)
        ));
    }

    #[test]
    fn leaf_never_outlives_its_ca() {
        let ca = mint_ca("ca", Validity::starting(now(), Duration::days(10))).unwrap();
        let leaf = mint_leaf(&ca, &sans(), Validity::starting(now(), Duration::days(90))).unwrap();
        let facts = parse_certificate("leaf", &leaf.cert_pem).unwrap();
        assert_eq!(facts.validity.not_after, now() + Duration::days(10));
    }

    #[test]
    fn two_cas_have_different_serials() {
        let validity = Validity::starting(now(), Duration::days(1));
        let a = mint_ca("ca", validity).unwrap();
        let b = mint_ca("ca", validity).unwrap();
        let serial = |pem: &str| {
            let der = parse_certificate("ca", pem).unwrap().der;
            let (_, x509) = x509_parser::parse_x509_certificate(&der).unwrap();
            x509.raw_serial().to_vec()
        };
        assert_ne!(serial(&a.cert_pem), serial(&b.cert_pem));
    }

    #[test]
    fn renewal_point_is_two_thirds_into_the_lifetime() {
        let validity = Validity {
            not_before: now(),
            not_after: now() + Duration::days(90),
        };
        assert_eq!(validity.renew_at(), now() + Duration::days(60));
        assert!(validity.contains(now()));
        assert!(!validity.contains(now() - Duration::seconds(1)));
    }

    #[test]
    fn garbage_is_an_error_naming_the_input() {
        let error = parse_certificate("signing-ca.crt", "not pem").unwrap_err();
        assert!(error.to_string().starts_with("signing-ca.crt:"), "{error}");
    }
}
