//! The vocabulary every controller's decision is written in.
//!
//! Each controller's core function (`cluster::decide`, `lifecycle::decide`, `coexist::decide`)
//! looks at a snapshot of what exists and returns a [`Decision`]: writes to make in order,
//! Events among them where they belong, and when to look again. The reconciler carries a
//! decision out the same way for every controller: it stops at the first failed write, records
//! the action's [`Action::failure_reason`] as a Warning Event, and retries the whole pass, which
//! recomputes what is left (every write is idempotent by name).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// How long a steady object waits before it is looked at again with no watch event: KubeRay's
/// `RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV` default. The watches carry every change; this only
/// repairs a missed event.
pub const STEADY_REQUEUE: Duration = Duration::from_secs(300);

/// The requeue that looks again once `deadline` (epoch seconds) has passed at `now`: the seconds
/// left plus one, since timestamps have whole seconds.
pub fn until_after(deadline: i64, now: i64) -> Duration {
    Duration::from_secs((deadline - now).max(0).unsigned_abs() + 1)
}

/// A Kubernetes Event about the reconciled object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventNote {
    /// Warning (true) or Normal.
    pub warning: bool,
    /// CamelCase reason, e.g. `CreatedRayCluster`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

impl EventNote {
    /// A Normal Event.
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        Self {
            warning: false,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// A Warning Event.
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        Self {
            warning: true,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

/// The size a PodGroup must hold: the two spec fields raygate writes on an existing PodGroup.
/// Its queue, priority and Volcano's status stay as they are.
#[derive(Clone, Debug, PartialEq)]
pub struct PodGroupSize {
    /// PodGroup name.
    pub name: String,
    /// New `spec.minMember`.
    pub min_member: i32,
    /// New `spec.minResources`.
    pub min_resources: BTreeMap<String, Quantity>,
    /// New `spec.subGroupPolicy` (empty: none); `None` leaves the field alone, where the
    /// PodGroup CRD does not have it.
    pub sub_group_policy: Option<Vec<crate::volcano::SubGroupPolicySpec>>,
}

/// What one reconcile decided.
#[derive(Clone, Debug)]
pub struct Decision<A> {
    /// Writes and Events, in the order they must happen; carrying out stops at the first
    /// failed write.
    pub actions: Vec<A>,
    /// Reconcile again after this long even if nothing changes (`None`: wait for a watch
    /// event).
    pub requeue_after: Option<Duration>,
}

impl<A> Default for Decision<A> {
    fn default() -> Self {
        Self {
            actions: Vec::new(),
            requeue_after: None,
        }
    }
}

/// What every controller's action can say about itself.
pub trait Action {
    /// The Event to record, when the action is one.
    fn event(&self) -> Option<&EventNote>;

    /// KubeRay's Warning Event reason for this write failing (e.g. `FailedToCreateService`),
    /// when it has one.
    fn failure_reason(&self) -> Option<&'static str>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_constructors_set_the_type() {
        let normal = EventNote::normal("CreatedService", "Created service ns/a");
        assert!(!normal.warning);
        assert_eq!(normal.reason, "CreatedService");
        let warning = EventNote::warning("InvalidSpec", String::from("bad"));
        assert!(warning.warning);
        assert_eq!(warning.message, "bad");
    }

    #[test]
    fn the_default_decision_does_nothing_and_waits_for_a_change() {
        let decision = Decision::<()>::default();
        assert!(decision.actions.is_empty());
        assert_eq!(decision.requeue_after, None);
    }
}
