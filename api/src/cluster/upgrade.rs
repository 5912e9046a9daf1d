//! `spec.upgradeStrategy` of a user-created RayCluster: with `type: Recreate`, a change of the
//! spec that the Pods are made from replaces every Pod (docs/upstream.md, "KubeRay: RayCluster
//! controller"; docs/reconciler.md, "Upgrade strategy").
//!
//! The head Pod carries a stamp: a hash of the spec it was made from and the version of the
//! operator that computed it. A pass compares the stamp with the current spec. Scaling
//! (`replicas`, `minReplicas`, `maxReplicas`, `scaleStrategy.workersToDelete` and a group's
//! `suspend`, which scales it to none), the Pods' tolerations and scheduling gates (which
//! queueing systems edit) and `upgradeStrategy` itself are left out of the hash, so none of
//! them recreates a Pod.
//!
//! A stamp from another operator, or from another version of raygate, was computed some other
//! way: it is replaced by this version's stamp of the current spec and nothing is recreated, as
//! KubeRay does after its own upgrade. KubeRay's head Pods carry its version there, and raygate
//! writes `raygate/<version>`, so neither operator mistakes the other's stamp for a change.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};

use super::build::fnv1a;
use crate::keys;
use crate::ray::v1::RayCluster;

/// Head Pod annotation: the hash of the spec the Pods were made from (KubeRay's key).
pub const RECREATE_HASH_ANNOTATION: &str = "ray.io/upgrade-strategy-recreate-hash";
/// Head Pod annotation: the operator and version that computed the hash (KubeRay's key).
pub const OPERATOR_VERSION_ANNOTATION: &str = "ray.io/kuberay-version";
/// `spec.upgradeStrategy.type` that recreates the Pods on a spec change.
pub const RECREATE: &str = "Recreate";

/// What raygate writes into [`OPERATOR_VERSION_ANNOTATION`].
pub fn operator_version() -> String {
    format!("raygate/{}", env!("CARGO_PKG_VERSION"))
}

/// The hash of the part of `cluster`'s spec a Recreate upgrade watches: 16 hex digits of
/// FNV-1a over the spec's JSON without the fields the module documentation lists.
pub fn spec_hash(cluster: &RayCluster) -> String {
    let mut spec = cluster.spec.clone();
    spec.upgrade_strategy = None;
    without_queueing_fields(&mut spec.head_group_spec.template);
    for group in spec.worker_group_specs.iter_mut().flatten() {
        group.replicas = None;
        group.min_replicas = None;
        group.max_replicas = None;
        group.suspend = None;
        // Its only field is `workersToDelete`.
        group.scale_strategy = None;
        without_queueing_fields(&mut group.template);
    }
    // Serializing typed values whose maps have string keys cannot fail.
    let json = serde_json::to_vec(&spec).unwrap_or_default();
    format!("{:016x}", fnv1a([json.as_slice()]))
}

fn without_queueing_fields(template: &mut PodTemplateSpec) {
    if let Some(spec) = &mut template.spec {
        spec.tolerations = None;
        spec.scheduling_gates = None;
    }
}

/// The annotations that stamp a head Pod made from `cluster`'s current spec.
pub fn head_stamp(cluster: &RayCluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        (RECREATE_HASH_ANNOTATION.to_string(), spec_hash(cluster)),
        (OPERATOR_VERSION_ANNOTATION.to_string(), operator_version()),
    ])
}

/// What a pass does about the upgrade strategy, given the cluster's live head Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Upgrade {
    /// Nothing: no Recreate strategy, no live head, or the head was made from this spec.
    Current,
    /// Replace the head Pod's stamp with these annotations (made by another operator or
    /// version, or before raygate stamped heads); nothing is recreated.
    Restamp(BTreeMap<String, String>),
    /// The spec changed since the Pods were made: delete every Pod.
    Recreate,
}

/// Decides [`Upgrade`] for `cluster` whose live (not terminating) head Pod is `head`.
pub fn check(cluster: &RayCluster, head: Option<&Pod>) -> Upgrade {
    let recreate = cluster
        .spec
        .upgrade_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        == Some(RECREATE);
    let Some(head) = head.filter(|_| recreate) else {
        return Upgrade::Current;
    };
    let annotation = |key: &str| keys::value_in(head.metadata.annotations.as_ref(), key);
    let stamp = head_stamp(cluster);
    let ours = annotation(OPERATOR_VERSION_ANNOTATION)
        == stamp.get(OPERATOR_VERSION_ANNOTATION).map(String::as_str);
    match annotation(RECREATE_HASH_ANNOTATION) {
        Some(hash) if ours => {
            if Some(hash) == stamp.get(RECREATE_HASH_ANNOTATION).map(String::as_str) {
                Upgrade::Current
            } else {
                Upgrade::Recreate
            }
        }
        _ => Upgrade::Restamp(stamp),
    }
}
