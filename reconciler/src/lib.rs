//! raygate-reconciler (being built).

pub mod queue_policy;
