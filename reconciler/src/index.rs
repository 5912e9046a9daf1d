//! Secondary indexes over a watch cache: the names of the objects of a namespace that share one
//! value of a label or annotation.
//!
//! kube's [`Store`] finds an object by namespace and name only, so a pass that wanted the Pods
//! of one cluster walked every cached Pod: O(Pods) per pass, and O(Pods²) over a burst of
//! RayJobs (docs/reconciler.md, "Reads come from watch caches"). An [`Index`] is kept by the
//! watch that fills the store, from the same events, and answers with names, which the store
//! resolves; the objects themselves are stored once.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

/// The value an object is indexed by (a label's or an annotation's), if it has one.
pub type IndexKey<K> = fn(&K) -> Option<&str>;

/// The names of the objects of each namespace by their value of one key.
///
/// The index is updated just before the store from the same watch events, so a pass may find
/// a name the store does not hold yet, or miss an object for the moment between the two
/// updates: what a watch cache that is a little behind shows anyway. [`Index::objects`]
/// resolves the names in the store and answers only the objects the store holds with the value
/// asked for.
pub struct Index<K> {
    key: IndexKey<K>,
    state: Arc<RwLock<State>>,
}

impl<K> Clone for Index<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key,
            state: self.state.clone(),
        }
    }
}

/// What the index holds: the entries as last listed and watched, and those of a relist in
/// progress, which replace them when it is complete (as kube's store does).
#[derive(Default)]
struct State {
    live: Entries,
    relisting: Option<Entries>,
}

/// Names by (namespace, value), and each object's value, to move an object whose value changed.
#[derive(Default)]
struct Entries {
    names: HashMap<(String, String), BTreeSet<String>>,
    values: HashMap<(String, String), String>,
}

impl Entries {
    fn insert(&mut self, namespace: &str, name: &str, value: Option<&str>) {
        self.remove(namespace, name);
        if let Some(value) = value {
            self.names
                .entry((namespace.to_string(), value.to_string()))
                .or_default()
                .insert(name.to_string());
            self.values
                .insert((namespace.to_string(), name.to_string()), value.to_string());
        }
    }

    fn remove(&mut self, namespace: &str, name: &str) {
        let Some(value) = self
            .values
            .remove(&(namespace.to_string(), name.to_string()))
        else {
            return;
        };
        let key = (namespace.to_string(), value);
        if let Some(names) = self.names.get_mut(&key) {
            names.remove(name);
            if names.is_empty() {
                self.names.remove(&key);
            }
        }
    }
}

impl<K> Index<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// An empty index of objects by `key`.
    pub fn new(key: IndexKey<K>) -> Self {
        Self {
            key,
            state: Arc::default(),
        }
    }

    /// Takes in one watch event, as the store does.
    pub(crate) fn apply(&self, event: &watcher::Event<K>) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        let key = self.key;
        let place = |object: &K| {
            let meta = object.meta();
            (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            )
        };
        match event {
            watcher::Event::Apply(object) => {
                let (namespace, name) = place(object);
                state.live.insert(&namespace, &name, key(object));
            }
            watcher::Event::Delete(object) => {
                let (namespace, name) = place(object);
                state.live.remove(&namespace, &name);
            }
            watcher::Event::Init => state.relisting = Some(Entries::default()),
            watcher::Event::InitApply(object) => {
                let (namespace, name) = place(object);
                if let Some(relisting) = state.relisting.as_mut() {
                    relisting.insert(&namespace, &name, key(object));
                }
            }
            watcher::Event::InitDone => {
                if let Some(relisted) = state.relisting.take() {
                    state.live = relisted;
                }
            }
        }
    }

    /// The objects of `namespace` whose value is `value`, as `store` has them, in name order: an
    /// object the store holds with another value (its update not yet in the index) is left out.
    pub fn objects(&self, store: &Store<K>, namespace: &str, value: &str) -> Vec<Arc<K>> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        let Some(names) = state
            .live
            .names
            .get(&(namespace.to_string(), value.to_string()))
        else {
            return Vec::new();
        };
        names
            .iter()
            .filter_map(|name| store.get(&ObjectRef::new(name).within(namespace)))
            .filter(|object| (self.key)(object) == Some(value))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;

    fn cluster_label(pod: &Pod) -> Option<&str> {
        pod.metadata
            .labels
            .as_ref()?
            .get("ray.io/cluster")
            .map(String::as_str)
    }

    fn pod(namespace: &str, name: &str, cluster: Option<&str>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some(namespace.to_string());
        pod.metadata.name = Some(name.to_string());
        pod.metadata.labels =
            cluster.map(|c| [("ray.io/cluster".to_string(), c.to_string())].into());
        pod
    }

    /// An index and a store fed the same events, as `Cache::run` feeds them.
    struct Fed {
        index: Index<Pod>,
        store: Store<Pod>,
        writer: reflector::store::Writer<Pod>,
    }

    impl Fed {
        fn new() -> Self {
            let (store, writer) = reflector::store();
            Self {
                index: Index::new(cluster_label),
                store,
                writer,
            }
        }

        fn feed(&mut self, event: Event<Pod>) {
            self.index.apply(&event);
            self.writer.apply_watcher_event(&event);
        }

        fn names(&self, namespace: &str, cluster: &str) -> Vec<String> {
            self.index
                .objects(&self.store, namespace, cluster)
                .iter()
                .map(|pod| pod.metadata.name.clone().unwrap_or_default())
                .collect()
        }
    }

    #[test]
    fn finds_the_objects_of_one_value_in_one_namespace() {
        let mut fed = Fed::new();
        fed.feed(Event::Init);
        for (namespace, name, cluster) in [
            ("team", "a-head", Some("a")),
            ("team", "a-worker", Some("a")),
            ("team", "b-head", Some("b")),
            ("other", "a-head", Some("a")),
            ("team", "unlabelled", None),
        ] {
            fed.feed(Event::InitApply(pod(namespace, name, cluster)));
        }
        fed.feed(Event::InitDone);
        assert_eq!(fed.names("team", "a"), ["a-head", "a-worker"]);
        assert_eq!(fed.names("team", "b"), ["b-head"]);
        assert_eq!(fed.names("other", "a"), ["a-head"]);
        assert!(fed.names("team", "c").is_empty());
    }

    #[test]
    fn follows_changes_of_the_value_and_deletions() {
        let mut fed = Fed::new();
        fed.feed(Event::Apply(pod("team", "p", Some("a"))));
        fed.feed(Event::Apply(pod("team", "q", Some("a"))));
        fed.feed(Event::Apply(pod("team", "p", Some("b"))));
        assert_eq!(fed.names("team", "a"), ["q"]);
        assert_eq!(fed.names("team", "b"), ["p"]);
        fed.feed(Event::Apply(pod("team", "p", None)));
        assert!(fed.names("team", "b").is_empty());
        fed.feed(Event::Delete(pod("team", "q", Some("a"))));
        assert!(fed.names("team", "a").is_empty());
        let state = fed.index.state.read().expect("not poisoned");
        assert!(state.live.names.is_empty() && state.live.values.is_empty());
    }

    #[test]
    fn a_relist_replaces_the_entries_when_it_is_complete() {
        let mut fed = Fed::new();
        fed.feed(Event::Apply(pod("team", "gone", Some("a"))));
        fed.feed(Event::Init);
        fed.feed(Event::InitApply(pod("team", "new", Some("a"))));
        // Until the relist is complete, the index answers as the store does: from the old list.
        assert_eq!(fed.names("team", "a"), ["gone"]);
        fed.feed(Event::InitDone);
        assert_eq!(fed.names("team", "a"), ["new"]);
    }

    #[test]
    fn an_object_the_store_holds_with_another_value_is_not_answered() {
        let mut fed = Fed::new();
        fed.feed(Event::Apply(pod("team", "p", Some("a"))));
        // The store has the change before the index does.
        fed.writer
            .apply_watcher_event(&Event::Apply(pod("team", "p", Some("b"))));
        assert!(fed.names("team", "a").is_empty());
    }

    #[test]
    fn a_name_the_store_does_not_hold_is_not_answered() {
        let fed = Fed::new();
        fed.index.apply(&Event::Apply(pod("team", "p", Some("a"))));
        assert!(fed.names("team", "a").is_empty());
    }
}
