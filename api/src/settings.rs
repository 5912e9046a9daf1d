//! Settings every part of raygate must agree on, parsed once.
//!
//! The webhook (Pod onboarding, QueuePolicy governance), the reconciler (PodGroups,
//! QueuePolicy status) and the install manifests (the webhooks' `namespaceSelector`s) all read
//! the opt-in label from one [`OptInLabel`], so a non-default label cannot onboard Pods in one
//! part and leave them out in another. The label carries who may change it on a Namespace
//! ([`LabelAdmins`], `--namespace-label-admins`): a namespace owner who could remove it would
//! step out of every QueuePolicy (`docs/queue-policy.md`, "Policy without escape").

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use crate::keys::{NAMESPACE_OPT_IN_LABEL, NAMESPACE_OPT_IN_VALUE};
use crate::validation::k8s::{is_qualified_name, is_valid_label_value};

/// The namespace label (`--namespace-label KEY=VALUE`) that opts a namespace into Volcano
/// gang scheduling; `raygate.io/scheduler=volcano` by default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptInLabel {
    /// Label key, e.g. `raygate.io/scheduler`.
    pub key: String,
    /// Label value, e.g. `volcano`.
    pub value: String,
    /// Who may add, change or remove the label on a Namespace (`--namespace-label-admins`).
    pub admins: LabelAdmins,
}

impl Default for OptInLabel {
    fn default() -> Self {
        Self {
            key: NAMESPACE_OPT_IN_LABEL.to_owned(),
            value: NAMESPACE_OPT_IN_VALUE.to_owned(),
            admins: LabelAdmins::default(),
        }
    }
}

impl OptInLabel {
    /// Whether a namespace with these labels is opted in: the label is there with exactly
    /// this value.
    pub fn selects(&self, namespace_labels: &BTreeMap<String, String>) -> bool {
        namespace_labels.get(&self.key) == Some(&self.value)
    }
}

impl fmt::Display for OptInLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// A `--namespace-label` that is not a valid `KEY=VALUE` label (the flag parser echoes what
/// was written before this message).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}; write KEY=VALUE, e.g. {example}", example = OptInLabel::default())]
pub struct OptInLabelError {
    /// What is wrong with it.
    pub reason: String,
}

impl FromStr for OptInLabel {
    type Err = OptInLabelError;

    fn from_str(written: &str) -> Result<Self, Self::Err> {
        let error = |reason: String| OptInLabelError { reason };
        let (key, value) = written
            .split_once('=')
            .ok_or_else(|| error("no '=' between the key and the value".to_owned()))?;
        if let Some(reason) = is_qualified_name(key).into_iter().next() {
            return Err(error(format!("the key {key:?} is invalid: {reason}")));
        }
        // An empty value would select namespaces whose label is empty, never what is meant.
        if value.is_empty() {
            return Err(error("the value is empty".to_owned()));
        }
        if let Some(reason) = is_valid_label_value(value).into_iter().next() {
            return Err(error(format!("the value {value:?} is invalid: {reason}")));
        }
        Ok(Self {
            key: key.to_owned(),
            value: value.to_owned(),
            admins: LabelAdmins::default(),
        })
    }
}

/// Who may add, change or remove the opt-in label on a Namespace
/// (`--namespace-label-admins group:NAME,user:NAME,...`): requesters whose user name or one of
/// whose groups is listed. `group:system:masters` by default, the group Kubernetes' own
/// cluster-admin identities have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelAdmins {
    /// User names (`user:NAME`), e.g. `system:serviceaccount:argocd:argocd-application-controller`.
    pub users: BTreeSet<String>,
    /// Group names (`group:NAME`), e.g. `system:masters`.
    pub groups: BTreeSet<String>,
}

/// The group of Kubernetes' cluster-admin identities, the default [`LabelAdmins`].
pub const CLUSTER_ADMIN_GROUP: &str = "system:masters";

impl Default for LabelAdmins {
    fn default() -> Self {
        Self {
            users: BTreeSet::new(),
            groups: BTreeSet::from([CLUSTER_ADMIN_GROUP.to_owned()]),
        }
    }
}

impl LabelAdmins {
    /// Whether a requester with this user name and these groups is one of them.
    pub fn admit(&self, username: &str, groups: &[String]) -> bool {
        self.users.contains(username) || groups.iter().any(|g| self.groups.contains(g))
    }

    /// Who they are, for messages: `group system:masters or user alice`; `nobody` when empty.
    pub fn describe(&self) -> String {
        let who: Vec<String> = self
            .groups
            .iter()
            .map(|g| format!("group {g}"))
            .chain(self.users.iter().map(|u| format!("user {u}")))
            .collect();
        if who.is_empty() {
            "nobody".to_owned()
        } else {
            who.join(" or ")
        }
    }
}

impl fmt::Display for LabelAdmins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = self
            .groups
            .iter()
            .map(|g| format!("group:{g}"))
            .chain(self.users.iter().map(|u| format!("user:{u}")))
            .collect();
        f.write_str(&entries.join(","))
    }
}

/// A `--namespace-label-admins` entry that is neither `group:NAME` nor `user:NAME` (the flag
/// parser echoes what was written before this message).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "entry {entry:?} is neither group:NAME nor user:NAME; write a comma-separated list, e.g. \
     group:system:masters,user:alice"
)]
pub struct LabelAdminsError {
    /// The entry as written.
    pub entry: String,
}

impl FromStr for LabelAdmins {
    type Err = LabelAdminsError;

    /// Comma-separated `group:NAME` and `user:NAME` entries; empty entries are skipped, so an
    /// empty string means nobody (only raygate's webhook being off lets the label change).
    fn from_str(written: &str) -> Result<Self, Self::Err> {
        let mut admins = LabelAdmins {
            users: BTreeSet::new(),
            groups: BTreeSet::new(),
        };
        for entry in written.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let error = || LabelAdminsError {
                entry: entry.to_owned(),
            };
            let (kind, name) = entry.split_once(':').ok_or_else(error)?;
            if name.is_empty() {
                return Err(error());
            }
            match kind {
                "group" => admins.groups.insert(name.to_owned()),
                "user" => admins.users.insert(name.to_owned()),
                _ => return Err(error()),
            };
        }
        Ok(admins)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_default_is_raygates_own_label() {
        let label = OptInLabel::default();
        assert_eq!(label.to_string(), "raygate.io/scheduler=volcano");
        assert!(label.selects(&labels(&[("raygate.io/scheduler", "volcano")])));
    }

    #[test]
    fn only_the_exact_key_and_value_select() {
        let label: OptInLabel = "team.example.com/gang=on".parse().expect("valid");
        assert!(label.selects(&labels(&[("team.example.com/gang", "on"), ("x", "y")])));
        assert!(!label.selects(&labels(&[("team.example.com/gang", "off")])));
        assert!(!label.selects(&labels(&[("team.example.com/gang", "On")])));
        assert!(!label.selects(&labels(&[("raygate.io/scheduler", "volcano")])));
        assert!(!label.selects(&labels(&[])));
    }

    #[test]
    fn label_admins_are_groups_and_users_and_print_as_written() {
        let admins: LabelAdmins = "group:system:masters, user:system:serviceaccount:argocd:app,,"
            .parse()
            .expect("valid");
        assert!(admins.admit(
            "bob",
            &["system:authenticated".into(), "system:masters".into()]
        ));
        assert!(admins.admit("system:serviceaccount:argocd:app", &[]));
        assert!(!admins.admit("alice", &["system:authenticated".into(), "team-a".into()]));
        assert!(
            !admins.admit("system:masters", &[]),
            "a user is not a group"
        );
        assert_eq!(
            admins.to_string(),
            "group:system:masters,user:system:serviceaccount:argocd:app"
        );
        assert_eq!(
            admins.to_string().parse::<LabelAdmins>(),
            Ok(admins.clone())
        );
        assert_eq!(
            admins.describe(),
            "group system:masters or user system:serviceaccount:argocd:app"
        );
        assert_eq!(LabelAdmins::default().to_string(), "group:system:masters");
        let nobody: LabelAdmins = "".parse().expect("empty is nobody");
        assert!(!nobody.admit("admin", &["system:masters".into()]));
        assert_eq!(nobody.describe(), "nobody");
    }

    #[test]
    fn bad_label_admins_name_the_entry_and_the_syntax() {
        for written in ["system:masters", "group:", "alice", "role:admin"] {
            let error = format!("group:x,{written}")
                .parse::<LabelAdmins>()
                .unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "entry {written:?} is neither group:NAME nor user:NAME; write a \
                     comma-separated list, e.g. group:system:masters,user:alice"
                )
            );
        }
    }

    #[test]
    fn bad_labels_say_what_was_written_and_what_to_write() {
        let error = "raygate.io/scheduler".parse::<OptInLabel>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "no '=' between the key and the value; write KEY=VALUE, e.g. \
             raygate.io/scheduler=volcano"
        );
        let error = "bad key=on".parse::<OptInLabel>().unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("the key \"bad key\" is invalid: name part must consist"),
            "{error}"
        );
        let error = "team/gang=".parse::<OptInLabel>().unwrap_err();
        assert!(error.to_string().contains("the value is empty"), "{error}");
        let error = "team/gang=a b".parse::<OptInLabel>().unwrap_err();
        assert!(
            error
                .to_string()
                .contains("the value \"a b\" is invalid: a valid label must be"),
            "{error}"
        );
    }
}
