//! Settings every part of raygate must agree on, parsed once.
//!
//! The webhook (Pod onboarding, QueuePolicy governance), the reconciler (PodGroups,
//! QueuePolicy status) and the install manifests (the webhooks' `namespaceSelector`s) all read
//! the opt-in label from one [`OptInLabel`], so a non-default label cannot onboard Pods in one
//! part and leave them out in another.

use std::collections::BTreeMap;
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
}

impl Default for OptInLabel {
    fn default() -> Self {
        Self {
            key: NAMESPACE_OPT_IN_LABEL.to_owned(),
            value: NAMESPACE_OPT_IN_VALUE.to_owned(),
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
        })
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
