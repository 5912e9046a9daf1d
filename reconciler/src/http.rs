//! The plain-HTTP health and metrics listener: `/healthz`, `/readyz`, `/metrics`.
//!
//! Every replica serves it, leader or not: a standby replica is healthy and ready (it is
//! ready to take over), and its metrics show `leader_election_master_status 0`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::context::Shutdown;
use crate::metrics::Metrics;

/// Binds `addr`; fails fast (before leader election) when the port is taken.
///
/// # Errors
/// When the address cannot be bound.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, crate::runtime::Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| crate::runtime::Error::Bind { addr, source })
}

/// Serves health and metrics on `listener` until `shutdown` fires.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>, shutdown: Shutdown) {
    let accept = async {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a health/metrics connection failed");
                    continue;
                }
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let metrics = metrics.clone();
                    async move { Ok::<_, Infallible>(respond(&req, &metrics)) }
                });
                if let Err(e) = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(error = %e, "health/metrics connection ended with an error");
                }
            });
        }
    };
    tokio::select! {
        () = accept => {}
        () = shutdown.wait() => {}
    }
}

fn respond(req: &Request<Incoming>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match req.uri().path() {
        "/healthz" | "/readyz" | "/livez" => (StatusCode::OK, "text/plain", "ok".to_string()),
        "/metrics" => (
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /healthz, /readyz or /metrics\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}
