//! A client of the Ray dashboard's Jobs REST API (docs/upstream.md, "Ray: Jobs API"), over hyper.
//!
//! Every call has a timeout (KubeRay: 2 s direct). Addresses come from `status.dashboardURL`
//! (`<head-svc>.<ns>.svc.<domain>:<port>`) through an [`AddressResolver`], so tests and
//! single-node setups can point every cluster at one local Ray head.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use raygate_api::cluster::auth::DASHBOARD_HEADER;
use raygate_api::lifecycle::RayJobDetails;
use serde_json::Value;

/// Maps a cluster's `status.dashboardURL` to the `host:port` raygate connects to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AddressResolver {
    /// Connect to the dashboard URL itself (the head Service's cluster DNS name).
    #[default]
    ClusterDns,
    /// Connect every cluster to this one `host:port` (a local Ray head in tests).
    Fixed(String),
}

impl AddressResolver {
    /// The `host:port` to connect to for `dashboard_url` (scheme, if any, dropped).
    pub fn resolve(&self, dashboard_url: &str) -> String {
        match self {
            AddressResolver::Fixed(address) => strip_scheme(address).to_string(),
            AddressResolver::ClusterDns => strip_scheme(dashboard_url).to_string(),
        }
    }
}

fn strip_scheme(url: &str) -> &str {
    url.trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/')
}

/// Why a dashboard call failed.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    /// The job does not exist (HTTP 404).
    #[error("Job {0} does not exist on the cluster")]
    NotFound(String),
    /// The dashboard answered with an error status.
    #[error("{method} {path}: HTTP {status}: {body}")]
    Status {
        /// Request method.
        method: Method,
        /// Request path.
        path: String,
        /// HTTP status.
        status: StatusCode,
        /// Response body (often a Python traceback).
        body: String,
    },
    /// The request could not be sent or the answer not read.
    #[error("{method} http://{address}{path}: {reason}")]
    Transport {
        /// Request method.
        method: Method,
        /// `host:port`.
        address: String,
        /// Request path.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The answer is not the JSON expected.
    #[error("{path}: unexpected answer {body:?}: {reason}")]
    Decode {
        /// Request path.
        path: String,
        /// Response body.
        body: String,
        /// Parse error.
        reason: String,
    },
}

impl DashboardError {
    /// Whether the dashboard refused the call's credentials (HTTP 401 or 403): the token sent
    /// is not, or no longer, the cluster's.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            DashboardError::Status { status, .. }
                if *status == StatusCode::UNAUTHORIZED || *status == StatusCode::FORBIDDEN
        )
    }
}

/// The Jobs API client.
#[derive(Clone, Debug)]
pub struct Dashboard {
    client: Client<HttpConnector, Full<Bytes>>,
    resolver: AddressResolver,
    timeout: Duration,
}

impl Dashboard {
    /// A client resolving addresses with `resolver`, giving up on each call after `timeout`.
    /// Each call takes the cluster's Ray auth token, if it has one ([`crate::tokens`]), sent in
    /// the `x-ray-authorization` header.
    pub fn new(resolver: AddressResolver, timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeout));
        Dashboard {
            client: Client::builder(TokioExecutor::new()).build(connector),
            resolver,
            timeout,
        }
    }

    async fn call(
        &self,
        method: Method,
        dashboard_url: &str,
        token: Option<&str>,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, String), DashboardError> {
        let address = self.resolver.resolve(dashboard_url);
        let transport = |reason: String| DashboardError::Transport {
            method: method.clone(),
            address: address.clone(),
            path: path.to_string(),
            reason,
        };
        let mut request = Request::builder()
            .method(method.clone())
            .uri(format!("http://{address}{path}"));
        if let Some(token) = token {
            request = request.header(DASHBOARD_HEADER, format!("Bearer {token}"));
        }
        let payload = match body {
            Some(json) => {
                request = request.header("content-type", "application/json");
                Bytes::from(json.to_string())
            }
            None => Bytes::new(),
        };
        let request = request
            .body(Full::new(payload))
            .map_err(|e| transport(e.to_string()))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| transport(e.to_string()))?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| transport(e.to_string()))?
                .to_bytes();
            Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| transport(format!("no answer within {:?}", self.timeout)))?
    }

    fn check(
        method: Method,
        path: &str,
        (status, body): (StatusCode, String),
    ) -> Result<String, DashboardError> {
        if status.is_success() {
            Ok(body)
        } else {
            Err(DashboardError::Status {
                method,
                path: path.to_string(),
                status,
                body,
            })
        }
    }

    /// `GET /api/jobs/<id>`.
    pub async fn job(
        &self,
        dashboard_url: &str,
        token: Option<&str>,
        submission_id: &str,
    ) -> Result<RayJobDetails, DashboardError> {
        let path = format!("/api/jobs/{submission_id}");
        let answer = self
            .call(Method::GET, dashboard_url, token, &path, None)
            .await?;
        if answer.0 == StatusCode::NOT_FOUND {
            return Err(DashboardError::NotFound(submission_id.to_string()));
        }
        let body = Self::check(Method::GET, &path, answer)?;
        serde_json::from_str(&body).map_err(|e| DashboardError::Decode {
            path,
            body,
            reason: e.to_string(),
        })
    }

    /// `POST /api/jobs/`. A submission id Ray already has counts as submitted: Ray answers a
    /// duplicate with HTTP 500 and "already exists" (docs/upstream.md, "Ray: Jobs API").
    pub async fn submit(
        &self,
        dashboard_url: &str,
        token: Option<&str>,
        request: &Value,
    ) -> Result<(), DashboardError> {
        let path = "/api/jobs/";
        let answer = self
            .call(Method::POST, dashboard_url, token, path, Some(request))
            .await?;
        if answer.0 == StatusCode::INTERNAL_SERVER_ERROR
            && (answer.1.contains("already exists")
                || answer.1.contains("Please use a different submission_id"))
        {
            return Ok(());
        }
        Self::check(Method::POST, path, answer).map(drop)
    }

    /// `GET /api/jobs/<id>/logs`: the job's output so far.
    pub async fn logs(
        &self,
        dashboard_url: &str,
        token: Option<&str>,
        submission_id: &str,
    ) -> Result<String, DashboardError> {
        let path = format!("/api/jobs/{submission_id}/logs");
        let answer = self
            .call(Method::GET, dashboard_url, token, &path, None)
            .await?;
        if answer.0 == StatusCode::NOT_FOUND {
            return Err(DashboardError::NotFound(submission_id.to_string()));
        }
        let body = Self::check(Method::GET, &path, answer)?;
        let value: Value = serde_json::from_str(&body).map_err(|e| DashboardError::Decode {
            path: path.clone(),
            body: body.clone(),
            reason: e.to_string(),
        })?;
        Ok(value
            .get("logs")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string())
    }

    /// `POST /api/jobs/<id>/stop`; whether Ray stopped it (false: already terminal).
    pub async fn stop(
        &self,
        dashboard_url: &str,
        token: Option<&str>,
        submission_id: &str,
    ) -> Result<bool, DashboardError> {
        let path = format!("/api/jobs/{submission_id}/stop");
        let answer = self
            .call(Method::POST, dashboard_url, token, &path, None)
            .await?;
        if answer.0 == StatusCode::NOT_FOUND {
            return Err(DashboardError::NotFound(submission_id.to_string()));
        }
        let body = Self::check(Method::POST, &path, answer)?;
        let value: Value = serde_json::from_str(&body).map_err(|e| DashboardError::Decode {
            path,
            body: body.clone(),
            reason: e.to_string(),
        })?;
        Ok(value.get("stopped").and_then(Value::as_bool) == Some(true))
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// A one-request dashboard on loopback answering `status` and `body`; returns its address
    /// and the request it got, headers lowercased.
    async fn one_answer(
        status: &'static str,
        body: &'static str,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let address = listener.local_addr().expect("its address").to_string();
        let served = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("a connection");
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let read = stream.read(&mut buffer).await.expect("the request");
                assert!(read > 0, "the connection closed mid-request");
                request.extend_from_slice(&buffer[..read]);
            }
            let answer = format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            stream
                .write_all(answer.as_bytes())
                .await
                .expect("the answer");
            String::from_utf8_lossy(&request).to_lowercase()
        });
        (address, served)
    }

    #[tokio::test]
    async fn a_token_goes_in_the_ray_authorization_header_and_only_then() {
        let body = r#"{"status": "RUNNING", "submission_id": "s"}"#;
        let dashboard = Dashboard::new(AddressResolver::ClusterDns, Duration::from_secs(5));
        let (address, served) = one_answer("200 OK", body).await;
        dashboard
            .job(&address, Some("s3cr3t"), "s")
            .await
            .expect("the job");
        let request = served.await.expect("served");
        assert!(
            request.contains("\r\nx-ray-authorization: bearer s3cr3t\r\n"),
            "{request}"
        );

        let (address, served) = one_answer("200 OK", body).await;
        dashboard.job(&address, None, "s").await.expect("the job");
        let request = served.await.expect("served");
        assert!(!request.contains("authorization"), "{request}");
    }

    #[tokio::test]
    async fn a_refused_token_is_told_apart_from_other_failures() {
        let dashboard = Dashboard::new(AddressResolver::ClusterDns, Duration::from_secs(5));
        for (status, refused) in [
            ("401 Unauthorized", true),
            ("403 Forbidden", true),
            ("500 Internal Server Error", false),
        ] {
            let (address, served) = one_answer(status, "no").await;
            let error = dashboard
                .job(&address, Some("old"), "s")
                .await
                .expect_err("an error status");
            served.await.expect("served");
            assert_eq!(error.is_refused(), refused, "{status}: {error}");
        }
    }

    #[test]
    fn resolver_maps_cluster_addresses() {
        let url = "demo-x-head-svc.ml.svc.cluster.local:8265";
        assert_eq!(AddressResolver::ClusterDns.resolve(url), url);
        assert_eq!(
            AddressResolver::ClusterDns.resolve(&format!("http://{url}/")),
            url
        );
        assert_eq!(
            AddressResolver::Fixed("http://127.0.0.1:8265".into()).resolve(url),
            "127.0.0.1:8265"
        );
    }
}
