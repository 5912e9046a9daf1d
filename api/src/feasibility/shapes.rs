//! [`NodeShapes`]: the shape of every Node, kept by a Node watch of the webhook's and of the
//! reconciler's, and read by every feasibility check they make.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::api::core::v1::Node;

use super::NodeShape;

/// The shape of every Node, fed by a Node watch: what feasibility reads of each (name, labels,
/// taints that keep Pods off, allocatable, cordoned), not the Node objects, whose status
/// (images, conditions, addresses) is most of their size. Cheap to clone; clones share the
/// shapes.
///
/// Each change reports whether a shape changed, so a watcher can wake what waits on the nodes
/// only then: a kubelet's status updates change conditions and heartbeats, rarely a shape.
#[derive(Clone, Default)]
pub struct NodeShapes {
    inner: Arc<RwLock<ShapesInner>>,
}

#[derive(Default)]
struct ShapesInner {
    /// The shapes, by Node name.
    by_name: BTreeMap<String, Arc<NodeShape>>,
    /// A relist in progress: the shapes listed so far, replacing `by_name` when it completes.
    relist: Option<BTreeMap<String, Arc<NodeShape>>>,
    /// Every shape, built on the first read after a change.
    snapshot: Option<Arc<[Arc<NodeShape>]>>,
}

impl NodeShapes {
    /// Exactly these shapes.
    pub fn from_shapes(shapes: impl IntoIterator<Item = NodeShape>) -> Self {
        let by_name = shapes
            .into_iter()
            .map(|shape| (shape.name.clone(), Arc::new(shape)))
            .collect();
        NodeShapes {
            inner: Arc::new(RwLock::new(ShapesInner {
                by_name,
                ..ShapesInner::default()
            })),
        }
    }

    /// A relist starts: the shapes stay as they are until [`Self::end_relist`].
    pub fn begin_relist(&self) {
        self.write().relist = Some(BTreeMap::new());
    }

    /// One Node of the relist in progress.
    pub fn relisted(&self, node: &Node) {
        let shape = Arc::new(NodeShape::of(node));
        self.write()
            .relist
            .get_or_insert_with(BTreeMap::new)
            .insert(shape.name.clone(), shape);
    }

    /// The relist is complete: its Nodes replace every shape. Whether any shape changed.
    pub fn end_relist(&self) -> bool {
        let mut inner = self.write();
        let listed = inner.relist.take().unwrap_or_default();
        let changed = listed != inner.by_name;
        if changed {
            inner.by_name = listed;
            inner.snapshot = None;
        }
        changed
    }

    /// A Node was added or changed. Whether its shape is new or changed.
    pub fn apply(&self, node: &Node) -> bool {
        let shape = Arc::new(NodeShape::of(node));
        let mut inner = self.write();
        if inner.by_name.get(&shape.name) == Some(&shape) {
            return false;
        }
        inner.by_name.insert(shape.name.clone(), shape);
        inner.snapshot = None;
        true
    }

    /// The Node `name` was deleted. Whether it had a shape.
    pub fn delete(&self, name: &str) -> bool {
        let mut inner = self.write();
        let removed = inner.by_name.remove(name).is_some();
        if removed {
            inner.snapshot = None;
        }
        removed
    }

    /// Every Node's shape, in name order (shared until the next change).
    pub fn snapshot(&self) -> Arc<[Arc<NodeShape>]> {
        if let Some(snapshot) = &self.read().snapshot {
            return snapshot.clone();
        }
        let mut inner = self.write();
        let snapshot: Arc<[Arc<NodeShape>]> = inner.by_name.values().cloned().collect();
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
}
