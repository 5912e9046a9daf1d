//! Making sure the API server can reach raygate's conversion webhook.
//!
//! `control-plane up` points the `ray.io` CRDs' conversion webhook at `$RAYGATE_WEBHOOK_URL`
//! (`https://127.0.0.1:9443/convert`, certificate `$RAYGATE_WEBHOOK_CRT` from the environment's
//! serving CA). When a raygate webhook server already listens there, tests use it. Otherwise
//! [`ensure_served`] serves `/convert` from this test process with raygate's own
//! [`raygate_api::conversion::convert_review_json`] — the function the webhook server mounts —
//! so that the conversion itself is proven against the real API server either way.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::Env;

/// Who answers the environment's ConversionReviews.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConversionServer {
    /// A raygate webhook server was already listening at `$RAYGATE_WEBHOOK_URL`.
    Raygate,
    /// This test process serves `/convert` with raygate's conversion function.
    TestProcess,
}

static SERVER: OnceLock<ConversionServer> = OnceLock::new();

/// Makes sure something answers `$RAYGATE_WEBHOOK_URL/convert` for the rest of this test process.
///
/// # Panics
/// When the environment has no webhook certificate, or the address is neither served nor free.
pub fn ensure_served(env: &Env) -> ConversionServer {
    *SERVER.get_or_init(|| {
        let url = env.var("RAYGATE_WEBHOOK_URL");
        let address: SocketAddr = url
            .strip_prefix("https://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("RAYGATE_WEBHOOK_URL {url} is not https://<ip>:<port>"));
        if std::net::TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_ok() {
            return ConversionServer::Raygate;
        }
        let acceptor = acceptor(env);
        let listener = std::net::TcpListener::bind(address)
            .unwrap_or_else(|e| panic!("binding {address} for the conversion webhook: {e}"));
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        // Its own runtime on its own thread: each #[tokio::test] has a runtime of its own that
        // ends with the test, and the server must outlive every test of the process.
        std::thread::Builder::new()
            .name("conversion-webhook".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(serve(listener, acceptor));
            })
            .expect("conversion webhook thread");
        ConversionServer::TestProcess
    })
}

fn acceptor(env: &Env) -> TlsAcceptor {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(env.var("RAYGATE_WEBHOOK_CRT"))
            .and_then(|certs| certs.collect())
            .expect("the environment's webhook certificate");
    let key = PrivateKeyDer::from_pem_file(env.var("RAYGATE_WEBHOOK_KEY"))
        .expect("the environment's webhook key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("a usable certificate");
    TlsAcceptor::from(Arc::new(config))
}

async fn serve(listener: std::net::TcpListener, acceptor: TlsAcceptor) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service = hyper::service::service_fn(answer);
            // A failed connection only fails the review the API server sent over it.
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    if request.uri().path() != raygate_api::keys::CONVERT_PATH {
        let mut response = Response::new(Full::new(Bytes::from_static(b"not found")));
        *response.status_mut() = StatusCode::NOT_FOUND;
        return Ok(response);
    }
    let body = request.into_body().collect().await?.to_bytes();
    let review = raygate_api::conversion::convert_review_json(&body);
    let json = serde_json::to_vec(&review).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(json)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
