//! Bookkeeping of the TLS server's connections ([`crate::server::serve`]): the bound on open
//! connections, the requests in flight on each, and which connection to close when.
//!
//! A connection is *idle* while it has no request in flight: from the end of its TLS handshake
//! until its first request head is complete, and again from the moment a response body has been
//! written until the next request head is complete, in HTTP/1 and HTTP/2 alike. An idle
//! connection is closed after the idle timeout; at the bound, the connection idle the longest is
//! closed to make room for a new one. A connection with a request in flight is never closed by
//! either, nor is one still in its handshake (which the handshake timeout bounds).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, oneshot, watch};

/// Why the server closes a connection of its own accord.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Close {
    /// No request in flight for the idle timeout.
    Idle,
    /// Closed at the bound, as the connection idle the longest, to make room for a new one.
    Evicted,
    /// Graceful shutdown of the server.
    Shutdown,
}

impl Close {
    /// The `reason` label of `raygate_webhook_connections_closed_total`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Close::Idle => "idle",
            Close::Evicted => "evicted",
            Close::Shutdown => "shutdown",
        }
    }
}

/// The open connections: at most `max`, each holding a [`Slot`].
pub(crate) struct Connections {
    slots: Arc<Semaphore>,
    max: u32,
    idle: Mutex<IdleQueue>,
    /// Signalled whenever a connection becomes idle, for [`Connections::make_room`].
    became_idle: Notify,
    open: Gauge,
}

/// The idle connections, by the order in which they became idle: the first is the one idle the
/// longest. Each entry closes its connection when sent to.
#[derive(Default)]
struct IdleQueue {
    next: u64,
    waiting: BTreeMap<u64, oneshot::Sender<()>>,
}

impl Connections {
    /// Room for `max` connections, counted in the `open` gauge.
    pub(crate) fn new(max: u32, open: Gauge) -> Self {
        Connections {
            slots: Arc::new(Semaphore::new(max as usize)),
            max,
            idle: Mutex::default(),
            became_idle: Notify::new(),
            open,
        }
    }

    /// How many connections are open.
    pub(crate) fn open(&self) -> usize {
        self.max as usize - self.slots.available_permits()
    }

    /// A slot, if one is free.
    pub(crate) fn try_slot(&self) -> Option<Slot> {
        let permit = self.slots.clone().try_acquire_owned().ok()?;
        Some(self.slot(permit))
    }

    /// A slot at the bound: closes the connection idle the longest (when none is idle, the
    /// first to become idle, unless a connection closes before) and waits for the slot it
    /// frees. `None` only if the semaphore were closed, which nothing does.
    pub(crate) async fn make_room(&self) -> Option<Slot> {
        let permit = self.slots.clone().acquire_owned();
        futures::pin_mut!(permit);
        loop {
            let became_idle = self.became_idle.notified();
            futures::pin_mut!(became_idle);
            // Registered before looking, so that a connection becoming idle in between is seen.
            became_idle.as_mut().enable();
            if self.evict_longest_idle() {
                break;
            }
            tokio::select! {
                permit = &mut permit => return permit.ok().map(|permit| self.slot(permit)),
                () = became_idle => {}
            }
        }
        permit.await.ok().map(|permit| self.slot(permit))
    }

    /// Returns once every connection has closed.
    pub(crate) async fn all_closed(&self) {
        // Acquiring fails only on a closed semaphore, which nothing closes.
        let _ = self.slots.acquire_many(self.max).await;
    }

    fn slot(&self, permit: OwnedSemaphorePermit) -> Slot {
        self.open.inc();
        Slot {
            _permit: permit,
            open: self.open.clone(),
        }
    }

    fn queue(&self) -> MutexGuard<'_, IdleQueue> {
        // The queue is consistent after every statement, so a panic elsewhere cannot break it.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells the connection idle the longest to close; false when none is idle.
    fn evict_longest_idle(&self) -> bool {
        let mut queue = self.queue();
        while let Some((_, evict)) = queue.waiting.pop_first() {
            // A connection that has just become busy again no longer listens: try the next.
            if evict.send(()).is_ok() {
                return true;
            }
        }
        false
    }

    /// Queues an idle connection, until the returned entry is dropped.
    fn enter_idle(&self) -> (IdleEntry<'_>, oneshot::Receiver<()>) {
        let (evict, evicted) = oneshot::channel();
        let key = {
            let mut queue = self.queue();
            let key = queue.next;
            queue.next += 1;
            queue.waiting.insert(key, evict);
            key
        };
        self.became_idle.notify_waiters();
        (
            IdleEntry {
                connections: self,
                key,
            },
            evicted,
        )
    }

    /// Returns when the connection whose requests `activity` counts is to be closed for
    /// idleness: after `timeout` without a request in flight, or when it is evicted as the
    /// connection idle the longest.
    pub(crate) async fn until_idle(&self, activity: &Activity, timeout: Duration) -> Close {
        let mut in_flight = activity.0.subscribe();
        loop {
            // `activity` holds a sender while this borrows it, so the waits below end on a
            // change of the count, never on a closed channel; were it closed, closing the
            // connection would be the safe answer.
            if in_flight.wait_for(|n| *n == 0).await.is_err() {
                return Close::Idle;
            }
            let (_entry, evicted) = self.enter_idle();
            tokio::select! {
                () = tokio::time::sleep(timeout) => return Close::Idle,
                _ = evicted => return Close::Evicted,
                // Any request, however short, starts the idle time anew.
                changed = in_flight.changed() => if changed.is_err() {
                    return Close::Idle;
                },
            }
        }
    }
}

/// An idle connection's place in the queue, left when dropped.
struct IdleEntry<'a> {
    connections: &'a Connections,
    key: u64,
}

impl Drop for IdleEntry<'_> {
    fn drop(&mut self) {
        self.connections.queue().waiting.remove(&self.key);
    }
}

/// One open connection's place under the bound, freed when dropped.
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
    open: Gauge,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.dec();
    }
}

/// The number of requests in flight on one connection.
#[derive(Clone)]
pub(crate) struct Activity(watch::Sender<usize>);

impl Default for Activity {
    fn default() -> Self {
        Activity(watch::Sender::new(0))
    }
}

impl Activity {
    /// Counts a request in flight until the returned guard is dropped.
    pub(crate) fn request(&self) -> InFlight {
        self.0.send_modify(|n| *n += 1);
        InFlight(self.0.clone())
    }
}

/// A request in flight; dropping it ends the request.
pub(crate) struct InFlight(watch::Sender<usize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// A response body that keeps its request in flight until hyper has written it and drops it
/// (or the connection ends first).
pub(crate) struct InFlightBody<B> {
    body: B,
    _in_flight: InFlight,
}

impl<B> InFlightBody<B> {
    /// `body`, keeping `in_flight` until it is dropped.
    pub(crate) fn new(body: B, in_flight: InFlight) -> Self {
        InFlightBody {
            body,
            _in_flight: in_flight,
        }
    }
}

impl<B: Body + Unpin> Body for InFlightBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
