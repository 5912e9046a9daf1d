//! What the decisions read of the objects a reconciler only observes.
//!
//! The reconciler keeps every Ray Pod it watches in memory (docs/reconciler.md, "Memory"), and
//! most of a Pod is its spec: containers with their command, environment, probes, volumes. No
//! decision reads that spec but for `nodeName`; the spec of a Pod raygate creates comes from its
//! RayCluster's template, never from the Pod. Keeping only what is read makes the Pod cache a
//! fraction of its size with the same answers (tested in `cluster::decide` and `pending`).

use k8s_openapi::api::core::v1::{Pod, PodSpec};

/// Keeps of `pod` what the decisions read: its metadata, its status and, of its spec, only
/// `nodeName` (a gang member that has one is bound, [`crate::pending::GangPods`]). Everything
/// else of the spec is dropped; the Pod must never be written back from what is left.
pub fn keep_what_decisions_read(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        *spec = PodSpec {
            node_name: spec.node_name.take(),
            ..PodSpec::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_node_name_of_the_spec_is_kept_and_metadata_and_status_stay_whole() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo-head", "namespace": "team",
                         "labels": {"ray.io/node-type": "head"},
                         "annotations": {"scheduling.k8s.io/group-name": "ray-demo-pg"}},
            "spec": {"nodeName": "real-1", "schedulerName": "volcano",
                     "containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0",
                                     "env": [{"name": "RAY_ADDRESS", "value": "x"}]}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "containerStatuses": [{"name": "ray-head", "ready": true, "image": "i",
                                              "imageID": "", "restartCount": 0}]}
        }))
        .expect("a Pod");
        let mut kept = pod.clone();
        keep_what_decisions_read(&mut kept);
        assert_eq!(kept.metadata, pod.metadata);
        assert_eq!(kept.status, pod.status);
        assert_eq!(
            kept.spec,
            Some(PodSpec {
                node_name: Some("real-1".to_string()),
                ..PodSpec::default()
            })
        );
    }

    #[test]
    fn a_pod_without_a_spec_stays_without_one() {
        let mut pod = Pod::default();
        keep_what_decisions_read(&mut pod);
        assert_eq!(pod, Pod::default());
    }
}
