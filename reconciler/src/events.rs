//! Recording Events off the reconcile path.
//!
//! An Event is a POST of its own, and a pass that awaited each one would hold its object's
//! reconcile (and one of the controller's `--concurrency` slots) for as many API round trips as
//! it records Events: three of a RayJob's first pass and three of its cluster's were Events
//! (docs/reconciler.md, "Events"). A pass queues its Events on an [`EventSink`] and goes on;
//! one task per leadership term publishes them, [`IN_FLIGHT`] at a time. Events are a record
//! for people, never an input of a decision, so one that cannot be published is logged and
//! dropped, as before.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder};
use tokio::sync::mpsc;

/// Events waiting to be published; a pass that finds the queue full waits for room, so a
/// burst slows the passes down rather than growing memory without bound.
const QUEUE: usize = 1024;

/// Events published at once.
const IN_FLIGHT: usize = 8;

/// How long a shutdown waits for the queued Events to be published.
pub(crate) const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// An Event and the object it is about.
struct Queued {
    event: Event,
    regarding: ObjectReference,
}

/// Where passes queue their Events (cheap to clone: one channel).
#[derive(Clone)]
pub(crate) struct EventSink {
    sender: mpsc::Sender<Queued>,
}

impl EventSink {
    /// A sink and the future that publishes what it receives through `recorder`. The future
    /// ends once every clone of the sink is dropped and the queued Events are published.
    pub(crate) fn new(recorder: Recorder) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let (sender, mut receiver) = mpsc::channel::<Queued>(QUEUE);
        let queued = futures::stream::poll_fn(move |cx| receiver.poll_recv(cx));
        let publish = queued.for_each_concurrent(IN_FLIGHT, move |queued| {
            let recorder = recorder.clone();
            async move {
                if let Err(error) = recorder.publish(&queued.event, &queued.regarding).await {
                    tracing::warn!(
                        %error,
                        reason = %queued.event.reason,
                        object = ?queued.regarding.name,
                        "could not record an Event"
                    );
                }
            }
        });
        (Self { sender }, publish)
    }

    /// Queues `event` about `regarding`, waiting while the queue is full.
    pub(crate) async fn record(&self, event: Event, regarding: ObjectReference) {
        if self.sender.send(Queued { event, regarding }).await.is_err() {
            tracing::debug!("Event not recorded: the reconciler is stopping");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use hyper::{Request, Response};
    use kube::Client;
    use kube::runtime::events::{EventType, Reporter};

    use super::*;

    fn event(reason: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.to_string(),
            note: None,
            action: "Reconcile".to_string(),
            secondary: None,
        }
    }

    #[tokio::test]
    async fn queued_events_are_published_once_the_sink_is_dropped_even_when_one_is_refused() {
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let log = bodies.clone();
        let service = tower::service_fn(move |request: Request<kube::client::Body>| {
            let log = log.clone();
            async move {
                let body = request.into_body().collect().await?.to_bytes();
                let body = String::from_utf8_lossy(&body).into_owned();
                let refused = body.contains("Refused");
                log.lock().expect("lock").push(body.clone());
                Response::builder()
                    .status(if refused { 500 } else { 201 })
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body)))
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            }
        });
        let recorder = Recorder::new(
            Client::new(service, "default"),
            Reporter {
                controller: "raygate-reconciler".into(),
                instance: None,
            },
        );
        let (sink, publish) = EventSink::new(recorder);
        let regarding = ObjectReference {
            namespace: Some("team".into()),
            name: Some("demo".into()),
            ..ObjectReference::default()
        };
        for reason in ["CreatedRayCluster", "Refused", "CreatedService"] {
            sink.record(event(reason), regarding.clone()).await;
        }
        assert!(
            bodies.lock().expect("lock").is_empty(),
            "recording only queues"
        );
        drop(sink);
        tokio::time::timeout(Duration::from_secs(10), publish)
            .await
            .expect("the publisher ends once the sink is gone");
        let mut published: Vec<String> = bodies
            .lock()
            .expect("lock")
            .iter()
            .filter_map(|body| {
                serde_json::from_str::<serde_json::Value>(body).ok()?["reason"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        published.sort();
        assert_eq!(
            published,
            ["CreatedRayCluster", "CreatedService", "Refused"],
            "a refused Event does not stop the others"
        );
    }
}
