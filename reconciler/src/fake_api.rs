//! A fake API server for the unit tests of the code that writes: it logs every request and lets
//! each test choose the answers.

use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, Response};
use kube::Client;
use serde_json::json;

/// A request the fake API server got: method, path and query, body.
pub(crate) type Seen = (String, String, String);

/// Every request the fake API server got, in order.
pub(crate) type Log = Arc<Mutex<Vec<Seen>>>;

/// A client of a fake API server that logs each request and answers it with the status code
/// and body `answer` makes of it.
pub(crate) fn fake_api<F>(answer: F) -> (Client, Log)
where
    F: Fn(&Seen) -> (u16, String) + Clone + Send + Sync + 'static,
{
    let log: Log = Arc::default();
    let requests = log.clone();
    let service = tower::service_fn(move |request: Request<kube::client::Body>| {
        let (requests, answer) = (requests.clone(), answer.clone());
        async move {
            let method = request.method().to_string();
            let uri = request.uri().to_string();
            let body = request.into_body().collect().await?.to_bytes();
            let seen = (method, uri, String::from_utf8_lossy(&body).into_owned());
            let (code, body) = answer(&seen);
            requests.lock().expect("lock").push(seen);
            Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
        }
    });
    (Client::new(service, "default"), log)
}

/// What the API server answers a successful create or patch: the object written (`{}` for a
/// body that is not one).
pub(crate) fn echo(body: &str) -> String {
    if body.starts_with('{') {
        body.to_owned()
    } else {
        String::from("{}")
    }
}

/// The Status the API server answers a refused request with.
pub(crate) fn refusal(code: u16) -> String {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
           "reason": "Refused", "message": "refused", "code": code})
    .to_string()
}
