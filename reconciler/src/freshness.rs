//! Keeping a pass from deciding on a cached object that the reconciler's own writes replaced.
//!
//! A controller reads its objects from a watch cache ([`crate::cache`]), which lags behind the
//! API server: right after a pass writes a RayJob's status, the next pass can still see the
//! version before the write and would decide the same step again (a second status write that
//! fails on its `resourceVersion` precondition, or creates that are answered AlreadyExists).
//!
//! [`Superseded`] remembers, per object, the versions this process replaced with its own
//! writes. A cached version in the set is skipped: the watch event of the write wakes the
//! controller again, and [`SUPERSEDED_RECHECK`] bounds the wait should that event be lost. A
//! cached version not in the set is newer than every recorded one, so the set is forgotten and
//! the pass goes ahead. RayJob writes carry a `resourceVersion` precondition, so every later
//! version contains them; a RayCluster status write does not, and a version written by someone
//! else in between can at worst lead to the same status being written once more.
//! Nothing here survives a restart, and nothing needs to: a new process starts from a fresh
//! list.
//!
//! [`Expected`] does the same for the children a pass created: a later pass of the owner waits
//! for the cache to show them before it decides again.
//!
//! [`CreateAnswers`] keeps the API server's answer to a create, the object as stored, for the
//! controller that reconciles it next, which would otherwise read it again.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::Value;

/// When to look again at an object whose cached version is superseded, in case the watch
/// event that carries the newer version never arrives (the watch broke and is relisting).
pub const SUPERSEDED_RECHECK: Duration = Duration::from_secs(5);

/// Per object (by UID), the versions this process's writes have replaced and the cache may
/// still show.
#[derive(Debug, Default)]
pub struct Superseded(Mutex<HashMap<String, Vec<String>>>);

impl Superseded {
    /// Records that a write turned version `before` of the object `uid` into `after`. A write
    /// the API server found to change nothing keeps the version, and records nothing.
    pub fn record(&self, uid: &str, before: &str, after: &str) {
        if uid.is_empty() || before.is_empty() || before == after {
            return;
        }
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let versions = map.entry(uid.to_string()).or_default();
        if !versions.iter().any(|v| v == before) {
            versions.push(before.to_string());
        }
    }

    /// Whether the cached version `seen` of object `uid` is one this process already replaced;
    /// when it is not, what was remembered about the object is forgotten.
    pub fn is_superseded(&self, uid: &str, seen: &str) -> bool {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match map.get(uid) {
            Some(versions) if versions.iter().any(|v| v == seen) => true,
            Some(_) => {
                map.remove(uid);
                false
            }
            None => false,
        }
    }

    /// Forgets the object `uid` (it is gone).
    pub fn forget(&self, uid: &str) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uid);
    }

    /// How many objects have a superseded version remembered.
    pub fn len(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Whether no object has a superseded version remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How long a pass waits for the cache to show an object this process created: the watch event
/// of the create normally arrives within milliseconds; past this, the pass goes ahead (the
/// object may have been deleted at once, or its event lost while the watch relists).
pub const EXPECTED_WAIT: Duration = Duration::from_secs(5);

/// The kind under which [`Expected`] records a Pod this process labelled into a multi-host
/// replica: the owner's next pass waits until the cache shows the Pod labelled (or gone). A
/// pass that saw some of a group's Pods labelled and the rest not yet would take the rest for
/// Pods without a replica, label them into replicas of their own and then delete a replica as
/// one too many (seen in the RayCluster end-to-end test of labelling Pods into replicas).
pub const LABELLED_POD: &str = "labelled Pod";

/// A child an owner's pass wrote: what the cache must show of it (its kind, e.g. `"Pod"`, for a
/// child created; [`LABELLED_POD`] for a Pod labelled) and its name.
type Child = (&'static str, String);

/// Per owner (by UID), the children this process created and the cache may not show yet, with
/// when each was created.
///
/// The cache of children lags behind the creates as it lags behind status writes: a pass woken
/// by the watch event of one new Pod may not see its sibling yet, and would ask for it again.
/// The answer would be AlreadyExists (names are deterministic), but each such create costs a
/// request, a run of the admission webhooks and a second Event. A pass of an owner with a
/// child it created and does not yet see waits for that child's watch event instead, as the
/// ReplicaSet controller waits for its expectations.
#[derive(Debug, Default)]
pub struct Expected(Mutex<HashMap<String, Vec<(Child, Instant)>>>);

impl Expected {
    /// Records that this process created the `kind` named `name` for owner `uid`.
    pub fn record(&self, uid: &str, kind: &'static str, name: &str) {
        if uid.is_empty() {
            return;
        }
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let children = map.entry(uid.to_string()).or_default();
        children.retain(|((k, n), _)| (*k, n.as_str()) != (kind, name));
        children.push(((kind, name.to_string()), Instant::now()));
    }

    /// How long a pass of owner `uid` still waits for a child it created to reach the cache
    /// (`seen(kind, name)` says whether the cache shows it), or `None` to go ahead. Children
    /// seen, and children awaited for [`EXPECTED_WAIT`] already, are forgotten.
    pub fn wait_for(&self, uid: &str, seen: impl Fn(&str, &str) -> bool) -> Option<Duration> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let children = map.get_mut(uid)?;
        children.retain(|((kind, name), created)| {
            !seen(kind, name) && created.elapsed() < EXPECTED_WAIT
        });
        let longest = children
            .iter()
            .map(|(_, created)| EXPECTED_WAIT.saturating_sub(created.elapsed()))
            .max();
        if longest.is_none() {
            map.remove(uid);
        }
        longest
    }

    /// Stops waiting for the `kind` named `name` of owner `uid` (this process deletes it).
    pub fn deleted(&self, uid: &str, kind: &str, name: &str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(children) = map.get_mut(uid) {
            children.retain(|((k, n), _)| (*k, n.as_str()) != (kind, name));
        }
    }

    /// Forgets the owner `uid` (it is gone).
    pub fn forget(&self, uid: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
    }
}

/// How long the answer to a create is kept for the object's first pass; an answer nobody took
/// by then is dropped (its controller may not run in this process).
pub const CREATE_ANSWER_KEPT: Duration = Duration::from_secs(30);

/// The answers to the creates of this process, by the created object's UID: the object as
/// stored (its JSON, fields raygate's types do not know included) at its first version.
///
/// A RayCluster's first pass builds its Pods from the stored JSON. When this process created
/// the RayCluster (for a RayJob), the create's answer is exactly that, so the pass takes it
/// instead of reading the cluster again; for any other version it reads.
#[derive(Debug, Default)]
pub struct CreateAnswers(Mutex<HashMap<String, (String, Value, Instant)>>);

impl CreateAnswers {
    /// Keeps the answer `created` to a create; answers older than [`CREATE_ANSWER_KEPT`] are
    /// dropped.
    pub fn record(&self, created: &DynamicObject) {
        let (Some(uid), Some(version)) = (
            created.uid().filter(|uid| !uid.is_empty()),
            created.resource_version(),
        ) else {
            return;
        };
        let Ok(json) = serde_json::to_value(created) else {
            return;
        };
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, (_, _, at)| at.elapsed() < CREATE_ANSWER_KEPT);
        map.insert(uid, (version, json, Instant::now()));
    }

    /// Takes the stored JSON of object `uid` if the answer kept for it is at `version`. An
    /// answer at another version is of no further use and is dropped.
    pub fn take(&self, uid: &str, version: &str) -> Option<Value> {
        let (kept, json, _) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid)?;
        (kept == version).then_some(json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(uid: &str, version: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": "c", "uid": uid, "resourceVersion": version},
            "spec": {"unknownToRaygate": {"kept": true}},
        }))
        .expect("a valid object")
    }

    #[test]
    fn the_answer_to_a_create_is_taken_once_and_only_at_its_version() {
        let answers = CreateAnswers::default();
        answers.record(&created("uid-1", "10"));
        answers.record(&created("uid-2", "11"));
        answers.record(&created("", "12"));
        let json = answers.take("uid-1", "10").expect("kept at version 10");
        assert_eq!(json["spec"]["unknownToRaygate"]["kept"], true, "{json}");
        assert_eq!(answers.take("uid-1", "10"), None, "taken already");
        assert_eq!(answers.take("uid-2", "13"), None, "another version");
        assert_eq!(answers.take("uid-2", "11"), None, "dropped on the miss");
        assert_eq!(answers.take("", "12"), None, "no UID, nothing kept");
    }

    #[test]
    fn an_owner_waits_for_the_children_it_created_until_the_cache_shows_them() {
        let expected = Expected::default();
        let never = |_: &str, _: &str| false;
        assert_eq!(expected.wait_for("uid-1", never), None, "nothing created");
        expected.record("uid-1", "Pod", "head");
        expected.record("uid-1", "Pod", "worker");
        expected.record("", "Pod", "nobody");
        let wait = expected
            .wait_for("uid-1", |kind, name| (kind, name) == ("Pod", "head"))
            .expect("the worker is not in the cache yet");
        assert!(wait <= EXPECTED_WAIT && wait > Duration::ZERO, "{wait:?}");
        assert_eq!(expected.wait_for("uid-2", never), None, "another owner");
        assert_eq!(
            expected.wait_for("uid-1", |kind, name| (kind, name) == ("Pod", "worker")),
            None,
            "the head was seen before, so it is forgotten; now the worker is too"
        );
        assert_eq!(expected.wait_for("uid-1", never), None, "forgotten");
        expected.record("uid-1", "Pod", "head");
        expected.deleted("uid-1", "Pod", "head");
        assert_eq!(expected.wait_for("uid-1", never), None, "deleted");
        expected.record("uid-1", "Pod", "head");
        expected.forget("uid-1");
        assert_eq!(expected.wait_for("uid-1", never), None, "owner gone");
    }

    #[test]
    fn a_version_replaced_by_our_writes_is_skipped_until_the_cache_moves_past_it() {
        let superseded = Superseded::default();
        assert!(!superseded.is_superseded("uid-1", "10"), "nothing recorded");
        // One pass decided on 10, wrote the finalizer (→ 11) and the status (→ 12).
        superseded.record("uid-1", "10", "11");
        superseded.record("uid-1", "11", "12");
        assert!(superseded.is_superseded("uid-1", "10"));
        assert!(
            superseded.is_superseded("uid-1", "11"),
            "misses the status write"
        );
        assert!(!superseded.is_superseded("uid-2", "10"), "another object");
        assert!(!superseded.is_superseded("uid-1", "12"), "caught up");
        assert!(superseded.is_empty(), "forgotten once caught up");
        assert!(!superseded.is_superseded("uid-1", "10"));
    }

    #[test]
    fn no_op_writes_and_objects_without_identity_are_never_skipped_and_gone_ones_forgotten() {
        let superseded = Superseded::default();
        superseded.record("", "10", "11");
        superseded.record("uid-1", "", "11");
        superseded.record("uid-1", "10", "10");
        assert!(
            superseded.is_empty(),
            "a write that changed nothing is no newer version"
        );
        superseded.record("uid-1", "10", "11");
        superseded.record("uid-1", "10", "11");
        assert_eq!(superseded.len(), 1);
        superseded.forget("uid-1");
        assert!(!superseded.is_superseded("uid-1", "10"));
    }
}
