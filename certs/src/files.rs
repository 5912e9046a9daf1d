//! Files mode: a certificate and key mounted from a Secret (cert-manager, or created by hand),
//! reloaded without a restart.
//!
//! The kubelet updates a Secret volume by writing a new timestamped directory and atomically
//! swapping the `..data` symlink, then deleting the old directory; an inotify watch on the file
//! path misses that. The files are therefore re-read by path on every poll and compared by
//! content, which follows any symlink swap, rename or in-place rewrite.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::FilesConfig;
use crate::{CertResolver, CertTask, certified_key_from_pem};

/// Polls a certificate and key file and serves them through a [`CertResolver`].
#[derive(Debug)]
pub struct FileSource;

impl FileSource {
    /// Loads the files now and then every `config.poll_interval`; a change of either file's
    /// content is served from the next handshake on. An unreadable or inconsistent pair (e.g.
    /// read between the writes of the certificate and the key) is logged and retried; the
    /// previous certificate stays served meanwhile.
    pub fn spawn(config: FilesConfig, resolver: Arc<CertResolver>) -> CertTask {
        CertTask::spawn(poll(config, resolver))
    }
}

async fn poll(config: FilesConfig, resolver: Arc<CertResolver>) {
    let mut loaded: Option<(Vec<u8>, Vec<u8>)> = None;
    let mut rejected: Option<(Vec<u8>, Vec<u8>)> = None;
    let mut read_error: Option<String> = None;
    let mut ticks = tokio::time::interval(config.poll_interval.max(Duration::from_millis(10)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let contents = match read_pair(&config.cert_path, &config.key_path).await {
            Ok(contents) => contents,
            Err(message) => {
                if read_error.as_ref() != Some(&message) {
                    tracing::warn!(%message, "cannot read the webhook certificate files");
                }
                read_error = Some(message);
                resolver.metrics().errors.inc();
                continue;
            }
        };
        read_error = None;
        if loaded.as_ref() == Some(&contents) || rejected.as_ref() == Some(&contents) {
            continue;
        }
        match certified_key_from_pem(&contents.0, &contents.1) {
            Ok(key) => {
                resolver.set(key);
                tracing::info!(
                    cert = %config.cert_path.display(),
                    "loaded the webhook serving certificate"
                );
                loaded = Some(contents);
                rejected = None;
            }
            Err(error) => {
                tracing::warn!(
                    cert = %config.cert_path.display(),
                    key = %config.key_path.display(),
                    %error,
                    "the webhook certificate files do not form a usable pair; keeping the previous one"
                );
                resolver.metrics().errors.inc();
                rejected = Some(contents);
            }
        }
    }
}

async fn read_pair(cert: &Path, key: &Path) -> Result<(Vec<u8>, Vec<u8>), String> {
    let read = |path: PathBuf| async move {
        tokio::fs::read(&path)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    Ok((
        read(cert.to_path_buf()).await?,
        read(key.to_path_buf()).await?,
    ))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use rustls::pki_types::{CertificateDer, ServerName};
    use time::OffsetDateTime;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::pki::{PemPair, Validity, mint_ca, mint_leaf, parse_certificate};

    struct Pki {
        ca: PemPair,
    }

    impl Pki {
        fn new() -> Pki {
            let validity = Validity::starting(OffsetDateTime::now_utc(), time::Duration::days(1));
            Pki {
                ca: mint_ca("test-ca", validity).unwrap(),
            }
        }

        fn leaf(&self) -> PemPair {
            let validity = Validity::starting(OffsetDateTime::now_utc(), time::Duration::hours(1));
            mint_leaf(
                &self.ca,
                &["localhost".into(), "127.0.0.1".into()],
                validity,
            )
            .unwrap()
        }
    }

    /// A TLS server on loopback answering every connection with one byte, serving from
    /// `resolver`; returns its port.
    async fn serve(resolver: Arc<CertResolver>) -> u16 {
        let config = rustls::ServerConfig::builder_with_provider(crate::ring_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(resolver);
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(mut tls) = acceptor.accept(stream).await {
                        let _ = tls.write_all(b"!").await;
                        let _ = tls.shutdown().await;
                    }
                });
            }
        });
        port
    }

    /// Handshakes with the server trusting `ca` and returns the served leaf, or the handshake
    /// error (e.g. while nothing is loaded yet).
    async fn try_served_leaf(port: u16, ca: &PemPair) -> std::io::Result<CertificateDer<'static>> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(parse_certificate("ca", &ca.cert_pem).unwrap().der)
            .unwrap();
        let config = rustls::ClientConfig::builder_with_provider(crate::ring_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut tls = connector
            .connect(ServerName::try_from("localhost").unwrap(), stream)
            .await?;
        let mut byte = [0u8; 1];
        tls.read_exact(&mut byte).await?;
        Ok(tls.get_ref().1.peer_certificates().unwrap()[0].clone())
    }

    async fn served_leaf(port: u16, ca: &PemPair) -> CertificateDer<'static> {
        try_served_leaf(port, ca)
            .await
            .expect("a verified TLS handshake")
    }

    fn der_of(pair: &PemPair) -> CertificateDer<'static> {
        parse_certificate("leaf", &pair.cert_pem).unwrap().der
    }

    fn write_pair(dir: &Path, pair: &PemPair) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("tls.crt"), &pair.cert_pem).unwrap();
        std::fs::write(dir.join("tls.key"), &pair.key_pem).unwrap();
    }

    async fn wait_until_served(port: u16, pki: &Pki, wanted: &PemPair) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if try_served_leaf(port, &pki.ca).await.ok() == Some(der_of(wanted)) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the new certificate was not served within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "raygate-certs-{name}-{}-{}",
            std::process::id(),
            OffsetDateTime::now_utc().unix_timestamp_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test]
    async fn a_kubelet_style_symlink_swap_is_served_on_the_next_handshake() {
        let pki = Pki::new();
        let (first, second) = (pki.leaf(), pki.leaf());
        let volume = temp_dir("symlink");
        // The layout of a Secret volume: ..<timestamp>/ files, ..data -> ..<timestamp>,
        // tls.crt -> ..data/tls.crt.
        write_pair(&volume.join("..2026_01_01_a"), &first);
        symlink("..2026_01_01_a", volume.join("..data")).unwrap();
        symlink("..data/tls.crt", volume.join("tls.crt")).unwrap();
        symlink("..data/tls.key", volume.join("tls.key")).unwrap();

        let resolver = Arc::new(CertResolver::new());
        let _task = FileSource::spawn(
            FilesConfig {
                cert_path: volume.join("tls.crt"),
                key_path: volume.join("tls.key"),
                poll_interval: Duration::from_millis(50),
            },
            resolver.clone(),
        );
        let port = serve(resolver.clone()).await;
        wait_until_served(port, &pki, &first).await;
        let first_not_after = parse_certificate("leaf", &first.cert_pem)
            .unwrap()
            .validity
            .not_after;
        assert_eq!(
            resolver.metrics().not_after_seconds(),
            first_not_after.unix_timestamp()
        );

        // What the kubelet does: new directory, new symlink renamed over ..data, old one gone.
        write_pair(&volume.join("..2026_01_02_b"), &second);
        symlink("..2026_01_02_b", volume.join("..data_tmp")).unwrap();
        std::fs::rename(volume.join("..data_tmp"), volume.join("..data")).unwrap();
        std::fs::remove_dir_all(volume.join("..2026_01_01_a")).unwrap();

        wait_until_served(port, &pki, &second).await;
        assert_eq!(resolver.metrics().loads(), 2);
        std::fs::remove_dir_all(&volume).unwrap();
    }

    #[tokio::test]
    async fn a_broken_pair_keeps_the_previous_certificate_until_it_is_fixed() {
        let pki = Pki::new();
        let (first, second) = (pki.leaf(), pki.leaf());
        let dir = temp_dir("broken");
        write_pair(&dir, &first);
        let resolver = Arc::new(CertResolver::new());
        let _task = FileSource::spawn(
            FilesConfig {
                cert_path: dir.join("tls.crt"),
                key_path: dir.join("tls.key"),
                poll_interval: Duration::from_millis(20),
            },
            resolver.clone(),
        );
        let port = serve(resolver.clone()).await;
        wait_until_served(port, &pki, &first).await;

        // Certificate rewritten, key not yet: the pair does not match.
        std::fs::write(dir.join("tls.crt"), &second.cert_pem).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(served_leaf(port, &pki.ca).await, der_of(&first));
        assert!(resolver.metrics().errors.get() >= 1);

        std::fs::write(dir.join("tls.key"), &second.key_pem).unwrap();
        wait_until_served(port, &pki, &second).await;
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn missing_files_leave_the_resolver_unloaded() {
        let dir = temp_dir("missing");
        let resolver = Arc::new(CertResolver::new());
        let task = FileSource::spawn(
            FilesConfig {
                cert_path: dir.join("tls.crt"),
                key_path: dir.join("tls.key"),
                poll_interval: Duration::from_millis(20),
            },
            resolver.clone(),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!resolver.is_loaded());
        let pki = Pki::new();
        write_pair(&dir, &pki.leaf());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !resolver.is_loaded() {
            assert!(tokio::time::Instant::now() < deadline, "never loaded");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(task);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
