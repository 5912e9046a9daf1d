//! New objects enter a controller a few at a time, so a pass that carries a started object
//! forward never waits behind a burst of first passes (docs/reconciler.md, "First passes wait
//! their turn").
//!
//! kube-runtime's runner, while every one of its `--concurrency` slots is busy, moves every due
//! request into one set and later takes them from it in the set's iteration order, not in the
//! order they came. 500 RayJobs created at once put 500 first passes into that set, and a
//! RayJob whose cluster had just become ready waited behind a random share of them: up to the
//! whole burst. [`gate`] keeps the first passes of new objects outside the controller, in the
//! order they came, and lets at most `limit` of them in at once, queued or running; a place is
//! given back when its pass ends ([`FirstPasses::ended`]). Every other trigger (a started
//! object's own change, a child's) goes straight in, and finds the slots the first passes may
//! not take.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::{FutureExt, SinkExt, Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How long a first pass let in keeps its place at most: the controller skips an object deleted
/// in the meantime without calling the reconciler, so its pass never ends.
pub const ADMITTED_HOLD: Duration = Duration::from_secs(10);
/// Objects buffered on their way to the controller before the gate waits for it.
const BUFFER: usize = 1024;

/// Whether an object's next pass is its first: no pass has left a mark on it yet.
pub type IsNew<K> = fn(&K) -> bool;

/// Each first pass let in and not yet ended, with its permit and when it was let in.
type Admitted<K> = HashMap<ObjectRef<K>, (OwnedSemaphorePermit, Instant)>;

/// The first passes let into a controller and not yet ended, each holding a permit.
pub struct FirstPasses<K: Resource> {
    admitted: Arc<Mutex<Admitted<K>>>,
}

impl<K: Resource> Clone for FirstPasses<K> {
    fn clone(&self) -> Self {
        Self {
            admitted: self.admitted.clone(),
        }
    }
}

impl<K> FirstPasses<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// A pass of `object` has ended: if it was let in as a first pass, the next one may go.
    pub fn ended(&self, object: &K) {
        self.lock().remove(&ObjectRef::from_obj(object));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Admitted<K>> {
        self.admitted.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A controller's trigger as [`gate`] passes it on.
pub struct Gated<K: Resource> {
    /// Started objects, each change passed on as it comes, and new objects, at most `limit`
    /// not yet ended at a time: the controller's trigger.
    pub trigger: mpsc::Receiver<Result<K, watcher::Error>>,
    /// What the controller's passes report their end to.
    pub first_passes: FirstPasses<K>,
    /// Sorts the trigger until it ends or the controller stops taking from it.
    pub run: BoxFuture<'static, ()>,
}

/// Passes on `trigger` (the objects a controller reconciles, as their cache delivers them):
/// the changes of started objects at once, and the new objects (`is_new`) `limit` (at least
/// one) at a time in the order they came, as `store` holds them when their turn comes. A new
/// object that changes while it waits is let in once; one that starts meanwhile (another pass
/// of it ran) goes on at once; one no longer in `store` when its turn comes is dropped.
pub fn gate<K>(
    trigger: impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    store: Store<K>,
    is_new: IsNew<K>,
    limit: usize,
) -> Gated<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let (mut sender, receiver) = mpsc::channel(BUFFER);
    let first_passes = FirstPasses {
        admitted: Arc::default(),
    };
    let holding = first_passes.clone();
    let permits = Arc::new(Semaphore::new(limit.max(1)));
    let run = async move {
        let mut trigger = std::pin::pin!(trigger.fuse());
        let mut waiting = Waiting::default();
        let mut expiry = tokio::time::interval(ADMITTED_HOLD / 2);
        loop {
            tokio::select! {
                item = trigger.next() => {
                    let forward = match item {
                        None => return,
                        Some(Ok(object)) if is_new(&object) => {
                            waiting.push(ObjectRef::from_obj(&object));
                            continue;
                        }
                        Some(Ok(object)) => {
                            waiting.remove(&ObjectRef::from_obj(&object));
                            Ok(object)
                        }
                        Some(Err(error)) => Err(error),
                    };
                    if sender.send(forward).await.is_err() {
                        return;
                    }
                }
                permit = permits.clone().acquire_owned(), if !waiting.is_empty() => {
                    let Ok(permit) = permit else { return };
                    let Some(next) = waiting.pop_present(&store) else { continue };
                    holding.lock().insert(ObjectRef::from_obj(&*next), (permit, Instant::now()));
                    if sender.send(Ok(K::clone(&next))).await.is_err() {
                        return;
                    }
                }
                _ = expiry.tick() => {
                    holding.lock().retain(|_, (_, at)| at.elapsed() < ADMITTED_HOLD);
                }
            }
        }
    }
    .boxed();
    Gated {
        trigger: receiver,
        first_passes,
        run,
    }
}

/// New objects waiting to be let in, first come first in, each once.
struct Waiting<K: Resource> {
    order: VecDeque<ObjectRef<K>>,
    members: HashSet<ObjectRef<K>>,
}

impl<K: Resource> Default for Waiting<K> {
    fn default() -> Self {
        Self {
            order: VecDeque::new(),
            members: HashSet::new(),
        }
    }
}

impl<K> Waiting<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn push(&mut self, object: ObjectRef<K>) {
        if self.members.insert(object.clone()) {
            self.order.push_back(object);
        }
    }

    fn remove(&mut self, object: &ObjectRef<K>) {
        if self.members.remove(object) {
            self.order.retain(|waiting| waiting != object);
        }
    }

    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The first waiting object that `store` still holds, as it holds it; those before it are
    /// gone.
    fn pop_present(&mut self, store: &Store<K>) -> Option<Arc<K>> {
        while let Some(object) = self.order.pop_front() {
            self.members.remove(&object);
            if let Some(stored) = store.get(&object) {
                return Some(stored);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    use super::*;

    /// A ConfigMap stands in for a Ray object: it is new while it has no data.
    fn object(name: &str, started: bool) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.name = Some(name.to_string());
        object.metadata.namespace = Some("team".to_string());
        object.data = started.then(|| [("started".to_string(), "yes".to_string())].into());
        object
    }

    fn is_new(object: &ConfigMap) -> bool {
        object.data.is_none()
    }

    struct Fixture {
        trigger: mpsc::UnboundedSender<Result<ConfigMap, watcher::Error>>,
        writer: Writer<ConfigMap>,
        gated: Gated<ConfigMap>,
    }

    impl Fixture {
        /// A gate letting in `limit` at a time, its loop running on the test's runtime.
        fn new(limit: usize) -> Self {
            let (trigger, receiver) = mpsc::unbounded();
            let (store, writer) = reflector::store();
            let mut gated = gate(receiver, store, is_new, limit);
            let run = std::mem::replace(&mut gated.run, futures::future::ready(()).boxed());
            tokio::spawn(run);
            Self {
                trigger,
                writer,
                gated,
            }
        }

        /// `object` stored and delivered to the gate, as its cache does.
        fn deliver(&mut self, object: ConfigMap) {
            self.writer
                .apply_watcher_event(&Event::Apply(object.clone()));
            self.trigger
                .unbounded_send(Ok(object))
                .expect("gate running");
        }

        /// The objects passed on since the last call: (started ones, new ones).
        async fn passed(&mut self) -> (Vec<String>, Vec<String>) {
            settle().await;
            let (mut started, mut new) = (Vec::new(), Vec::new());
            while let Ok(Ok(object)) = self.gated.trigger.try_recv() {
                let name = object.metadata.name.clone().unwrap_or_default();
                if is_new(&object) {
                    new.push(name);
                } else {
                    started.push(name);
                }
            }
            (started, new)
        }

        async fn admitted(&mut self) -> Vec<String> {
            let (started, new) = self.passed().await;
            assert!(started.is_empty(), "{started:?}");
            new
        }

        async fn straight(&mut self) -> Vec<String> {
            let (started, new) = self.passed().await;
            assert!(new.is_empty(), "{new:?}");
            started
        }
    }

    /// Lets the gate's loop run until it waits.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn started_objects_pass_straight_while_new_ones_go_in_a_few_at_a_time_in_order() {
        let mut fixture = Fixture::new(2);
        for n in 0..5 {
            fixture.deliver(object(&format!("new-{n}"), false));
        }
        fixture.deliver(object("started", true));
        assert_eq!(
            fixture.passed().await,
            (vec!["started".into()], vec!["new-0".into(), "new-1".into()])
        );
        // Nothing new until a first pass ends; a started object's change still goes on.
        fixture.deliver(object("started", true));
        assert_eq!(fixture.straight().await, ["started"]);
        fixture.gated.first_passes.ended(&object("new-1", false));
        assert_eq!(fixture.admitted().await, ["new-2"]);
        // A pass of an object that was not let in as a first pass frees nothing.
        fixture.gated.first_passes.ended(&object("started", true));
        assert!(fixture.admitted().await.is_empty());
        fixture.gated.first_passes.ended(&object("new-0", false));
        fixture.gated.first_passes.ended(&object("new-2", false));
        assert_eq!(fixture.admitted().await, ["new-3", "new-4"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_object_is_let_in_once_and_not_at_all_once_started_or_gone() {
        let mut fixture = Fixture::new(1);
        fixture.deliver(object("first", false));
        assert_eq!(fixture.admitted().await, ["first"]);
        for name in ["changed", "starts", "deleted", "changed", "last"] {
            fixture.deliver(object(name, false));
        }
        // `starts` is started by a pass that ran meanwhile: it goes straight on instead.
        fixture.deliver(object("starts", true));
        assert_eq!(fixture.straight().await, ["starts"]);
        fixture
            .writer
            .apply_watcher_event(&Event::Delete(object("deleted", false)));
        for (started, expected) in [("first", "changed"), ("changed", "last")] {
            fixture.gated.first_passes.ended(&object(started, false));
            assert_eq!(fixture.admitted().await, [expected]);
        }
        fixture.gated.first_passes.ended(&object("last", false));
        assert!(fixture.admitted().await.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_first_pass_that_never_ends_gives_its_place_back_after_the_hold() {
        let mut fixture = Fixture::new(1);
        fixture.deliver(object("skipped", false));
        fixture.deliver(object("next", false));
        assert_eq!(fixture.admitted().await, ["skipped"]);
        tokio::time::sleep(ADMITTED_HOLD / 2).await;
        assert!(fixture.admitted().await.is_empty());
        tokio::time::sleep(ADMITTED_HOLD).await;
        assert_eq!(fixture.admitted().await, ["next"]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_gate_stops_with_its_trigger() {
        let (trigger, receiver) = mpsc::unbounded::<Result<ConfigMap, watcher::Error>>();
        let gated = gate(receiver, reflector::store().0, is_new, 1);
        drop(trigger);
        tokio::time::timeout(Duration::from_secs(1), gated.run)
            .await
            .expect("the gate's loop ends with its trigger");
    }
}
