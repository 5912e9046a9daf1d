//! [`NodeKinds`]: the nodes feasibility judges an object against, grouped by kind, so that a
//! check costs a step per kind of node (a node pool, a template), not per node.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::quantity::ResourceQuantity;
use crate::queue_policy::NodeTemplate;
use crate::sizing::Resources;

use super::{NodeShape, NodeTaint};

/// The label whose value differs from node to node (it is the node's name, or close to it):
/// left out of a kind, kept with each node.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// What the nodes of one kind share: everything feasibility reads of a node but its name and
/// its [`HOSTNAME_LABEL`].
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct NodeTraits {
    /// The node's labels but [`HOSTNAME_LABEL`].
    pub(super) labels: BTreeMap<String, String>,
    pub(super) taints: Vec<NodeTaint>,
    pub(super) allocatable: Resources,
    pub(super) unschedulable: bool,
    pub(super) template: bool,
}

/// What differs between the nodes of one kind: the name, and the [`HOSTNAME_LABEL`], most
/// often the same string (then shared).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct NodeName {
    pub(super) name: Arc<str>,
    pub(super) hostname: Option<Arc<str>>,
}

impl NodeShape {
    /// The shape as what it shares with nodes of its kind and what is its own.
    pub(super) fn split(self) -> (NodeTraits, NodeName) {
        let NodeShape {
            name,
            mut labels,
            taints,
            allocatable,
            unschedulable,
            template,
        } = self;
        let name: Arc<str> = name.into();
        let hostname = labels.remove(HOSTNAME_LABEL).map(|hostname| {
            if *hostname == *name {
                name.clone()
            } else {
                hostname.into()
            }
        });
        let traits = NodeTraits {
            labels,
            taints,
            allocatable,
            unschedulable,
            template,
        };
        (traits, NodeName { name, hostname })
    }
}

/// One `traits`, shared by every node that has them.
pub(super) fn intern(
    interned: &mut BTreeSet<Arc<NodeTraits>>,
    traits: NodeTraits,
) -> Arc<NodeTraits> {
    if let Some(known) = interned.get(&traits) {
        return known.clone();
    }
    let traits = Arc::new(traits);
    interned.insert(traits.clone());
    traits
}

/// Nodes of one kind: their shared traits and, in name order, each node's own name.
#[derive(Clone, Debug)]
struct NodeKind {
    traits: Arc<NodeTraits>,
    nodes: Arc<[NodeName]>,
}

/// The nodes feasibility judges an object against ([`super::check_feasibility`]), grouped by
/// kind: nodes that differ only in their name and `kubernetes.io/hostname` label (those of a
/// node pool) are one kind, checked once. Cheap to clone: kinds share their nodes.
#[derive(Clone, Debug, Default)]
pub struct NodeKinds {
    /// In the order of each kind's first node's name.
    kinds: Vec<NodeKind>,
}

impl NodeKinds {
    /// These shapes, by kind (of shapes with the same name, the last).
    pub fn from_shapes(shapes: impl IntoIterator<Item = NodeShape>) -> Self {
        let by_name: BTreeMap<String, NodeShape> = shapes
            .into_iter()
            .map(|shape| (shape.name.clone(), shape))
            .collect();
        let mut interned = BTreeSet::new();
        Self::grouped(by_name.into_values().map(|shape| {
            let (traits, name) = shape.split();
            (intern(&mut interned, traits), name)
        }))
    }

    /// `nodes` (in name order, their traits interned) grouped by kind.
    pub(super) fn grouped(nodes: impl IntoIterator<Item = (Arc<NodeTraits>, NodeName)>) -> Self {
        let mut index: HashMap<*const NodeTraits, usize> = HashMap::new();
        let mut groups: Vec<(Arc<NodeTraits>, Vec<NodeName>)> = Vec::new();
        for (traits, name) in nodes {
            let at = *index.entry(Arc::as_ptr(&traits)).or_insert_with(|| {
                groups.push((traits.clone(), Vec::new()));
                groups.len() - 1
            });
            groups[at].1.push(name);
        }
        let kinds = groups
            .into_iter()
            .map(|(traits, nodes)| NodeKind {
                traits,
                nodes: nodes.into(),
            })
            .collect();
        NodeKinds { kinds }
    }

    /// These nodes and the nodes of `templates`, the nodes an autoscaler can add (the node
    /// templates of the object's QueuePolicies, [`crate::queue_policy::node_templates`]): a
    /// kind each. Borrowed when there is no template.
    pub fn with_templates(&self, templates: &[&NodeTemplate]) -> Cow<'_, NodeKinds> {
        if templates.is_empty() {
            return Cow::Borrowed(self);
        }
        let mut all = self.clone();
        all.kinds.extend(templates.iter().map(|template| {
            let (traits, name) = NodeShape::of_template(template).split();
            NodeKind {
                traits: Arc::new(traits),
                nodes: Arc::new([name]),
            }
        }));
        Cow::Owned(all)
    }

    /// How many nodes (and node templates) there are.
    pub fn len(&self) -> usize {
        self.kinds.iter().map(|kind| kind.nodes.len()).sum()
    }

    /// Whether there is no node (and no node template).
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// How many kinds the nodes come in.
    pub fn kind_count(&self) -> usize {
        self.kinds.len()
    }

    /// The names of the nodes (and node templates), in name order.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = (self.kinds.iter())
            .flat_map(|kind| kind.nodes.iter().map(|node| &*node.name))
            .collect();
        names.sort_unstable();
        names
    }

    /// Every node's shape, in name order.
    #[cfg(test)]
    pub(super) fn shapes(&self) -> Vec<NodeShape> {
        let mut shapes: Vec<NodeShape> = (self.kinds.iter())
            .flat_map(|kind| {
                kind.nodes.iter().map(|node| {
                    let traits = NodeTraits::clone(&kind.traits);
                    let mut labels = traits.labels;
                    if let Some(hostname) = &node.hostname {
                        labels.insert(HOSTNAME_LABEL.to_string(), hostname.to_string());
                    }
                    NodeShape {
                        name: node.name.to_string(),
                        labels,
                        taints: traits.taints,
                        allocatable: traits.allocatable,
                        unschedulable: traits.unschedulable,
                        template: traits.template,
                    }
                })
            })
            .collect();
        shapes.sort_by(|a, b| a.name.cmp(&b.name));
        shapes
    }

    /// The schedulable nodes as candidates for one Pod: a candidate per kind, or with
    /// `per_node` (the Pod's placement reads what differs between nodes of a kind) per node.
    pub(super) fn candidates(&self, per_node: bool) -> Vec<Candidate<'_>> {
        let schedulable = self.kinds.iter().filter(|kind| !kind.traits.unschedulable);
        if per_node {
            schedulable
                .flat_map(|kind| {
                    (kind.nodes.chunks(1)).map(|one| Candidate {
                        traits: &kind.traits,
                        nodes: one,
                    })
                })
                .collect()
        } else {
            schedulable
                .map(|kind| Candidate {
                    traits: &kind.traits,
                    nodes: &kind.nodes,
                })
                .collect()
        }
    }
}

/// Nodes that every check of one Pod answers alike: a kind's nodes, or one of them.
#[derive(Clone, Copy)]
pub(super) struct Candidate<'k> {
    pub(super) traits: &'k NodeTraits,
    /// At least one node.
    pub(super) nodes: &'k [NodeName],
}

impl Candidate<'_> {
    /// The value of the label `key` (of the first node, for [`HOSTNAME_LABEL`]).
    pub(super) fn label(&self, key: &str) -> Option<&str> {
        if key == HOSTNAME_LABEL {
            self.nodes.first()?.hostname.as_deref()
        } else {
            self.traits.labels.get(key).map(String::as_str)
        }
    }

    /// The first node's name.
    pub(super) fn name(&self) -> &str {
        self.nodes.first().map_or("", |node| &node.name)
    }

    /// How many nodes the candidate stands for.
    pub(super) fn count(&self) -> i64 {
        i64::try_from(self.nodes.len()).unwrap_or(i64::MAX)
    }

    /// How findings name `node`: its name, or `template <name>` for a node template.
    pub(super) fn label_of(&self, node: &NodeName) -> String {
        if self.traits.template {
            format!("template {}", node.name)
        } else {
            node.name.to_string()
        }
    }

    /// The allocatable amount of `resource` on each of the nodes (zero when not reported).
    pub(super) fn offers(&self, resource: &str) -> ResourceQuantity {
        self.traits
            .allocatable
            .get(resource)
            .copied()
            .unwrap_or(ResourceQuantity::ZERO)
    }
}

/// Whether a placement that reads `label_keys` (and `metadata.name` with `reads_name`) reads
/// what differs between the nodes of a kind.
pub(super) fn reads_per_node<'a>(
    mut label_keys: impl Iterator<Item = &'a str>,
    reads_name: bool,
) -> bool {
    reads_name || label_keys.any(|key| key == HOSTNAME_LABEL)
}
