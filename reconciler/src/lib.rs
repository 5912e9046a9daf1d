//! raygate's lightweight reconciler: RayJob lifecycle, RayCluster Pods, PodGroups, submitter Jobs.
//!
//! Thin shells around the pure decisions of `raygate-api`: each controller observes what exists,
//! asks the core what to do, and performs it.

pub mod dashboard;
pub mod rayjob;
