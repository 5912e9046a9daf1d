//! Each check shown firing and not firing, on objects checked as the webhook checks them.

use serde_json::{Value, json};

use super::*;
use crate::check::check_object;
use crate::validation::ValidationContext;

/// A node with `allocatable` and whatever else `extra` sets (labels, spec).
fn node(name: &str, allocatable: Value, extra: Value) -> NodeShape {
    let mut object = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name}, "status": {"allocatable": allocatable}});
    if let Some(labels) = extra.get("labels") {
        object["metadata"]["labels"] = labels.clone();
    }
    if let Some(spec) = extra.get("spec") {
        object["spec"] = spec.clone();
    }
    NodeShape::of(&serde_json::from_value(object).expect("a Node"))
}

fn small(name: &str) -> NodeShape {
    node(
        name,
        json!({"cpu": "2", "memory": "8Gi", "pods": "110"}),
        json!({}),
    )
}

fn container(requests: Value) -> Value {
    json!({"name": "ray", "image": "rayproject/ray:2.60.0", "resources": {"requests": requests}})
}

fn pod_spec(requests: Value, extra: Value) -> Value {
    let mut spec = json!({"containers": [container(requests)]});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            spec[k] = v;
        }
    }
    spec
}

fn cluster_spec(head: Value, workers: Value) -> Value {
    json!({"headGroupSpec": {"template": {"spec": head}}, "workerGroupSpecs": workers})
}

fn worker(name: &str, replicas: i64, spec: Value) -> Value {
    json!({"groupName": name, "replicas": replicas, "minReplicas": replicas,
           "maxReplicas": replicas, "template": {"spec": spec}})
}

fn job(cluster: Value, extra: Value) -> Value {
    let mut spec = json!({"entrypoint": "python x.py", "rayClusterSpec": cluster});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            spec[k] = v;
        }
    }
    json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
           "metadata": {"name": "demo", "namespace": "ml"}, "spec": spec})
}

fn raycluster(cluster: Value) -> Value {
    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "metadata": {"name": "demo", "namespace": "ml"}, "spec": cluster})
}

fn feasibility(object: Value, nodes: &[NodeShape]) -> Feasibility {
    let checked = check_object(object, &ValidationContext::default()).expect("a Ray kind");
    assert!(checked.report.valid, "{:?}", checked.report.findings);
    let gang = checked.gang.expect("sized").expect("a gang");
    let nodes = NodeKinds::from_shapes(nodes.iter().cloned());
    check_feasibility((&checked.typed.expect("typed")).into(), &gang, &nodes)
}

/// The findings' messages, each with its field.
fn found(object: Value, nodes: &[NodeShape]) -> Vec<String> {
    match feasibility(object, nodes) {
        Feasibility::Checked(found) => found.iter().map(|f| format!("{}: {f}", f.field)).collect(),
        Feasibility::NoNodes => panic!("no nodes"),
    }
}

fn head_only(head: Value) -> Value {
    raycluster(cluster_spec(head, json!([])))
}

const HEAD: &str = "spec.headGroupSpec.template.spec";

#[test]
fn the_issues_rayjob_is_infeasible_for_head_and_workers() {
    let object = job(
        cluster_spec(
            pod_spec(json!({"cpu": "64", "memory": "8Gi"}), json!({})),
            json!([worker(
                "gpu",
                4,
                pod_spec(json!({"cpu": "1", "nvidia.com/gpu": "8"}), json!({}))
            )]),
        ),
        json!({}),
    );
    assert_eq!(
        found(object, &[small("real-1"), small("real-2")]),
        [
            "spec.rayClusterSpec.headGroupSpec.template.spec: head Pod asks cpu 64; the largest node offers 2 (real-1)",
            "spec.rayClusterSpec.workerGroupSpecs[0].template.spec: worker group \"gpu\" Pod asks nvidia.com/gpu 8; no node offers nvidia.com/gpu",
        ]
    );
}

#[test]
fn an_object_managed_elsewhere_makes_no_pod_here_and_has_nothing_to_find() {
    let cluster = cluster_spec(
        pod_spec(json!({"cpu": "64"}), json!({})),
        json!([worker(
            "gpu",
            4,
            pod_spec(json!({"cpu": "1", "nvidia.com/gpu": "8"}), json!({}))
        )]),
    );
    let multikueue = json!({"managedBy": "kueue.x-k8s.io/multikueue"});
    let nodes = [small("real-1")];
    assert_eq!(
        feasibility(job(cluster.clone(), multikueue.clone()), &nodes),
        Feasibility::Checked(Vec::new())
    );
    assert_eq!(
        feasibility(job(cluster.clone(), multikueue), &[]),
        Feasibility::Checked(Vec::new())
    );
    let mut managed = raycluster(cluster.clone());
    managed["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    assert_eq!(
        feasibility(managed, &nodes),
        Feasibility::Checked(Vec::new())
    );
    // KubeRay's own value is raygate's reconciler too: the object is checked.
    let kuberay = json!({"managedBy": "ray.io/kuberay-operator"});
    assert_eq!(found(job(cluster, kuberay), &nodes).len(), 2);
}

#[test]
fn a_pod_that_fits_is_feasible_and_quantities_compare_by_value() {
    let nodes = [node(
        "n",
        json!({"cpu": "1e3", "memory": "2Gi", "ephemeral-storage": "1Gi"}),
        json!({}),
    )];
    let fits = head_only(pod_spec(
        json!({"cpu": "500m", "memory": "2048Mi", "ephemeral-storage": "1073741824"}),
        json!({}),
    ));
    assert_eq!(found(fits, &nodes), Vec::<String>::new());
    let too_big = head_only(pod_spec(json!({"memory": "2049Mi"}), json!({})));
    assert_eq!(
        found(too_big, &nodes),
        [format!(
            "{HEAD}: head Pod asks memory 2049Mi; the largest node offers 2Gi (n)"
        )]
    );
    let many_cpus = head_only(pod_spec(json!({"cpu": "1001"}), json!({})));
    assert_eq!(
        found(many_cpus, &nodes),
        [format!(
            "{HEAD}: head Pod asks cpu 1001; the largest node offers 1e3 (n)"
        )]
    );
}

#[test]
fn limits_stand_in_for_requests_and_init_containers_and_overhead_count() {
    let nodes = [node("n", json!({"cpu": "4", "memory": "4Gi"}), json!({}))];
    let limits_only = head_only(json!({"containers": [
        {"name": "ray", "resources": {"limits": {"cpu": "5"}}}]}));
    assert_eq!(
        found(limits_only, &nodes),
        [format!(
            "{HEAD}: head Pod asks cpu 5; the largest node offers 4 (n)"
        )]
    );
    // An init container runs alone: the larger of it and the containers' sum counts.
    let init = head_only(json!({
        "containers": [container(json!({"cpu": "2"}))],
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "3"}}}]}));
    assert_eq!(found(init, &nodes), Vec::<String>::new());
    let big_init = head_only(json!({
        "containers": [container(json!({"cpu": "2"}))],
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "4500m"}}}]}));
    assert_eq!(
        found(big_init, &nodes),
        [format!(
            "{HEAD}: head Pod asks cpu 4500m; the largest node offers 4 (n)"
        )]
    );
    // A sidecar (restartPolicy Always) runs next to the containers: it adds up.
    let sidecar = head_only(json!({
        "containers": [container(json!({"cpu": "3"}))],
        "initContainers": [{"name": "proxy", "restartPolicy": "Always",
                            "resources": {"requests": {"cpu": "1500m"}}}]}));
    assert_eq!(
        found(sidecar, &nodes),
        [format!(
            "{HEAD}: head Pod asks cpu 4500m; the largest node offers 4 (n)"
        )]
    );
    let overhead = head_only(json!({
        "containers": [container(json!({"cpu": "3"}))],
        "overhead": {"cpu": "1500m"}}));
    assert_eq!(
        found(overhead, &nodes),
        [format!(
            "{HEAD}: head Pod asks cpu 4500m; the largest node offers 4 (n)"
        )]
    );
}

#[test]
fn every_resource_must_fit_on_one_node_at_once() {
    let nodes = [
        node("cpu-rich", json!({"cpu": "16", "memory": "4Gi"}), json!({})),
        node("mem-rich", json!({"cpu": "2", "memory": "64Gi"}), json!({})),
    ];
    let object = head_only(pod_spec(json!({"cpu": "8", "memory": "32Gi"}), json!({})));
    assert_eq!(
        found(object, &nodes),
        [format!(
            "{HEAD}: head Pod asks cpu 8, memory 32Gi; no single node offers all of it at once"
        )]
    );
}

#[test]
fn extended_resources_are_checked_like_any_other() {
    let gpu = node(
        "gpu-1",
        json!({"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "4", "example.com/fpga": "0"}),
        json!({}),
    );
    let object = |requests: Value| {
        raycluster(cluster_spec(
            pod_spec(json!({"cpu": "1"}), json!({})),
            json!([worker("w", 1, pod_spec(requests, json!({})))]),
        ))
    };
    assert_eq!(
        found(
            object(json!({"nvidia.com/gpu": "4"})),
            std::slice::from_ref(&gpu)
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        found(
            object(json!({"nvidia.com/gpu": "8"})),
            std::slice::from_ref(&gpu)
        ),
        [
            "spec.workerGroupSpecs[0].template.spec: worker group \"w\" Pod asks nvidia.com/gpu 8; the largest node offers 4 (gpu-1)"
        ]
    );
    assert_eq!(
        found(object(json!({"example.com/fpga": "1"})), &[gpu]),
        [
            "spec.workerGroupSpecs[0].template.spec: worker group \"w\" Pod asks example.com/fpga 1; no node offers example.com/fpga"
        ]
    );
}

#[test]
fn node_selectors_match_labels() {
    let nodes = [
        node(
            "ssd-1",
            json!({"cpu": "8"}),
            json!({"labels": {"disktype": "ssd", "zone": "a"}}),
        ),
        node(
            "hdd-1",
            json!({"cpu": "8"}),
            json!({"labels": {"disktype": "hdd"}}),
        ),
    ];
    let object = |selector: Value| {
        head_only(pod_spec(
            json!({"cpu": "1"}),
            json!({"nodeSelector": selector}),
        ))
    };
    assert_eq!(
        found(object(json!({"disktype": "ssd"})), &nodes),
        Vec::<String>::new()
    );
    assert_eq!(
        found(object(json!({"disktype": "nvme"})), &nodes),
        [format!(
            "{HEAD}: head Pod: no node matches its nodeSelector disktype=nvme"
        )]
    );
    assert_eq!(
        found(object(json!({"disktype": "hdd", "zone": "a"})), &nodes),
        [format!(
            "{HEAD}: head Pod: no node matches its nodeSelector disktype=hdd,zone=a"
        )]
    );
    // Resources are compared on the nodes the selector allows only.
    let big = head_only(pod_spec(
        json!({"cpu": "4"}),
        json!({"nodeSelector": {"disktype": "ssd"}}),
    ));
    let small_ssd = [
        node(
            "ssd-1",
            json!({"cpu": "2"}),
            json!({"labels": {"disktype": "ssd"}}),
        ),
        node("hdd-1", json!({"cpu": "8"}), json!({})),
    ];
    assert_eq!(
        found(big, &small_ssd),
        [format!(
            "{HEAD}: head Pod asks cpu 4; the largest node offers 2 (ssd-1)"
        )]
    );
}

#[test]
fn required_node_affinity_supports_every_operator_and_fields() {
    let nodes = [node(
        "gpu-7",
        json!({"cpu": "8"}),
        json!({"labels": {"zone": "a", "gpus": "8", "pool": "train"}}),
    )];
    let object = |terms: Value| {
        head_only(pod_spec(
            json!({"cpu": "1"}),
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": terms}}}}),
        ))
    };
    let expression = |key: &str, operator: &str, values: Value| {
        let mut requirement = json!({"key": key, "operator": operator});
        if !values.is_null() {
            requirement["values"] = values;
        }
        json!([{"matchExpressions": [requirement]}])
    };
    let table = [
        (expression("zone", "In", json!(["a", "b"])), true),
        (expression("zone", "In", json!(["b"])), false),
        (expression("zone", "NotIn", json!(["b"])), true),
        (expression("zone", "NotIn", json!(["a"])), false),
        (expression("missing", "NotIn", json!(["a"])), true),
        (expression("pool", "Exists", Value::Null), true),
        (expression("missing", "Exists", Value::Null), false),
        (expression("missing", "DoesNotExist", Value::Null), true),
        (expression("pool", "DoesNotExist", Value::Null), false),
        (expression("gpus", "Gt", json!(["4"])), true),
        (expression("gpus", "Gt", json!(["8"])), false),
        (expression("gpus", "Lt", json!(["9"])), true),
        (expression("gpus", "Lt", json!(["8"])), false),
        (expression("pool", "Gt", json!(["1"])), false),
        (
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-7"]}]}]),
            true,
        ),
        (
            json!([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["gpu-7"]}]}]),
            false,
        ),
        // Terms are ORed, the requirements of one term ANDed.
        (
            json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                   {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                         {"key": "pool", "operator": "Exists"}]}]),
            true,
        ),
        (
            json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                         {"key": "pool", "operator": "DoesNotExist"}]}]),
            false,
        ),
    ];
    for (terms, feasible) in table {
        let expected: Vec<String> = if feasible {
            Vec::new()
        } else {
            vec![format!(
                "{HEAD}: head Pod: no node matches its required node affinity (requiredDuringSchedulingIgnoredDuringExecution)"
            )]
        };
        assert_eq!(found(object(terms.clone()), &nodes), expected, "{terms}");
    }
}

#[test]
fn taints_must_be_tolerated_and_prefer_no_schedule_is_ignored() {
    let tainted = |effect: &str| {
        node(
            "real-1",
            json!({"cpu": "8"}),
            json!({"spec": {"taints": [{"key": "dedicated", "value": "infra", "effect": effect}]}}),
        )
    };
    let object = |tolerations: Value| {
        head_only(pod_spec(
            json!({"cpu": "1"}),
            json!({"tolerations": tolerations}),
        ))
    };
    let refused = [format!(
        "{HEAD}: head Pod: no node tolerated: node real-1 has taint dedicated=infra:NoSchedule"
    )];
    assert_eq!(found(object(json!([])), &[tainted("NoSchedule")]), refused);
    assert_eq!(
        found(object(json!([])), &[tainted("PreferNoSchedule")]),
        Vec::<String>::new()
    );
    assert_eq!(
        found(object(json!([])), &[tainted("NoExecute")]),
        [format!(
            "{HEAD}: head Pod: no node tolerated: node real-1 has taint dedicated=infra:NoExecute"
        )]
    );
    let table = [
        (
            json!([{"key": "dedicated", "operator": "Equal", "value": "infra"}]),
            true,
        ),
        (
            json!([{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]),
            true,
        ),
        (
            json!([{"key": "dedicated", "value": "infra", "effect": "NoExecute"}]),
            false,
        ),
        (json!([{"key": "dedicated", "value": "gpu"}]), false),
        (json!([{"key": "dedicated", "operator": "Exists"}]), true),
        (json!([{"key": "other", "operator": "Exists"}]), false),
        // An empty key with Exists tolerates every taint.
        (json!([{"operator": "Exists"}]), true),
        (
            json!([{"operator": "Exists", "effect": "NoExecute"}]),
            false,
        ),
    ];
    for (tolerations, feasible) in table {
        let expected: Vec<String> = if feasible {
            Vec::new()
        } else {
            refused.to_vec()
        };
        assert_eq!(
            found(object(tolerations.clone()), &[tainted("NoSchedule")]),
            expected,
            "{tolerations}"
        );
    }
    // Any tolerated node is enough; the message lists at most three others.
    let many: Vec<NodeShape> = (1..=5)
        .map(|i| {
            node(
                &format!("n{i}"),
                json!({"cpu": "8"}),
                json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}),
            )
        })
        .collect();
    assert_eq!(
        found(object(json!([])), &many),
        [format!(
            "{HEAD}: head Pod: no node tolerated: node n1 has taint k:NoSchedule, node n2 has taint k:NoSchedule, node n3 has taint k:NoSchedule (and 2 more nodes)"
        )]
    );
    let mut mixed = many.clone();
    mixed.push(small("clean"));
    assert_eq!(found(object(json!([])), &mixed), Vec::<String>::new());
}

#[test]
fn unschedulable_nodes_are_left_out_and_an_empty_cluster_is_its_own_outcome() {
    let object = head_only(pod_spec(json!({"cpu": "4"}), json!({})));
    let cordoned = node(
        "big",
        json!({"cpu": "64"}),
        json!({"spec": {"unschedulable": true}}),
    );
    assert_eq!(
        found(object.clone(), &[cordoned.clone(), small("real-1")]),
        [format!(
            "{HEAD}: head Pod asks cpu 4; the largest node offers 2 (real-1)"
        )]
    );
    assert_eq!(
        feasibility(object.clone(), &[cordoned]),
        Feasibility::NoNodes
    );
    assert_eq!(
        feasibility(object, &Vec::<NodeShape>::new()),
        Feasibility::NoNodes
    );
}

#[test]
fn multi_host_replicas_need_all_their_pods_on_the_nodes_they_may_use() {
    let tpu = |name: &str| {
        node(
            name,
            json!({"cpu": "16", "google.com/tpu": "4"}),
            json!({"labels": {"pool": "tpu"}}),
        )
    };
    let object = |replicas: i64| {
        let mut group = worker(
            "tpu",
            replicas,
            pod_spec(
                json!({"cpu": "1", "google.com/tpu": "4"}),
                json!({"nodeSelector": {"pool": "tpu"}}),
            ),
        );
        group["numOfHosts"] = json!(2);
        raycluster(cluster_spec(
            pod_spec(json!({"cpu": "1"}), json!({})),
            json!([group]),
        ))
    };
    let nodes = [tpu("tpu-1"), tpu("tpu-2"), tpu("tpu-3"), small("cpu-1")];
    // One replica of two hosts: two of the three TPU nodes.
    assert_eq!(found(object(1), &nodes), Vec::<String>::new());
    // Two replicas of two hosts need four TPU Pods; each node holds one.
    assert_eq!(
        found(object(2), &nodes),
        [
            "spec.workerGroupSpecs[0].template.spec: worker group \"tpu\" needs 4 Pods at once; the nodes they may run on hold at most 3 of them, even empty",
            "spec: the gang needs google.com/tpu 16; the 4 schedulable nodes together offer 12",
        ]
    );
}

#[test]
fn the_submitter_pod_is_checked_in_k8s_job_mode_only() {
    let cluster = cluster_spec(pod_spec(json!({"cpu": "1"}), json!({})), json!([]));
    let nodes = [node("n", json!({"cpu": "2", "memory": "8Gi"}), json!({}))];
    let template = json!({"submitterPodTemplate": {"spec": {
        "restartPolicy": "Never",
        "nodeSelector": {"role": "submitters"},
        "containers": [{"name": "submit", "image": "rayproject/ray:2.60.0",
                        "resources": {"requests": {"cpu": "500m"}}}]}}});
    assert_eq!(
        found(job(cluster.clone(), template.clone()), &nodes),
        [
            "spec.submitterPodTemplate.spec: submitter Pod: no node matches its nodeSelector role=submitters"
        ]
    );
    // HTTPMode has no submitter Pod: the template is not used.
    let mut http = template.clone();
    http["submissionMode"] = json!("HTTPMode");
    assert_eq!(
        found(job(cluster.clone(), http), &nodes),
        Vec::<String>::new()
    );
    // KubeRay's default submitter asks 500m CPU and 200Mi memory.
    let tiny = [node("n", json!({"cpu": "1", "memory": "100Mi"}), json!({}))];
    let head_fits = cluster_spec(pod_spec(json!({"cpu": "100m"}), json!({})), json!([]));
    assert_eq!(
        found(job(head_fits.clone(), json!({})), &tiny),
        [
            "spec.submitterPodTemplate.spec: submitter Pod asks memory 200Mi; the largest node offers 100Mi (n)"
        ]
    );
    // In SidecarMode the default submitter is a container of the head Pod.
    assert_eq!(
        found(
            job(head_fits, json!({"submissionMode": "SidecarMode"})),
            &tiny
        ),
        [
            "spec.rayClusterSpec.headGroupSpec.template.spec: head Pod asks memory 200Mi; the largest node offers 100Mi (n)"
        ]
    );
}

#[test]
fn the_gang_must_fit_all_schedulable_nodes_together() {
    let object = raycluster(cluster_spec(
        pod_spec(json!({"cpu": "2"}), json!({})),
        json!([worker("w", 3, pod_spec(json!({"cpu": "2"}), json!({})))]),
    ));
    let nodes = [small("a"), small("b"), small("c")];
    // Every Pod fits one node, the worker group's three Pods fit three nodes, but head and
    // workers together need 8 CPUs of 6.
    assert_eq!(
        found(object.clone(), &nodes),
        ["spec: the gang needs cpu 8; the 3 schedulable nodes together offer 6"]
    );
    let mut four = nodes.to_vec();
    four.push(small("d"));
    assert_eq!(found(object, &four), Vec::<String>::new());
}

#[test]
fn node_shapes_keep_only_what_feasibility_reads() {
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "real-1", "labels": {"zone": "a"}, "annotations": {"big": "x"}},
        "spec": {"unschedulable": true, "taints": [
            {"key": "a", "effect": "NoSchedule"},
            {"key": "b", "value": "v", "effect": "PreferNoSchedule"},
            {"key": "c", "value": "v", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "1500m", "memory": "lots"},
                   "capacity": {"cpu": "2"}, "images": [{"names": ["ray"], "sizeBytes": 1}]}
    }))
    .expect("a Node");
    let shape = NodeShape::of(&node);
    assert_eq!(shape.name, "real-1");
    assert!(shape.unschedulable);
    let taints: Vec<String> = shape.taints.iter().map(ToString::to_string).collect();
    assert_eq!(taints, ["a:NoSchedule", "c=v:NoExecute"]);
    let allocatable: Vec<String> = shape
        .allocatable
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    assert_eq!(allocatable, ["cpu=1500m"]);
    assert_eq!(shape.labels.get("zone").map(String::as_str), Some("a"));
}

#[test]
fn a_nodes_file_gives_shapes_and_names_what_is_not_a_node() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: real-1}
  status: {allocatable: {cpu: "2"}}
---
apiVersion: v1
kind: Node
metadata: {name: real-2, labels: {disktype: ssd}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
---
apiVersion: v1
kind: Node
metadata: {name: 3}
spec: {unschedulable: "yes"}
"#;
    let results: Vec<Result<NodeShape, String>> = crate::input::parse_documents("nodes.yaml", text)
        .expect("YAML")
        .into_iter()
        .map(|d| node_shape_of_document(d).map_err(|e| e.to_string()))
        .collect();
    assert_eq!(results[0].as_ref().map(|n| n.name.as_str()), Ok("real-1"));
    assert_eq!(results[1].as_ref().map(|n| n.name.as_str()), Ok("real-2"));
    assert_eq!(
        results[2],
        Err("document 3 is Pod (v1), not a v1 Node".to_string())
    );
    assert!(
        results[3]
            .as_ref()
            .is_err_and(|e| e.starts_with("document 4 is not a valid Node: ")),
        "{:?}",
        results[3]
    );
}

/// A node template of a QueuePolicy, as written.
fn template(value: Value) -> NodeShape {
    NodeShape::of_template(&serde_json::from_value(value).expect("a node template"))
}

#[test]
fn node_templates_are_nodes_an_autoscaler_adds_as_many_of_as_needed() {
    let gpu_pool = template(json!({
        "name": "gpu-pool", "labels": {"pool": "gpu"},
        "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                   {"key": "soft", "effect": "PreferNoSchedule"}],
        "allocatable": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "8"}}));
    let gpu_worker = |replicas: i64, tolerate: bool| {
        let mut extra = json!({"nodeSelector": {"pool": "gpu"}});
        if tolerate {
            extra["tolerations"] = json!([{"key": "dedicated", "operator": "Exists"}]);
        }
        raycluster(cluster_spec(
            pod_spec(json!({"cpu": "1"}), json!({})),
            json!([worker(
                "gpu",
                replicas,
                pod_spec(json!({"cpu": "4", "nvidia.com/gpu": "8"}), extra)
            )]),
        ))
    };
    // A cluster scaled to zero is judged against its template: 16 GPU workers fit, since the
    // autoscaler adds as many nodes as the gang needs, and the head fits no template.
    assert_eq!(
        found(gpu_worker(16, true), std::slice::from_ref(&gpu_pool)),
        [
            "spec.headGroupSpec.template.spec: head Pod: no node tolerated: node template gpu-pool has taint dedicated=gpu:NoSchedule"
        ]
    );
    // With a node for the head, nothing is infeasible: not the 16 workers' group, not the
    // gang's 128 GPUs.
    let nodes = [small("cpu-1"), gpu_pool.clone()];
    assert_eq!(found(gpu_worker(16, true), &nodes), Vec::<String>::new());
    // The template's taints count like a node's; its name says it is a template.
    assert_eq!(
        found(gpu_worker(1, false), &nodes),
        [
            "spec.workerGroupSpecs[0].template.spec: worker group \"gpu\" Pod: no node tolerated: node template gpu-pool has taint dedicated=gpu:NoSchedule"
        ]
    );
    // A Pod larger than the template's nodes stays infeasible, and says so.
    let huge = raycluster(cluster_spec(
        pod_spec(
            json!({"cpu": "16"}),
            json!({"tolerations": [{"operator": "Exists"}]}),
        ),
        json!([]),
    ));
    assert_eq!(
        found(huge, &nodes),
        [format!(
            "{HEAD}: head Pod asks cpu 16; the largest node offers 8 (template gpu-pool)"
        )]
    );
}

#[test]
fn a_no_schedule_taint_named_after_an_extended_resource_the_pod_asks_for_is_tolerated() {
    let gpu_node = node(
        "gpu-1",
        json!({"cpu": "8", "nvidia.com/gpu": "8"}),
        json!({"spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}}),
    );
    let asks = |requests: Value| head_only(pod_spec(requests, json!({})));
    // As the ExtendedResourceToleration admission plugin makes it: a GPU Pod tolerates the
    // GPU pool's taint.
    assert_eq!(
        found(
            asks(json!({"cpu": "1", "nvidia.com/gpu": "1"})),
            std::slice::from_ref(&gpu_node)
        ),
        Vec::<String>::new()
    );
    // A Pod that asks no GPU does not.
    assert_eq!(
        found(asks(json!({"cpu": "1"})), std::slice::from_ref(&gpu_node)),
        [format!(
            "{HEAD}: head Pod: no node tolerated: node gpu-1 has taint nvidia.com/gpu=present:NoSchedule"
        )]
    );
    // Nor is a NoExecute taint, or one named after a native resource, tolerated that way.
    let taint = |key: &str, effect: &str| {
        node(
            "n",
            json!({"cpu": "8", "nvidia.com/gpu": "8"}),
            json!({"spec": {"taints": [{"key": key, "effect": effect}]}}),
        )
    };
    for (key, effect) in [("nvidia.com/gpu", "NoExecute"), ("cpu", "NoSchedule")] {
        assert_eq!(
            found(
                asks(json!({"cpu": "1", "nvidia.com/gpu": "1"})),
                &[taint(key, effect)]
            )
            .len(),
            1,
            "{key}:{effect}"
        );
    }
    assert!(is_extended_resource("example.com/fpga"));
    assert!(!is_extended_resource("kubernetes.io/batch"));
    assert!(!is_extended_resource("hugepages-2Mi"));
}

/// Five nodes of one pool: alike but for their names and hostname labels.
fn pool(taints: Value) -> Vec<NodeShape> {
    (1..=5)
        .map(|i| {
            let name = format!("pool-{i}");
            node(
                &name,
                json!({"cpu": "4", "memory": "16Gi"}),
                json!({"labels": {"kubernetes.io/hostname": name, "pool": "p"},
                       "spec": {"taints": taints}}),
            )
        })
        .collect()
}

#[test]
fn the_nodes_of_a_pool_are_judged_together_and_told_apart_where_a_pod_names_one() {
    let cluster = |spec: Value, replicas: i64| {
        raycluster(cluster_spec(
            pod_spec(json!({"cpu": "1"}), json!({})),
            json!([worker("w", replicas, spec)]),
        ))
    };
    let nodes = pool(json!([]));
    assert_eq!(
        NodeKinds::from_shapes(nodes.clone()).kind_count(),
        1,
        "one kind"
    );
    // Ten 3-CPU workers: each node holds one, and the five hold five.
    let three = pod_spec(json!({"cpu": "3"}), json!({}));
    assert_eq!(
        found(cluster(three.clone(), 5), &nodes),
        Vec::<String>::new()
    );
    assert_eq!(
        found(cluster(three, 10), &nodes),
        [
            "spec.workerGroupSpecs[0].template.spec: worker group \"w\" needs 10 Pods at once; the nodes they may run on hold at most 5 of them, even empty",
            "spec: the gang needs cpu 31; the 5 schedulable nodes together offer 20",
        ]
    );
    // A Pod pinned to one node by its hostname label, or by name, is judged on that node.
    let pinned = |extra: Value| pod_spec(json!({"cpu": "3"}), extra);
    let on_host = |host: &str| json!({"nodeSelector": {"kubernetes.io/hostname": host}});
    assert_eq!(
        found(cluster(pinned(on_host("pool-3")), 1), &nodes),
        Vec::<String>::new()
    );
    assert_eq!(
        found(cluster(pinned(on_host("pool-3")), 2), &nodes),
        [
            "spec.workerGroupSpecs[0].template.spec: worker group \"w\" needs 2 Pods at once; the nodes they may run on hold at most 1 of them, even empty"
        ]
    );
    assert_eq!(
        found(cluster(pinned(on_host("pool-9")), 1), &nodes),
        [
            "spec.workerGroupSpecs[0].template.spec: worker group \"w\" Pod: no node matches its nodeSelector kubernetes.io/hostname=pool-9"
        ]
    );
    let by_name = |name: &str| {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [name]}]}]}}}})
    };
    assert_eq!(
        found(cluster(pinned(by_name("pool-2")), 1), &nodes),
        Vec::<String>::new()
    );
    assert_eq!(
        found(cluster(pinned(by_name("pool-2")), 2), &nodes),
        [
            "spec.workerGroupSpecs[0].template.spec: worker group \"w\" needs 2 Pods at once; the nodes they may run on hold at most 1 of them, even empty"
        ]
    );
    // Taints: three nodes named, the others counted.
    let tainted = pool(json!([{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]));
    assert_eq!(
        found(
            cluster(pod_spec(json!({"cpu": "1"}), json!({})), 1),
            &tainted
        )[0],
        "spec.headGroupSpec.template.spec: head Pod: no node tolerated: node pool-1 has taint dedicated=infra:NoSchedule, node pool-2 has taint dedicated=infra:NoSchedule, node pool-3 has taint dedicated=infra:NoSchedule (and 2 more nodes)"
    );
    // The largest node of a kind is named by its first name.
    assert_eq!(
        found(cluster(pod_spec(json!({"cpu": "8"}), json!({})), 1), &nodes),
        [
            "spec.workerGroupSpecs[0].template.spec: worker group \"w\" Pod asks cpu 8; the largest node offers 4 (pool-1)"
        ]
    );
}
