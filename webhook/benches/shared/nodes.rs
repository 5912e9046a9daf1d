//! Realistic Node objects for the benchmarks, as a managed Kubernetes service lists them.

use k8s_openapi::api::core::v1::Node;
use serde_json::json;

/// Node `i` as a managed Kubernetes service reports it: 14 labels, 8 allocatable resources, 5
/// conditions, 30 images. With `gpu`, an 8-GPU node tainted `nvidia.com/gpu=present:NoSchedule`;
/// else a 32-CPU node without taints or GPUs.
pub fn node(i: usize, gpu: bool) -> Node {
    let (pool, instance, accelerator) = if gpu {
        ("ml-gpu-pool", "a3-highgpu-8g", "nvidia-h100-80gb")
    } else {
        ("ml-cpu-pool", "n2-standard-32", "none")
    };
    let name = format!("gke-{pool}-7f3a9c2d-{i:05}");
    let (cpu, memory, gpus) = if gpu {
        ("207740m", "1826732532Ki", "8")
    } else {
        ("31850m", "127601492Ki", "0")
    };
    let taints = if gpu {
        json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    } else {
        json!([])
    };
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
                "beta.kubernetes.io/instance-type": instance,
                "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": instance,
                "topology.kubernetes.io/region": "europe-west4",
                "topology.kubernetes.io/zone": "europe-west4-a",
                "cloud.google.com/gke-nodepool": pool,
                "cloud.google.com/gke-accelerator": accelerator,
                "cloud.google.com/machine-family": if gpu { "a3" } else { "n2" },
                "nvidia.com/gpu.present": gpu.to_string(),
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
            "taints": taints
        },
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "ephemeral-storage": "47060071478",
                            "pods": "110", "nvidia.com/gpu": gpus, "hugepages-1Gi": "0",
                            "hugepages-2Mi": "0", "attachable-volumes-gce-pd": "127"},
            "capacity": {"cpu": cpu, "memory": memory, "ephemeral-storage": "98831908Ki",
                         "pods": "110", "nvidia.com/gpu": gpus, "hugepages-1Gi": "0",
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
