//! Table-driven tests of the admission rules: each rule is shown firing and not firing.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::*;
use crate::feasibility::NodeShape;
use crate::finding::Severity;
use crate::queue_policy::QueuePolicySpec;
use crate::validation::ReconcilerKind;
use crate::volcano::{QueueSpec, QueueStatus};

fn queue(name: &str, state: Option<&str>, capability: &[(&str, &str)]) -> (String, Arc<Queue>) {
    let mut queue = Queue::new(
        name,
        QueueSpec {
            capability: (!capability.is_empty()).then(|| {
                capability
                    .iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect()
            }),
            ..QueueSpec::default()
        },
    );
    queue.status = Some(QueueStatus {
        state: state.map(str::to_string),
        ..QueueStatus::default()
    });
    (name.to_string(), Arc::new(queue))
}

fn queues() -> BTreeMap<String, Arc<Queue>> {
    [
        queue("default", Some("Open"), &[]),
        queue("team-a", Some("Open"), &[("cpu", "8"), ("memory", "64Gi")]),
        queue("team-b", Some("Open"), &[]),
        queue("closed", Some("Closed"), &[]),
        queue("closing", Some("Closing"), &[]),
        queue("fresh", None, &[]),
        // A hierarchy: org (4 CPUs) > mid > team-d (16 CPUs); org > team-c; org > small (2 CPUs);
        // and a cycle.
        queue("org", Some("Open"), &[("cpu", "4")]),
        child(queue("mid", Some("Open"), &[]), "org"),
        child(queue("team-c", Some("Open"), &[]), "org"),
        child(queue("team-d", Some("Open"), &[("cpu", "16")]), "mid"),
        child(queue("small", Some("Open"), &[("cpu", "2")]), "org"),
        child(queue("loop-a", Some("Open"), &[]), "loop-b"),
        child(queue("loop-b", Some("Open"), &[]), "loop-a"),
    ]
    .into_iter()
    .collect()
}

/// `queue` with `spec.parent: parent`.
fn child((name, queue): (String, Arc<Queue>), parent: &str) -> (String, Arc<Queue>) {
    let mut queue = Queue::clone(&queue);
    queue.spec.parent = Some(parent.to_string());
    (name, Arc::new(queue))
}

fn policy(name: &str, spec: Value) -> Arc<QueuePolicy> {
    let spec: QueuePolicySpec = serde_json::from_value(spec).expect("policy spec");
    Arc::new(QueuePolicy::new(name, spec))
}

fn namespace(opted_in: bool, queue_annotation: Option<&str>) -> ObjectMeta {
    let mut labels = BTreeMap::from([("team".to_string(), "a".to_string())]);
    if opted_in {
        labels.insert(
            keys::NAMESPACE_OPT_IN_LABEL.to_string(),
            keys::NAMESPACE_OPT_IN_VALUE.to_string(),
        );
    }
    ObjectMeta {
        name: Some("ml".into()),
        labels: Some(labels),
        annotations: queue_annotation.map(|q| {
            BTreeMap::from([(keys::NAMESPACE_QUEUE_ANNOTATION.to_string(), q.to_string())])
        }),
        ..ObjectMeta::default()
    }
}

/// A cluster of one head (1 CPU, 2Gi) and `workers` workers (1 CPU, 1Gi each).
fn cluster_spec(workers: i32) -> Value {
    json!({"headGroupSpec": {"template": {"spec": {"containers": [
        {"name": "head", "image": "rayproject/ray:2.60.0",
         "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}}},
           "workerGroupSpecs": [{"groupName": "w", "replicas": workers, "minReplicas": 0,
                                 "maxReplicas": 100, "template": {"spec": {"containers": [
        {"name": "w", "image": "rayproject/ray:2.60.0",
         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}]})
}

fn labelled(mut object: Value, labels: &[(&str, &str)]) -> Value {
    if !labels.is_empty() {
        object["metadata"]["labels"] = labels
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    object
}

/// A RayJob in HTTPMode (no submitter resources) with `workers` workers.
fn job(labels: &[(&str, &str)], workers: i32) -> Value {
    labelled(
        json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
               "metadata": {"name": "demo", "namespace": "ml"},
               "spec": {"entrypoint": "python x.py", "submissionMode": "HTTPMode",
                        "rayClusterSpec": cluster_spec(workers)}}),
        labels,
    )
}

fn cluster(labels: &[(&str, &str)], workers: i32) -> Value {
    labelled(
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "demo", "namespace": "ml"}, "spec": cluster_spec(workers)}),
        labels,
    )
}

fn with_status(mut object: Value, deployment: &str, cluster: &str) -> Value {
    object["status"] = json!({"jobDeploymentStatus": deployment, "rayClusterName": cluster});
    object
}

struct Case {
    name: &'static str,
    operation: Operation,
    object: Value,
    old: Option<Value>,
    namespace: ObjectMeta,
    policies: Vec<Arc<QueuePolicy>>,
    nodes: Vec<NodeShape>,
}

/// A node with `cpu` CPUs and `memory`.
fn node(name: &str, cpu: &str, memory: &str) -> NodeShape {
    NodeShape {
        name: name.to_string(),
        allocatable: [("cpu", cpu), ("memory", memory)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.parse().expect("a quantity")))
            .collect(),
        ..NodeShape::default()
    }
}

impl Case {
    fn create(name: &'static str, object: Value) -> Self {
        Case {
            name,
            operation: Operation::Create,
            object,
            old: None,
            namespace: namespace(true, None),
            policies: Vec::new(),
            nodes: vec![node("big", "256", "1Ti")],
        }
    }

    fn update(name: &'static str, old: Value, object: Value) -> Self {
        Case {
            operation: Operation::Update,
            old: Some(old),
            ..Case::create(name, object)
        }
    }

    fn ns(mut self, namespace: ObjectMeta) -> Self {
        self.namespace = namespace;
        self
    }

    fn policies(mut self, policies: Vec<Arc<QueuePolicy>>) -> Self {
        self.policies = policies;
        self
    }

    fn nodes(mut self, nodes: Vec<NodeShape>) -> Self {
        self.nodes = nodes;
        self
    }

    fn review(&self) -> Admission {
        let queues = queues();
        let ctx = ValidationContext::default();
        let nodes = NodeKinds::from_shapes(self.nodes.iter().cloned());
        review_ray_object(RayObjectReview {
            operation: self.operation,
            object: self.object.clone(),
            old_object: self.old.clone(),
            namespace: &self.namespace,
            opt_in: &OptInLabel::default(),
            queues: &queues,
            policies: &self.policies,
            nodes: &nodes,
            context: &ctx,
        })
    }
}

/// `(case, rule, expected severity or None when the rule must not fire)`.
fn check_table(table: Vec<(Case, &str, Option<Severity>)>) {
    for (case, rule, expected) in table {
        let admission = case.review();
        let fired: Vec<&Finding> = admission
            .findings
            .iter()
            .filter(|f| f.rule == rule)
            .collect();
        match expected {
            None => assert!(fired.is_empty(), "{}: {rule} fired: {fired:?}", case.name),
            Some(severity) => {
                assert!(
                    !fired.is_empty(),
                    "{}: {rule} did not fire; findings: {:?}",
                    case.name,
                    admission.findings
                );
                assert!(
                    fired.iter().all(|f| f.severity == severity),
                    "{}: {rule} has the wrong severity: {fired:?}",
                    case.name
                );
                assert_eq!(
                    admission.allowed(),
                    !admission.findings.iter().any(Finding::is_error),
                    "{}",
                    case.name
                );
            }
        }
    }
}

const Q: &str = keys::QUEUE_LABEL;
const P: &str = keys::PRIORITY_CLASS_LABEL;
const ERROR: Option<Severity> = Some(Severity::Error);
const WARNING: Option<Severity> = Some(Severity::Warning);

#[test]
fn a_gang_above_an_ancestor_queues_capability_is_warned_of() {
    let messages = |queue: &str, workers: i32| -> Vec<String> {
        Case::create("hierarchy", job(&[(Q, queue)], workers))
            .review()
            .findings
            .iter()
            .filter(|f| f.rule.starts_with("volcano-gang-exceeds"))
            .map(|f| format!("{:?} {}: {}", f.severity, f.rule, f.message))
            .collect()
    };
    // The gang of a head and 4 workers needs 5 CPUs; org caps its subtree at 4.
    assert_eq!(
        messages("team-c", 4),
        [
            "Warning volcano-gang-exceeds-parent-capability: the gang needs cpu 5 but queue \"team-c\"'s ancestor queue \"org\" has capability cpu 4 (1 over): where Volcano enforces the queue hierarchy (capacity plugin, enableHierarchy) it can never admit this PodGroup; shrink the cluster or choose a queue under a bigger parent"
        ]
    );
    assert_eq!(messages("team-c", 3), Vec::<String>::new());
    // Through a parent without a capability, up to the grandparent.
    assert_eq!(messages("team-d", 4).len(), 1);
    assert!(messages("team-d", 4)[0].contains("queue \"team-d\"'s ancestor queue \"org\""));
    // The queue's own capability is the error; its ancestors do not repeat the resource.
    assert_eq!(
        messages("small", 4),
        [
            "Error volcano-gang-exceeds-capability: the gang needs cpu 5 but queue \"small\" has capability cpu 2 (3 over): Volcano can never admit this PodGroup; shrink the cluster or choose a bigger queue"
        ]
    );
    // A cycle ends the walk.
    assert_eq!(messages("loop-a", 4), Vec::<String>::new());
}

#[test]
fn volcano_queue_rules() {
    check_table(vec![
        (
            Case::create("missing queue", job(&[(Q, "nope")], 1)),
            rules::VOLCANO_QUEUE_MISSING,
            ERROR,
        ),
        (
            Case::create("existing queue", job(&[(Q, "team-b")], 1)),
            rules::VOLCANO_QUEUE_MISSING,
            None,
        ),
        (
            Case::create("missing queue, not opted in", job(&[(Q, "nope")], 1))
                .ns(namespace(false, None)),
            rules::VOLCANO_QUEUE_MISSING,
            None,
        ),
        (
            Case::create("closed queue", job(&[(Q, "closed")], 1)),
            rules::VOLCANO_QUEUE_NOT_OPEN,
            ERROR,
        ),
        (
            Case::create("closing queue", cluster(&[(Q, "closing")], 1)),
            rules::VOLCANO_QUEUE_NOT_OPEN,
            ERROR,
        ),
        (
            Case::create("open queue", job(&[(Q, "team-b")], 1)),
            rules::VOLCANO_QUEUE_NOT_OPEN,
            None,
        ),
        (
            Case::create("unset state", job(&[(Q, "fresh")], 1)),
            rules::VOLCANO_QUEUE_STATE_UNSET,
            WARNING,
        ),
        (
            Case::create("set state", job(&[(Q, "team-b")], 1)),
            rules::VOLCANO_QUEUE_STATE_UNSET,
            None,
        ),
        (
            Case::create("gang above capability", job(&[(Q, "team-a")], 8)),
            rules::VOLCANO_GANG_EXCEEDS_CAPABILITY,
            ERROR,
        ),
        (
            Case::create("gang at capability", job(&[(Q, "team-a")], 7)),
            rules::VOLCANO_GANG_EXCEEDS_CAPABILITY,
            None,
        ),
        (
            Case::create("no label: the default queue is checked", job(&[], 1)),
            rules::VOLCANO_QUEUE_MISSING,
            None,
        ),
    ]);
}

#[test]
fn cluster_selector_is_refused_only_with_gang_scheduling() {
    let mut selector = job(&[(Q, "team-b")], 1);
    selector["spec"] = json!({"entrypoint": "python x.py", "submissionMode": "HTTPMode",
                              "clusterSelector": {"ray.io/cluster": "shared"}});
    check_table(vec![
        (
            Case::create("selector, opted in", selector.clone()),
            rules::VOLCANO_CLUSTER_SELECTOR,
            ERROR,
        ),
        (
            Case::create("selector, not opted in", selector).ns(namespace(false, None)),
            rules::VOLCANO_CLUSTER_SELECTOR,
            None,
        ),
        (
            Case::create("own cluster", job(&[(Q, "team-b")], 1)),
            rules::VOLCANO_CLUSTER_SELECTOR,
            None,
        ),
    ]);
}

#[test]
fn capability_message_names_resource_and_excess() {
    let admission = Case::create("big", job(&[(Q, "team-a")], 10)).review();
    assert!(!admission.allowed());
    assert_eq!(
        admission.denial().as_deref(),
        Some(
            "spec.rayClusterSpec: the gang needs cpu 11 but queue \"team-a\" has capability cpu 8 (3 over): Volcano can never admit this PodGroup; shrink the cluster or choose a bigger queue"
        )
    );
}

#[test]
fn closed_queue_message() {
    let admission = Case::create("closed", job(&[(Q, "closed")], 1)).review();
    assert_eq!(
        admission.denial().as_deref(),
        Some(
            "metadata.labels[volcano.sh/queue-name]: queue \"closed\" is Closed: Volcano admits new PodGroups only to an Open queue; choose another queue or reopen it"
        )
    );
}

fn allow_a() -> Arc<QueuePolicy> {
    policy(
        "allow-a",
        json!({"allowedQueues": ["team-a", "fresh"], "defaultQueue": "team-a"}),
    )
}

#[test]
fn policy_rules_deny_and_warn() {
    let warn = |name: &str, spec: Value| {
        let mut spec = spec;
        spec["enforcement"] = json!("Warn");
        policy(name, spec)
    };
    let limits = json!({"maxMinMember": 3, "maxMinResources": {"cpu": "3", "memory": "100Gi"}});
    let priorities = json!({"allowedPriorityClasses": ["high"]});
    let required = json!({"requireQueue": true});
    check_table(vec![
        (
            Case::create("queue not allowed", job(&[(Q, "team-b")], 1)).policies(vec![allow_a()]),
            rules::POLICY_QUEUE_NOT_ALLOWED,
            ERROR,
        ),
        (
            Case::create("queue allowed", job(&[(Q, "team-a")], 1)).policies(vec![allow_a()]),
            rules::POLICY_QUEUE_NOT_ALLOWED,
            None,
        ),
        (
            Case::create("queue not allowed, Warn", job(&[(Q, "team-b")], 1)).policies(vec![
                warn("audit", json!({"allowedQueues": ["team-a"]})),
            ]),
            rules::POLICY_QUEUE_NOT_ALLOWED,
            WARNING,
        ),
        (
            Case::create("queue not allowed, policy selects other namespaces", job(&[(Q, "team-b")], 1))
                .policies(vec![policy(
                    "other",
                    json!({"allowedQueues": ["team-a"], "namespaceSelector": {"matchLabels": {"team": "z"}}}),
                )]),
            rules::POLICY_QUEUE_NOT_ALLOWED,
            None,
        ),
        (
            // The label reaches the queue through KubeRay's Volcano adapter: no escape by
            // leaving the namespace unlabelled.
            Case::create("queue not allowed, namespace not opted in", job(&[(Q, "team-b")], 1))
                .ns(namespace(false, None))
                .policies(vec![allow_a()]),
            rules::POLICY_QUEUE_NOT_ALLOWED,
            ERROR,
        ),
        (
            Case::create("no queue label, namespace not opted in", job(&[], 1))
                .ns(namespace(false, None))
                .policies(vec![allow_a()]),
            rules::POLICY_QUEUE_NOT_ALLOWED,
            None,
        ),
        (
            Case::update(
                "queue label added, namespace not opted in",
                job(&[], 1),
                job(&[(Q, "team-b")], 1),
            )
            .ns(namespace(false, None))
            .policies(vec![allow_a()]),
            rules::POLICY_QUEUE_NOT_ALLOWED,
            ERROR,
        ),
        (
            Case::create("implicit default queue not allowed", job(&[], 1)).policies(vec![policy(
                "strict",
                json!({"allowedQueues": ["team-a"]}),
            )]),
            rules::POLICY_QUEUE_NOT_ALLOWED,
            ERROR,
        ),
        (
            Case::create("queue required", job(&[], 1)).policies(vec![policy("r", required.clone())]),
            rules::POLICY_QUEUE_REQUIRED,
            ERROR,
        ),
        (
            Case::create("queue required and given", job(&[(Q, "team-b")], 1))
                .policies(vec![policy("r", required.clone())]),
            rules::POLICY_QUEUE_REQUIRED,
            None,
        ),
        (
            Case::create("queue required and defaulted", job(&[], 1))
                .ns(namespace(true, Some("team-b")))
                .policies(vec![policy("r", required)]),
            rules::POLICY_QUEUE_REQUIRED,
            None,
        ),
        (
            Case::create("priority not allowed", job(&[(Q, "team-b"), (P, "low")], 1))
                .policies(vec![policy("p", priorities.clone())]),
            rules::POLICY_PRIORITY_CLASS_NOT_ALLOWED,
            ERROR,
        ),
        (
            Case::create("priority allowed", job(&[(Q, "team-b"), (P, "high")], 1))
                .policies(vec![policy("p", priorities.clone())]),
            rules::POLICY_PRIORITY_CLASS_NOT_ALLOWED,
            None,
        ),
        (
            Case::create("no priority label", job(&[(Q, "team-b")], 1))
                .policies(vec![policy("p", priorities)]),
            rules::POLICY_PRIORITY_CLASS_NOT_ALLOWED,
            None,
        ),
        (
            Case::create("minMember above limit", job(&[(Q, "team-b")], 3))
                .policies(vec![policy("l", limits.clone())]),
            rules::POLICY_MAX_MIN_MEMBER,
            ERROR,
        ),
        (
            Case::create("minMember at limit", job(&[(Q, "team-b")], 2))
                .policies(vec![policy("l", limits.clone())]),
            rules::POLICY_MAX_MIN_MEMBER,
            None,
        ),
        (
            Case::create("cpu above limit", cluster(&[(Q, "team-b")], 3))
                .policies(vec![policy("l", limits.clone())]),
            rules::POLICY_MAX_MIN_RESOURCES,
            ERROR,
        ),
        (
            Case::create("cpu at limit", cluster(&[(Q, "team-b")], 2))
                .policies(vec![policy("l", limits.clone())]),
            rules::POLICY_MAX_MIN_RESOURCES,
            None,
        ),
        (
            Case::create("cpu above limit, Warn", cluster(&[(Q, "team-b")], 3))
                .policies(vec![warn("l", limits)]),
            rules::POLICY_MAX_MIN_RESOURCES,
            WARNING,
        ),
    ]);
}

#[test]
fn every_matching_deny_policy_must_allow() {
    let both = vec![
        policy("a", json!({"allowedQueues": ["team-a", "team-b"]})),
        policy(
            "b",
            json!({"allowedQueues": ["team-b"], "enforcement": "Deny"}),
        ),
    ];
    let denied = Case::create("a allows, b denies", job(&[(Q, "team-a")], 1))
        .policies(both.clone())
        .review();
    assert!(!denied.allowed());
    let by: Vec<&str> = denied
        .findings
        .iter()
        .filter(|f| f.rule == rules::POLICY_QUEUE_NOT_ALLOWED)
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(by.len(), 1, "{by:?}");
    assert!(by[0].contains("QueuePolicy \"b\""), "{by:?}");
    let allowed = Case::create("both allow", job(&[(Q, "team-b")], 1))
        .policies(both)
        .review();
    assert!(allowed.allowed(), "{:?}", allowed.findings);
}

#[test]
fn warn_mode_only_warns() {
    let audit = policy(
        "audit",
        json!({"allowedQueues": ["team-a"], "maxMinMember": 1, "enforcement": "Warn"}),
    );
    let admission = Case::create("audit", job(&[(Q, "team-b")], 2))
        .policies(vec![audit])
        .review();
    assert!(admission.allowed(), "{:?}", admission.findings);
    assert_eq!(admission.denial(), None);
    let warnings = admission.warnings();
    assert!(
        warnings.contains(&"metadata.labels[volcano.sh/queue-name]: queue \"team-b\" is not allowed in namespace \"ml\" by QueuePolicy \"audit\" (allowed: team-a) (QueuePolicy \"audit\" is in Warn mode: admitted)".to_string()),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w
                .starts_with("spec.rayClusterSpec: the gang's minMember 3 exceeds maxMinMember 1")),
        "{warnings:?}"
    );
}

fn patched(admission: &Admission, object: &Value) -> Value {
    let mut object = object.clone();
    json_patch::patch(&mut object, admission.patch.as_ref().expect("a patch")).expect("applies");
    object
}

#[test]
fn queue_defaulting() {
    // Namespace annotation wins over the policy's default.
    let object = job(&[], 1);
    let admission = Case::create("annotation", object.clone())
        .ns(namespace(true, Some("team-b")))
        .policies(vec![policy("d", json!({"defaultQueue": "team-a"}))])
        .review();
    assert!(admission.allowed(), "{:?}", admission.findings);
    assert_eq!(
        patched(&admission, &object)["metadata"]["labels"][Q],
        "team-b"
    );

    // Policy default when the namespace has none; an existing labels map is extended.
    let object = job(&[("app", "x")], 1);
    let admission = Case::create("policy", object.clone())
        .policies(vec![allow_a()])
        .review();
    assert!(admission.allowed(), "{:?}", admission.findings);
    let after = patched(&admission, &object);
    assert_eq!(after["metadata"]["labels"][Q], "team-a");
    assert_eq!(after["metadata"]["labels"]["app"], "x");

    // An empty label counts as unset and is replaced.
    let object = job(&[(Q, "")], 1);
    let admission = Case::create("empty", object.clone())
        .ns(namespace(true, Some("team-b")))
        .review();
    assert_eq!(
        patched(&admission, &object)["metadata"]["labels"][Q],
        "team-b"
    );

    // Rules see the defaulted queue: a closed default is refused, with its origin.
    let admission = Case::create("closed default", job(&[], 1))
        .ns(namespace(true, Some("closed")))
        .review();
    assert!(
        admission.denial().is_some_and(|d| d.contains(
            "(defaulted from the namespace annotation scheduling.volcano.sh/queue-name)"
        )),
        "{:?}",
        admission.findings
    );

    // Never: a labelled object, an UPDATE, a namespace that is not opted in, a RayCluster that
    // belongs to a RayJob, a namespace without any default.
    let none = [
        Case::create("labelled", job(&[(Q, "team-b")], 1)).ns(namespace(true, Some("team-a"))),
        Case::update("update", job(&[], 1), job(&[], 1)).ns(namespace(true, Some("team-a"))),
        Case::create("not opted in", job(&[], 1)).ns(namespace(false, Some("team-a"))),
        Case::create(
            "owned cluster",
            cluster(
                &[
                    (keys::ORIGINATED_FROM_CRD_LABEL, "RayJob"),
                    (keys::ORIGINATED_FROM_CR_NAME_LABEL, "demo"),
                ],
                1,
            ),
        )
        .ns(namespace(true, Some("team-a"))),
        Case::create("cluster owned without the labels", {
            let mut owned = cluster(&[], 1);
            owned["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "demo", "uid": "u"}]);
            owned
        })
        .ns(namespace(true, Some("team-a"))),
        Case::create("no default", job(&[], 1)),
    ];
    for case in none {
        assert_eq!(case.review().patch, None, "{}", case.name);
    }
}

#[test]
fn conflicting_policy_defaults_warn_and_the_first_by_name_wins() {
    let object = job(&[], 1);
    let admission = Case::create("conflict", object.clone())
        .policies(vec![
            policy("zz", json!({"defaultQueue": "team-b"})),
            policy("aa", json!({"defaultQueue": "team-a"})),
        ])
        .review();
    assert_eq!(
        patched(&admission, &object)["metadata"]["labels"][Q],
        "team-a"
    );
    assert!(
        admission
            .findings
            .iter()
            .any(|f| f.rule == rules::POLICY_DEFAULT_QUEUE_CONFLICT && !f.is_error())
    );
}

#[test]
fn live_cluster_from_status() {
    let job = |status: &str, cluster: &str, shutdown: bool| {
        let mut j = with_status(job(&[], 1), status, cluster);
        j["spec"]["shutdownAfterJobFinishes"] = json!(shutdown);
        j
    };
    for status in [
        "Initializing",
        "Waiting",
        "Running",
        "Suspending",
        "Retrying",
    ] {
        assert!(live_cluster(&job(status, "c", true)).is_some(), "{status}");
    }
    for status in ["Complete", "Failed"] {
        assert!(live_cluster(&job(status, "c", false)).is_some(), "{status}");
        assert!(live_cluster(&job(status, "c", true)).is_none(), "{status}");
    }
    for status in ["", "Suspended", "ValidationFailed"] {
        assert!(live_cluster(&job(status, "c", false)).is_none(), "{status}");
    }
    assert!(live_cluster(&job("Running", "", false)).is_none());
    assert_eq!(
        live_cluster(&job("Running", "demo-abc", false)),
        Some(LiveCluster {
            name: "demo-abc".into(),
            deployment_status: "Running".into()
        })
    );
}

#[test]
fn update_rules() {
    let running = |labels: &[(&str, &str)]| with_status(job(labels, 1), "Running", "demo-x");
    let suspended = |labels: &[(&str, &str)]| with_status(job(labels, 1), "Suspended", "demo-x");
    let mut resized = running(&[(Q, "team-b")]);
    resized["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = json!(2);
    check_table(vec![
        (
            Case::update(
                "queue change, live",
                running(&[(Q, "team-b")]),
                running(&[(Q, "team-a")]),
            ),
            rules::QUEUE_LABEL_IMMUTABLE,
            ERROR,
        ),
        (
            Case::update(
                "queue removed, live",
                running(&[(Q, "team-b")]),
                running(&[]),
            ),
            rules::QUEUE_LABEL_IMMUTABLE,
            ERROR,
        ),
        (
            Case::update(
                "queue unchanged, live",
                running(&[(Q, "team-b")]),
                running(&[(Q, "team-b")]),
            ),
            rules::QUEUE_LABEL_IMMUTABLE,
            None,
        ),
        (
            Case::update(
                "queue change, suspended",
                suspended(&[(Q, "team-b")]),
                suspended(&[(Q, "team-a")]),
            ),
            rules::QUEUE_LABEL_IMMUTABLE,
            None,
        ),
        (
            Case::update(
                "queue change, not opted in",
                running(&[(Q, "team-b")]),
                running(&[(Q, "team-a")]),
            )
            .ns(namespace(false, None)),
            rules::QUEUE_LABEL_IMMUTABLE,
            None,
        ),
        (
            Case::update(
                "queue change, standalone cluster",
                cluster(&[(Q, "team-b")], 1),
                cluster(&[(Q, "team-a")], 1),
            ),
            rules::QUEUE_LABEL_IMMUTABLE,
            ERROR,
        ),
        (
            Case::update(
                "priority change, live",
                running(&[(Q, "team-b"), (P, "a")]),
                running(&[(Q, "team-b"), (P, "b")]),
            ),
            rules::PRIORITY_LABEL_IMMUTABLE,
            ERROR,
        ),
        (
            Case::update(
                "priority unchanged, live",
                running(&[(Q, "team-b"), (P, "a")]),
                running(&[(Q, "team-b"), (P, "a")]),
            ),
            rules::PRIORITY_LABEL_IMMUTABLE,
            None,
        ),
        (
            Case::update(
                "cluster spec change, started",
                running(&[(Q, "team-b")]),
                resized,
            ),
            rules::RAYJOB_CLUSTER_SPEC_CHANGE_IGNORED,
            WARNING,
        ),
        (
            Case::update(
                "cluster spec change, new",
                job(&[(Q, "team-b")], 1),
                job(&[(Q, "team-b")], 2),
            ),
            rules::RAYJOB_CLUSTER_SPEC_CHANGE_IGNORED,
            None,
        ),
    ]);
}

#[test]
fn queue_label_change_message() {
    let old = with_status(job(&[(Q, "team-b")], 1), "Running", "demo-x");
    let new = with_status(job(&[(Q, "team-a")], 1), "Running", "demo-x");
    let admission = Case::update("change", old, new).review();
    assert_eq!(
        admission.denial().as_deref(),
        Some(
            "metadata.labels[volcano.sh/queue-name]: cannot change from \"team-b\" to \"team-a\" while the RayJob has a live RayCluster \"demo-x\" (status.jobDeploymentStatus Running): its PodGroup keeps the value it was created with; delete and re-create the RayJob to change it"
        )
    );
}

#[test]
fn errors_the_old_object_had_are_ratcheted_to_warnings() {
    // The queue was closed after the RayJob was admitted: adding a finalizer must still work.
    let old = with_status(job(&[(Q, "closed")], 1), "Running", "demo-x");
    let mut new = old.clone();
    new["metadata"]["finalizers"] = json!([keys::RAYJOB_FINALIZER]);
    let admission = Case::update("finalizer", old.clone(), new).review();
    assert!(admission.allowed(), "{:?}", admission.findings);
    assert!(
        admission
            .findings
            .iter()
            .any(|f| f.rule == rules::VOLCANO_QUEUE_NOT_OPEN && !f.is_error())
    );
    // A new violation is still an error: the old object was fine, the new one is not.
    let old = job(&[(Q, "team-a")], 1);
    let admission = Case::update("grow", old, job(&[(Q, "team-a")], 20)).review();
    assert!(!admission.allowed());
}

#[test]
fn foundation_rules_still_apply() {
    let mut broken = job(&[(Q, "team-b")], 1);
    broken["spec"]["suspend"] = json!(true);
    let admission = Case::create("suspend", broken).review();
    assert!(!admission.allowed());
    assert!(
        admission
            .denial()
            .is_some_and(|d| d.contains("shutdownAfterJobFinishes set to false")),
        "{:?}",
        admission.denial()
    );
}

/// The `unsupported-*` rules that fire on a RayJob with GCS fault tolerance, reviewed with the
/// process-wide reconciler `default` in a namespace with `reconciler_label` (if any).
fn unsupported_rules(default: ReconcilerKind, reconciler_label: Option<&str>) -> Vec<String> {
    let mut fault_tolerant = job(&[(Q, "team-b")], 1);
    fault_tolerant["spec"]["rayClusterSpec"]["gcsFaultToleranceOptions"] =
        json!({"redisAddress": "redis:6379"});
    let mut ns = namespace(true, None);
    if let Some(value) = reconciler_label {
        ns.labels
            .get_or_insert_default()
            .insert(keys::RECONCILER_LABEL.to_string(), value.to_string());
    }
    let queues = queues();
    let context = ValidationContext {
        reconciler: default,
        ..ValidationContext::default()
    };
    review_ray_object(RayObjectReview {
        operation: Operation::Create,
        object: fault_tolerant,
        old_object: None,
        namespace: &ns,
        opt_in: &OptInLabel::default(),
        queues: &queues,
        policies: &[],
        nodes: &NodeKinds::from_shapes([node("big", "256", "1Ti")]),
        context: &context,
    })
    .findings
    .into_iter()
    .filter(|f| f.rule.starts_with("unsupported-"))
    .map(|f| format!("{:?} {}", f.severity, f.rule))
    .collect()
}

#[test]
fn the_namespaces_reconciler_label_decides_what_is_unsupported() {
    let denied = vec!["Error unsupported-gcs-fault-tolerance".to_string()];
    // The label wins over the process-wide setting, both ways.
    assert_eq!(
        unsupported_rules(ReconcilerKind::Kuberay, Some("raygate")),
        denied
    );
    assert!(unsupported_rules(ReconcilerKind::Raygate, Some("kuberay")).is_empty());
    // Without the label (or with one the reconciler does not know), the process-wide setting.
    assert_eq!(unsupported_rules(ReconcilerKind::Raygate, None), denied);
    assert!(unsupported_rules(ReconcilerKind::Kuberay, None).is_empty());
    assert_eq!(
        unsupported_rules(ReconcilerKind::Raygate, Some("KubeRay")),
        denied
    );
    assert!(unsupported_rules(ReconcilerKind::Kuberay, Some("volcano")).is_empty());
}

#[test]
fn other_kinds_are_refused_with_a_reason() {
    let admission = Case::create("pod", json!({"apiVersion": "v1", "kind": "Pod"})).review();
    assert_eq!(
        admission.denial().as_deref(),
        Some(
            "raygate reviews only ray.io/v1 and ray.io/v1alpha1 RayJobs and RayClusters, not v1 Pod"
        )
    );
    let admission = Case::create("garbage", json!(42)).review();
    assert!(!admission.allowed());
}

#[test]
fn rule_names_are_unique() {
    let mut names = rules::ALL.to_vec();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), rules::ALL.len());
}

#[test]
fn every_rule_is_in_the_catalogue() {
    let catalogue = include_str!("../../../docs/queue-policy.md");
    let policy_rules = [
        crate::queue_policy::rules::POLICY_MALFORMED,
        crate::queue_policy::rules::POLICY_UNKNOWN_FIELD,
        crate::queue_policy::rules::POLICY_SELECTOR_INVALID,
        crate::queue_policy::rules::POLICY_QUEUE_NAME_INVALID,
        crate::queue_policy::rules::POLICY_DEFAULT_QUEUE_NOT_ALLOWED,
        crate::queue_policy::rules::POLICY_PRIORITY_CLASS_INVALID,
        crate::queue_policy::rules::POLICY_MAX_MIN_MEMBER_INVALID,
        crate::queue_policy::rules::POLICY_MAX_MIN_RESOURCES_INVALID,
        crate::queue_policy::rules::POLICY_ENFORCEMENT_INVALID,
        crate::queue_policy::rules::POLICY_ALLOWS_NOTHING,
    ];
    let missing: Vec<&str> = rules::ALL
        .iter()
        .chain(&policy_rules)
        .copied()
        .filter(|rule| !catalogue.contains(&format!("`{rule}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "missing from docs/queue-policy.md: {missing:?}"
    );
}

const HEAD_FIELD: &str = "spec.rayClusterSpec.headGroupSpec.template.spec";

/// The feasibility findings of `case` as `(rule, severity, field: message)`.
fn feasibility_findings(case: &Case) -> Vec<(String, Severity, String)> {
    case.review()
        .findings
        .into_iter()
        .filter(|f| {
            [rules::RAY_OBJECT_INFEASIBLE, rules::FEASIBILITY_NOT_CHECKED]
                .contains(&f.rule.as_str())
        })
        .map(|f| (f.rule.clone(), f.severity, f.to_string()))
        .collect()
}

#[test]
fn an_infeasible_object_is_a_warning_by_default_and_denied_only_by_a_deny_policy() {
    let tiny = || vec![node("real-1", "8", "1536Mi"), node("real-2", "8", "1Gi")];
    let warning = (
        rules::RAY_OBJECT_INFEASIBLE.to_string(),
        Severity::Warning,
        format!("{HEAD_FIELD}: head Pod asks memory 2Gi; the largest node offers 1536Mi (real-1)"),
    );
    let case = Case::create("tiny nodes", job(&[], 0)).nodes(tiny());
    assert_eq!(feasibility_findings(&case), std::slice::from_ref(&warning));
    assert!(case.review().allowed());
    // A feasible object gets nothing.
    let fits = Case::create("big node", job(&[], 2));
    assert_eq!(feasibility_findings(&fits), []);

    let deny = policy("strict", json!({"infeasible": "Deny"}));
    let denied = Case::create("deny", job(&[], 0))
        .nodes(tiny())
        .policies(vec![
            policy("lenient", json!({"infeasible": "Ignore"})),
            deny.clone(),
        ]);
    let admission = denied.review();
    assert!(!admission.allowed());
    assert_eq!(
        admission.denial().as_deref(),
        Some(
            format!("{HEAD_FIELD}: head Pod asks memory 2Gi; the largest node offers 1536Mi (real-1) (QueuePolicy \"strict\" denies what can never be scheduled: infeasible: Deny)")
                .as_str()
        )
    );
    // Audit mode never denies; Ignore only when every matching policy says so.
    let audit = policy(
        "audit",
        json!({"infeasible": "Deny", "enforcement": "Warn"}),
    );
    let audited = Case::create("audit", job(&[], 0))
        .nodes(tiny())
        .policies(vec![audit]);
    assert_eq!(
        feasibility_findings(&audited),
        std::slice::from_ref(&warning)
    );
    let ignore = policy("quiet", json!({"infeasible": "Ignore"}));
    let ignored = Case::create("ignore", job(&[], 0))
        .nodes(tiny())
        .policies(vec![ignore.clone()]);
    assert_eq!(feasibility_findings(&ignored), []);
    let mixed = Case::create("ignore and default", job(&[], 0))
        .nodes(tiny())
        .policies(vec![ignore, policy("plain", json!({}))]);
    assert_eq!(feasibility_findings(&mixed), [warning]);

    // An UPDATE of an object that was already infeasible is not denied (ratcheting).
    let update = Case::update("update", job(&[], 0), job(&[("team", "x")], 0))
        .nodes(tiny())
        .policies(vec![deny.clone()]);
    assert!(update.review().allowed(), "{:?}", update.review().findings);
    // Growing a feasible object beyond the nodes is.
    let grown = Case::update("grown", job(&[], 0), {
        let mut object = job(&[], 0);
        object["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"]
            [0]["resources"]["requests"]["cpu"] = json!("300");
        object
    })
    .policies(vec![deny]);
    assert!(!grown.review().allowed());
}

#[test]
fn with_no_node_known_feasibility_is_not_checked_and_never_denies() {
    let case = Case::create("no nodes", job(&[], 0))
        .nodes(Vec::new())
        .policies(vec![policy("strict", json!({"infeasible": "Deny"}))]);
    assert_eq!(
        feasibility_findings(&case),
        [(
            rules::FEASIBILITY_NOT_CHECKED.to_string(),
            Severity::Warning,
            "spec.rayClusterSpec: the cluster has no schedulable nodes yet; feasibility not checked (a QueuePolicy's nodeTemplates can name the nodes an autoscaler adds)"
                .to_string()
        )]
    );
    assert!(case.review().allowed());
    let cluster = Case::create("no nodes, RayCluster", cluster(&[], 0)).nodes(Vec::new());
    assert_eq!(
        feasibility_findings(&cluster)
            .into_iter()
            .map(|f| f.2)
            .collect::<Vec<_>>(),
        [
            "spec: the cluster has no schedulable nodes yet; feasibility not checked (a QueuePolicy's nodeTemplates can name the nodes an autoscaler adds)"
        ]
    );
}

#[test]
fn a_policys_node_templates_judge_a_cluster_scaled_to_zero() {
    let pool = |cpu: &str| {
        policy(
            "autoscaled",
            json!({"infeasible": "Deny", "nodeTemplates": [
                {"name": "pool", "allocatable": {"cpu": cpu, "memory": "64Gi"}}]}),
        )
    };
    // No node exists, but the autoscaler can add nodes of the pool: checked, and it fits.
    let fits = Case::create("scale from zero", job(&[], 3))
        .nodes(Vec::new())
        .policies(vec![pool("16")]);
    assert_eq!(feasibility_findings(&fits), []);
    assert!(fits.review().allowed());
    // A Pod larger than the template's nodes is infeasible, and the template is named.
    let too_big = Case::create("larger than the pool", job(&[], 0))
        .nodes(Vec::new())
        .policies(vec![pool("100m")]);
    let found = feasibility_findings(&too_big);
    assert!(
        found.iter().any(
            |(rule, severity, message)| rule == rules::RAY_OBJECT_INFEASIBLE
                && *severity == Severity::Error
                && message.contains("the largest node offers 100m (template pool)")
        ),
        "{found:?}"
    );
    assert!(!too_big.review().allowed());
}

#[test]
fn feasibility_follows_the_policy_scope() {
    let tiny = vec![node("real-1", "8", "1536Mi")];
    // Not opted in and naming no queue: only the validation rules.
    let elsewhere = Case::create("not opted in", job(&[], 0))
        .ns(namespace(false, None))
        .nodes(tiny.clone());
    assert_eq!(feasibility_findings(&elsewhere), []);
    // A RayJob's own RayCluster was checked through its RayJob.
    let owned = Case::create(
        "owned cluster",
        cluster(
            &[
                (keys::ORIGINATED_FROM_CRD_LABEL, "RayJob"),
                (keys::ORIGINATED_FROM_CR_NAME_LABEL, "j"),
            ],
            0,
        ),
    )
    .nodes(tiny.clone());
    assert_eq!(feasibility_findings(&owned), []);
    // Not opted in but naming a Volcano queue: the namespace's policies apply, and so does
    // feasibility.
    let queued = Case::create("queue elsewhere", job(&[(Q, "team-b")], 0))
        .ns(namespace(false, None))
        .nodes(tiny)
        .policies(vec![policy("p", json!({}))]);
    assert_eq!(feasibility_findings(&queued).len(), 1);
}
