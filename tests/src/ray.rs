//! A client of the Ray head's Jobs API (dashboard port), over plain HTTP/1.1.
//!
//! The dashboard answers small JSON or text bodies on loopback; a few lines of HTTP/1.1 over a
//! `TcpStream` (one request per connection, `Connection: close`) are enough and keep an HTTP
//! client crate out of the test build.

use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An HTTP answer: status code and body.
#[derive(Clone, Debug)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// Body, decoded as UTF-8 (lossy).
    pub body: String,
}

impl Response {
    /// The body parsed as JSON.
    pub fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_str(&self.body)
            .with_context(|| format!("not JSON (HTTP {}): {}", self.status, self.body))
    }
}

/// The Ray dashboard at `host:port` (from `http://host:port`).
#[derive(Clone, Debug)]
pub struct Dashboard {
    authority: String,
    /// A Ray auth token, sent in `x-ray-authorization` ([`Dashboard::with_token`]).
    token: Option<String>,
}

impl Dashboard {
    /// A client of `base`, e.g. `http://127.0.0.1:8265` ([`crate::Env::ray_dashboard`]).
    ///
    /// # Panics
    /// When `base` is not an `http://host:port` URL.
    pub fn new(base: &str) -> Dashboard {
        let authority = base
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("Ray dashboard address {base} is not http://host:port"))
            .trim_end_matches('/');
        Dashboard {
            authority: authority.to_string(),
            token: None,
        }
    }

    /// The same client sending Ray auth token `token` with every request, as a
    /// token-authenticated cluster's dashboard wants it.
    pub fn with_token(self, token: &str) -> Dashboard {
        Dashboard {
            token: Some(token.to_string()),
            ..self
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> anyhow::Result<Response> {
        self.request("GET", path, None).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Response> {
        self.request("POST", path, Some(body)).await
    }

    /// Submits `entrypoint` as job `submission_id` (`POST /api/jobs/`).
    pub async fn submit(&self, submission_id: &str, entrypoint: &str) -> anyhow::Result<Response> {
        self.post(
            "/api/jobs/",
            &json!({"entrypoint": entrypoint, "submission_id": submission_id}),
        )
        .await
    }

    /// The job's details (`GET /api/jobs/<id>`); an error unless HTTP 200.
    pub async fn job(&self, submission_id: &str) -> anyhow::Result<Value> {
        let answer = self.get(&format!("/api/jobs/{submission_id}")).await?;
        if answer.status != 200 {
            bail!(
                "GET /api/jobs/{submission_id}: HTTP {}: {}",
                answer.status,
                answer.body
            );
        }
        answer.json()
    }

    /// The job's details once its status is terminal (`SUCCEEDED`, `FAILED`, `STOPPED`), or
    /// `None` while it is not.
    pub async fn terminal_job(&self, submission_id: &str) -> anyhow::Result<Option<Value>> {
        let job = self.job(submission_id).await?;
        let terminal = matches!(
            job["status"].as_str(),
            Some("SUCCEEDED" | "FAILED" | "STOPPED")
        );
        Ok(terminal.then_some(job))
    }

    async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Response> {
        let exchange = async {
            let mut stream = TcpStream::connect(&self.authority).await.with_context(|| {
                format!("connecting to the Ray dashboard at {}", self.authority)
            })?;
            let body = body.map(Value::to_string).unwrap_or_default();
            let authorization = self
                .token
                .as_ref()
                .map(|token| format!("x-ray-authorization: Bearer {token}\r\n"))
                .unwrap_or_default();
            let request = format!(
                "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: */*\r\n\
                 {authorization}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                self.authority,
                body.len()
            );
            stream.write_all(request.as_bytes()).await?;
            let mut raw = Vec::new();
            stream.read_to_end(&mut raw).await?;
            parse_response(&raw)
        };
        tokio::time::timeout(Duration::from_secs(30), exchange)
            .await
            .with_context(|| format!("{method} {path}: no answer from the Ray dashboard in 30 s"))?
            .with_context(|| format!("{method} {path}"))
    }
}

/// Parses a complete HTTP/1.1 response (read until the server closed the connection).
fn parse_response(raw: &[u8]) -> anyhow::Result<Response> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers in the answer")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line {status_line:?}"))?;
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        body = dechunk(&body)?;
    }
    Ok(Response {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Decodes a `Transfer-Encoding: chunked` body.
fn dechunk(mut data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("chunk size line without CRLF")?;
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size_text = size_text
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let size = usize::from_str_radix(&size_text, 16)
            .with_context(|| format!("bad chunk size {size_text:?}"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            bail!("truncated chunk");
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::parse_response;

    #[test]
    fn parses_plain_and_chunked_answers() {
        let plain = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsuccess").unwrap();
        assert_eq!((plain.status, plain.body.as_str()), (200, "success"));
        let chunked = parse_response(
            b"HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nalre\r\n7;x=y\r\nady exi\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (chunked.status, chunked.body.as_str()),
            (500, "already exi")
        );
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
    }
}
