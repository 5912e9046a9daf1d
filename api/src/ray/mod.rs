//! The `ray.io` API group: RayJob and RayCluster in `v1` (storage) and the frozen `v1alpha1`.

pub mod v1;
pub mod v1alpha1;
