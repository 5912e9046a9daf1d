//! raygate's functional core.
//!
//! Every decision raygate makes lives here as a pure function: validating RayJobs and
//! RayClusters, sizing PodGroups, naming objects. The crate performs no I/O (no network, no
//! clock, no randomness): the webhook, the reconciler and the CLI call the same functions, so
//! they cannot disagree about what is valid or how big a gang is.
//!
//! # Nothing a user wrote is lost
//!
//! The typed structs in [`ray`] and [`volcano`] are for *reading and deciding* only. They are
//! never serialised back over a user's object: mutations are expressed as JSON patches against
//! the raw object the API server sent (admission), or as merge/JSON patches and status-subresource
//! patches (reconciler), which touch only the fields raygate owns. Unknown fields therefore
//! survive every raygate write, whatever version of the types raygate was built with.

pub mod admission;
pub mod apply;
pub mod check;
pub mod cluster;
pub mod coexist;
pub mod conversion;
pub mod crd;
pub mod decision;
pub mod feasibility;
pub mod features;
pub mod finding;
pub mod input;
pub mod keys;
pub mod lifecycle;
pub mod manifests;
pub mod observed;
pub mod onboarding;
pub mod pending;
pub mod preserve;
pub mod quantity;
pub mod queue_policy;
pub mod ray;
pub mod runtime_env;
pub mod settings;
pub mod sizing;
#[cfg(test)]
pub(crate) mod test_support;
pub mod validation;
pub mod volcano;
