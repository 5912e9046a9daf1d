//! Certificates out of PEM bundles, as the tests read webhook CA bundles and Secrets.

use raygate_certs::pki::parse_certificate;
use rustls::pki_types::CertificateDer;

/// The DER certificates of a PEM bundle, in order.
///
/// # Panics
/// When a PEM block of the bundle is not a certificate.
pub fn certificates(bundle: &[u8]) -> Vec<CertificateDer<'static>> {
    String::from_utf8_lossy(bundle)
        .split_inclusive("-----END CERTIFICATE-----")
        .filter(|block| block.contains("BEGIN CERTIFICATE"))
        .map(|pem| parse_certificate("bundle", pem).expect("a certificate").der)
        .collect()
}
