//! Recording Events off the reconcile path.
//!
//! An Event is a POST of its own, and a pass that awaited each one would hold its object's
//! reconcile (and one of the controller's `--concurrency` slots) for as many API round trips as
//! it records Events: three of a RayJob's first pass and three of its cluster's were Events
//! (docs/reconciler.md, "Events"). A pass queues its Events on an [`EventSink`] and goes on;
//! one task per leadership term publishes them, [`IN_FLIGHT`] at a time. Events are a record
//! for people, never an input of a decision, so one that cannot be published is logged and
//! dropped, as before.
//!
//! Only a Warning that repeats an earlier one word for word becomes a series. kube's
//! [`Recorder`] takes an Event for a repeat of an earlier one when type, reason, action and object
//! are the same, whatever its note says, and patches the earlier Event's count instead of
//! recording the new note; it keeps every Event it published for six minutes to find them.
//! A cluster's second `CreatedWorkerPod` would then show the first Pod's name, a spec fixed into
//! a different mistake would show the old `InvalidSpec` message with a count of 2, and a burst of
//! creations would keep thousands of Events in memory. So Normal Events (each records one fact:
//! a created or deleted object, a finished run) each get a `Recorder` that remembers nothing, and
//! Warnings one per object, reason and note ([`WarningSeries`]), as client-go's correlator
//! counts only identical messages.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
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

/// How long a Warning's repeats join its series after the last one: the six minutes kube's
/// `Recorder` keeps a published Event to find its repeats.
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// What makes a Warning the repeat of an earlier one: the same object, reason and note.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct SeriesKey {
    namespace: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    reason: String,
    note: Option<String>,
}

/// The `Recorder`s of Warnings, one per [`SeriesKey`] seen within [`SERIES_WINDOW`], with when
/// each was last used.
#[derive(Clone)]
struct WarningSeries {
    client: Client,
    reporter: Reporter,
    recorders: Arc<Mutex<HashMap<SeriesKey, (Recorder, Instant)>>>,
}

impl WarningSeries {
    fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            recorders: Arc::default(),
        }
    }

    /// The `Recorder` that makes `queued` a repeat of the Warnings with its key, and only of
    /// those. Keys unused for [`SERIES_WINDOW`] are forgotten, as the `Recorder` forgets their
    /// Events.
    fn recorder(&self, queued: &Queued) -> Recorder {
        let key = SeriesKey {
            namespace: queued.regarding.namespace.clone(),
            kind: queued.regarding.kind.clone(),
            name: queued.regarding.name.clone(),
            uid: queued.regarding.uid.clone(),
            reason: queued.event.reason.clone(),
            note: queued.event.note.clone(),
        };
        let now = Instant::now();
        // A poisoned lock only means another publish panicked; the map is still whole.
        let mut recorders = self
            .recorders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        recorders.retain(|_, (_, used)| now.duration_since(*used) < SERIES_WINDOW);
        let (recorder, used) = recorders.entry(key).or_insert_with(|| {
            (
                Recorder::new(self.client.clone(), self.reporter.clone()),
                now,
            )
        });
        *used = now;
        recorder.clone()
    }
}

/// Where passes queue their Events (cheap to clone: one channel).
#[derive(Clone)]
pub(crate) struct EventSink {
    sender: mpsc::Sender<Queued>,
}

impl EventSink {
    /// A sink and the future that publishes what it receives with `client`, as `reporter`.
    /// The future ends once every clone of the sink is dropped and the queued Events are
    /// published.
    pub(crate) fn new(
        client: Client,
        reporter: Reporter,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let (sender, mut receiver) = mpsc::channel::<Queued>(QUEUE);
        let queued = futures::stream::poll_fn(move |cx| receiver.poll_recv(cx));
        let warnings = WarningSeries::new(client.clone(), reporter.clone());
        let publish = queued.for_each_concurrent(IN_FLIGHT, move |queued: Queued| {
            let recorder = match queued.event.type_ {
                EventType::Warning => warnings.recorder(&queued),
                // A Recorder of its own remembers nothing, so the Event is created as it is.
                EventType::Normal => Recorder::new(client.clone(), reporter.clone()),
            };
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
    use super::*;
    use crate::fake_api::{Log, Seen, fake_api};

    fn event(reason: &str) -> Event {
        Event {
            type_: EventType::Normal,
            reason: reason.to_string(),
            note: None,
            action: "Reconcile".to_string(),
            secondary: None,
        }
    }

    fn reporter() -> Reporter {
        Reporter {
            controller: "raygate-reconciler".into(),
            instance: None,
        }
    }

    fn regarding() -> ObjectReference {
        ObjectReference {
            namespace: Some("team".into()),
            name: Some("demo".into()),
            ..ObjectReference::default()
        }
    }

    /// An API server that answers every request with its body; a body that names `Refused`
    /// gets a 500.
    fn echoing_api() -> (Client, Log) {
        fake_api(|(_, _, body): &Seen| {
            let code = if body.contains("Refused") { 500 } else { 201 };
            (code, body.clone())
        })
    }

    /// Records `events` one after the other and returns the requests that published them.
    async fn published(events: Vec<Event>) -> Vec<(String, serde_json::Value)> {
        let (client, requests) = echoing_api();
        let (sink, publish) = EventSink::new(client, reporter());
        let publisher = tokio::spawn(publish);
        for event in events {
            sink.record(event, regarding()).await;
            // One at a time, so a repeat finds the Event it repeats already published.
            let sent = requests.lock().expect("lock").len();
            tokio::time::timeout(Duration::from_secs(10), async {
                while requests.lock().expect("lock").len() == sent {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await
            .expect("the Event is published");
        }
        drop(sink);
        publisher.await.expect("the publisher ends");
        let requests = requests.lock().expect("lock");
        requests
            .iter()
            .map(|(method, _, body)| (method.clone(), serde_json::from_str(body).expect("JSON")))
            .collect()
    }

    #[tokio::test]
    async fn normal_events_of_one_reason_and_object_are_each_created_with_their_note() {
        let created = |pod: &str| Event {
            note: Some(format!("Created worker Pod team/{pod}")),
            ..event("CreatedWorkerPod")
        };
        let requests = published(vec![created("demo-a"), created("demo-b")]).await;
        let notes: Vec<(&str, &str)> = requests
            .iter()
            .map(|(method, body)| (method.as_str(), body["note"].as_str().unwrap_or_default()))
            .collect();
        assert_eq!(
            notes,
            [
                ("POST", "Created worker Pod team/demo-a"),
                ("POST", "Created worker Pod team/demo-b")
            ]
        );
    }

    #[tokio::test]
    async fn a_repeated_warning_becomes_a_series() {
        let refused = || Event {
            type_: EventType::Warning,
            note: Some("pods \"demo-head\" is forbidden".into()),
            ..event("FailedCreateHeadPod")
        };
        let requests = published(vec![refused(), refused()]).await;
        let methods: Vec<&str> = requests.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(methods, ["POST", "PATCH"]);
        assert_eq!(requests[1].1["series"]["count"], 2);
    }

    #[tokio::test]
    async fn a_warning_with_another_note_is_an_event_of_its_own() {
        let invalid = |note: &str| Event {
            type_: EventType::Warning,
            note: Some(note.into()),
            ..event("InvalidSpec")
        };
        let requests = published(vec![
            invalid("spec.headGroupSpec: Required value"),
            invalid("spec.workerGroupSpecs[0].groupName: Required value"),
            invalid("spec.headGroupSpec: Required value"),
        ])
        .await;
        let seen: Vec<(&str, &str, i64)> = requests
            .iter()
            .map(|(method, body)| {
                (
                    method.as_str(),
                    body["note"].as_str().unwrap_or_default(),
                    body["series"]["count"].as_i64().unwrap_or(1),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("POST", "spec.headGroupSpec: Required value", 1),
                (
                    "POST",
                    "spec.workerGroupSpecs[0].groupName: Required value",
                    1
                ),
                ("PATCH", "spec.headGroupSpec: Required value", 2),
            ]
        );
    }

    #[tokio::test]
    async fn queued_events_are_published_once_the_sink_is_dropped_even_when_one_is_refused() {
        let (client, requests) = echoing_api();
        let (sink, publish) = EventSink::new(client, reporter());
        for reason in ["CreatedRayCluster", "Refused", "CreatedService"] {
            sink.record(event(reason), regarding()).await;
        }
        assert!(
            requests.lock().expect("lock").is_empty(),
            "recording only queues"
        );
        drop(sink);
        tokio::time::timeout(Duration::from_secs(10), publish)
            .await
            .expect("the publisher ends once the sink is gone");
        let mut published: Vec<String> = requests
            .lock()
            .expect("lock")
            .iter()
            .filter_map(|(_, _, body)| {
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
