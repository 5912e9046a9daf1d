//! Feasibility: could the Pods of a RayJob or RayCluster ever be scheduled on the cluster's
//! nodes, if the nodes were empty?
//!
//! [`check_feasibility`] takes the object after defaulting and sizing ([`crate::check`]) and a
//! snapshot of the nodes ([`NodeShape`], what the webhook caches of each Node) and reports, for
//! each kind of Pod the object makes (the head, each worker group's Pods, the RayJob's submitter
//! Pod where the submitter runs as a Pod), why no node could ever hold it:
//!
//! 1. the node is cordoned (`spec.unschedulable`): such nodes are left out entirely;
//! 2. the Pod's `nodeSelector` matches no node's labels;
//! 3. its required node affinity matches no node;
//! 4. every remaining node has a `NoSchedule` or `NoExecute` taint the Pod does not tolerate;
//! 5. no remaining node's allocatable resources cover the Pod's effective requests (each
//!    resource alone, then all of them together on one node);
//! 6. the group's required Pods (for a multi-host group `numOfHosts` Pods per replica) do not
//!    fit on the remaining nodes together, each node holding as many copies as its allocatable
//!    resources allow.
//!
//! Then the gang as a whole: each resource of the PodGroup's `minResources` against the sum of
//! the allocatable resources of all schedulable nodes. An empty cluster (no schedulable node) is
//! its own outcome, [`Feasibility::NoNodes`], never an infeasibility. An object whose
//! `spec.managedBy` hands it to another controller ([`keys::managed_elsewhere`], e.g. Kueue's
//! MultiKueue, which runs it on another cluster) makes no Pod here, so nothing is found. The
//! scheduler's rules this follows are described in docs/feasibility.md.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::check::{Typed, type_meta};
use crate::input::Document;
use crate::keys;
use crate::quantity::ResourceQuantity;
use crate::queue_policy::NodeTemplate;
use crate::ray::v1::{RayCluster, RayClusterSpec, RayJob};
use crate::sizing::{self, GangSize, Resources};

mod kinds;
mod shapes;
pub use kinds::NodeKinds;
pub use shapes::NodeShapes;

use kinds::{Candidate, reads_per_node};

/// A node as feasibility sees it: only what the checks read. [`NodeKinds`] groups them by kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeShape {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// The taints that keep Pods off the node: `NoSchedule` and `NoExecute` only
    /// (`PreferNoSchedule` never does).
    pub taints: Vec<NodeTaint>,
    /// `status.allocatable`; entries that are not valid quantities are left out.
    pub allocatable: Resources,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// A node an autoscaler can add as many of as needed (a QueuePolicy's node template), not
    /// one that exists.
    pub template: bool,
}

/// A taint that keeps Pods that do not tolerate it off a node.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeTaint {
    /// The taint's key.
    pub key: String,
    /// The taint's value; empty when it has none.
    pub value: String,
    /// `NoSchedule` or `NoExecute`.
    pub effect: String,
}

impl fmt::Display for NodeTaint {
    /// kubectl's form: `key=value:Effect`, or `key:Effect` without a value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect)
        }
    }
}

impl NodeShape {
    /// The shape of a Node object.
    pub fn of(node: &Node) -> NodeShape {
        let spec = node.spec.as_ref();
        let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        NodeShape {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: keeping_pods_off(spec.and_then(|s| s.taints.as_deref())),
            allocatable: quantities(allocatable),
            unschedulable: spec.and_then(|s| s.unschedulable) == Some(true),
            template: false,
        }
    }

    /// The shape of the nodes of `template` (its taints that keep Pods off, its allocatable
    /// quantities that parse; the policy's validation refuses the others).
    pub fn of_template(template: &NodeTemplate) -> NodeShape {
        NodeShape {
            name: template.name.clone(),
            labels: template.labels.clone().unwrap_or_default(),
            taints: keeping_pods_off(template.taints.as_deref()),
            allocatable: quantities(Some(&template.allocatable)),
            unschedulable: false,
            template: true,
        }
    }
}

/// The taints that keep Pods off a node: `NoSchedule` and `NoExecute` (never
/// `PreferNoSchedule`).
fn keeping_pods_off(taints: Option<&[Taint]>) -> Vec<NodeTaint> {
    taints
        .into_iter()
        .flatten()
        .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
        .map(|t| NodeTaint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone(),
        })
        .collect()
}

/// The entries of an allocatable map that are valid quantities.
fn quantities(allocatable: Option<&BTreeMap<String, Quantity>>) -> Resources {
    allocatable
        .into_iter()
        .flatten()
        .filter_map(|(name, q)| Some((name.clone(), ResourceQuantity::try_from(q).ok()?)))
        .collect()
}

/// Which Pod of a Ray object a finding is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodKind {
    /// The head Pod.
    Head,
    /// A worker Pod of the named group.
    Worker(String),
    /// The RayJob's submitter Pod (K8sJobMode).
    Submitter,
}

impl fmt::Display for PodKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PodKind::Head => f.write_str("head Pod"),
            PodKind::Worker(group) => write!(f, "worker group {group:?} Pod"),
            PodKind::Submitter => f.write_str("submitter Pod"),
        }
    }
}

/// Why a Pod, a group of Pods or the gang can never be scheduled on the cluster's nodes.
#[derive(Clone, Debug, PartialEq)]
pub enum Cause {
    /// The Pod's `nodeSelector` (rendered `key=value,…`) matches no schedulable node.
    NodeSelector {
        /// The selector.
        selector: String,
    },
    /// The Pod's required node affinity matches no schedulable node its selector allows.
    NodeAffinity,
    /// Every node the Pod's selector and affinity allow has a taint the Pod does not tolerate.
    Taints {
        /// Up to three nodes, each with the first taint the Pod does not tolerate.
        untolerated: Vec<(String, NodeTaint)>,
        /// How many more nodes are not listed.
        more: usize,
    },
    /// No node the Pod may run on offers enough of one resource.
    Resource {
        /// The resource name.
        resource: String,
        /// The Pod's effective request.
        asks: ResourceQuantity,
        /// The most any of those nodes offers, and the node; `None` when none offers any.
        largest: Option<(ResourceQuantity, String)>,
    },
    /// Each resource fits on some node, but no node offers all of them at once.
    NoSingleNode {
        /// The Pod's effective requests.
        asks: Resources,
    },
    /// The group's required Pods do not fit on the nodes they may run on, even when empty.
    TooManyPods {
        /// Pods the gang needs of this kind.
        needs: i64,
        /// The most of them the nodes hold.
        holds: i64,
    },
    /// The gang's `minResources` of one resource exceed what all schedulable nodes offer
    /// together.
    Gang {
        /// The resource name.
        resource: String,
        /// The gang's `minResources` entry.
        needs: ResourceQuantity,
        /// The sum of the schedulable nodes' allocatable amounts.
        offers: ResourceQuantity,
        /// How many schedulable nodes there are.
        nodes: usize,
    },
}

/// One reason an object can never be scheduled.
#[derive(Clone, Debug, PartialEq)]
pub struct Infeasibility {
    /// Field path of the Pod template (or of the cluster spec, for the gang).
    pub field: String,
    /// The Pod kind; `None` for the gang as a whole.
    pub pod: Option<PodKind>,
    /// Why.
    pub cause: Cause,
}

impl fmt::Display for Infeasibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pod = self.pod.as_ref();
        let who = || pod.map_or_else(|| "the gang".to_string(), ToString::to_string);
        match &self.cause {
            Cause::NodeSelector { selector } => {
                write!(f, "{}: no node matches its nodeSelector {selector}", who())
            }
            Cause::NodeAffinity => write!(
                f,
                "{}: no node matches its required node affinity (requiredDuringSchedulingIgnoredDuringExecution)",
                who()
            ),
            Cause::Taints { untolerated, more } => {
                let listed: Vec<String> = untolerated
                    .iter()
                    .map(|(node, taint)| format!("node {node} has taint {taint}"))
                    .collect();
                write!(f, "{}: no node tolerated: {}", who(), listed.join(", "))?;
                if *more > 0 {
                    write!(f, " (and {more} more nodes)")?;
                }
                Ok(())
            }
            Cause::Resource {
                resource,
                asks,
                largest,
            } => match largest {
                Some((offers, node)) => write!(
                    f,
                    "{} asks {resource} {asks}; the largest node offers {offers} ({node})",
                    who()
                ),
                None => write!(
                    f,
                    "{} asks {resource} {asks}; no node offers {resource}",
                    who()
                ),
            },
            Cause::NoSingleNode { asks } => write!(
                f,
                "{} asks {}; no single node offers all of it at once",
                who(),
                render(asks)
            ),
            Cause::TooManyPods { needs, holds } => {
                let pods = match pod {
                    Some(PodKind::Worker(group)) => format!("worker group {group:?}"),
                    _ => who(),
                };
                write!(
                    f,
                    "{pods} needs {needs} Pods at once; the nodes they may run on hold at most {holds} of them, even empty"
                )
            }
            Cause::Gang {
                resource,
                needs,
                offers,
                nodes,
            } => write!(
                f,
                "the gang needs {resource} {needs}; the {nodes} schedulable node{} together offer{} {offers}",
                if *nodes == 1 { "" } else { "s" },
                if *nodes == 1 { "s" } else { "" },
            ),
        }
    }
}

/// The outcome of [`check_feasibility`].
#[derive(Clone, Debug, PartialEq)]
pub enum Feasibility {
    /// The cluster has no schedulable node yet: nothing was checked.
    NoNodes,
    /// Checked: every reason the object can never be scheduled (none: it fits an empty cluster).
    Checked(Vec<Infeasibility>),
}

/// The message of [`Feasibility::NoNodes`].
pub const NO_NODES_MESSAGE: &str = "the cluster has no schedulable nodes yet; feasibility not checked (a QueuePolicy's nodeTemplates can name the nodes an autoscaler adds)";

/// Why a document of a nodes file (`raygate validate --nodes`) gives no node shape.
#[derive(Debug, thiserror::Error)]
pub enum NodeDocumentError {
    /// The document is another kind of object.
    #[error("document {number} is {what}, not a v1 Node")]
    NotANode {
        /// 1-based position of the document.
        number: usize,
        /// Its kind and apiVersion, as written.
        what: String,
    },
    /// The document says it is a Node but does not read as one.
    #[error("document {number} is not a valid Node: {source}")]
    Invalid {
        /// 1-based position of the document.
        number: usize,
        /// Why it does not read.
        source: serde_json::Error,
    },
}

/// The shape of a document that holds a `v1` Node (`kubectl get nodes -o yaml` gives a `List`
/// of them, which the input reader flattens).
pub fn node_shape_of_document(document: Document) -> Result<NodeShape, NodeDocumentError> {
    let number = document.index + 1;
    match type_meta(&document.value) {
        Some(("v1", "Node")) => {}
        other => {
            let what = other.map_or_else(
                || "an object without apiVersion/kind".to_string(),
                |(api_version, kind)| format!("{kind} ({api_version})"),
            );
            return Err(NodeDocumentError::NotANode { number, what });
        }
    }
    let node: Node = serde_json::from_value(document.value)
        .map_err(|source| NodeDocumentError::Invalid { number, source })?;
    Ok(NodeShape::of(&node))
}

/// One kind of Pod of the object: its template, effective requests and how many the gang needs.
struct PodDemand<'a> {
    kind: PodKind,
    field: String,
    spec: Option<&'a PodSpec>,
    requests: Resources,
    count: i64,
}

/// A Ray object whose Pods feasibility judges: the webhook's and the CLI's checked object, or
/// the reconciler's cached one.
#[derive(Clone, Copy, Debug)]
pub enum RayObject<'a> {
    /// A RayJob.
    RayJob(&'a RayJob),
    /// A RayCluster.
    RayCluster(&'a RayCluster),
}

impl<'a> From<&'a Typed> for RayObject<'a> {
    fn from(typed: &'a Typed) -> Self {
        match typed {
            Typed::RayJob(job) => RayObject::RayJob(job),
            Typed::RayCluster(cluster) => RayObject::RayCluster(cluster),
        }
    }
}

/// Whether each Pod of `object` could be scheduled on some node of `nodes` if that node were
/// empty, and whether the gang `gang` (the object's, from sizing) fits all schedulable nodes
/// together (see the module documentation). An object managed elsewhere has nothing to find.
pub fn check_feasibility(object: RayObject<'_>, gang: &GangSize, nodes: &NodeKinds) -> Feasibility {
    let managed_by = match object {
        RayObject::RayJob(job) => job.spec.managed_by.as_deref(),
        RayObject::RayCluster(cluster) => cluster.spec.managed_by.as_deref(),
    };
    if keys::managed_elsewhere(managed_by) {
        return Feasibility::Checked(Vec::new());
    }
    let schedulable = nodes.candidates(false);
    if schedulable.is_empty() {
        return Feasibility::NoNodes;
    }
    let (pods, gang_field) = match object {
        RayObject::RayJob(job) => match job.spec.ray_cluster_spec.as_ref() {
            Some(spec) => (job_pods(job, spec), "spec.rayClusterSpec"),
            None => return Feasibility::Checked(Vec::new()),
        },
        RayObject::RayCluster(cluster) => (cluster_pods(&cluster.spec, "spec", false), "spec"),
    };
    let mut found = Vec::new();
    for pod in &pods {
        if let Some(cause) = pod_cause(pod, nodes, &schedulable) {
            found.push(Infeasibility {
                field: pod.field.clone(),
                pod: Some(pod.kind.clone()),
                cause,
            });
        }
    }
    let node_count = schedulable
        .iter()
        .map(|c| usize::try_from(c.count()).unwrap_or(usize::MAX))
        .sum();
    for (resource, needs) in &gang.min_resources {
        let named = found
            .iter()
            .any(|f| matches!(&f.cause, Cause::Resource { resource: r, .. } if r == resource));
        if named || needs.is_zero() {
            continue;
        }
        // Summed until it covers the need: most gangs are covered by the first kinds.
        let mut offers = ResourceQuantity::ZERO;
        let mut covered = false;
        for kind in &schedulable {
            // An autoscaler adds as many nodes of a template as the gang needs.
            covered = kind.traits.template && !kind.offers(resource).is_zero();
            offers += kind.offers(resource).times(kind.count());
            if covered || offers >= *needs {
                break;
            }
        }
        if !covered && *needs > offers {
            found.push(Infeasibility {
                field: gang_field.to_string(),
                pod: None,
                cause: Cause::Gang {
                    resource: resource.clone(),
                    needs: *needs,
                    offers,
                    nodes: node_count,
                },
            });
        }
    }
    Feasibility::Checked(found)
}

/// Why `nodes` could never hold the gang of `object` as sized for its PodGroup
/// ([`check_feasibility`]), for the reconciler's `GangPending` condition: empty when they could,
/// when no node is schedulable (nothing can be judged yet) or when the object does not size.
pub fn infeasibilities(object: RayObject<'_>, nodes: &NodeKinds) -> Vec<Infeasibility> {
    let gang = match object {
        RayObject::RayJob(job) => sizing::ray_job_gang(job),
        RayObject::RayCluster(cluster) => sizing::cluster_gang(&cluster.spec, "spec"),
    };
    match gang.map(|gang| check_feasibility(object, &gang, nodes)) {
        Ok(Feasibility::Checked(found)) => found,
        Ok(Feasibility::NoNodes) | Err(_) => Vec::new(),
    }
}

/// The Pods of a RayJob: its cluster's, and the submitter Pod in K8sJobMode (in SidecarMode
/// the submitter is a container of the head Pod).
fn job_pods<'a>(job: &'a RayJob, spec: &'a RayClusterSpec) -> Vec<PodDemand<'a>> {
    let mode = job.spec.submission_mode.as_deref().unwrap_or("K8sJobMode");
    let mut pods = cluster_pods(spec, "spec.rayClusterSpec", mode == "SidecarMode");
    if mode == "K8sJobMode" {
        let template = job.spec.submitter_pod_template.as_deref();
        let spec = template.and_then(|t| t.spec.as_ref());
        let requests = match spec {
            Some(spec) => effective_requests(spec),
            None => sizing::submitter_resources(job)
                .map(|r| r.into_owned())
                .unwrap_or_default(),
        };
        pods.push(PodDemand {
            kind: PodKind::Submitter,
            field: "spec.submitterPodTemplate.spec".to_string(),
            spec,
            requests,
            count: 1,
        });
    }
    pods
}

/// The head and the worker groups of a cluster spec (suspended groups make no Pods). With
/// `sidecar` the head also runs KubeRay's default submitter container.
fn cluster_pods<'a>(spec: &'a RayClusterSpec, field: &str, sidecar: bool) -> Vec<PodDemand<'a>> {
    let head = spec.head_group_spec.template.spec.as_ref();
    let mut head_requests = head.map(effective_requests).unwrap_or_default();
    if sidecar {
        for (name, quantity) in [
            ("cpu", sizing::DEFAULT_SUBMITTER_CPU),
            ("memory", sizing::DEFAULT_SUBMITTER_MEMORY),
        ] {
            if let Ok(quantity) = quantity.parse() {
                sizing::add_quantity(&mut head_requests, name, quantity);
            }
        }
    }
    let mut pods = vec![PodDemand {
        kind: PodKind::Head,
        field: format!("{field}.headGroupSpec.template.spec"),
        spec: head,
        requests: head_requests,
        count: 1,
    }];
    let autoscaling = spec.autoscaling();
    for (i, group) in spec.worker_group_specs.iter().flatten().enumerate() {
        if group.suspend == Some(true) {
            continue;
        }
        let pod = group.template.spec.as_ref();
        pods.push(PodDemand {
            kind: PodKind::Worker(group.group_name.clone()),
            field: format!("{field}.workerGroupSpecs[{i}].template.spec"),
            spec: pod,
            requests: pod.map(effective_requests).unwrap_or_default(),
            count: sizing::worker_group_replicas(group, autoscaling),
        });
    }
    pods
}

/// A Pod's effective requests as the scheduler computes them: the sum of its containers'
/// requests (limits where a request is absent), at least the largest init container's (plus the
/// restartable init containers started before it), restartable (sidecar) init containers added
/// to the sum, and the Pod overhead on top. Quantities that do not parse are left out (the
/// schema refuses them before this runs).
fn effective_requests(spec: &PodSpec) -> Resources {
    let of = |c: &Container| sizing::container_resources(c).unwrap_or_default();
    let mut total = Resources::new();
    for container in &spec.containers {
        add_all(&mut total, &of(container));
    }
    let mut init_peak = Resources::new();
    let mut sidecars = Resources::new();
    for container in spec.init_containers.iter().flatten() {
        let requests = of(container);
        let during = if container.restart_policy.as_deref() == Some("Always") {
            add_all(&mut total, &requests);
            add_all(&mut sidecars, &requests);
            sidecars.clone()
        } else {
            let mut during = requests;
            add_all(&mut during, &sidecars);
            during
        };
        for (name, quantity) in during {
            let peak = init_peak.entry(name).or_insert(ResourceQuantity::ZERO);
            if quantity > *peak {
                *peak = quantity;
            }
        }
    }
    for (name, peak) in init_peak {
        let sum = total.entry(name).or_insert(ResourceQuantity::ZERO);
        if peak > *sum {
            *sum = peak;
        }
    }
    let overhead = spec
        .overhead
        .iter()
        .flatten()
        .filter_map(|(name, q)| Some((name.clone(), ResourceQuantity::try_from(q).ok()?)));
    for (name, quantity) in overhead {
        sizing::add_quantity(&mut total, &name, quantity);
    }
    total
}

fn add_all(total: &mut Resources, part: &Resources) {
    for (name, quantity) in part {
        sizing::add_quantity(total, name, *quantity);
    }
}

/// What a Pod's template says about where it may run, and what it asks of a node.
struct Placement<'a> {
    selector: Option<&'a BTreeMap<String, String>>,
    terms: Option<&'a [NodeSelectorTerm]>,
    tolerations: &'a [Toleration],
    /// The Pod's non-zero effective requests.
    asked: Vec<(&'a String, &'a ResourceQuantity)>,
}

impl<'a> Placement<'a> {
    fn of(pod: &'a PodDemand<'a>) -> Self {
        let spec = pod.spec;
        Placement {
            selector: spec.and_then(|s| s.node_selector.as_ref()),
            terms: spec
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .as_ref()
                })
                .map(|r| r.node_selector_terms.as_slice()),
            tolerations: spec
                .and_then(|s| s.tolerations.as_deref())
                .unwrap_or_default(),
            asked: pod.requests.iter().filter(|(_, q)| !q.is_zero()).collect(),
        }
    }

    /// Whether the placement reads what differs between the nodes of a kind (their names or
    /// hostname labels), so that they must be judged one by one.
    fn reads_per_node(&self) -> bool {
        let selector_keys = self.selector.into_iter().flat_map(|s| s.keys());
        let terms = self.terms.unwrap_or_default();
        let expression_keys = terms
            .iter()
            .flat_map(|t| t.match_expressions.iter().flatten().map(|r| &r.key));
        let reads_name = terms
            .iter()
            .any(|t| t.match_fields.as_ref().is_some_and(|f| !f.is_empty()));
        reads_per_node(
            selector_keys.chain(expression_keys).map(String::as_str),
            reads_name,
        )
    }

    fn selects(&self, node: &Candidate<'_>) -> bool {
        self.selector
            .is_none_or(|s| s.iter().all(|(k, v)| node.label(k) == Some(v.as_str())))
    }

    fn has_affinity_for(&self, node: &Candidate<'_>) -> bool {
        self.terms.is_none_or(|terms| terms_match(terms, node))
    }

    /// The first of `node`'s taints the Pod does not tolerate. A `NoSchedule` taint whose key
    /// is an extended resource the Pod asks for counts as tolerated: the API server's
    /// ExtendedResourceToleration admission plugin (on in GKE and AKS, for GPU node pools)
    /// adds that toleration to the Pod, and a cluster without it is at worst told too little,
    /// never that a schedulable Pod is not.
    fn untolerated<'n>(&self, node: &Candidate<'n>) -> Option<&'n NodeTaint> {
        let added_by_admission = |taint: &NodeTaint| {
            taint.effect == "NoSchedule"
                && is_extended_resource(&taint.key)
                && self.asked.iter().any(|(name, _)| **name == taint.key)
        };
        node.traits.taints.iter().find(|taint| {
            let tolerated = self.tolerations.iter().any(|t| tolerates(t, taint));
            !(tolerated || added_by_admission(taint))
        })
    }

    /// How many copies of the Pod the candidate's nodes hold when empty; unbounded without any
    /// request, and for a node template that holds one (an autoscaler adds as many as needed).
    fn copies(&self, node: &Candidate<'_>) -> i64 {
        let copies = self.copies_on_one(node);
        if node.traits.template && copies > 0 {
            i64::MAX
        } else {
            copies.saturating_mul(node.count())
        }
    }

    fn copies_on_one(&self, node: &Candidate<'_>) -> i64 {
        self.asked
            .iter()
            .map(|(resource, asks)| {
                let per = asks.nanos();
                let offers = node.offers(resource).nanos();
                if per <= 0 {
                    i64::MAX
                } else {
                    i64::try_from(offers.max(0) / per).unwrap_or(i64::MAX)
                }
            })
            .min()
            .unwrap_or(i64::MAX)
    }
}

/// Why no node could hold `pod`, checking the stages in the scheduler's order: on the
/// `schedulable` kinds of `nodes`, or on each node when the Pod's placement tells them apart.
fn pod_cause(
    pod: &PodDemand<'_>,
    nodes: &NodeKinds,
    schedulable: &[Candidate<'_>],
) -> Option<Cause> {
    let placement = Placement::of(pod);
    let each_node;
    let schedulable = if placement.reads_per_node() {
        each_node = nodes.candidates(true);
        &each_node
    } else {
        schedulable
    };
    if fits(pod, &placement, schedulable) {
        return None;
    }
    let nodes: Vec<&Candidate<'_>> = schedulable
        .iter()
        .filter(|n| placement.selects(n))
        .collect();
    if nodes.is_empty() {
        let selector: Vec<String> = placement
            .selector
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        return Some(Cause::NodeSelector {
            selector: selector.join(","),
        });
    }
    let nodes: Vec<&Candidate<'_>> = nodes
        .into_iter()
        .filter(|n| placement.has_affinity_for(n))
        .collect();
    if nodes.is_empty() {
        return Some(Cause::NodeAffinity);
    }
    let (tainted, nodes): (Vec<&Candidate<'_>>, Vec<&Candidate<'_>>) = nodes
        .into_iter()
        .partition(|n| placement.untolerated(n).is_some());
    if nodes.is_empty() {
        let mut untolerated = Vec::new();
        for kind in &tainted {
            let Some(taint) = placement.untolerated(kind) else {
                continue;
            };
            for node in kind.nodes.iter().take(3 - untolerated.len()) {
                untolerated.push((kind.label_of(node), taint.clone()));
            }
            if untolerated.len() == 3 {
                break;
            }
        }
        let tainted_nodes: usize = tainted.iter().map(|kind| kind.nodes.len()).sum();
        let more = tainted_nodes - untolerated.len();
        return Some(Cause::Taints { untolerated, more });
    }
    resource_cause(pod, &placement, &nodes)
}

/// Whether the nodes the Pod may run on hold all the Pods of its kind the gang needs (at least
/// one): the common answer, found without naming a cause, usually on the first kinds looked at.
fn fits(pod: &PodDemand<'_>, placement: &Placement<'_>, schedulable: &[Candidate<'_>]) -> bool {
    let needs = pod.count.max(1);
    let mut holds: i64 = 0;
    for node in schedulable {
        if placement.selects(node)
            && placement.has_affinity_for(node)
            && placement.untolerated(node).is_none()
        {
            holds = holds.saturating_add(placement.copies(node));
            if holds >= needs {
                return true;
            }
        }
    }
    false
}

/// Why none of `nodes` (those the Pod may run on) could hold it, or the group's Pods.
fn resource_cause(
    pod: &PodDemand<'_>,
    placement: &Placement<'_>,
    nodes: &[&Candidate<'_>],
) -> Option<Cause> {
    for (resource, asks) in &placement.asked {
        // The node is named only once found: a name per node looked at cost more than the
        // rest of a review on a large cluster.
        let largest = nodes
            .iter()
            .map(|n| (n.offers(resource), *n))
            .filter(|(offers, _)| !offers.is_zero())
            .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.name().cmp(a.1.name())));
        if largest.is_none_or(|(offers, _)| offers < **asks) {
            return Some(Cause::Resource {
                resource: (*resource).clone(),
                asks: **asks,
                largest: largest
                    .and_then(|(offers, kind)| Some((offers, kind.label_of(kind.nodes.first()?)))),
            });
        }
    }
    let holds = nodes
        .iter()
        .fold(0_i64, |sum, n| sum.saturating_add(placement.copies(n)));
    if holds == 0 {
        return Some(Cause::NoSingleNode {
            asks: (placement.asked.iter())
                .map(|(name, q)| ((*name).clone(), **q))
                .collect(),
        });
    }
    (holds < pod.count).then_some(Cause::TooManyPods {
        needs: pod.count,
        holds,
    })
}

/// Whether `name` is an extended resource (apimachinery's `IsExtendedResourceName`): a
/// qualified name outside the `kubernetes.io` domain, not a quota's `requests.` form.
fn is_extended_resource(name: &str) -> bool {
    let Some((domain, _)) = name.split_once('/') else {
        return false;
    };
    let kubernetes = domain == "kubernetes.io" || domain.ends_with(".kubernetes.io");
    !(kubernetes || name.starts_with("requests."))
}

/// Whether a node matches required node affinity: any term matches (a term with no
/// requirement matches nothing).
fn terms_match(terms: &[NodeSelectorTerm], node: &Candidate<'_>) -> bool {
    terms.iter().any(|term| {
        let expressions = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        if expressions.is_empty() && fields.is_empty() {
            return false;
        }
        expressions
            .iter()
            .all(|r| requirement_matches(r, node.label(&r.key)))
            && fields.iter().all(|r| {
                let value = (r.key == "metadata.name").then_some(node.name());
                requirement_matches(r, value)
            })
    })
}

/// One node selector requirement against the value of its key (`None`: the node has no such
/// label or field). An unknown operator matches nothing.
fn requirement_matches(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let number = |v: &str| v.parse::<i64>().ok();
    let compare = |ordering: std::cmp::Ordering| match (value.and_then(number), values) {
        (Some(label), [bound]) => number(bound).is_some_and(|b| label.cmp(&b) == ordering),
        _ => false,
    };
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compare(std::cmp::Ordering::Greater),
        "Lt" => compare(std::cmp::Ordering::Less),
        _ => false,
    }
}

/// Whether a toleration tolerates a taint: the effect matches (an empty effect matches all),
/// the key matches (an empty key with `Exists` matches every key), and with `Exists` any value,
/// with `Equal` (or no operator) the same value.
fn tolerates(toleration: &Toleration, taint: &NodeTaint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() {
        return operator == "Exists";
    }
    if key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => toleration.value.as_deref().unwrap_or_default() == taint.value,
        _ => false,
    }
}

/// `cpu 4, memory 8Gi`.
fn render(resources: &Resources) -> String {
    let parts: Vec<String> = resources
        .iter()
        .map(|(name, quantity)| format!("{name} {quantity}"))
        .collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests;
