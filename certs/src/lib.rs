//! raygate's webhook serving certificates.
//!
//! The TLS server never reads certificates itself: it asks a [`CertResolver`]
//! on every handshake, and whatever source owns the certificate (mounted
//! files, or a self-managed CA kept in a Secret) swaps a new one in. A swap
//! takes effect on the next handshake, so rotation never drops a connection.
//!
//! Two sources keep the resolver up to date:
//! * [`FileSource`]: a certificate and key mounted from a Secret (cert-manager or by hand),
//!   polled and reloaded when their content changes — also when the kubelet swaps the
//!   volume's `..data` symlink, because the files are re-read by path on every poll;
//! * [`SelfManaged`]: raygate's own CA and serving certificate kept in a Secret shared by all
//!   replicas, rotated by the schedule of [`rotation`], with the CA bundle injected into the
//!   webhook configurations and the CRDs' conversion webhooks.
//!
//! [`CertSource`] selects one of them from plain configuration (the CLI builds it).

pub mod config;
pub mod files;
pub mod inject;
mod metrics;
pub mod pki;
pub mod rotation;
pub mod secret;
pub mod self_managed;

use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

pub use config::{CertSource, FilesConfig, SelfManagedConfig};
pub use files::FileSource;
pub use metrics::CertMetrics;
pub use self_managed::{SelfManaged, request_rotation};

/// Why a certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// The certificate PEM holds no usable certificate.
    #[error("the certificate PEM contains no CERTIFICATE block")]
    NoCertificate,
    /// A PEM block could not be decoded.
    #[error("cannot read {what} PEM: {source}")]
    Pem {
        /// Which input: "certificate" or "private key".
        what: &'static str,
        /// The decoder's error.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// rustls rejected the key or the key does not match the certificate.
    #[error("unusable certificate or key: {0}")]
    Tls(#[from] rustls::Error),
}

/// Builds a [`CertifiedKey`] from a PEM certificate chain and a PEM private
/// key (PKCS#8, PKCS#1 or SEC1), with the ring provider.
pub fn certified_key_from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, CertError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| CertError::Pem {
            what: "certificate",
            source,
        })?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| CertError::Pem {
        what: "private key",
        source,
    })?;
    let provider = ring_provider();
    let signing_key = provider.key_provider.load_private_key(key)?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified.keys_match()?;
    Ok(certified)
}

/// The process's crypto provider: ring, the one kube uses, so no second
/// provider is ever compiled in.
pub fn ring_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The serving certificate of the webhook server, swappable at run time.
///
/// Until the first [`CertResolver::set`] every handshake fails, and
/// [`CertResolver::is_loaded`] is false, which keeps `/readyz` false.
#[derive(Debug, Default)]
pub struct CertResolver {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    metrics: CertMetrics,
}

impl CertResolver {
    /// An empty resolver.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `key` from the next handshake on.
    pub fn set(&self, key: CertifiedKey) {
        if let Some(leaf) = key.end_entity_cert().ok().cloned()
            && let Ok(facts) = pki::facts_from_der(leaf.into_owned())
        {
            self.metrics
                .not_after_seconds
                .set(facts.validity.not_after.unix_timestamp());
        }
        self.metrics.loads.inc();
        let mut current = self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *current = Some(Arc::new(key));
    }

    /// Serves `key` unless the same certificate chain is already served; returns whether it
    /// changed anything.
    pub fn set_if_changed(&self, key: CertifiedKey) -> bool {
        if self
            .current()
            .is_some_and(|current| current.cert == key.cert)
        {
            return false;
        }
        self.set(key);
        true
    }

    /// The certificate metrics: served `notAfter`, loads, rotation steps, errors. Register
    /// them once with [`CertMetrics::register`].
    pub fn metrics(&self) -> &CertMetrics {
        &self.metrics
    }

    /// Whether a certificate has been loaded.
    pub fn is_loaded(&self) -> bool {
        self.current().is_some()
    }

    /// The certificate served now.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// A running certificate source. Dropping the handle stops it: keep it for as long as the
/// server runs.
#[derive(Debug)]
pub struct CertTask {
    task: tokio::task::JoinHandle<()>,
}

impl CertTask {
    fn spawn(future: impl std::future::Future<Output = ()> + Send + 'static) -> CertTask {
        CertTask {
            task: tokio::spawn(future),
        }
    }

    /// Stops the source; the resolver keeps serving the last certificate.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for CertTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}
