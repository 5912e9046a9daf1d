//! What the decisions read of the objects a reconciler only observes.
//!
//! The reconciler keeps every Ray Pod it watches in memory (docs/reconciler.md, "Memory"), and
//! most of a Pod is its spec: containers with their command, environment, probes, volumes. No
//! decision reads that spec but for `nodeName`; the spec of a Pod raygate creates comes from its
//! RayCluster's template, never from the Pod. Keeping only what is read makes the Pod cache a
//! fraction of its size with the same answers (tested in `cluster::decide` and `pending`).
//!
//! Of every kind it watches, the reconciler drops `managedFields`, which no decision reads,
//! except of PodGroups: [`keep_gang_size_owners`] keeps the little of them `coexist` reads.

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use serde_json::{Map, Value};

use crate::volcano::PodGroup;

/// The fields of a PodGroup's spec that size its gang: `coexist` tells raygate's PodGroups
/// from ones another controller sizes by who owns them.
const GANG_SIZE_FIELDS: [&str; 2] = ["f:minMember", "f:minResources"];

/// Keeps of `pod` what the decisions read: its metadata but for `managedFields`, its status
/// and, of its spec, only `nodeName` (a gang member that has one is bound,
/// [`crate::pending::GangPods`]). Everything else of the spec is dropped; the Pod must never be
/// written back from what is left.
pub fn keep_what_decisions_read(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    if let Some(spec) = pod.spec.as_mut() {
        *spec = PodSpec {
            node_name: spec.node_name.take(),
            ..PodSpec::default()
        };
    }
}

/// Keeps of `pg`'s `managedFields` only what `coexist` reads: the managers that own the
/// gang's size (`spec.minMember`, `spec.minResources`), each with just those fields. A
/// PodGroup's field sets name every label, owner reference and status field it has, and
/// Volcano rewrites its status entry on every pass; none of that is read.
pub fn keep_gang_size_owners(pg: &mut PodGroup) {
    let Some(entries) = pg.metadata.managed_fields.take() else {
        return;
    };
    let kept: Vec<ManagedFieldsEntry> = entries
        .into_iter()
        .filter_map(|entry| {
            let spec = entry.fields_v1.as_ref()?.0.get("f:spec")?;
            let owned: Map<String, Value> = GANG_SIZE_FIELDS
                .into_iter()
                .filter(|field| spec.get(field).is_some())
                .map(|field| (field.to_string(), Value::Object(Map::new())))
                .collect();
            (!owned.is_empty()).then(|| ManagedFieldsEntry {
                manager: entry.manager,
                fields_v1: Some(FieldsV1(serde_json::json!({ "f:spec": owned }))),
                ..ManagedFieldsEntry::default()
            })
        })
        .collect();
    pg.metadata.managed_fields = Some(kept);
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::test_support::managed;

    #[test]
    fn only_the_node_name_of_the_spec_is_kept_and_metadata_and_status_stay_whole() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo-head", "namespace": "team",
                         "labels": {"ray.io/node-type": "head"},
                         "annotations": {"scheduling.k8s.io/group-name": "ray-demo-pg"},
                         "managedFields": [{"manager": "raygate-reconciler",
                                            "operation": "Apply",
                                            "fieldsType": "FieldsV1",
                                            "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
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
        assert_eq!(
            kept.metadata,
            ObjectMeta {
                managed_fields: None,
                ..pod.metadata.clone()
            }
        );
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

    #[test]
    fn only_the_owners_of_the_gang_size_are_kept_with_just_those_fields() {
        let mut pg = PodGroup::new("ray-demo-pg", Default::default());
        pg.metadata.managed_fields = Some(vec![
            managed(
                "raygate-reconciler",
                serde_json::json!({"f:metadata": {"f:labels": {"f:app": {}}},
                                   "f:spec": {"f:minMember": {}, "f:queue": {},
                                              "f:minResources": {"f:cpu": {}}}}),
            ),
            managed(
                "vc-controller-manager",
                serde_json::json!({"f:status": {"f:phase": {}}}),
            ),
            managed(
                "kuberay-operator",
                serde_json::json!({"f:spec": {"f:minResources": {"f:memory": {}}}}),
            ),
            managed("kubectl", serde_json::json!({"f:spec": {"f:queue": {}}})),
            ManagedFieldsEntry::default(),
        ]);
        keep_gang_size_owners(&mut pg);
        let kept: Vec<(Option<&str>, Option<&Value>)> = pg
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|e| (e.manager.as_deref(), e.fields_v1.as_ref().map(|f| &f.0)))
            .collect();
        assert_eq!(
            kept,
            [
                (
                    Some("raygate-reconciler"),
                    Some(&serde_json::json!({"f:spec": {"f:minMember": {}, "f:minResources": {}}}))
                ),
                (
                    Some("kuberay-operator"),
                    Some(&serde_json::json!({"f:spec": {"f:minResources": {}}}))
                ),
            ]
        );
    }

    #[test]
    fn a_pod_group_without_managed_fields_stays_without_them() {
        let mut pg = PodGroup::new("ray-demo-pg", Default::default());
        keep_gang_size_owners(&mut pg);
        assert_eq!(pg.metadata.managed_fields, None);
    }
}
