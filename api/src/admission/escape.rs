//! Policy without escape: QueuePolicies bind everything that reaches a Volcano queue, not only
//! the Ray objects of opted-in namespaces, and the opt-in label itself is guarded.
//!
//! * [`review_namespace`]: adding, changing or removing the opt-in label on a Namespace is
//!   refused unless the requester is one of the label's admins
//!   ([`crate::settings::LabelAdmins`]), so a namespace owner cannot step out of the policies
//!   by unlabelling the namespace (the escape Gatekeeper closes for its exemption label).
//! * [`review_volcano_pod`]: a Pod with `schedulerName: volcano` that names no PodGroup gets one
//!   from Volcano's PodGroup controller, in the queue of its `scheduling.volcano.sh/queue-name`
//!   annotation, else Volcano's `default` queue (`docs/upstream.md`, "Volcano: Pods without a
//!   PodGroup"). The queue rules of the
//!   namespace's policies apply at `kubectl apply`, instead of a Pod that stays Pending.
//! * [`review_pod_group`]: every PodGroup, whoever writes it (a user, KubeRay, Volcano's
//!   controller, raygate), must pass the queue, priority and gang rules of its namespace's
//!   policies: the choke point every Volcano-scheduled Pod passes through.
//!
//! Here a policy applies wherever its `namespaceSelector` matches, opted in or not. The messages
//! and rule names are those of the Ray object rules ([`super::rules`]); only the field paths
//! differ.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

use super::rules::{self, PolicyFields, QueueChoice};
use super::{Admission, Operation};
use crate::finding::{Compat, Finding};
use crate::keys;
use crate::quantity::ResourceQuantity;
use crate::queue_policy::{QueuePolicy, matching_policies};
use crate::settings::OptInLabel;
use crate::sizing::GangSize;

/// **Error.** The opt-in label of a Namespace was added, changed or removed by a requester who
/// is not one of its admins (`--namespace-label-admins`).
pub const OPT_IN_LABEL_PROTECTED: &str = "namespace-opt-in-label-protected";

/// Field path of a Pod's queue annotation.
pub const POD_QUEUE_FIELD: &str = "metadata.annotations[scheduling.volcano.sh/queue-name]";

/// The requester of an admission request (`request.userInfo`).
#[derive(Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(default)]
pub struct UserInfo {
    /// User name, e.g. `alice` or `system:serviceaccount:ns:name`.
    pub username: String,
    /// Groups, e.g. `system:authenticated`.
    pub groups: Vec<String>,
}

/// Decides a Namespace CREATE or UPDATE: the opt-in label may only be added, changed or removed
/// by one of `opt_in.admins`. Everything else about a Namespace is allowed.
pub fn review_namespace(
    operation: Operation,
    object: &Value,
    old_object: Option<&Value>,
    user: &UserInfo,
    opt_in: &OptInLabel,
) -> Admission {
    let key = &opt_in.key;
    let value = |namespace: &Value| rules::labels(namespace).get(key).cloned();
    let after = value(object);
    let before = match operation {
        Operation::Update => old_object.and_then(value),
        _ => None,
    };
    let change = match (&before, &after) {
        _ if before == after => None,
        (None, Some(new)) => Some(format!("cannot add label {key}={new}")),
        (Some(old), None) => Some(format!("cannot remove label {key}={old}")),
        (Some(old), Some(new)) => {
            Some(format!("cannot change label {key} from {old:?} to {new:?}"))
        }
        (None, None) => None,
    };
    let Some(change) = change.filter(|_| !opt_in.admins.admit(&user.username, &user.groups)) else {
        return Admission::default();
    };
    Admission {
        findings: vec![Finding::error(
            OPT_IN_LABEL_PROTECTED,
            format!("metadata.labels[{key}]"),
            format!(
                "{change}: user {:?} may not change raygate's opt-in label, which decides whether QueuePolicies and gang scheduling govern the namespace; ask a cluster admin ({}, raygate's --namespace-label-admins) to change it",
                user.username,
                opt_in.admins.describe()
            ),
            Compat::Raygate,
        )],
        patch: None,
    }
}

/// The policies of a namespace, whether it is opted in or not.
fn policies_of<'a>(
    namespace: &ObjectMeta,
    policies: &'a [Arc<QueuePolicy>],
) -> Vec<&'a QueuePolicy> {
    let empty = BTreeMap::new();
    matching_policies(policies, namespace.labels.as_ref().unwrap_or(&empty))
}

/// Decides a Pod CREATE in any namespace: a Pod Volcano schedules that names no PodGroup must
/// name (by annotation `scheduling.volcano.sh/queue-name`, else Volcano's `default`) a queue its
/// namespace's policies allow. Other Pods are allowed: a Pod in a PodGroup is bound by the
/// PodGroup's queue, which [`review_pod_group`] checked.
pub fn review_volcano_pod(
    pod: &Value,
    namespace: &ObjectMeta,
    policies: &[Arc<QueuePolicy>],
) -> Admission {
    let volcano = pod.pointer("/spec/schedulerName").and_then(Value::as_str)
        == Some(keys::VOLCANO_SCHEDULER_NAME);
    let annotations = rules::string_entries(pod, "/metadata/annotations");
    if !volcano || keys::value_in(&annotations, keys::POD_GROUP_ANNOTATION).is_some() {
        return Admission::default();
    }
    let choice = match keys::value_in(&annotations, keys::NAMESPACE_QUEUE_ANNOTATION) {
        Some(queue) => QueueChoice::Label(queue.to_string()),
        None => QueueChoice::Unset,
    };
    let fields = PolicyFields {
        queue: POD_QUEUE_FIELD,
        queue_setting: "scheduling.volcano.sh/queue-name annotation",
        gang: "spec",
        priority: "spec.priorityClassName",
    };
    let mut findings = Vec::new();
    for policy in policies_of(namespace, policies) {
        rules::policy_rules(
            policy,
            namespace.name.as_deref().unwrap_or_default(),
            &choice,
            None,
            None,
            &fields,
            &mut findings,
        );
    }
    Admission {
        findings,
        patch: None,
    }
}

/// The policy rules of one PodGroup: its `spec.queue` (empty: Volcano's `default`),
/// `spec.priorityClassName` and gang (`spec.minMember`, `spec.minResources`).
fn pod_group_findings(
    pod_group: &Value,
    namespace: &str,
    policies: &[&QueuePolicy],
) -> Vec<Finding> {
    let spec = pod_group.get("spec").unwrap_or(&Value::Null);
    let text = |field: &str| {
        spec.get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let choice = match text("queue") {
        Some(queue) => QueueChoice::Label(queue.to_string()),
        None => QueueChoice::Unset,
    };
    let gang = GangSize {
        min_member: spec
            .get("minMember")
            .and_then(Value::as_i64)
            .map_or(0, |n| i32::try_from(n).unwrap_or(i32::MAX)),
        min_resources: spec
            .get("minResources")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, quantity)| {
                let quantity = match quantity {
                    Value::String(s) => s.parse::<ResourceQuantity>().ok()?,
                    Value::Number(n) => n.to_string().parse::<ResourceQuantity>().ok()?,
                    _ => return None,
                };
                Some((name.clone(), quantity))
            })
            .collect(),
        sub_groups: Vec::new(),
    };
    let fields = PolicyFields {
        queue: "spec.queue",
        queue_setting: "spec.queue",
        gang: "spec",
        priority: "spec.priorityClassName",
    };
    let mut findings = Vec::new();
    for policy in policies {
        rules::policy_rules(
            policy,
            namespace,
            &choice,
            text("priorityClassName"),
            Some(&gang),
            &fields,
            &mut findings,
        );
    }
    findings
}

/// Decides a PodGroup CREATE or UPDATE in any namespace against the policies that select it.
/// On UPDATE, a violation the old PodGroup already had is a warning (ratcheting, as for Ray
/// objects): a policy tightened later never blocks Volcano's or a controller's later writes.
pub fn review_pod_group(
    operation: Operation,
    pod_group: &Value,
    old_object: Option<&Value>,
    namespace: &ObjectMeta,
    policies: &[Arc<QueuePolicy>],
) -> Admission {
    let matching = policies_of(namespace, policies);
    let name = namespace.name.as_deref().unwrap_or_default();
    let findings = pod_group_findings(pod_group, name, &matching);
    let findings = match (operation, old_object) {
        (Operation::Update, Some(old)) => {
            rules::ratchet(findings, &pod_group_findings(old, name, &matching))
        }
        _ => findings,
    };
    Admission {
        findings,
        patch: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::rules::{
        POLICY_MAX_MIN_MEMBER, POLICY_MAX_MIN_RESOURCES, POLICY_PRIORITY_CLASS_NOT_ALLOWED,
        POLICY_QUEUE_NOT_ALLOWED, POLICY_QUEUE_REQUIRED,
    };
    use crate::queue_policy::QueuePolicySpec;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: name.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn owner() -> UserInfo {
        user("alice", &["team-a", "system:authenticated"])
    }

    fn admin() -> UserInfo {
        user("raygate-admin", &["system:masters", "system:authenticated"])
    }

    fn namespace_object(labels: &[(&str, &str)]) -> Value {
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": labels}})
    }

    fn rules_of(admission: &Admission) -> Vec<(&str, bool)> {
        admission
            .findings
            .iter()
            .map(|f| (f.rule.as_str(), f.is_error()))
            .collect()
    }

    const OPTED_IN: (&str, &str) = ("raygate.io/scheduler", "volcano");
    const NAME: (&str, &str) = ("kubernetes.io/metadata.name", "ml");

    #[test]
    fn only_admins_add_change_or_remove_the_opt_in_label() {
        let opt_in = OptInLabel::default();
        let labelled = namespace_object(&[OPTED_IN, NAME]);
        let unlabelled = namespace_object(&[NAME]);
        let other_value = namespace_object(&[("raygate.io/scheduler", "off"), NAME]);
        let cases = [
            (
                "remove",
                Operation::Update,
                &unlabelled,
                Some(&labelled),
                "metadata.labels[raygate.io/scheduler]: cannot remove label raygate.io/scheduler=volcano",
            ),
            (
                "add",
                Operation::Update,
                &labelled,
                Some(&unlabelled),
                "metadata.labels[raygate.io/scheduler]: cannot add label raygate.io/scheduler=volcano",
            ),
            (
                "change",
                Operation::Update,
                &other_value,
                Some(&labelled),
                "metadata.labels[raygate.io/scheduler]: cannot change label raygate.io/scheduler from \"volcano\" to \"off\"",
            ),
            (
                "create labelled",
                Operation::Create,
                &labelled,
                None,
                "metadata.labels[raygate.io/scheduler]: cannot add label raygate.io/scheduler=volcano",
            ),
        ];
        for (case, operation, object, old, start) in cases {
            let refused = review_namespace(operation, object, old, &owner(), &opt_in);
            let denial = refused
                .denial()
                .unwrap_or_else(|| panic!("{case}: allowed"));
            assert_eq!(
                denial,
                format!(
                    "{start}: user \"alice\" may not change raygate's opt-in label, which decides whether QueuePolicies and gang scheduling govern the namespace; ask a cluster admin (group system:masters, raygate's --namespace-label-admins) to change it"
                ),
                "{case}"
            );
            assert_eq!(
                rules_of(&refused),
                [(OPT_IN_LABEL_PROTECTED, true)],
                "{case}"
            );
            let allowed = review_namespace(operation, object, old, &admin(), &opt_in);
            assert!(
                allowed.allowed() && allowed.findings.is_empty(),
                "{case}: {allowed:?}"
            );
        }
    }

    #[test]
    fn other_namespace_changes_and_other_labels_are_not_guarded() {
        let opt_in = OptInLabel::default();
        let labelled = namespace_object(&[OPTED_IN, NAME]);
        let relabelled = namespace_object(&[OPTED_IN, NAME, ("team", "b")]);
        for (operation, object, old) in [
            (Operation::Update, &relabelled, Some(&labelled)),
            (Operation::Update, &labelled, Some(&labelled)),
            (Operation::Create, &namespace_object(&[NAME]), None),
            (
                Operation::Update,
                &namespace_object(&[NAME, ("team", "b")]),
                Some(&namespace_object(&[NAME])),
            ),
        ] {
            let review = review_namespace(operation, object, old, &owner(), &opt_in);
            assert!(review.findings.is_empty(), "{object}: {review:?}");
        }
    }

    #[test]
    fn the_configured_label_and_admins_are_the_ones_guarded() {
        let opt_in = OptInLabel {
            admins: "user:gitops".parse().expect("admins"),
            ..("team.example.com/gang=on".parse().expect("a label"))
        };
        let labelled = namespace_object(&[("team.example.com/gang", "on")]);
        let unlabelled = namespace_object(&[OPTED_IN]);
        let review = review_namespace(
            Operation::Update,
            &unlabelled,
            Some(&labelled),
            &admin(),
            &opt_in,
        );
        let denial = review
            .denial()
            .expect("system:masters is not an admin here");
        assert!(
            denial.starts_with("metadata.labels[team.example.com/gang]: cannot remove label team.example.com/gang=on: user \"raygate-admin\""),
            "{denial}"
        );
        assert!(
            denial.contains("ask a cluster admin (user gitops,"),
            "{denial}"
        );
        // raygate's default label is an ordinary label under another opt-in label.
        let review = review_namespace(
            Operation::Update,
            &namespace_object(&[]),
            Some(&unlabelled),
            &owner(),
            &opt_in,
        );
        assert!(review.findings.is_empty(), "{review:?}");
        let gitops = review_namespace(
            Operation::Update,
            &unlabelled,
            Some(&labelled),
            &user("gitops", &[]),
            &opt_in,
        );
        assert!(gitops.findings.is_empty(), "{gitops:?}");
    }

    fn policy(name: &str, spec: Value) -> Arc<QueuePolicy> {
        let spec: QueuePolicySpec = serde_json::from_value(spec).expect("a policy spec");
        Arc::new(QueuePolicy::new(name, spec))
    }

    fn meta(labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some("ml".to_string()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    fn team_a() -> Vec<Arc<QueuePolicy>> {
        vec![
            policy(
                "team-a",
                json!({"namespaceSelector": {"matchLabels": {"team": "a"}}, "allowedQueues": ["team-a"],
                       "allowedPriorityClasses": ["low"], "maxMinMember": 4, "maxMinResources": {"cpu": "8"}}),
            ),
            policy(
                "other-team",
                json!({"namespaceSelector": {"matchLabels": {"team": "b"}}, "allowedQueues": []}),
            ),
        ]
    }

    fn pod(scheduler: &str, annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "annotations": annotations},
               "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "x"}]}})
    }

    #[test]
    fn a_volcano_pod_without_a_pod_group_must_name_an_allowed_queue_in_any_namespace() {
        let unlabelled = meta(&[("team", "a")]);
        let refused = review_volcano_pod(
            &pod(
                "volcano",
                json!({"scheduling.volcano.sh/queue-name": "gpu"}),
            ),
            &unlabelled,
            &team_a(),
        );
        assert_eq!(
            refused.denial().as_deref(),
            Some(
                "metadata.annotations[scheduling.volcano.sh/queue-name]: queue \"gpu\" is not allowed in namespace \"ml\" by QueuePolicy \"team-a\" (allowed: team-a)"
            )
        );
        let defaulted = review_volcano_pod(&pod("volcano", json!({})), &unlabelled, &team_a());
        assert_eq!(
            defaulted.denial().as_deref(),
            Some(
                "metadata.annotations[scheduling.volcano.sh/queue-name]: queue \"default\" (no scheduling.volcano.sh/queue-name annotation: Volcano's default queue) is not allowed in namespace \"ml\" by QueuePolicy \"team-a\" (allowed: team-a)"
            )
        );
        let opted_in = meta(&[("team", "a"), OPTED_IN]);
        for (what, admission) in [
            (
                "allowed queue",
                review_volcano_pod(
                    &pod(
                        "volcano",
                        json!({"scheduling.volcano.sh/queue-name": "team-a"}),
                    ),
                    &unlabelled,
                    &team_a(),
                ),
            ),
            (
                "another scheduler",
                review_volcano_pod(
                    &pod(
                        "default-scheduler",
                        json!({"scheduling.volcano.sh/queue-name": "gpu"}),
                    ),
                    &unlabelled,
                    &team_a(),
                ),
            ),
            (
                "in a PodGroup (checked there)",
                review_volcano_pod(
                    &pod(
                        "volcano",
                        json!({"scheduling.volcano.sh/queue-name": "gpu", "scheduling.k8s.io/group-name": "pg"}),
                    ),
                    &opted_in,
                    &team_a(),
                ),
            ),
            (
                "no policy selects the namespace",
                review_volcano_pod(
                    &pod(
                        "volcano",
                        json!({"scheduling.volcano.sh/queue-name": "gpu"}),
                    ),
                    &meta(&[("team", "c")]),
                    &team_a(),
                ),
            ),
        ] {
            assert!(admission.findings.is_empty(), "{what}: {admission:?}");
        }
        let required = vec![policy("strict", json!({"requireQueue": true}))];
        let review = review_volcano_pod(&pod("volcano", json!({})), &unlabelled, &required);
        assert_eq!(rules_of(&review), [(POLICY_QUEUE_REQUIRED, true)]);
        assert!(
            review.denial().is_some_and(|d| d.ends_with("set the scheduling.volcano.sh/queue-name annotation")),
            "{review:?}"
        );
        let warn = vec![policy(
            "audit",
            json!({"allowedQueues": ["team-a"], "enforcement": "Warn"}),
        )];
        let review = review_volcano_pod(
            &pod(
                "volcano",
                json!({"scheduling.volcano.sh/queue-name": "gpu"}),
            ),
            &unlabelled,
            &warn,
        );
        assert!(review.allowed(), "{review:?}");
        assert_eq!(rules_of(&review), [(POLICY_QUEUE_NOT_ALLOWED, false)]);
    }

    fn pod_group(queue: Option<&str>, min_member: i64, cpu: &str, priority: Option<&str>) -> Value {
        let mut spec =
            json!({"minMember": min_member, "minResources": {"cpu": cpu, "memory": "1Gi"}});
        if let Some(queue) = queue {
            spec["queue"] = json!(queue);
        }
        if let Some(priority) = priority {
            spec["priorityClassName"] = json!(priority);
        }
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": "pg"}, "spec": spec})
    }

    #[test]
    fn a_pod_group_passes_the_queue_priority_and_gang_rules_of_its_namespace() {
        let ns = meta(&[("team", "a")]);
        let review = review_pod_group(
            Operation::Create,
            &pod_group(Some("gpu"), 6, "12", Some("urgent")),
            None,
            &ns,
            &team_a(),
        );
        assert_eq!(
            rules_of(&review),
            [
                (POLICY_QUEUE_NOT_ALLOWED, true),
                (POLICY_PRIORITY_CLASS_NOT_ALLOWED, true),
                (POLICY_MAX_MIN_MEMBER, true),
                (POLICY_MAX_MIN_RESOURCES, true),
            ]
        );
        assert_eq!(
            review.denial().as_deref(),
            Some(
                "spec.queue: queue \"gpu\" is not allowed in namespace \"ml\" by QueuePolicy \"team-a\" (allowed: team-a); \
                 spec.priorityClassName: priority class \"urgent\" is not allowed in namespace \"ml\" by QueuePolicy \"team-a\" (allowed: low); \
                 spec: the gang's minMember 6 exceeds maxMinMember 4 of QueuePolicy \"team-a\" by 2; \
                 spec: the gang needs cpu 12, above maxMinResources cpu 8 of QueuePolicy \"team-a\" (4 over)"
            )
        );
        let unset = review_pod_group(
            Operation::Create,
            &pod_group(None, 1, "1", None),
            None,
            &ns,
            &team_a(),
        );
        assert_eq!(
            unset.denial().as_deref(),
            Some(
                "spec.queue: queue \"default\" (no spec.queue: Volcano's default queue) is not allowed in namespace \"ml\" by QueuePolicy \"team-a\" (allowed: team-a)"
            )
        );
        let fine = review_pod_group(
            Operation::Create,
            &pod_group(Some("team-a"), 4, "8", Some("low")),
            None,
            &ns,
            &team_a(),
        );
        assert!(fine.findings.is_empty(), "{fine:?}");
        let elsewhere = review_pod_group(
            Operation::Create,
            &pod_group(Some("gpu"), 60, "99", None),
            None,
            &meta(&[("team", "c")]),
            &team_a(),
        );
        assert!(elsewhere.findings.is_empty(), "{elsewhere:?}");
    }

    #[test]
    fn a_pod_group_update_is_refused_only_for_a_new_violation() {
        let ns = meta(&[("team", "a")]);
        let old = pod_group(Some("team-a"), 4, "8", None);
        let moved = review_pod_group(
            Operation::Update,
            &pod_group(Some("gpu"), 4, "8", None),
            Some(&old),
            &ns,
            &team_a(),
        );
        assert_eq!(rules_of(&moved), [(POLICY_QUEUE_NOT_ALLOWED, true)]);
        let grown = review_pod_group(
            Operation::Update,
            &pod_group(Some("team-a"), 5, "8", None),
            Some(&old),
            &ns,
            &team_a(),
        );
        assert_eq!(rules_of(&grown), [(POLICY_MAX_MIN_MEMBER, true)]);
        // Stored before the policy was tightened: a status-like rewrite is not blocked.
        let stored = pod_group(Some("gpu"), 4, "8", None);
        let rewrite = review_pod_group(Operation::Update, &stored, Some(&stored), &ns, &team_a());
        assert!(rewrite.allowed(), "{rewrite:?}");
        assert_eq!(rules_of(&rewrite), [(POLICY_QUEUE_NOT_ALLOWED, false)]);
    }
}
