//! The memory of the webhook's Node cache: what holding the shapes of a cluster's Nodes costs,
//! per 1,000 Nodes, next to holding the Node objects themselves (as a reflector store would).
//!
//! Run with `cargo bench -p raygate-webhook --bench node_cache`. Builds the cache the way the
//! webhook fills it (page by page, each Node reduced to its shape before the next page is
//! read) from realistic Nodes (a GPU node as a managed Kubernetes service reports it: 14 labels,
//! a taint, 8 allocatable resources, 5 conditions, 30 images), and prints the growth of the
//! process's resident set (`VmRSS`) per 1,000 Nodes for the shapes and for the Nodes.

use std::hint::black_box;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use raygate_webhook::{Caches, Preloaded};
use serde_json::json;

/// The same allocator as the `raygate` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Nodes held in each measurement.
const NODES: usize = 20_000;
/// Nodes per page of the initial list.
const PAGE: usize = 100;

/// A GPU node as a managed Kubernetes service reports it.
fn node(i: usize) -> Node {
    let name = format!("gke-ml-gpu-pool-7f3a9c2d-{i:05}");
    let images: Vec<_> = (0..30)
        .map(|j| {
            json!({"names": [
                format!("registry.example.com/team/image-{j}@sha256:{:064x}", i * 31 + j),
                format!("registry.example.com/team/image-{j}:v1.{j}.0")],
                "sizeBytes": 123_456_789 + j})
        })
        .collect();
    let conditions: Vec<_> = [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
        "NetworkUnavailable",
    ]
    .iter()
    .map(|t| {
        json!({"type": t, "status": "False", "reason": format!("Kubelet{t}"),
            "message": format!("kubelet reports {t} as it is"),
            "lastHeartbeatTime": "2026-12-07T01:00:00Z", "lastTransitionTime": "2026-11-01T10:00:00Z"})
    })
    .collect();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": format!("5b1c6a3e-0000-4000-8000-{i:012}"),
            "resourceVersion": "987654321", "creationTimestamp": "2026-11-01T10:00:00Z",
            "labels": {
                "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/instance-type": "a3-highgpu-8g",
                "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "a3-highgpu-8g",
                "topology.kubernetes.io/region": "europe-west4",
                "topology.kubernetes.io/zone": "europe-west4-a",
                "cloud.google.com/gke-nodepool": "ml-gpu-pool",
                "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
                "cloud.google.com/machine-family": "a3",
                "nvidia.com/gpu.present": "true",
                "team": "ml"},
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "container.googleapis.com/instance_id": format!("{}", 7_000_000_000_u64 + i as u64),
                "csi.volume.kubernetes.io/nodeid": format!("{{\"pd.csi.storage.gke.io\":\"projects/p/zones/europe-west4-a/instances/{i}\"}}")}
        },
        "spec": {
            "podCIDR": "10.4.0.0/24", "podCIDRs": ["10.4.0.0/24"],
            "providerID": format!("gce://p/europe-west4-a/{i}"),
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        },
        "status": {
            "allocatable": {"cpu": "207740m", "memory": "1826732532Ki", "ephemeral-storage": "47060071478",
                            "pods": "110", "nvidia.com/gpu": "8", "hugepages-1Gi": "0",
                            "hugepages-2Mi": "0", "attachable-volumes-gce-pd": "127"},
            "capacity": {"cpu": "208", "memory": "1871940596Ki", "ephemeral-storage": "98831908Ki",
                         "pods": "110", "nvidia.com/gpu": "8", "hugepages-1Gi": "0",
                         "hugepages-2Mi": "0", "attachable-volumes-gce-pd": "127"},
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                          {"type": "ExternalIP", "address": "34.0.0.1"},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": format!("{i:032x}"), "systemUUID": format!("{i:032x}"),
                "bootID": format!("{i:032x}"), "kernelVersion": "6.1.100+", "osImage": "Container-Optimized OS",
                "containerRuntimeVersion": "containerd://1.7.24", "kubeletVersion": "v1.37.2",
                "kubeProxyVersion": "v1.37.2", "operatingSystem": "linux", "architecture": "amd64"},
            "images": images
        }
    }))
    .expect("a Node")
}

/// The process's resident set, KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// KiB per 1,000 Nodes of a growth of `grown` KiB.
fn per_thousand(grown: u64) -> f64 {
    grown as f64 * 1000.0 / NODES as f64
}

fn main() {
    // Warm the allocator and the JSON machinery, so that neither is counted.
    black_box(node(0));

    let before = rss_kib();
    let caches = Caches::preloaded_in_pages((0..NODES / PAGE).map(|page| Preloaded {
        nodes: (page * PAGE..(page + 1) * PAGE).map(node).collect(),
        ..Preloaded::default()
    }));
    let shapes = caches.nodes();
    let shapes_grown = rss_kib().saturating_sub(before);
    assert_eq!(shapes.len(), NODES);

    let before = rss_kib();
    let whole: Vec<Arc<Node>> = (0..NODES).map(|i| Arc::new(node(i))).collect();
    let whole_grown = rss_kib().saturating_sub(before);
    black_box(&whole);

    println!("Node cache memory, {NODES} Nodes (VmRSS growth):");
    println!(
        "  node shapes (the webhook's cache): {:.0} KiB per 1,000 Nodes",
        per_thousand(shapes_grown)
    );
    println!(
        "  whole Node objects:                {:.0} KiB per 1,000 Nodes",
        per_thousand(whole_grown)
    );
    black_box(&shapes);
}
