//! [`NodeShapes`]: the shape of every Node, kept by a Node watch of the webhook's and of the
//! reconciler's, and read by every feasibility check they make.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::api::core::v1::Node;

use super::NodeShape;
use super::kinds::{NodeKinds, NodeName, NodeTraits, intern};

/// The shape of every Node, fed by a Node watch: what feasibility reads of each (name, labels,
/// taints that keep Pods off, allocatable, cordoned), not the Node objects, whose status
/// (images, conditions, addresses) is most of their size. Nodes of one kind (a node pool) share
/// one copy of what they have in common, so a node costs little more than its name. Cheap to
/// clone; clones share the shapes.
///
/// Each change reports whether a shape changed, so a watcher can wake what waits on the nodes
/// only then: a kubelet's status updates change conditions and heartbeats, rarely a shape.
#[derive(Clone, Default)]
pub struct NodeShapes {
    inner: Arc<RwLock<ShapesInner>>,
}

/// A Node as kept: its kind's traits (shared) and its hostname label.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    traits: Arc<NodeTraits>,
    hostname: Option<Arc<str>>,
}

type ByName = BTreeMap<Arc<str>, Entry>;

#[derive(Default)]
struct ShapesInner {
    by_name: ByName,
    /// A relist in progress: the Nodes listed so far, replacing `by_name` when it completes.
    relist: Option<ByName>,
    /// Every kind's traits, once.
    interned: BTreeSet<Arc<NodeTraits>>,
    /// The nodes by kind, built on the first read after a change.
    snapshot: Option<Arc<NodeKinds>>,
}

impl ShapesInner {
    fn entry(&mut self, shape: NodeShape) -> (Arc<str>, Entry) {
        let (traits, NodeName { name, hostname }) = shape.split();
        let traits = intern(&mut self.interned, traits);
        (name, Entry { traits, hostname })
    }

    fn changed(&mut self) {
        self.snapshot = None;
    }
}

impl NodeShapes {
    /// A relist starts: the shapes stay as they are until [`Self::end_relist`].
    pub fn begin_relist(&self) {
        self.write().relist = Some(BTreeMap::new());
    }

    /// One Node of the relist in progress.
    pub fn relisted(&self, node: &Node) {
        let mut inner = self.write();
        let (name, entry) = inner.entry(NodeShape::of(node));
        inner
            .relist
            .get_or_insert_with(BTreeMap::new)
            .insert(name, entry);
    }

    /// The relist is complete: its Nodes replace every shape. Whether any shape changed.
    pub fn end_relist(&self) -> bool {
        let mut inner = self.write();
        let listed = inner.relist.take().unwrap_or_default();
        let changed = listed != inner.by_name;
        if changed {
            inner.by_name = listed;
            inner.changed();
        }
        changed
    }

    /// A Node was added or changed. Whether its shape is new or changed.
    pub fn apply(&self, node: &Node) -> bool {
        let mut inner = self.write();
        let (name, entry) = inner.entry(NodeShape::of(node));
        if inner.by_name.get(&name) == Some(&entry) {
            return false;
        }
        inner.by_name.insert(name, entry);
        inner.changed();
        true
    }

    /// The Node `name` was deleted. Whether it had a shape.
    pub fn delete(&self, name: &str) -> bool {
        let mut inner = self.write();
        let removed = inner.by_name.remove(name).is_some();
        if removed {
            inner.changed();
        }
        removed
    }

    /// Every Node, by kind (shared until the next change).
    pub fn snapshot(&self) -> Arc<NodeKinds> {
        if let Some(snapshot) = &self.read().snapshot {
            return snapshot.clone();
        }
        let mut inner = self.write();
        if let Some(snapshot) = &inner.snapshot {
            return snapshot.clone();
        }
        // Traits no Node has any more (only the interning set and earlier snapshots hold
        // them) are let go; a snapshot still read keeps its own.
        inner
            .interned
            .retain(|traits| Arc::strong_count(traits) > 1);
        let nodes = inner.by_name.iter().map(|(name, entry)| {
            let node = NodeName {
                name: name.clone(),
                hostname: entry.hostname.clone(),
            };
            (entry.traits.clone(), node)
        });
        let snapshot = Arc::new(NodeKinds::grouped(nodes));
        inner.snapshot = Some(snapshot.clone());
        snapshot
    }

    // A panic while the lock was held left whole shapes behind (every write replaces entries),
    // so a poisoned lock is still read.
    fn read(&self) -> RwLockReadGuard<'_, ShapesInner> {
        self.inner
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, ShapesInner> {
        self.inner
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(name: &str, cpu: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu}, "images": [{"names": ["rayproject/ray"]}]}}))
        .expect("a Node")
    }

    fn names_and_cpus(shapes: &NodeShapes) -> Vec<String> {
        shapes
            .snapshot()
            .shapes()
            .iter()
            .map(|n| format!("{}={}", n.name, n.allocatable["cpu"]))
            .collect()
    }

    #[test]
    fn shapes_follow_the_watch_and_a_relist_replaces_them_when_it_completes() {
        let shapes = NodeShapes::default();
        assert!(shapes.snapshot().is_empty());
        assert!(shapes.apply(&node("a", "2")));
        assert!(shapes.apply(&node("b", "4")));
        let before = shapes.snapshot();
        assert_eq!(names_and_cpus(&shapes), ["a=2", "b=4"]);
        // An update that changes nothing feasibility reads is no change, and keeps the snapshot.
        assert!(!shapes.apply(&node("a", "2")));
        assert!(Arc::ptr_eq(&before, &shapes.snapshot()));
        assert!(shapes.apply(&node("a", "8")));
        assert_eq!(names_and_cpus(&shapes), ["a=8", "b=4"]);
        assert!(shapes.delete("b"));
        assert!(!shapes.delete("b"));
        assert_eq!(names_and_cpus(&shapes), ["a=8"]);
        // During a relist the old shapes stay; once it completes only the listed ones are left.
        shapes.begin_relist();
        shapes.relisted(&node("c", "1"));
        assert_eq!(names_and_cpus(&shapes), ["a=8"]);
        assert!(shapes.end_relist());
        assert_eq!(names_and_cpus(&shapes), ["c=1"]);
        // A relist that finds what is already known changes nothing.
        let before = shapes.snapshot();
        shapes.begin_relist();
        shapes.relisted(&node("c", "1"));
        assert!(!shapes.end_relist());
        assert!(Arc::ptr_eq(&before, &shapes.snapshot()));
    }

    fn pool_node(name: &str, zone: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi"}}}))
        .expect("a Node")
    }

    #[test]
    fn nodes_that_differ_only_in_name_and_hostname_are_one_kind() {
        let shapes = NodeShapes::default();
        for i in 0..100 {
            shapes.apply(&pool_node(&format!("pool-a-{i:03}"), "a"));
        }
        shapes.apply(&pool_node("pool-b-000", "b"));
        {
            let kinds = shapes.snapshot();
            assert_eq!((kinds.len(), kinds.kind_count()), (101, 2));
            // Each node keeps its own hostname label.
            let all = kinds.shapes();
            assert_eq!(all[7].labels["kubernetes.io/hostname"], "pool-a-007");
            assert_eq!(all[100].labels["topology.kubernetes.io/zone"], "b");
        }
        // A node that changes kind leaves its old kind; a kind no node has is let go.
        shapes.apply(&pool_node("pool-b-000", "a"));
        let kinds = shapes.snapshot();
        assert_eq!((kinds.len(), kinds.kind_count()), (101, 1));
        assert_eq!(shapes.read().interned.len(), 1);
    }
}
